//! The evaluation pool: one judge per GPU (GPU work on one GPU is serialized, so timing is
//! exclusive per GPU) and a few GPU-less judges for compile-only work. Judges start lazily,
//! are restarted when they die, and a job whose judge died twice gets an honest failure report.

use crate::judge::{Judge, JudgeError, JudgeSpec};
use crate::protocol::{EvalRequest, EvalResponse, Hello, KeyedReport};
use mkb_core::{EvalMode, EvalReport, Verdict};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
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
}

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
}

type Queue = Arc<Mutex<mpsc::Receiver<Job>>>;

/// A pool of judges. Cheap to clone handles are not needed: share it behind an `Arc`.
pub struct EvalPool {
    gpu_tx: Option<mpsc::Sender<Job>>,
    cpu_tx: mpsc::Sender<Job>,
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
        let spec_for = |gpu: Option<u32>, n: usize| JudgeSpec {
            python: cfg.python.clone(),
            root: cfg.root.clone(),
            gpu,
            log_file: cfg.log_dir.as_ref().map(|d| match gpu {
                Some(g) => d.join(format!("judge-gpu{g}.log")),
                None => d.join(format!("judge-cpu{n}.log")),
            }),
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
                    Ok(j) if j.hello.can_run => (ids, Some(j)),
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
        let mut first_cpu = Some(first_cpu);
        for n in 0..cfg.cpu_workers.max(1) {
            tokio::spawn(worker(
                spec_for(None, n),
                cfg.start_timeout,
                cpu_q.clone(),
                first_cpu.take(),
            ));
        }
        let gpu_tx = if gpu_ids.is_empty() {
            None
        } else {
            let (tx, rx) = mpsc::channel::<Job>(1024);
            let q: Queue = Arc::new(Mutex::new(rx));
            let mut first = first_gpu;
            for &g in &gpu_ids {
                tokio::spawn(worker(
                    spec_for(Some(g), 0),
                    cfg.start_timeout,
                    q.clone(),
                    first.take(),
                ));
            }
            Some(tx)
        };
        Ok(EvalPool {
            gpu_tx,
            cpu_tx,
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
        let tx = if req.mode.needs_gpu() {
            self.gpu_tx.as_ref().ok_or(EvalError::NoGpu)?
        } else {
            &self.cpu_tx
        };
        let (reply, rx) = oneshot::channel();
        tx.send(Job {
            req,
            reply,
            on_event,
        })
        .await
        .map_err(|_| EvalError::Closed)?;
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

async fn worker(spec: JudgeSpec, start_timeout: Duration, queue: Queue, mut judge: Option<Judge>) {
    loop {
        let job = {
            let mut q = queue.lock().await;
            match q.recv().await {
                Some(j) => j,
                None => break,
            }
        };
        let Job {
            req,
            reply,
            mut on_event,
        } = job;
        let mut sink = |v: &serde_json::Value| {
            if let Some(f) = on_event.as_mut() {
                f(v)
            }
        };
        let mut last_err: Option<JudgeError> = None;
        let mut result = None;
        // One retry on a fresh judge: a judge death is the evaluator's failure, not the candidate's.
        for _attempt in 0..2 {
            if judge.is_none() {
                match Judge::start(&spec, start_timeout).await {
                    Ok(j) => judge = Some(j),
                    Err(e) => {
                        last_err = Some(e);
                        continue;
                    }
                }
            }
            let j = judge.as_mut().expect("started");
            let seed: u64 = rand::random();
            match j.evaluate(&req, seed, &mut sink).await {
                Ok(resp) => {
                    result = Some(Ok(resp));
                    break;
                }
                Err(JudgeError::Rejected(msg)) => {
                    result = Some(Err(EvalError::Rejected(msg)));
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "judge failed; restarting it");
                    judge = None;
                    last_err = Some(e);
                }
            }
        }
        let result = result.unwrap_or_else(|| {
            let err = last_err.map(|e| e.to_string()).unwrap_or_default();
            match last_err_kind(&err) {
                Some(verdict) => Ok(failed_group(&req, verdict, &err)),
                None => Err(EvalError::Start(err)),
            }
        });
        let _ = reply.send(result);
    }
    if let Some(j) = judge {
        j.shutdown().await;
    }
}

fn last_err_kind(err: &str) -> Option<Verdict> {
    if err.starts_with("could not start") {
        None
    } else if err.contains("did not answer within") {
        Some(Verdict::Timeout)
    } else {
        Some(Verdict::Crashed)
    }
}

/// Reports for a group whose judge failed twice (e.g. a GPU hang): every candidate gets the
/// failure, with the judge's own log.
fn failed_group(req: &EvalRequest, verdict: Verdict, err: &str) -> EvalResponse {
    let reports = req
        .candidates
        .iter()
        .map(|c| {
            let mut r = EvalReport::infrastructure(
                req.mode,
                verdict,
                "judge_failed",
                format!(
                    "the evaluator process failed twice while evaluating this group: {}",
                    crate::protocol::trim(err, 300)
                ),
            );
            r.log = crate::protocol::trim(err, 8000);
            KeyedReport {
                key: c.key.clone(),
                report: r,
            }
        })
        .collect();
    EvalResponse {
        reports,
        session: serde_json::Value::Null,
    }
}
