//! The agent loop of one attempt: a fresh conversation (system prompt + variant prompt, plus a
//! skill in its fixed slot for skill-conditioned and placebo attempts), tool calls served
//! against the evaluator (any [`Evaluator`]: the real pool in a run), budgets enforced, the final kernel chosen, and, for solo
//! attempts, the distillation turn. Every event is appended to a JSONL trajectory as it happens,
//! scrubbed of the process's secrets.
//!
//! Wall budget: everything an attempt does (model calls and their retries, tool evaluations,
//! the distillation turn) ends by `start + max_wall_s + queued`, where `queued` is the time its
//! tool evaluations spent waiting for the shared evaluator (a call's wall time less the
//! evaluation's own `phases.total`): that wait depends on how busy the evaluator is, which
//! differs between the solo and conditioned phases of a run, so it is not charged to the
//! agent (at most another `max_wall_s` of it is granted). Both are recorded (`wall_s`,
//! `eval_wait_s`). The conversation itself ends [`distill_reserve`] earlier in every
//! condition alike, so that a solo attempt's distillation fits in the same budget without
//! giving solo attempts less time than the others. An optional input-token cap
//! (`max_input_tokens`) ends the conversation before a call once the attempt's prompt tokens
//! reach it.
//!
//! Faults that are not the model's (the provider failing past its retries or never answering,
//! an evaluation that failed for infrastructure reasons) end the attempt with an
//! [`AttemptError`]: it is not recorded and a re-run redoes it.

use crate::provider::{
    ChatRequest, ConversationKey, Message, Provider, ProviderError, Sampling, Usage,
};
use crate::skill::{audit, distill_prompt, parse_skill, Skill};
use crate::tools::{self, describe_report, eval_mode_of, tool_specs};
use mkb_core::{Budget, Dsl, EndReason, EvalMode, EvalReport, Verdict};
use mkb_eval::{EvalError, EvalRequest, Evaluator};
use serde_json::json;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;

/// The system prompt of every attempt (solo and conditioned alike).
pub const SYSTEM_PROMPT: &str = "You are an expert GPU kernel engineer. You write one fast, correct kernel for an \
NVIDIA H200 (sm_90a) in the DSL your task names, and nothing else: no PyTorch compute, no other kernel language. \
Work with the tools: write_kernel to save your kernel file, compile to check it builds, test to check \
correctness on the GPU, benchmark to time it against eager PyTorch, submit when you are done. The harness keeps \
your best kernel that it measured correct. Your budget is limited, so make each call count.";

/// Everything one attempt needs.
#[derive(Debug, Clone)]
pub struct AttemptSpec {
    pub attempt_id: String,
    pub key: ConversationKey,
    pub problem_dir: PathBuf,
    pub dsl: Dsl,
    /// The user prompt: the variant prompt, plus the skill slot when the condition has a skill.
    pub user_prompt: String,
    pub brief: String,
    pub starter: String,
    pub budget: Budget,
    pub sampling: Sampling,
    /// Some(max chars) to distill a skill after the attempt (solo attempts).
    pub distill_max_chars: Option<usize>,
    /// The leak markers of every DSL this attempt's skill may be given to (the leak audit).
    pub audit_markers: Vec<String>,
    /// Absolute folder for this attempt's artifacts, and the same relative to the run folder.
    pub dir: PathBuf,
    pub rel_dir: String,
    /// Can test/benchmark run (is there a GPU behind the pool)?
    pub gpu_available: bool,
    /// Longest log an agent gets back from one tool call.
    pub max_log_chars: usize,
    /// Timing of the benchmark tool (the final evaluation times separately, fully).
    pub tool_timing: mkb_eval::TimingOptions,
}

/// One evaluation a tool call ran.
#[derive(Debug, Clone)]
pub struct ToolEval {
    pub seq: u32,
    pub tool: String,
    pub mode: EvalMode,
    /// Kernel snapshot, relative to the run folder.
    pub kernel: String,
    pub report: EvalReport,
}

/// A finished attempt (whatever its outcome).
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub end_reason: EndReason,
    pub turns: u32,
    pub usage: Usage,
    pub evals: Vec<ToolEval>,
    /// Wall seconds of the attempt (the conversation, distillation excluded), queueing for
    /// the evaluator included.
    pub wall_s: f64,
    /// Seconds of `wall_s` its tool evaluations spent queued for the evaluator.
    pub eval_wait_s: f64,
    /// Relative path of the final kernel, when any kernel was written.
    pub final_kernel: Option<String>,
    /// "best_correct" (the harness measured it correct), "last_written" or "none".
    pub final_source: &'static str,
    pub trajectory: String,
    pub error: Option<String>,
    /// The distilled skill and the tokens its turn used (solo attempts).
    pub skill: Option<(Skill, Usage)>,
}

/// Failures that say nothing about the model or its kernel: the attempt is not recorded and
/// a re-run retries it (e.g. the evaluator for this DSL is not installed on this machine).
#[derive(Debug, Error)]
pub enum AttemptError {
    #[error("evaluator unavailable: {0}")]
    Evaluator(String),
    #[error("provider unavailable: {0}")]
    Provider(String),
    /// Every request will fail the same way (key refused, unknown model, bad recordings):
    /// the run must stop before it stores anything.
    #[error("provider refused the run: {0}")]
    ProviderFatal(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

struct Trajectory {
    file: std::fs::File,
    start: Instant,
}

impl Trajectory {
    fn create(path: &Path) -> std::io::Result<Trajectory> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        Ok(Trajectory {
            file: std::fs::File::create(path)?,
            start: Instant::now(),
        })
    }

    fn log(&mut self, kind: &str, body: serde_json::Value) -> std::io::Result<()> {
        let mut v = json!({"t": (self.start.elapsed().as_secs_f64() * 1000.0).round() / 1000.0, "type": kind});
        if let (Some(obj), serde_json::Value::Object(b)) = (v.as_object_mut(), body) {
            obj.extend(b);
        }
        let mut line =
            mkb_core::secret::scrub(&serde_json::to_string(&v).unwrap_or_default()).into_owned();
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.file.flush()
    }
}

/// The best kernel so far by the harness's own measurements.
#[derive(Default)]
struct Best {
    /// (runtime us, snapshot) of the fastest benchmark-correct kernel.
    bench: Option<(f64, String)>,
    /// The latest test-correct kernel.
    tested: Option<String>,
}

impl Best {
    fn observe(&mut self, mode: EvalMode, snapshot: &str, r: &EvalReport) {
        if r.verdict != Verdict::Correct {
            return;
        }
        match mode {
            EvalMode::Bench | EvalMode::Full => {
                if let Some(t) = r.runtime.as_ref().map(|t| t.median_us) {
                    if self.bench.as_ref().is_none_or(|(b, _)| t < *b) {
                        self.bench = Some((t, snapshot.to_string()));
                    }
                }
            }
            EvalMode::Test => self.tested = Some(snapshot.to_string()),
            EvalMode::Compile => {}
        }
    }
    fn pick(&self) -> Option<&str> {
        self.bench
            .as_ref()
            .map(|(_, s)| s.as_str())
            .or(self.tested.as_deref())
    }
}

enum Flow {
    Continue,
    End(EndReason),
}

/// The end of an attempt's wall budget kept for its distillation turn: a tenth of the budget,
/// at most 600 s. The conversation of every attempt (solo or not) ends this much earlier.
pub fn distill_reserve(max_wall_s: u64) -> Duration {
    Duration::from_secs(max_wall_s.min(6000)) / 10
}

/// Run one attempt to its end and, when asked, distill its skill.
pub async fn run_attempt<E: Evaluator>(
    spec: &AttemptSpec,
    provider: &Provider,
    pool: &E,
) -> Result<AttemptOutcome, AttemptError> {
    std::fs::create_dir_all(spec.dir.join("kernels"))?;
    let traj_rel = format!("{}/trajectory.jsonl", spec.rel_dir);
    let mut traj = Trajectory::create(&spec.dir.join("trajectory.jsonl"))?;
    let start = Instant::now();
    // The whole attempt, distillation included, ends by `hard_deadline`.
    let hard_deadline = start + Duration::from_secs(spec.budget.max_wall_s);
    let base_deadline = hard_deadline - distill_reserve(spec.budget.max_wall_s);
    // Time queued for the evaluator so far: it moves every deadline later.
    let mut queued = Queued {
        total: Duration::ZERO,
        cap: Duration::from_secs(spec.budget.max_wall_s),
    };
    let mut session = provider.session(&spec.key).map_err(|e| {
        if e.is_fatal() {
            AttemptError::ProviderFatal(e.to_string())
        } else {
            AttemptError::Provider(e.to_string())
        }
    })?;
    let specs = tool_specs();

    let mut messages = vec![
        Message::system(SYSTEM_PROMPT),
        Message::user(spec.user_prompt.clone()),
    ];
    traj.log("start", json!({"attempt": spec.attempt_id, "key": spec.key, "budget": spec.budget, "producer": provider.producer()}))?;
    for m in &messages {
        traj.log("message", json!({"message": m}))?;
    }

    let mut usage = Usage::default();
    let mut turns = 0u32;
    let mut evals: Vec<ToolEval> = Vec::new();
    let mut kernel: Option<(u32, String)> = None; // (version, snapshot rel path)
    let mut versions = 0u32;
    let mut best = Best::default();
    // Provider faults no longer end an attempt (they abort it), so nothing sets this yet.
    let error: Option<String> = None;

    let end = loop {
        if turns >= spec.budget.max_turns {
            break EndReason::MaxTurns;
        }
        if usage.output_tokens >= spec.budget.max_output_tokens {
            break EndReason::MaxOutputTokens;
        }
        if spec
            .budget
            .max_input_tokens
            .is_some_and(|cap| usage.input_tokens >= cap)
        {
            break EndReason::MaxInputTokens;
        }
        let deadline = base_deadline + queued.total;
        if Instant::now() >= deadline {
            break EndReason::WallClock;
        }
        let mut sampling = spec.sampling.clone();
        let left = spec.budget.max_output_tokens - usage.output_tokens;
        sampling.max_tokens = Some(
            sampling
                .max_tokens
                .map_or(left.min(u32::MAX as u64) as u32, |m| {
                    (m as u64).min(left) as u32
                }),
        );
        let req = ChatRequest {
            messages: messages.clone(),
            tools: specs.clone(),
            sampling,
        };
        let resp = match session.chat(&req, deadline).await {
            Ok(r) => r,
            Err(e) => match classify(&e, turns) {
                ProviderFailure::Budget => break EndReason::WallClock,
                ProviderFailure::Fatal => {
                    traj.log(
                        "provider_error",
                        json!({"error": e.to_string(), "fatal": true}),
                    )?;
                    return Err(AttemptError::ProviderFatal(e.to_string()));
                }
                ProviderFailure::NotAnAttempt => {
                    traj.log("provider_error", json!({"error": e.to_string()}))?;
                    return Err(AttemptError::Provider(e.to_string()));
                }
            },
        };
        turns += 1;
        usage.input_tokens += resp.usage.input_tokens;
        usage.output_tokens += resp.usage.output_tokens;
        traj.log("assistant", json!({"message": resp.message, "usage": resp.usage, "stop_reason": resp.stop_reason, "latency_ms": resp.latency_ms, "retries": resp.retries}))?;
        let calls = resp.message.tool_calls.clone();
        messages.push(resp.message);
        if let Some(fe) = resp.format_error {
            let m = Message::user(fe);
            traj.log("message", json!({"message": m}))?;
            messages.push(m);
            continue;
        }
        if calls.is_empty() {
            break EndReason::Stopped;
        }
        let mut flow = Flow::Continue;
        for call in &calls {
            let result = if let Flow::End(_) = flow {
                "Not run: the attempt has ended.".to_string()
            } else {
                let (text, f) = handle_tool(
                    spec,
                    pool,
                    base_deadline,
                    &mut queued,
                    &call.name,
                    &call.arguments,
                    &mut kernel,
                    &mut versions,
                    &mut evals,
                    &mut best,
                    &mut traj,
                )
                .await?;
                flow = f;
                text
            };
            let m = Message::tool_result(call.id.clone(), result);
            traj.log("message", json!({"message": m}))?;
            messages.push(m);
        }
        if let Flow::End(reason) = flow {
            break reason;
        }
    };

    // The final kernel: the best the harness measured correct, else the last one written.
    let (final_kernel, final_source) = match (best.pick(), &kernel) {
        (Some(s), _) => (Some(s.to_string()), "best_correct"),
        (None, Some((_, s))) => (Some(s.clone()), "last_written"),
        (None, None) => (None, "none"),
    };
    let final_rel = match &final_kernel {
        Some(snap) => {
            let src = std::fs::read(run_root(spec).join(snap))?;
            let rel = format!("{}/final.py", spec.rel_dir);
            std::fs::write(spec.dir.join("final.py"), src)?;
            Some(rel)
        }
        None => None,
    };
    traj.log("end", json!({"end_reason": end, "turns": turns, "usage": usage, "final_kernel": final_rel, "final_source": final_source, "error": error}))?;
    let wall_s = start.elapsed().as_secs_f64();

    let skill = match spec.distill_max_chars {
        Some(max_chars) => Some(
            distill(
                spec,
                &mut session,
                &mut messages,
                &specs,
                max_chars,
                final_rel.as_deref(),
                &mut traj,
                hard_deadline + queued.total,
            )
            .await?,
        ),
        None => None,
    };

    Ok(AttemptOutcome {
        end_reason: end,
        turns,
        usage,
        evals,
        wall_s,
        eval_wait_s: queued.total.as_secs_f64(),
        final_kernel: final_rel,
        final_source,
        trajectory: traj_rel,
        error,
        skill,
    })
}

/// The run folder: `spec.dir` minus `spec.rel_dir`.
fn run_root(spec: &AttemptSpec) -> PathBuf {
    let depth = Path::new(&spec.rel_dir).components().count();
    let mut p = spec.dir.clone();
    for _ in 0..depth {
        p.pop();
    }
    p
}

enum ProviderFailure {
    /// The wall budget ran out while the model was answering: the attempt's own end.
    Budget,
    /// The run must stop (key refused, unknown model, bad recordings).
    Fatal,
    /// A provider fault: the attempt is not recorded and a re-run redoes it.
    NotAnAttempt,
}

/// What a failed model call means for the attempt, after `turns` answered calls.
fn classify(e: &ProviderError, turns: u32) -> ProviderFailure {
    match e {
        // The deadline cut a call short. It is the attempt's budget when the provider was
        // answering; a provider that failed until the end, or never answered at all, is a fault.
        ProviderError::DeadlineExceeded { last, .. } => {
            if last.is_some() || turns == 0 {
                ProviderFailure::NotAnAttempt
            } else {
                ProviderFailure::Budget
            }
        }
        e if e.is_fatal() => ProviderFailure::Fatal,
        _ => ProviderFailure::NotAnAttempt,
    }
}

/// Time an attempt's evaluations spent queued for the evaluator, and how much of it may still
/// extend the attempt's deadlines.
struct Queued {
    total: Duration,
    cap: Duration,
}

impl Queued {
    /// The part of an evaluation call's `elapsed` wall time spent queued: what the
    /// evaluation's own phases (`phases.total`) do not account for; 0 when unknown.
    fn wait_of(elapsed: Duration, report: &EvalReport) -> Duration {
        match report.phases.as_ref().map(|p| p.total) {
            Some(t) if t.is_finite() && t >= 0.0 => {
                elapsed.saturating_sub(Duration::from_secs_f64(t.min(1e9)))
            }
            _ => Duration::ZERO,
        }
    }

    /// Count `wait` (granted up to the cap).
    fn add(&mut self, wait: Duration) {
        self.total = (self.total + wait).min(self.cap);
    }
}

#[allow(clippy::too_many_arguments)]
async fn handle_tool<E: Evaluator>(
    spec: &AttemptSpec,
    pool: &E,
    base_deadline: Instant,
    queued: &mut Queued,
    name: &str,
    args: &serde_json::Value,
    kernel: &mut Option<(u32, String)>,
    versions: &mut u32,
    evals: &mut Vec<ToolEval>,
    best: &mut Best,
    traj: &mut Trajectory,
) -> Result<(String, Flow), AttemptError> {
    let root = run_root(spec);
    Ok(match name {
        tools::READ_BRIEF => (spec.brief.clone(), Flow::Continue),
        tools::READ_STARTER => (spec.starter.clone(), Flow::Continue),
        tools::READ_KERNEL => match kernel {
            Some((_, snap)) => (
                std::fs::read_to_string(root.join(snap.as_str()))?,
                Flow::Continue,
            ),
            None => (
                "No kernel written yet: call write_kernel first.".into(),
                Flow::Continue,
            ),
        },
        tools::WRITE_KERNEL => match args.get("source").and_then(|s| s.as_str()) {
            Some(src) => {
                *versions += 1;
                let rel = format!("{}/kernels/v{}.py", spec.rel_dir, versions);
                std::fs::write(root.join(&rel), mkb_core::secret::scrub(src).as_bytes())?;
                *kernel = Some((*versions, rel));
                (
                    format!(
                        "Saved kernel v{} ({} lines).",
                        versions,
                        src.lines().count()
                    ),
                    Flow::Continue,
                )
            }
            None => (
                "write_kernel needs one string argument `source` holding the whole file.".into(),
                Flow::Continue,
            ),
        },
        tools::SUBMIT => ("Submitted.".into(), Flow::End(EndReason::Submitted)),
        t if eval_mode_of(t).is_some() => {
            let mode = eval_mode_of(t).expect("checked");
            let Some((version, snap)) = kernel.clone() else {
                return Ok((
                    "No kernel written yet: call write_kernel first.".into(),
                    Flow::Continue,
                ));
            };
            if mode.needs_gpu() && !spec.gpu_available {
                return Ok((format!("{t} is unavailable on this machine: there is no GPU, only compile runs here."), Flow::Continue));
            }
            if evals.len() as u32 >= spec.budget.max_tool_evals {
                return Ok((
                    "Not run: the evaluation budget is used up.".into(),
                    Flow::End(EndReason::MaxToolEvals),
                ));
            }
            // The evaluation, like everything else, ends within the attempt's budget.
            let deadline = base_deadline + queued.total;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok((
                    "Not run: the wall-clock budget is used up.".into(),
                    Flow::End(EndReason::WallClock),
                ));
            }
            let mut req =
                EvalRequest::single(spec.problem_dir.clone(), spec.dsl, mode, root.join(&snap));
            req.timing = spec.tool_timing;
            req.limits.total_s = req.limits.total_s.min(left.as_secs_f64().max(1.0));
            req.limits.build_s = req.limits.build_s.min(req.limits.total_s);
            // Waiting in the evaluator's queue is not the agent's time: the call may run past
            // the deadline by what is left of the queueing allowance, and is judged against
            // the deadline moved by its own queueing once it returns.
            let called = Instant::now();
            let evaluated = tokio::time::timeout_at(
                tokio::time::Instant::from_std(deadline + queued.cap.saturating_sub(queued.total)),
                pool.evaluate_one(req),
            )
            .await;
            if let Ok(Ok(r)) = &evaluated {
                queued.add(Queued::wait_of(called.elapsed(), r));
            }
            let evaluated = match evaluated {
                Ok(Ok(_)) if Instant::now() > base_deadline + queued.total => Err(()),
                Ok(x) => Ok(x),
                Err(_) => Err(()),
            };
            let report = match evaluated {
                Err(_) => {
                    traj.log("eval_cut", json!({"tool": t, "kernel": snap, "why": "the attempt's wall budget ended during the evaluation"}))?;
                    return Ok((
                        "Not finished: the wall-clock budget ended during this evaluation.".into(),
                        Flow::End(EndReason::WallClock),
                    ));
                }
                Ok(Ok(r)) => r,
                Ok(Err(EvalError::NoGpu)) => return Ok((format!("{t} is unavailable on this machine: there is no GPU, only compile runs here."), Flow::Continue)),
                Ok(Err(e)) => return Err(AttemptError::Evaluator(e.to_string())),
            };
            // The machine failed, not the kernel (after the pool's own retries): not a result.
            if report.is_infrastructure() {
                traj.log(
                    "eval_not_evaluated",
                    json!({"seq": evals.len(), "tool": t, "kernel": snap, "report": report}),
                )?;
                return Err(AttemptError::Evaluator(format!(
                    "not evaluated ({}): {}",
                    report.reason.as_deref().unwrap_or("?"),
                    crate::tools::trim_middle(&report.message, 300)
                )));
            }
            let seq = evals.len() as u32;
            traj.log("eval", json!({"seq": seq, "tool": t, "kernel_version": version, "kernel": snap, "report": report}))?;
            best.observe(mode, &snap, &report);
            let text = describe_report(&report, spec.max_log_chars);
            evals.push(ToolEval {
                seq,
                tool: t.to_string(),
                mode,
                kernel: snap,
                report,
            });
            let flow = if evals.len() as u32 >= spec.budget.max_tool_evals {
                Flow::End(EndReason::MaxToolEvals)
            } else {
                Flow::Continue
            };
            (text, flow)
        }
        other => (
            format!(
                "Unknown tool {other:?}. Available: {}.",
                tool_specs()
                    .iter()
                    .map(|t| t.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Flow::Continue,
        ),
    })
}

/// The distillation turn: the same conversation asked for a skill. Its tokens are counted
/// apart from the attempt's budget. A failed call still yields a (flagged, empty) skill, so
/// that the conditioned attempt it feeds runs with what the source produced. It ends by
/// `deadline`, the end of the attempt's own wall budget.
#[allow(clippy::too_many_arguments)]
async fn distill(
    spec: &AttemptSpec,
    session: &mut crate::provider::Session,
    messages: &mut Vec<Message>,
    specs: &[crate::provider::ToolSpec],
    max_chars: usize,
    final_kernel: Option<&str>,
    traj: &mut Trajectory,
    deadline: Instant,
) -> Result<(Skill, Usage), AttemptError> {
    let ask = Message::user(distill_prompt(max_chars));
    traj.log("message", json!({"message": ask, "phase": "distill"}))?;
    messages.push(ask);
    let mut usage = Usage::default();
    let mut text = None;
    let mut failure = None;
    for _ in 0..2 {
        let mut sampling = spec.sampling.clone();
        sampling.max_tokens = Some(sampling.max_tokens.map_or(4096, |m| m.min(8192)));
        let req = ChatRequest {
            messages: messages.clone(),
            tools: specs.to_vec(),
            sampling,
        };
        match session.chat(&req, deadline).await {
            Ok(resp) => {
                usage.input_tokens += resp.usage.input_tokens;
                usage.output_tokens += resp.usage.output_tokens;
                traj.log(
                    "assistant",
                    json!({"message": resp.message, "usage": resp.usage, "phase": "distill"}),
                )?;
                let calls = resp.message.tool_calls.clone();
                let content = resp.message.content.clone();
                messages.push(resp.message);
                if !content.trim().is_empty() {
                    text = Some(content);
                    break;
                }
                // Tool calls instead of a skill: answer them and ask once more.
                for c in calls {
                    messages.push(Message::tool_result(c.id, "Not run: the attempt is over."));
                }
                messages.push(Message::user(
                    "Answer with the SKILL.md text only, without tool calls.",
                ));
            }
            Err(e) => {
                // The attempt answered before: a deadline here is the budget running out.
                match classify(&e, 1) {
                    ProviderFailure::Fatal => {
                        return Err(AttemptError::ProviderFatal(e.to_string()))
                    }
                    ProviderFailure::NotAnAttempt => {
                        return Err(AttemptError::Provider(e.to_string()))
                    }
                    ProviderFailure::Budget => {}
                }
                failure = Some(e.to_string());
                traj.log(
                    "provider_error",
                    json!({"error": e.to_string(), "phase": "distill"}),
                )?;
                break;
            }
        }
    }
    let mut skill = parse_skill(text.as_deref().unwrap_or(""), max_chars);
    if text.is_none() {
        skill.flags.push("distill_failed".to_string());
        if let Some(f) = failure {
            skill.description =
                crate::tools::trim_middle(&format!("distillation failed: {f}"), 300);
        }
    }
    let source = match final_kernel {
        Some(rel) => std::fs::read_to_string(run_root(spec).join(rel)).ok(),
        None => None,
    };
    skill
        .flags
        .extend(audit(&skill, &spec.audit_markers, source.as_deref()));
    traj.log("skill", json!({"skill": skill, "usage": usage}))?;
    Ok((skill, usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderConfig, RecordingHeader};
    use mkb_core::eval::Phases;
    use mkb_core::{Condition, Timing};
    use mkb_eval::{EvalResponse, KeyedReport};
    use std::collections::VecDeque;
    use std::sync::Mutex;

    fn report(total: Option<f64>) -> EvalReport {
        let mut r = EvalReport::infrastructure(
            EvalMode::Compile,
            Verdict::Correct,
            "ok",
            "compiled".into(),
        );
        r.phases = total.map(|t| Phases {
            total: t,
            ..Phases::default()
        });
        r
    }

    #[test]
    fn queueing_is_what_the_evaluation_itself_does_not_account_for() {
        let s = Duration::from_secs;
        // 50 s of wall time, 20 s of it the evaluation's own phases: 30 s queued.
        assert_eq!(Queued::wait_of(s(50), &report(Some(20.0))), s(30));
        // An evaluation that reports more than the call took queued for nothing.
        assert_eq!(Queued::wait_of(s(10), &report(Some(20.0))), s(0));
        // Unknown phases: nothing is excused (all of it is the agent's time).
        assert_eq!(Queued::wait_of(s(50), &report(None)), s(0));
        assert_eq!(Queued::wait_of(s(50), &report(Some(f64::NAN))), s(0));
        // The grant is capped (at the wall budget).
        let mut q = Queued {
            total: Duration::ZERO,
            cap: s(60),
        };
        q.add(s(40));
        q.add(s(40));
        assert_eq!(q.total, s(60));
    }

    /// An evaluator that answers from a script (one report per request, in order) and keeps
    /// every request it was sent.
    struct FakeEvaluator {
        gpu: bool,
        script: Mutex<VecDeque<EvalReport>>,
        seen: Mutex<Vec<EvalRequest>>,
    }

    impl FakeEvaluator {
        fn new(script: Vec<EvalReport>) -> FakeEvaluator {
            FakeEvaluator {
                gpu: true,
                script: Mutex::new(script.into()),
                seen: Mutex::new(Vec::new()),
            }
        }
        fn modes(&self) -> Vec<EvalMode> {
            self.seen.lock().unwrap().iter().map(|r| r.mode).collect()
        }
    }

    impl Evaluator for FakeEvaluator {
        fn evaluate(
            &self,
            req: EvalRequest,
        ) -> impl std::future::Future<Output = Result<EvalResponse, EvalError>> + Send {
            let report = self.script.lock().unwrap().pop_front();
            let keys: Vec<String> = req.candidates.iter().map(|c| c.key.clone()).collect();
            self.seen.lock().unwrap().push(req);
            std::future::ready(match report {
                Some(report) => Ok(EvalResponse {
                    reports: keys
                        .into_iter()
                        .map(|key| KeyedReport {
                            key,
                            report: report.clone(),
                        })
                        .collect(),
                    session: serde_json::Value::Null,
                }),
                None => Err(EvalError::Rejected("the fake's script is used up".into())),
            })
        }
        fn has_gpu(&self) -> bool {
            self.gpu
        }
        fn dsl_available(&self, _dsl: Dsl, mode: EvalMode) -> bool {
            self.gpu || !mode.needs_gpu()
        }
    }

    fn verdict(mode: EvalMode, v: Verdict, median_us: Option<f64>) -> EvalReport {
        let mut r = EvalReport::infrastructure(mode, v, "fake", "from the fake".into());
        r.reason = None;
        r.runtime = median_us.map(|m| Timing {
            median_us: m,
            iqr_us: 0.0,
            reps: 10,
            timer: "fake".into(),
            wall_us_per_call: None,
        });
        r
    }

    fn call(id: &str, name: &str, args: serde_json::Value) -> serde_json::Value {
        json!({"id": id, "name": name, "arguments": args})
    }

    fn key() -> ConversationKey {
        ConversationKey {
            model_label: "fake-model".into(),
            problem: "A01".into(),
            dsl: Dsl::CUTE,
            condition: Condition::Solo,
            run: 0,
        }
    }

    /// Writes a replay recording of `turns` (the tool calls of each assistant turn) and returns
    /// a replay provider that plays it.
    fn replay_provider(dir: &Path, turns: Vec<Vec<serde_json::Value>>) -> Provider {
        let header = RecordingHeader {
            format: crate::provider::replay::RECORDING_FORMAT.into(),
            version: crate::provider::replay::RECORDING_VERSION,
            key: key(),
            created: String::new(),
            producer: crate::provider::replay::HANDWRITTEN.into(),
            tool_mode: None,
        };
        let mut text = serde_json::to_string(&header).unwrap() + "\n";
        for (i, calls) in turns.into_iter().enumerate() {
            let line = json!({"turn": i, "response": {
                "message": {"role": "assistant", "content": format!("turn {i}"), "tool_calls": calls},
                "usage": {"input_tokens": 100, "output_tokens": 10},
                "stop_reason": "tool_calls"}});
            text.push_str(&(line.to_string() + "\n"));
        }
        let path = key().recording_path(dir);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        Provider::from_config(&ProviderConfig::replay(dir)).unwrap()
    }

    fn spec(run_dir: &Path, max_tool_evals: u32) -> AttemptSpec {
        let rel_dir = "attempts/fake-model/A01_cute_solo_r0".to_string();
        AttemptSpec {
            attempt_id: "fake-model/A01/cute/solo/r0".into(),
            key: key(),
            problem_dir: run_dir.join("problem"),
            dsl: Dsl::CUTE,
            user_prompt: "Write the kernel.".into(),
            brief: "the brief".into(),
            starter: "the starter".into(),
            budget: Budget {
                max_turns: 20,
                max_output_tokens: 100_000,
                max_tool_evals,
                max_wall_s: 600,
                max_input_tokens: None,
            },
            sampling: Sampling::default(),
            distill_max_chars: None,
            audit_markers: vec!["@T.prim_func".into()],
            dir: run_dir.join(&rel_dir),
            rel_dir,
            gpu_available: true,
            max_log_chars: 2000,
            tool_timing: mkb_eval::TimingOptions::default(),
        }
    }

    fn write(id: &str, src: &str) -> serde_json::Value {
        call(id, tools::WRITE_KERNEL, json!({"source": src}))
    }

    fn trajectory_types(run_dir: &Path, outcome: &AttemptOutcome) -> Vec<String> {
        std::fs::read_to_string(run_dir.join(&outcome.trajectory))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
            .collect()
    }

    #[tokio::test]
    async fn attempt_records_the_evaluators_verdicts_and_keeps_the_fastest_correct_kernel() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let provider = replay_provider(
            &tmp.path().join("rec"),
            vec![
                vec![write("c0", "# v1\n")],
                vec![call("c1", tools::COMPILE, json!({}))],
                vec![call("c2", tools::BENCHMARK, json!({}))],
                vec![
                    write("c3", "# v2\n"),
                    call("c4", tools::BENCHMARK, json!({})),
                ],
                vec![write("c5", "# v3\n"), call("c6", tools::TEST, json!({}))],
                vec![call("c7", tools::SUBMIT, json!({}))],
            ],
        );
        let fake = FakeEvaluator::new(vec![
            verdict(EvalMode::Compile, Verdict::Correct, None),
            verdict(EvalMode::Bench, Verdict::Correct, Some(50.0)),
            verdict(EvalMode::Bench, Verdict::Correct, Some(80.0)),
            verdict(EvalMode::Test, Verdict::Incorrect, None),
        ]);
        let spec = spec(&run_dir, 10);
        let out = run_attempt(&spec, &provider, &fake).await.unwrap();
        assert_eq!(out.end_reason, EndReason::Submitted);
        assert_eq!(out.turns, 6);
        assert_eq!(out.usage.output_tokens, 60);
        assert_eq!(
            fake.modes(),
            vec![
                EvalMode::Compile,
                EvalMode::Bench,
                EvalMode::Bench,
                EvalMode::Test
            ]
        );
        // Each request names the snapshot written just before it.
        let paths: Vec<PathBuf> = fake
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.candidates[0].path.clone())
            .collect();
        let kernels = spec.dir.join("kernels");
        assert_eq!(
            paths,
            vec![
                kernels.join("v1.py"),
                kernels.join("v1.py"),
                kernels.join("v2.py"),
                kernels.join("v3.py")
            ]
        );
        let verdicts: Vec<Verdict> = out.evals.iter().map(|e| e.report.verdict).collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::Correct,
                Verdict::Correct,
                Verdict::Correct,
                Verdict::Incorrect
            ]
        );
        assert_eq!(
            out.evals.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![0, 1, 2, 3]
        );
        assert_eq!(
            out.evals[2].report.runtime.as_ref().unwrap().median_us,
            80.0
        );
        // v1 benchmarked fastest and correct: it is the final kernel, not the last one written.
        assert_eq!(out.final_source, "best_correct");
        assert_eq!(
            std::fs::read_to_string(spec.dir.join("final.py")).unwrap(),
            "# v1\n"
        );
        assert!(out.skill.is_none());
        let types = trajectory_types(&run_dir, &out);
        assert_eq!(types.iter().filter(|t| *t == "\"eval\"").count(), 4);
        assert_eq!(types.last().map(String::as_str), Some("\"end\""));
    }

    #[tokio::test]
    async fn attempt_stops_at_the_evaluation_budget() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let provider = replay_provider(
            &tmp.path().join("rec"),
            vec![
                vec![write("c0", "# v1\n")],
                vec![call("c1", tools::COMPILE, json!({}))],
                // The second evaluation uses the budget up: the third call of the turn is not run.
                vec![
                    call("c2", tools::TEST, json!({})),
                    call("c3", tools::BENCHMARK, json!({})),
                ],
                vec![call("c4", tools::BENCHMARK, json!({}))],
                vec![call("c5", tools::SUBMIT, json!({}))],
            ],
        );
        let fake = FakeEvaluator::new(vec![
            verdict(EvalMode::Compile, Verdict::CompileError, None),
            verdict(EvalMode::Test, Verdict::Correct, None),
            verdict(EvalMode::Bench, Verdict::Correct, Some(10.0)),
        ]);
        let spec = spec(&run_dir, 2);
        let out = run_attempt(&spec, &provider, &fake).await.unwrap();
        assert_eq!(out.end_reason, EndReason::MaxToolEvals);
        assert_eq!(out.turns, 3);
        assert_eq!(fake.modes(), vec![EvalMode::Compile, EvalMode::Test]);
        assert_eq!(out.evals.len(), 2);
        assert_eq!(out.evals[0].report.verdict, Verdict::CompileError);
        assert_eq!(out.evals[1].report.verdict, Verdict::Correct);
        // Only test-correct: the tested kernel is final.
        assert_eq!(out.final_source, "best_correct");
        assert_eq!(
            out.final_kernel.as_deref(),
            Some(format!("{}/final.py", spec.rel_dir).as_str())
        );
        let traj = std::fs::read_to_string(run_dir.join(&out.trajectory)).unwrap();
        assert!(traj.contains("Not run: the attempt has ended."), "{traj}");
    }

    #[tokio::test]
    async fn an_infrastructure_report_aborts_the_attempt() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let provider = replay_provider(
            &tmp.path().join("rec"),
            vec![
                vec![write("c0", "# v1\n")],
                vec![call("c1", tools::COMPILE, json!({}))],
                vec![call("c2", tools::TEST, json!({}))],
                vec![call("c3", tools::SUBMIT, json!({}))],
            ],
        );
        let fake = FakeEvaluator::new(vec![
            verdict(EvalMode::Compile, Verdict::Correct, None),
            EvalReport::infrastructure(
                EvalMode::Test,
                Verdict::Crashed,
                "host_overload",
                "the host is overloaded".into(),
            ),
            verdict(EvalMode::Test, Verdict::Correct, None),
        ]);
        let spec = spec(&run_dir, 10);
        let err = run_attempt(&spec, &provider, &fake).await.unwrap_err();
        match err {
            AttemptError::Evaluator(msg) => {
                assert!(msg.contains("host_overload"), "{msg}");
                assert!(msg.contains("the host is overloaded"), "{msg}");
            }
            other => panic!("expected an evaluator error, got {other:?}"),
        }
        // The loop stopped at the failed evaluation: nothing more was asked of the evaluator.
        assert_eq!(fake.modes(), vec![EvalMode::Compile, EvalMode::Test]);
        let traj = std::fs::read_to_string(spec.dir.join("trajectory.jsonl")).unwrap();
        assert!(traj.contains("\"eval_not_evaluated\""), "{traj}");
        assert!(!spec.dir.join("final.py").exists());
    }

    #[tokio::test]
    async fn without_a_gpu_test_and_benchmark_are_not_sent_to_the_evaluator() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let provider = replay_provider(
            &tmp.path().join("rec"),
            vec![
                vec![write("c0", "# v1\n")],
                vec![call("c1", tools::TEST, json!({}))],
                vec![call("c2", tools::COMPILE, json!({}))],
                vec![],
            ],
        );
        let mut fake = FakeEvaluator::new(vec![verdict(EvalMode::Compile, Verdict::Correct, None)]);
        fake.gpu = false;
        let mut spec = spec(&run_dir, 10);
        spec.gpu_available = fake.has_gpu();
        let out = run_attempt(&spec, &provider, &fake).await.unwrap();
        assert_eq!(out.end_reason, EndReason::Stopped);
        assert_eq!(fake.modes(), vec![EvalMode::Compile]);
        assert_eq!(out.evals.len(), 1);
        // Compiled only: nothing measured correct, so the last written kernel is final.
        assert_eq!(out.final_source, "last_written");
    }
}
