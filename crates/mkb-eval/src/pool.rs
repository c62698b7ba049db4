//! The evaluation pool: one judge per GPU (GPU work on one GPU is serialized, so timing is
//! exclusive per GPU) and a few GPU-less judges for compile-only work. Judges start lazily and
//! are restarted when they die.
//!
//! Infrastructure failures are not results: a candidate whose report is `crashed` with an
//! infrastructure reason (`EvalReport::is_infrastructure`), or whose judge died or did not
//! start, is evaluated again, up to [`TRIES`] tries in all (a fresh judge when it died). When
//! every try ends in `runner_killed`, the kill is the candidate's own doing and the report
//! becomes `crashed` / `process_died`; any other failure that persists comes back as the
//! infrastructure report itself, which callers record as "not evaluated" (never as a score).
//! Every report leaving the pool is scrubbed of this process's secrets.
//!
//! Each queue keeps accounts of its judges (`stats`): busy and idle time, the time a judge sat
//! idle while a request waited, and each request's wait for a judge ([`EvalPool::stats`]).

mod stats;

pub use stats::{JudgeUse, PoolStats, QueueStats};

use crate::judge::{judge_env, Backend, Judge, JudgeError, JudgeSpec};
use crate::protocol::{Candidate, EvalRequest, EvalResponse, Hello, KeyedReport};
use mkb_core::eval::{JUDGE_FAILED, PROCESS_DIED};
use mkb_core::{EvalMode, EvalReport, Verdict};
use stats::Tracker;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, Mutex};

/// Which GPUs the pool uses.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuSelection {
    /// Ask a judge whether it can run kernels; use GPU 0 if so (one judge per listed GPU otherwise).
    Auto,
    None,
    List(Vec<u32>),
}

/// GPUs visible on this machine, by `nvidia-smi -L` (0 when it is missing or fails).
/// Honours CUDA_VISIBLE_DEVICES when it is set to a list.
pub fn count_gpus() -> u32 {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES") {
        let v = v.trim();
        if v.is_empty() || v == "-1" {
            return 0;
        }
        return v.split(',').filter(|x| !x.trim().is_empty()).count() as u32;
    }
    match std::process::Command::new("nvidia-smi").arg("-L").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count() as u32,
        _ => 0,
    }
}

/// Parse a GPU selection: "auto", "none" (or empty), or a list like "0,1".
pub fn parse_gpus(s: &str) -> Result<GpuSelection, anyhow::Error> {
    Ok(match s.trim() {
        "auto" => GpuSelection::Auto,
        "none" | "" => GpuSelection::None,
        list => GpuSelection::List(
            list.split(',')
                .map(|x| {
                    x.trim().parse::<u32>().map_err(|_| {
                        anyhow::anyhow!(
                            "GPU selection {s:?}: expected auto, none or a list like 0,1"
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub python: PathBuf,
    pub root: PathBuf,
    pub gpus: GpuSelection,
    /// GPU-less judges for compile-only requests.
    pub cpu_workers: usize,
    /// Folder for judge logs (stderr).
    pub log_dir: Option<PathBuf>,
    /// How long a judge may take to start (torch + DSL imports).
    pub start_timeout: Duration,
    /// Judges per GPU: one runs GPU work at a time (the judges' GPU lease, docs/evaluator.md),
    /// the others start runners and compile meanwhile. [`DEFAULT_JUDGES_PER_GPU`] unless set.
    pub judges_per_gpu: usize,
    /// Where judges run: local processes, or bridges to a Ray cluster (one actor each; one
    /// judge per GPU there, and `GpuSelection::Auto` means every GPU of the cluster).
    pub backend: Backend,
}

/// Two judges per GPU: one builds while the other holds the GPU (measured on the H200,
/// bench/h200/2026-12-01b/).
pub const DEFAULT_JUDGES_PER_GPU: usize = 2;

#[derive(Debug, Error)]
pub enum EvalError {
    #[error("no GPU is available to this pool: only mode \"compile\" can run here")]
    NoGpu,
    #[error("the {dsl} DSL is not installed where the evaluator runs ({detail})")]
    DslUnavailable { dsl: String, detail: String },
    #[error("the evaluator could not be started: {0}")]
    Start(String),
    #[error("the evaluator rejected the request: {0}")]
    Rejected(String),
    #[error("the pool is shut down")]
    Closed,
}

/// A callback for the judge's progress events.
pub type EventSink = Box<dyn FnMut(&serde_json::Value) + Send>;

struct Job {
    req: EvalRequest,
    reply: oneshot::Sender<Result<EvalResponse, EvalError>>,
    on_event: Option<EventSink>,
    /// When it entered the queue.
    submitted: Instant,
}

type Queue = Arc<Mutex<mpsc::Receiver<Job>>>;

/// A queue's accounting, shared by the pool (submits) and its judges' workers (take, finish).
type Stats = Arc<std::sync::Mutex<Tracker>>;

fn lock(stats: &Stats) -> std::sync::MutexGuard<'_, Tracker> {
    // The tracker's state stays consistent under a panic elsewhere: keep using it.
    stats.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pool of judges. Cheap to clone handles are not needed: share it behind an `Arc`.
pub struct EvalPool {
    gpu_tx: Option<mpsc::Sender<Job>>,
    cpu_tx: mpsc::Sender<Job>,
    gpu_stats: Option<Stats>,
    cpu_stats: Stats,
    started: Instant,
    /// What a GPU-less judge reported at start (versions, DSL availability).
    pub cpu_hello: Hello,
    /// What the first GPU judge reported, when there is one.
    pub gpu_hello: Option<Hello>,
    gpu_ids: Vec<u32>,
}

impl EvalPool {
    /// Start the pool: one GPU-less judge immediately (to learn what is installed), the GPU
    /// judges when GPUs are selected (Auto: when a GPU judge says it can run kernels).
    pub async fn start(cfg: PoolConfig) -> Result<EvalPool, EvalError> {
        let started = Instant::now();
        // A judge's name: its log file's, `judge-<name>.log`.
        let name_of = |gpu: Option<u32>, n: usize| match gpu {
            Some(g) if n == 0 => format!("gpu{g}"),
            Some(g) => format!("gpu{g}-{n}"),
            None => format!("cpu{n}"),
        };
        let spec_for = |gpu: Option<u32>, n: usize| JudgeSpec {
            python: cfg.python.clone(),
            root: cfg.root.clone(),
            gpu,
            log_file: cfg
                .log_dir
                .as_ref()
                .map(|d| d.join(format!("judge-{}.log", name_of(gpu, n)))),
            backend: cfg.backend.clone(),
        };
        let first_cpu = Judge::start(&spec_for(None, 0), cfg.start_timeout)
            .await
            .map_err(|e| EvalError::Start(e.to_string()))?;
        let cpu_hello = first_cpu.hello.clone();

        let (gpu_ids, first_gpu) = match &cfg.gpus {
            GpuSelection::None => (vec![], None),
            GpuSelection::List(ids) if ids.is_empty() => (vec![], None),
            sel => {
                let ids = match sel {
                    GpuSelection::List(ids) => ids.clone(),
                    _ => (0..count_gpus().max(1)).collect(),
                };
                match Judge::start(&spec_for(Some(ids[0]), 0), cfg.start_timeout).await {
                    Ok(j) if j.hello.can_run => {
                        // A Ray bridge: "auto" is one GPU judge per GPU of the cluster.
                        let ids = match (sel, j.hello.ray_cluster_gpus()) {
                            (GpuSelection::Auto, Some(n)) if n > 0 => (0..n).collect(),
                            _ => ids,
                        };
                        (ids, Some(j))
                    }
                    Ok(j) => {
                        if matches!(sel, GpuSelection::List(_)) {
                            return Err(EvalError::Start(format!("GPU {} was requested but the judge cannot run kernels there (gpu: {:?})", ids[0], j.hello.gpu)));
                        }
                        j.shutdown().await;
                        (vec![], None)
                    }
                    Err(e) => {
                        if matches!(sel, GpuSelection::List(_)) {
                            return Err(EvalError::Start(e.to_string()));
                        }
                        (vec![], None)
                    }
                }
            }
        };
        let gpu_hello = first_gpu.as_ref().map(|j| j.hello.clone());

        let (cpu_tx, cpu_rx) = mpsc::channel::<Job>(1024);
        let cpu_q: Queue = Arc::new(Mutex::new(cpu_rx));
        let n_cpu = cfg.cpu_workers.max(1);
        let cpu_stats: Stats = Arc::new(std::sync::Mutex::new(Tracker::new(
            (0..n_cpu).map(|n| name_of(None, n)).collect(),
            started,
        )));
        let mut first_cpu = Some(first_cpu);
        for n in 0..n_cpu {
            let slot = LiveJudge {
                spec: spec_for(None, n),
                start_timeout: cfg.start_timeout,
                judge: first_cpu.take(),
            };
            tokio::spawn(worker(slot, cpu_q.clone(), cpu_stats.clone(), n));
        }
        let (gpu_tx, gpu_stats) = if gpu_ids.is_empty() {
            (None, None)
        } else {
            let (tx, rx) = mpsc::channel::<Job>(1024);
            let q: Queue = Arc::new(Mutex::new(rx));
            let per_gpu = cfg.backend.judges_per_gpu(cfg.judges_per_gpu);
            let judges: Vec<(u32, usize)> = gpu_ids
                .iter()
                .flat_map(|&g| (0..per_gpu).map(move |n| (g, n)))
                .collect();
            let stats: Stats = Arc::new(std::sync::Mutex::new(Tracker::new(
                judges.iter().map(|&(g, n)| name_of(Some(g), n)).collect(),
                started,
            )));
            let mut first = first_gpu;
            for (i, &(g, n)) in judges.iter().enumerate() {
                let slot = LiveJudge {
                    spec: spec_for(Some(g), n),
                    start_timeout: cfg.start_timeout,
                    judge: first.take(),
                };
                tokio::spawn(worker(slot, q.clone(), stats.clone(), i));
            }
            (Some(tx), Some(stats))
        };
        Ok(EvalPool {
            gpu_tx,
            cpu_tx,
            gpu_stats,
            cpu_stats,
            started,
            cpu_hello,
            gpu_hello,
            gpu_ids,
        })
    }

    pub fn has_gpu(&self) -> bool {
        self.gpu_tx.is_some()
    }

    pub fn gpu_ids(&self) -> &[u32] {
        &self.gpu_ids
    }

    /// How the judges were used since the pool started (module doc).
    pub fn stats(&self) -> PoolStats {
        let now = Instant::now();
        PoolStats {
            elapsed_s: (now - self.started).as_secs_f64(),
            cpu: lock(&self.cpu_stats).report(now),
            gpu: self.gpu_stats.as_ref().map(|s| lock(s).report(now)),
        }
    }

    /// Is this DSL importable where requests of `mode` run?
    pub fn dsl_available(&self, dsl: mkb_core::Dsl, mode: EvalMode) -> bool {
        if mode.needs_gpu() {
            self.gpu_hello
                .as_ref()
                .is_some_and(|h| h.dsl_available(dsl))
        } else {
            self.cpu_hello.dsl_available(dsl)
        }
    }

    /// Evaluate a group of candidates. Compile-only requests go to GPU-less judges, the rest
    /// to the GPU judges (one request at a time per GPU).
    pub async fn evaluate(&self, req: EvalRequest) -> Result<EvalResponse, EvalError> {
        self.evaluate_with(req, None).await
    }

    pub async fn evaluate_with(
        &self,
        req: EvalRequest,
        on_event: Option<EventSink>,
    ) -> Result<EvalResponse, EvalError> {
        let hello = if req.mode.needs_gpu() {
            self.gpu_hello.as_ref()
        } else {
            Some(&self.cpu_hello)
        };
        let Some(hello) = hello else {
            return Err(EvalError::NoGpu);
        };
        if !hello.dsl_available(req.dsl) {
            let detail = hello
                .dsls
                .get(req.dsl.as_str())
                .and_then(|d| d.error.clone())
                .unwrap_or_else(|| "not importable".into());
            return Err(EvalError::DslUnavailable {
                dsl: req.dsl.to_string(),
                detail,
            });
        }
        let (tx, stats) = if req.mode.needs_gpu() {
            (
                self.gpu_tx.as_ref().ok_or(EvalError::NoGpu)?,
                self.gpu_stats.as_ref().ok_or(EvalError::NoGpu)?,
            )
        } else {
            (&self.cpu_tx, &self.cpu_stats)
        };
        let (reply, rx) = oneshot::channel();
        submit(
            tx,
            stats,
            Job {
                req,
                reply,
                on_event,
                submitted: Instant::now(),
            },
        )
        .await?;
        rx.await.map_err(|_| EvalError::Closed)?
    }

    /// Evaluate one candidate and return its report.
    pub async fn evaluate_one(&self, req: EvalRequest) -> Result<EvalReport, EvalError> {
        let mut resp = self.evaluate(req).await?;
        resp.reports
            .pop()
            .map(|k| k.report)
            .ok_or_else(|| EvalError::Rejected("the judge returned no report".into()))
    }
}

/// Tries of one evaluation after an infrastructure failure: the first and two retries.
pub const TRIES: usize = 3;

/// Pause before retry n (n times this), so that an overloaded host can recover.
const INFRA_PAUSE: Duration = Duration::from_secs(1);

/// Where a retry starts a judge.
trait JudgeSlot {
    async fn evaluate(
        &mut self,
        req: &EvalRequest,
        on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    ) -> Result<EvalResponse, JudgeError>;
    /// Forget the judge (it died); the next `evaluate` starts a fresh one.
    fn discard(&mut self);
    /// Stop the judge, if one runs (the pool is closing).
    async fn shutdown(self)
    where
        Self: Sized,
    {
    }
}

/// A judge process of the pool, started when first needed.
struct LiveJudge {
    spec: JudgeSpec,
    start_timeout: Duration,
    judge: Option<Judge>,
}

impl JudgeSlot for LiveJudge {
    async fn evaluate(
        &mut self,
        req: &EvalRequest,
        on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    ) -> Result<EvalResponse, JudgeError> {
        if self.judge.is_none() {
            self.judge = Some(Judge::start(&self.spec, self.start_timeout).await?);
        }
        let j = self.judge.as_mut().expect("started");
        j.evaluate(req, rand::random(), on_event).await
    }
    fn discard(&mut self) {
        self.judge = None;
    }
    async fn shutdown(self) {
        if let Some(j) = self.judge {
            j.shutdown().await;
        }
    }
}

/// Put `job` on a queue and count it as waiting from now. Cancelling the caller before the job
/// is queued leaves no trace (the slot is reserved first; counting and queueing do not wait).
async fn submit(tx: &mpsc::Sender<Job>, stats: &Stats, mut job: Job) -> Result<(), EvalError> {
    let permit = tx.reserve().await.map_err(|_| EvalError::Closed)?;
    let mut tracker = lock(stats);
    job.submitted = Instant::now();
    tracker.submitted(job.submitted);
    // Under the tracker's lock: no judge counts the job taken before it is counted waiting.
    permit.send(job);
    Ok(())
}

/// Take the next job of `queue` for judge `idx` (None: the queue is closed), counting it taken.
async fn take(queue: &Queue, stats: &Stats, idx: usize) -> Option<Job> {
    let job = queue.lock().await.recv().await?;
    lock(stats).taken(idx, job.submitted, Instant::now());
    Some(job)
}

/// Judge number `idx` of a queue: take a job, evaluate it (with retries), reply, repeat.
async fn worker<S: JudgeSlot>(mut slot: S, queue: Queue, stats: Stats, idx: usize) {
    while let Some(job) = take(&queue, &stats, idx).await {
        let Job {
            req,
            reply,
            mut on_event,
            ..
        } = job;
        let mut sink = |v: &serde_json::Value| {
            if let Some(f) = on_event.as_mut() {
                f(v)
            }
        };
        let result = evaluate_with_retries(&mut slot, &req, &mut sink, INFRA_PAUSE)
            .await
            .map(scrub_response);
        lock(&stats).finished(idx, Instant::now());
        let _ = reply.send(result);
    }
    slot.shutdown().await;
}

/// No secret of this process leaves the pool in a report (a candidate may have printed one).
fn scrub_response(resp: EvalResponse) -> EvalResponse {
    if mkb_core::secret::count() == 0 {
        return resp;
    }
    mkb_core::secret::scrub_value(&resp).unwrap_or(resp)
}

/// Evaluate `req`, trying again what failed for infrastructure reasons (module doc).
async fn evaluate_with_retries(
    slot: &mut impl JudgeSlot,
    req: &EvalRequest,
    on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    pause: Duration,
) -> Result<EvalResponse, EvalError> {
    let mut pending: Vec<Candidate> = req.candidates.clone();
    let mut done: BTreeMap<String, EvalReport> = BTreeMap::new();
    let mut failures: BTreeMap<String, Vec<EvalReport>> = BTreeMap::new();
    let mut session = serde_json::Value::Null;
    let mut answered = false;
    let mut last_err = String::new();
    for attempt in 0..TRIES {
        if pending.is_empty() {
            break;
        }
        if attempt > 0 {
            tokio::time::sleep(pause * attempt as u32).await;
        }
        let mut sub = req.clone();
        sub.candidates = pending.clone();
        match slot.evaluate(&sub, on_event).await {
            Ok(resp) => {
                answered = true;
                if session.is_null() {
                    session = resp.session;
                }
                for kr in resp.reports {
                    if !pending.iter().any(|c| c.key == kr.key) {
                        continue;
                    }
                    if kr.report.is_infrastructure() {
                        tracing::warn!(key = %kr.key, reason = ?kr.report.reason, try_ = attempt + 1,
                            "evaluation failed for infrastructure reasons; retrying");
                        failures.entry(kr.key).or_default().push(kr.report);
                    } else {
                        done.insert(kr.key, kr.report);
                    }
                }
                for c in &pending {
                    let tried = failures.get(&c.key).map_or(0, Vec::len);
                    if !done.contains_key(&c.key) && tried < attempt + 1 {
                        failures.entry(c.key.clone()).or_default().push(
                            EvalReport::infrastructure(
                                req.mode,
                                Verdict::Crashed,
                                "judge_error",
                                "the judge's answer had no report for this candidate".into(),
                            ),
                        );
                    }
                }
            }
            Err(JudgeError::Rejected(msg)) => return Err(EvalError::Rejected(msg)),
            Err(e @ JudgeError::Contract(_)) => return Err(EvalError::Rejected(e.to_string())),
            Err(e) => {
                tracing::warn!(error = %e, try_ = attempt + 1, "judge failed; restarting it");
                slot.discard();
                last_err = e.to_string();
                for c in &pending {
                    failures
                        .entry(c.key.clone())
                        .or_default()
                        .push(judge_failed_report(req.mode, &last_err));
                }
            }
        }
        pending.retain(|c| !done.contains_key(&c.key));
    }
    if !answered && done.is_empty() && last_err.starts_with("could not start") {
        return Err(EvalError::Start(last_err));
    }
    let reports = req
        .candidates
        .iter()
        .map(|c| {
            let report = match done.remove(&c.key) {
                Some(r) => r,
                None => settle(failures.remove(&c.key).unwrap_or_default(), req.mode),
            };
            KeyedReport {
                key: c.key.clone(),
                report,
            }
        })
        .collect();
    Ok(EvalResponse { reports, session })
}

/// The outcome of a candidate that failed for infrastructure reasons on every try.
fn settle(mut tries: Vec<EvalReport>, mode: EvalMode) -> EvalReport {
    let n = tries.len();
    let killed_every_time = n >= TRIES
        && tries
            .iter()
            .all(|r| r.reason.as_deref() == Some("runner_killed"));
    let mut last = tries
        .pop()
        .unwrap_or_else(|| judge_failed_report(mode, "no answer"));
    if killed_every_time {
        // Reproducible: the candidate itself brings its runner down (e.g. memory blow-up).
        last.verdict = Verdict::Crashed;
        last.reason = Some(PROCESS_DIED.into());
        last.message = format!(
            "the runner was killed on each of {n} tries, so the candidate kills it: {}",
            last.message
        );
    } else {
        last.message = format!(
            "not evaluated: the evaluation failed for infrastructure reasons on {n} tries ({}); last: {}",
            tries
                .iter()
                .chain(std::iter::once(&last))
                .filter_map(|r| r.reason.clone())
                .collect::<Vec<_>>()
                .join(", "),
            last.message
        );
    }
    last
}

/// A judge that died, hung or did not start: verdict `crashed`, reason `judge_failed` (an
/// infrastructure failure), with the judge's own log.
fn judge_failed_report(mode: EvalMode, err: &str) -> EvalReport {
    let mut r = EvalReport::infrastructure(
        mode,
        Verdict::Crashed,
        JUDGE_FAILED,
        format!(
            "the evaluator process failed: {}",
            crate::protocol::trim(err, 300)
        ),
    );
    r.log = crate::protocol::trim(err, 8000);
    r
}

/// Checks that every `reference.py` in `files` parses and imports with the evaluator's Python
/// (one process for all). The error lists each broken file with its line. Compile-mode
/// evaluations never run the reference, so this is how a broken one is caught in every mode.
pub async fn check_reference_files(
    python: &Path,
    root: &Path,
    files: &[PathBuf],
    timeout: Duration,
) -> Result<(), String> {
    if files.is_empty() {
        return Ok(());
    }
    let spec = JudgeSpec {
        python: python.to_path_buf(),
        root: root.to_path_buf(),
        gpu: None,
        log_file: None,
        backend: Backend::Local,
    };
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg("-c")
        .arg(REFERENCE_CHECK_PY)
        .args(files)
        .current_dir(root)
        .env_clear()
        .envs(judge_env(&spec))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = match tokio::time::timeout(timeout, cmd.output()).await {
        Err(_) => {
            return Err(format!(
                "checking the problems' reference.py files with {} took longer than {timeout:?}",
                python.display()
            ))
        }
        Ok(Err(e)) => {
            return Err(format!(
                "cannot run {} to check the problems' reference.py files: {e}",
                python.display()
            ))
        }
        Ok(Ok(o)) => o,
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rev().find(|l| l.starts_with('['));
    let problems: Vec<serde_json::Value> = match last.map(serde_json::from_str) {
        Some(Ok(v)) => v,
        _ => {
            return Err(format!(
                "checking the problems' reference.py files with {} failed: {}",
                python.display(),
                crate::protocol::trim(&String::from_utf8_lossy(&out.stderr), 2000)
            ))
        }
    };
    if problems.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| {
            let file = p["file"].as_str().unwrap_or("?");
            let file = Path::new(file)
                .strip_prefix(root)
                .map(|r| r.display().to_string())
                .unwrap_or_else(|_| file.to_string());
            match p["line"].as_u64() {
                Some(l) => format!("  {file}:{l}: {}", p["error"].as_str().unwrap_or("")),
                None => format!("  {file}: {}", p["error"].as_str().unwrap_or("")),
            }
        })
        .collect();
    Err(format!(
        "{} reference.py file(s) cannot be used:\n{}",
        lines.len(),
        lines.join("\n")
    ))
}

/// Parses and imports each file named on the command line; prints one JSON list of problems.
const REFERENCE_CHECK_PY: &str = r#"
import ast, importlib.util, json, sys, traceback
problems = []
for i, path in enumerate(sys.argv[1:]):
    try:
        with open(path, encoding="utf-8") as f:
            src = f.read()
    except (OSError, UnicodeDecodeError) as e:
        problems.append({"file": path, "line": None, "error": f"cannot read: {e}"})
        continue
    try:
        ast.parse(src, filename=path)
    except SyntaxError as e:
        problems.append({"file": path, "line": e.lineno, "error": f"syntax error: {e.msg}"})
        continue
    folder = path.rsplit("/", 1)[0] if "/" in path else "."
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(f"_mkb_reference_{i}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except BaseException as e:
        frames = [fr for fr in traceback.extract_tb(e.__traceback__) if fr.filename == path]
        line = frames[-1].lineno if frames else None
        problems.append({"file": path, "line": line, "error": f"import failed: {type(e).__name__}: {e}"})
    finally:
        sys.path.remove(folder)
print(json.dumps(problems))
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Candidate;
    use std::collections::VecDeque;

    /// What the fake judge does on one call, per candidate key: a verdict/reason, or the
    /// whole judge dying.
    enum Step {
        Reports(Vec<(&'static str, Verdict, Option<&'static str>)>),
        Dies,
        Rejects,
        BreaksContract,
    }

    struct FakeSlot {
        steps: VecDeque<Step>,
        /// The candidate keys of each call.
        calls: Vec<Vec<String>>,
        discarded: usize,
    }

    impl FakeSlot {
        fn new(steps: Vec<Step>) -> FakeSlot {
            FakeSlot {
                steps: steps.into(),
                calls: Vec::new(),
                discarded: 0,
            }
        }
    }

    impl JudgeSlot for FakeSlot {
        async fn evaluate(
            &mut self,
            req: &EvalRequest,
            _on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
        ) -> Result<EvalResponse, JudgeError> {
            self.calls
                .push(req.candidates.iter().map(|c| c.key.clone()).collect());
            match self.steps.pop_front().expect("no more scripted calls") {
                Step::Dies => Err(JudgeError::Died {
                    stderr_tail: "Segmentation fault".into(),
                }),
                Step::Rejects => Err(JudgeError::Rejected("bad request".into())),
                Step::BreaksContract => Err(JudgeError::Contract(
                    "reports[0] (a): report field `colour` is unknown".into(),
                )),
                Step::Reports(rs) => Ok(EvalResponse {
                    reports: rs
                        .into_iter()
                        .filter(|(k, _, _)| req.candidates.iter().any(|c| c.key == *k))
                        .map(|(k, v, reason)| {
                            let mut r = EvalReport::infrastructure(req.mode, v, "x", "m".into());
                            r.reason = reason.map(String::from);
                            KeyedReport {
                                key: k.into(),
                                report: r,
                            }
                        })
                        .collect(),
                    session: serde_json::Value::Null,
                }),
            }
        }
        fn discard(&mut self) {
            self.discarded += 1;
        }
    }

    fn request(keys: &[&str]) -> EvalRequest {
        EvalRequest {
            candidates: keys
                .iter()
                .map(|k| Candidate {
                    key: k.to_string(),
                    path: format!("/k/{k}.py").into(),
                })
                .collect(),
            ..EvalRequest::single(
                "/p".into(),
                mkb_core::Dsl::CUTE,
                EvalMode::Full,
                "/x".into(),
            )
        }
    }

    async fn run(slot: &mut FakeSlot, keys: &[&str]) -> Result<EvalResponse, EvalError> {
        evaluate_with_retries(slot, &request(keys), &mut |_| {}, Duration::ZERO).await
    }

    const OK: (Verdict, Option<&str>) = (Verdict::Correct, None);

    fn rep(k: &'static str, (v, r): (Verdict, Option<&'static str>)) -> Step {
        Step::Reports(vec![(k, v, r)])
    }

    #[tokio::test]
    async fn an_infrastructure_failure_is_retried_then_the_real_verdict_kept() {
        let mut slot = FakeSlot::new(vec![
            rep("a", (Verdict::Crashed, Some("host_overload"))),
            rep("a", OK),
        ]);
        let r = run(&mut slot, &["a"]).await.unwrap();
        assert_eq!(r.reports[0].report.verdict, Verdict::Correct);
        assert_eq!(slot.calls.len(), 2);
    }

    #[tokio::test]
    async fn a_failure_that_persists_is_not_evaluated_never_a_score() {
        let mut slot = FakeSlot::new(vec![
            rep("a", (Verdict::Crashed, Some("judge_error"))),
            rep("a", (Verdict::Crashed, Some("profiler_error"))),
            rep("a", (Verdict::Crashed, Some("judge_error"))),
        ]);
        let r = run(&mut slot, &["a"]).await.unwrap();
        let got = &r.reports[0].report;
        assert!(got.is_infrastructure(), "{got:?}");
        assert!(got.message.starts_with("not evaluated"), "{}", got.message);
        assert!(got
            .message
            .contains("judge_error, profiler_error, judge_error"));
        assert_eq!(slot.calls.len(), TRIES);
    }

    #[tokio::test]
    async fn a_runner_killed_on_every_try_is_the_candidates_own_crash() {
        let killed = (Verdict::Crashed, Some("runner_killed"));
        let mut slot = FakeSlot::new(vec![rep("a", killed), rep("a", killed), rep("a", killed)]);
        let r = run(&mut slot, &["a"]).await.unwrap();
        let got = &r.reports[0].report;
        assert_eq!(got.verdict, Verdict::Crashed);
        assert_eq!(got.reason.as_deref(), Some(PROCESS_DIED));
        assert!(!got.is_infrastructure());

        // Killed twice, then another infrastructure failure: not the candidate's doing.
        let mut slot = FakeSlot::new(vec![
            rep("a", killed),
            rep("a", killed),
            rep("a", (Verdict::Crashed, Some("no_gpu"))),
        ]);
        let r = run(&mut slot, &["a"]).await.unwrap();
        assert!(r.reports[0].report.is_infrastructure());
    }

    #[tokio::test]
    async fn a_dead_judge_is_replaced_and_only_failed_candidates_are_redone() {
        let mut slot = FakeSlot::new(vec![
            Step::Dies,
            Step::Reports(vec![
                ("a", Verdict::Correct, None),
                ("b", Verdict::Crashed, Some("runner_killed")),
                ("c", Verdict::Incorrect, Some("mismatch")),
            ]),
            rep("b", OK),
        ]);
        let r = run(&mut slot, &["a", "b", "c"]).await.unwrap();
        assert_eq!(
            slot.discarded, 1,
            "the dead judge is dropped for a fresh one"
        );
        assert_eq!(slot.calls[2], vec!["b".to_string()]);
        let keys: Vec<_> = r.reports.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"], "reports keep the request's order");
        assert_eq!(r.reports[1].report.verdict, Verdict::Correct);
        assert_eq!(r.reports[2].report.verdict, Verdict::Incorrect);
    }

    #[tokio::test]
    async fn a_judge_dying_on_every_try_is_not_evaluated() {
        let mut slot = FakeSlot::new(vec![Step::Dies, Step::Dies, Step::Dies]);
        let r = run(&mut slot, &["a"]).await.unwrap();
        let got = &r.reports[0].report;
        assert_eq!(got.reason.as_deref(), Some(JUDGE_FAILED));
        assert!(got.is_infrastructure());
        assert_eq!(slot.discarded, 3);
    }

    #[tokio::test]
    async fn a_rejected_request_is_an_error_at_once() {
        let mut slot = FakeSlot::new(vec![Step::Rejects]);
        assert!(matches!(
            run(&mut slot, &["a"]).await,
            Err(EvalError::Rejected(_))
        ));
        assert_eq!(slot.calls.len(), 1);
    }

    /// An answer that breaks the report schema is never retried (it cannot get better) and
    /// never becomes a verdict: the caller gets the error naming the field.
    #[tokio::test]
    async fn a_schema_mismatch_is_an_error_at_once() {
        let mut slot = FakeSlot::new(vec![Step::BreaksContract]);
        match run(&mut slot, &["a"]).await {
            Err(EvalError::Rejected(m)) => assert!(m.contains("`colour`"), "{m}"),
            other => panic!("expected a rejection, got {other:?}"),
        }
        assert_eq!((slot.calls.len(), slot.discarded), (1, 0));
    }

    /// A judge of a test queue: answers every candidate `correct` after `self.0`.
    struct SlowSlot(Duration);

    impl JudgeSlot for SlowSlot {
        async fn evaluate(
            &mut self,
            req: &EvalRequest,
            _on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
        ) -> Result<EvalResponse, JudgeError> {
            tokio::time::sleep(self.0).await;
            Ok(EvalResponse {
                reports: req
                    .candidates
                    .iter()
                    .map(|c| {
                        let mut r =
                            EvalReport::infrastructure(req.mode, Verdict::Correct, "x", "m".into());
                        r.reason = None;
                        KeyedReport {
                            key: c.key.clone(),
                            report: r,
                        }
                    })
                    .collect(),
                session: serde_json::Value::Null,
            })
        }
        fn discard(&mut self) {}
    }

    /// A queue whose accounts name `judges` judges, of which only the first `working` take
    /// work (each taking `each` per request), and `n` requests submitted to it at once; returns
    /// the queue's stats once every request was answered.
    async fn queue_run(judges: usize, working: usize, each: Duration, n: usize) -> QueueStats {
        let (tx, rx) = mpsc::channel::<Job>(16);
        let queue: Queue = Arc::new(Mutex::new(rx));
        let names = (0..judges).map(|i| format!("j{i}")).collect();
        let stats: Stats = Arc::new(std::sync::Mutex::new(Tracker::new(names, Instant::now())));
        for i in 0..working {
            tokio::spawn(worker(SlowSlot(each), queue.clone(), stats.clone(), i));
        }
        let mut replies = Vec::new();
        for _ in 0..n {
            let (reply, rx) = oneshot::channel();
            let job = Job {
                req: request(&["a"]),
                reply,
                on_event: None,
                submitted: Instant::now(),
            };
            submit(&tx, &stats, job).await.unwrap();
            replies.push(rx);
        }
        for r in replies {
            let resp = r.await.unwrap().unwrap();
            assert_eq!(resp.reports[0].report.verdict, Verdict::Correct);
        }
        let report = lock(&stats).report(Instant::now());
        report
    }

    /// Two judges, three requests of 300 ms at once: the third waits for a judge about 300 ms,
    /// and no judge is idle meanwhile (both are busy).
    #[tokio::test]
    async fn queue_waits_are_measured_and_busy_judges_are_not_idle() {
        let r = queue_run(2, 2, Duration::from_millis(300), 3).await;
        assert_eq!((r.requests, r.waiting), (3, 0), "{r:?}");
        assert!((1..=3).contains(&r.max_waiting), "{r:?}");
        assert!(r.wait_max_s >= 0.28 && r.wait_max_s < 2.0, "{r:?}");
        assert!(r.wait_p50_s < 0.1, "{r:?}");
        assert!(r.idle_while_waiting_s() < 0.05, "{r:?}");
        let busy: f64 = r.judges.iter().map(|j| j.busy_s).sum();
        assert!(busy >= 0.88, "three requests of 300 ms: {r:?}");
    }

    /// A judge that never takes work (here: no worker behind it) is idle while requests wait
    /// for the other one, and the stats say so.
    #[tokio::test]
    async fn a_judge_idle_while_a_request_waits_is_reported() {
        let r = queue_run(2, 1, Duration::from_millis(300), 2).await;
        assert_eq!(r.requests, 2, "{r:?}");
        let stuck = &r.judges[1];
        assert_eq!(stuck.busy_s, 0.0, "{r:?}");
        assert!(
            stuck.idle_while_waiting_s >= 0.28 && stuck.idle_while_waiting_s < 2.0,
            "{r:?}"
        );
        assert!(r.judges[0].idle_while_waiting_s < 0.05, "{r:?}");
        assert!(r.wait_max_s >= 0.28, "{r:?}");
    }

    #[tokio::test]
    async fn broken_reference_files_are_named_with_their_line() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("good/reference.py");
        let syntax = tmp.path().join("syntax/reference.py");
        let import = tmp.path().join("import/reference.py");
        for (p, src) in [
            (
                &good,
                "import math\n\ndef reference(x):\n    return math.sqrt(x)\n",
            ),
            (&syntax, "import math\n\ndef reference(x:\n    return x\n"),
            (&import, "import math\nimport no_such_module_mkb\n"),
        ] {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, src).unwrap();
        }
        let py = Path::new("python3");
        let t = Duration::from_secs(60);
        check_reference_files(py, tmp.path(), std::slice::from_ref(&good), t)
            .await
            .unwrap();
        let e = check_reference_files(py, tmp.path(), &[good, syntax, import], t)
            .await
            .unwrap_err();
        assert!(e.starts_with("2 reference.py file(s)"), "{e}");
        assert!(e.contains("syntax/reference.py:3: syntax error"), "{e}");
        assert!(
            e.contains("import/reference.py:2: import failed: ModuleNotFoundError"),
            "{e}"
        );
    }
}
