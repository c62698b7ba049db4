//! How an evaluator queue was used: per judge, the time it was busy, idle, and idle while at
//! least one request of its queue was waiting for a judge (a scheduling gap: work waited although
//! a judge could have taken it), and the queue wait of each request (from submitting it to a
//! judge taking it). Accounting is exact for a piecewise-constant state: every event (submit,
//! take, finish) first adds the time since the previous event to each judge's counters.
//!
//! `mkb run` records the pool's [`PoolStats`] in its store (meta `eval_queue`); the sessions
//! benchmark (scripts/bench-sessions.sh) reports them.

use serde::{Deserialize, Serialize};
use std::time::Instant;

/// One judge's use of its time since the pool started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JudgeUse {
    /// The judge's name, as its log file names it (`cpu0`, `gpu0`, `gpu0-1`, ...).
    pub judge: String,
    /// Seconds it held a request (starting a judge and retries included).
    pub busy_s: f64,
    /// Seconds it held none.
    pub idle_s: f64,
    /// Of `idle_s`, the seconds during which a request of its queue was waiting for a judge.
    pub idle_while_waiting_s: f64,
}

/// One queue (the GPU judges' or the GPU-less judges') and its judges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Requests a judge took.
    pub requests: u64,
    /// Requests waiting for a judge when these stats were read.
    pub waiting: u64,
    /// Most requests waiting at once.
    pub max_waiting: u64,
    /// Seconds from submitting a request to a judge taking it, over the requests taken:
    /// median, 95th percentile (nearest rank) and maximum.
    pub wait_p50_s: f64,
    pub wait_p95_s: f64,
    pub wait_max_s: f64,
    pub judges: Vec<JudgeUse>,
}

impl QueueStats {
    /// Seconds, summed over judges, that a judge sat idle while a request waited.
    pub fn idle_while_waiting_s(&self) -> f64 {
        self.judges.iter().map(|j| j.idle_while_waiting_s).sum()
    }
}

/// The whole pool: its GPU-less queue and, when it has GPUs, its GPU queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolStats {
    /// Seconds since the pool started.
    pub elapsed_s: f64,
    pub cpu: QueueStats,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<QueueStats>,
}

impl PoolStats {
    /// Seconds, summed over every judge, that a judge sat idle while a request of its queue
    /// waited. Zero when the pool never left work waiting beside an idle judge.
    pub fn idle_while_waiting_s(&self) -> f64 {
        self.cpu.idle_while_waiting_s()
            + self.gpu.as_ref().map_or(0.0, |g| g.idle_while_waiting_s())
    }
}

#[derive(Debug, Clone)]
struct JudgeState {
    name: String,
    busy: bool,
    busy_s: f64,
    idle_s: f64,
    idle_waiting_s: f64,
}

/// The live accounting of one queue (behind a mutex shared by the pool and its workers).
#[derive(Debug)]
pub(crate) struct Tracker {
    last: Instant,
    waiting: u64,
    max_waiting: u64,
    judges: Vec<JudgeState>,
    /// Queue wait of every request taken, seconds.
    waits: Vec<f64>,
}

impl Tracker {
    /// A queue served by judges named `names`, all idle at `now`.
    pub(crate) fn new(names: Vec<String>, now: Instant) -> Tracker {
        Tracker {
            last: now,
            waiting: 0,
            max_waiting: 0,
            judges: names
                .into_iter()
                .map(|name| JudgeState {
                    name,
                    busy: false,
                    busy_s: 0.0,
                    idle_s: 0.0,
                    idle_waiting_s: 0.0,
                })
                .collect(),
            waits: Vec::new(),
        }
    }

    /// Charge the time since the last event to every judge's current state.
    fn advance(&mut self, now: Instant) {
        if now <= self.last {
            return;
        }
        let dt = (now - self.last).as_secs_f64();
        for j in &mut self.judges {
            if j.busy {
                j.busy_s += dt;
            } else {
                j.idle_s += dt;
                if self.waiting > 0 {
                    j.idle_waiting_s += dt;
                }
            }
        }
        self.last = now;
    }

    /// A request entered the queue.
    pub(crate) fn submitted(&mut self, now: Instant) {
        self.advance(now);
        self.waiting += 1;
        self.max_waiting = self.max_waiting.max(self.waiting);
    }

    /// Judge `judge` took a request submitted at `submitted`.
    pub(crate) fn taken(&mut self, judge: usize, submitted: Instant, now: Instant) {
        self.advance(now);
        self.waiting = self.waiting.saturating_sub(1);
        if let Some(j) = self.judges.get_mut(judge) {
            j.busy = true;
        }
        self.waits
            .push(now.saturating_duration_since(submitted).as_secs_f64());
    }

    /// Judge `judge` is done with its request.
    pub(crate) fn finished(&mut self, judge: usize, now: Instant) {
        self.advance(now);
        if let Some(j) = self.judges.get_mut(judge) {
            j.busy = false;
        }
    }

    /// The stats as of `now`.
    pub(crate) fn report(&mut self, now: Instant) -> QueueStats {
        self.advance(now);
        let mut w = self.waits.clone();
        w.sort_by(f64::total_cmp);
        let ms = |x: f64| (x * 1000.0).round() / 1000.0;
        QueueStats {
            requests: w.len() as u64,
            waiting: self.waiting,
            max_waiting: self.max_waiting,
            wait_p50_s: ms(nearest_rank(&w, 0.50)),
            wait_p95_s: ms(nearest_rank(&w, 0.95)),
            wait_max_s: ms(w.last().copied().unwrap_or(0.0)),
            judges: self
                .judges
                .iter()
                .map(|j| JudgeUse {
                    judge: j.name.clone(),
                    busy_s: ms(j.busy_s),
                    idle_s: ms(j.idle_s),
                    idle_while_waiting_s: ms(j.idle_waiting_s),
                })
                .collect(),
        }
    }
}

/// The `q` quantile of sorted `v` by nearest rank (0 for no data).
fn nearest_rank(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let rank = (q * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    #[test]
    fn an_idle_judge_beside_a_waiting_request_is_counted() {
        let t0 = Instant::now();
        let mut t = Tracker::new(vec!["a".into(), "b".into()], t0);
        // a takes a request at once; b stays idle although a second request waits 2 s.
        t.submitted(at(t0, 0.0));
        t.taken(0, at(t0, 0.0), at(t0, 0.0));
        t.submitted(at(t0, 1.0));
        t.taken(1, at(t0, 1.0), at(t0, 3.0));
        t.finished(0, at(t0, 4.0));
        t.finished(1, at(t0, 5.0));
        let r = t.report(at(t0, 6.0));
        assert_eq!(r.requests, 2);
        assert_eq!(r.max_waiting, 1);
        let (a, b) = (&r.judges[0], &r.judges[1]);
        assert_eq!(
            (a.busy_s, a.idle_s, a.idle_while_waiting_s),
            (4.0, 2.0, 0.0)
        );
        assert_eq!(
            (b.busy_s, b.idle_s, b.idle_while_waiting_s),
            (2.0, 4.0, 2.0)
        );
        assert_eq!(r.idle_while_waiting_s(), 2.0);
        assert_eq!((r.wait_p50_s, r.wait_max_s), (0.0, 2.0));
    }

    #[test]
    fn busy_judges_with_a_queue_are_not_idle_while_waiting() {
        let t0 = Instant::now();
        let mut t = Tracker::new(vec!["only".into()], t0);
        // Three requests at 0; one judge serves them 1 s each, back to back.
        for _ in 0..3 {
            t.submitted(t0);
        }
        for i in 0..3 {
            t.taken(0, t0, at(t0, i as f64));
            t.finished(0, at(t0, i as f64 + 1.0));
        }
        let r = t.report(at(t0, 3.0));
        assert_eq!(r.max_waiting, 3);
        assert_eq!(r.judges[0].idle_while_waiting_s, 0.0);
        assert_eq!(r.judges[0].busy_s, 3.0);
        assert_eq!((r.wait_p50_s, r.wait_p95_s, r.wait_max_s), (1.0, 2.0, 2.0));
        assert_eq!(r.waiting, 0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.5), 10.0);
        assert_eq!(nearest_rank(&v, 0.95), 19.0);
        assert_eq!(nearest_rank(&[], 0.95), 0.0);
        assert_eq!(nearest_rank(&[7.0], 0.5), 7.0);
    }
}
