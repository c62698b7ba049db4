//! Provider rate limits shared by every session of one configured model: requests per minute and
//! tokens per minute as token buckets (full at start, refilled continuously), and a pause for all
//! sessions after a 429 (the server's `Retry-After`, else the backoff), so that concurrent
//! sessions do not hammer a provider that already said no. Counters of the waits go into the
//! run's store for `mkb status`.
//!
//! Hand-written rather than `governor`: the tokens of a request are only known once the answer
//! arrives, so the bucket is charged with an estimate up front and settled afterwards (refund or
//! debt), which governor's cells cannot express.

use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// What throttling cost one model so far (all sessions together).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleStats {
    /// Requests let through (retries included).
    pub requests: u64,
    /// Requests that had to wait for the limits or a pause.
    pub waits: u64,
    /// Seconds waited in total, summed over sessions.
    pub waited_s: f64,
    /// Answers with HTTP 429 (each paused every session of the model).
    pub rate_limited: u64,
    /// Tokens the provider reported using.
    pub tokens: u64,
}

#[derive(Debug)]
struct State {
    requests: f64,
    tokens: f64,
    last: Instant,
    paused_until: Option<Instant>,
    stats: ThrottleStats,
}

/// One model's shared limiter. `rpm` / `tpm` of None: that limit is off.
#[derive(Debug)]
pub(crate) struct Limiter {
    rpm: Option<f64>,
    tpm: Option<f64>,
    state: Mutex<State>,
}

/// The wait a request would need beyond its deadline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WouldPassDeadline(pub Duration);

impl Limiter {
    pub(crate) fn new(rpm: Option<f64>, tpm: Option<f64>) -> Limiter {
        Limiter {
            rpm,
            tpm,
            state: Mutex::new(State {
                requests: rpm.unwrap_or(0.0),
                tokens: tpm.unwrap_or(0.0),
                last: Instant::now(),
                paused_until: None,
                stats: ThrottleStats::default(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the numbers inconsistent: keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn refill(&self, s: &mut State, now: Instant) {
        let dt = now.saturating_duration_since(s.last).as_secs_f64();
        s.last = now;
        if let Some(r) = self.rpm {
            s.requests = (s.requests + dt * r / 60.0).min(r);
        }
        if let Some(t) = self.tpm {
            s.tokens = (s.tokens + dt * t / 60.0).min(t);
        }
    }

    /// The tokens a request of `est` is charged up front (never more than a full bucket, or
    /// it could never start).
    fn charge(&self, est: u64) -> f64 {
        self.tpm.map_or(0.0, |t| (est as f64).min(t))
    }

    /// Waits until a request estimated at `est` tokens may start, then charges it. Refuses
    /// (without sleeping) when the wait would pass `deadline`.
    pub(crate) async fn acquire(
        &self,
        est: u64,
        deadline: Instant,
    ) -> Result<(), WouldPassDeadline> {
        let need = self.charge(est);
        let mut waited = Duration::ZERO;
        loop {
            let wait = {
                let mut s = self.lock();
                let now = Instant::now();
                self.refill(&mut s, now);
                let mut wait = match s.paused_until {
                    Some(p) if p > now => p - now,
                    _ => Duration::ZERO,
                };
                if let Some(r) = self.rpm {
                    if s.requests < 1.0 {
                        wait = wait.max(Duration::from_secs_f64((1.0 - s.requests) * 60.0 / r));
                    }
                }
                if let Some(t) = self.tpm {
                    if s.tokens < need {
                        wait = wait.max(Duration::from_secs_f64((need - s.tokens) * 60.0 / t));
                    }
                }
                if wait.is_zero() {
                    if self.rpm.is_some() {
                        s.requests -= 1.0;
                    }
                    s.tokens -= need;
                    s.stats.requests += 1;
                    if !waited.is_zero() {
                        s.stats.waits += 1;
                        s.stats.waited_s += waited.as_secs_f64();
                    }
                    return Ok(());
                }
                wait
            };
            if Instant::now() + wait > deadline {
                return Err(WouldPassDeadline(wait));
            }
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                "provider rate limit: waiting"
            );
            tokio::time::sleep(wait).await;
            waited += wait;
        }
    }

    /// After the answer: replaces the up-front charge of `est` by the `used` tokens the
    /// provider reported (a refund, or a debt the next requests wait for).
    pub(crate) fn settle(&self, est: u64, used: Option<u64>) {
        let mut s = self.lock();
        if let Some(u) = used {
            s.stats.tokens += u;
            if self.tpm.is_some() {
                s.tokens += self.charge(est) - u as f64;
            }
        }
    }

    /// A 429: no session of this model starts a request for `wait`.
    pub(crate) fn pause(&self, wait: Duration) {
        let mut s = self.lock();
        let until = Instant::now() + wait;
        s.paused_until = Some(s.paused_until.map_or(until, |p| p.max(until)));
        s.stats.rate_limited += 1;
    }

    pub(crate) fn stats(&self) -> ThrottleStats {
        self.lock().stats.clone()
    }
}

/// A request's token estimate: its serialized size at 4 bytes per token plus the output it
/// allows (`max_tokens` / `max_completion_tokens`, 0 when absent).
pub(crate) fn estimate_tokens(body: &serde_json::Value, body_bytes: usize) -> u64 {
    let out = ["max_tokens", "max_completion_tokens"]
        .iter()
        .filter_map(|k| body.get(*k).and_then(|v| v.as_u64()))
        .max()
        .unwrap_or(0);
    (body_bytes as u64).div_ceil(4) + out
}

/// The tokens an answer reports: OpenAI's `usage.total_tokens` (else prompt + completion),
/// Anthropic's input + output (+ cache) tokens.
pub(crate) fn used_tokens(answer: &serde_json::Value) -> Option<u64> {
    let u = answer.get("usage")?;
    if let Some(t) = u.get("total_tokens").and_then(|v| v.as_u64()) {
        return Some(t);
    }
    let keys = [
        "prompt_tokens",
        "completion_tokens",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];
    let vals: Vec<u64> = keys
        .iter()
        .filter_map(|k| u.get(*k).and_then(|v| v.as_u64()))
        .collect();
    (!vals.is_empty()).then(|| vals.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[tokio::test(start_paused = true)]
    async fn requests_per_minute_space_out_requests_after_the_burst() {
        let l = Limiter::new(Some(60.0), None); // one per second after a burst of 60
        let t0 = Instant::now();
        for _ in 0..60 {
            l.acquire(0, far()).await.unwrap();
        }
        assert!(t0.elapsed() < Duration::from_millis(10), "the burst waits");
        l.acquire(0, far()).await.unwrap();
        l.acquire(0, far()).await.unwrap();
        let e = t0.elapsed();
        assert!(
            e >= Duration::from_millis(1990) && e < Duration::from_millis(2100),
            "{e:?}"
        );
        let st = l.stats();
        assert_eq!((st.requests, st.waits), (62, 2));
        assert!((st.waited_s - 2.0).abs() < 0.1, "{st:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_are_settled_after_the_answer() {
        let l = Limiter::new(None, Some(6000.0)); // 100 tokens per second
        l.acquire(6000, far()).await.unwrap(); // the whole bucket
                                               // The answer used 1000 tokens: 5000 come back, so 3000 more start at once.
        l.settle(6000, Some(1000));
        let t0 = Instant::now();
        l.acquire(3000, far()).await.unwrap();
        assert!(t0.elapsed() < Duration::from_millis(10));
        // 2000 left; a request used 4000 more than charged: a debt of 2000 -> waits 30 s for 1000.
        l.settle(0, Some(4000));
        l.acquire(1000, far()).await.unwrap();
        let e = t0.elapsed();
        assert!(
            e >= Duration::from_millis(29_900) && e < Duration::from_millis(30_200),
            "{e:?}"
        );
        assert_eq!(l.stats().tokens, 5000);
    }

    #[tokio::test(start_paused = true)]
    async fn an_estimate_above_the_bucket_is_capped_so_it_can_start() {
        let l = Limiter::new(None, Some(100.0));
        let t0 = Instant::now();
        l.acquire(1_000_000, far()).await.unwrap();
        assert!(t0.elapsed() < Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_after_429_holds_every_session() {
        let l = Arc::new(Limiter::new(None, None));
        l.pause(Duration::from_secs(5));
        let t0 = Instant::now();
        let a = tokio::spawn({
            let l = l.clone();
            async move { l.acquire(0, far()).await }
        });
        let b = tokio::spawn({
            let l = l.clone();
            async move { l.acquire(0, far()).await }
        });
        a.await.unwrap().unwrap();
        b.await.unwrap().unwrap();
        assert!(t0.elapsed() >= Duration::from_secs(5), "{:?}", t0.elapsed());
        let st = l.stats();
        assert_eq!((st.rate_limited, st.waits, st.requests), (1, 2, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_deadline_is_refused_without_sleeping() {
        let l = Limiter::new(Some(1.0), None);
        l.acquire(0, far()).await.unwrap();
        let t0 = Instant::now();
        let r = l.acquire(0, Instant::now() + Duration::from_secs(10)).await;
        assert!(matches!(r, Err(WouldPassDeadline(w)) if w > Duration::from_secs(50)));
        assert!(t0.elapsed() < Duration::from_millis(10));
    }

    #[test]
    fn token_estimates_and_usage_of_both_apis() {
        let body = json!({"model": "m", "max_tokens": 100});
        assert_eq!(estimate_tokens(&body, 400), 200);
        assert_eq!(estimate_tokens(&json!({}), 3), 1);
        assert_eq!(
            used_tokens(
                &json!({"usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}})
            ),
            Some(16)
        );
        assert_eq!(
            used_tokens(
                &json!({"usage": {"input_tokens": 30, "output_tokens": 5, "cache_read_input_tokens": 7}})
            ),
            Some(42)
        );
        assert_eq!(used_tokens(&json!({"choices": []})), None);
    }
}
