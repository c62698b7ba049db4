//! The experiment scheduler behind `mkb run`: plans every unit of the protocol (solo attempts
//! with their distillation, repeat-solo controls, skill-conditioned and placebo attempts, final
//! evaluations), runs what the store does not hold yet with many attempts in flight, and
//! reports what it could not do. Re-running the same command resumes: finished units are
//! skipped, a unit that was in flight when the process died is redone from scratch.
//!
//! One writer per run folder (`lock::RunLock`). Faults that are not results are never stored:
//! an attempt cut short by the provider or by an evaluation that failed for infrastructure
//! reasons, and a final evaluation that did, stay pending (deferred) for the next run; a fatal
//! provider fault (key refused, unknown model) stops the run before anything more is stored.

use crate::config::ExperimentConfig;
use anyhow::{anyhow, Context as _, Result};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use mkb_agent::provider::ConversationKey;
use mkb_agent::skill::skill_slot;
use mkb_agent::{run_attempt, AttemptError, AttemptSpec, Provider};
use mkb_core::prompt::{read_brief, variant_prompt};
use mkb_core::{Condition, Dsl, DslRegistry, EvalMode, EvalReport, Problem, Registry, Verdict};
use mkb_eval::{Candidate, EvalPool, EvalRequest, Evaluator, Limits, PoolConfig};
use mkb_store::{write_atomic, AttemptRecord, FinalEvalRecord, SkillRecord, Store, ToolEvalRecord};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, Semaphore};

/// Where and how to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Repository root (problems/, dsls/, docs/dsl/, python/).
    pub root: PathBuf,
    pub python: PathBuf,
    /// Parent of run folders (default `<root>/runs`).
    pub runs_dir: PathBuf,
    /// Overrides `eval.gpus` of the config.
    pub gpus: Option<String>,
    /// Show progress bars (off in tests and when stderr is not a terminal).
    pub progress: bool,
}

/// One attempt of the plan.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unit {
    pub model: String,
    pub problem: String,
    pub dsl: Dsl,
    pub condition: Condition,
    pub run: u32,
}

impl Unit {
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}/{}/r{}",
            self.model, self.problem, self.dsl, self.condition, self.run
        )
    }
    pub fn rel_dir(&self) -> String {
        let m: String = self
            .model
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!(
            "attempts/{m}/{}_{}_{}_r{}",
            self.problem, self.dsl, self.condition, self.run
        )
    }
}

/// Every attempt the config asks for, in dependency order (solo-type first). A problem takes
/// part in a direction only when it is posed in both its DSLs (has both variants).
pub fn plan(cfg: &ExperimentConfig, problems: &[&Problem]) -> Vec<Unit> {
    let mut units = BTreeSet::new();
    for m in &cfg.models {
        for p in problems {
            let directions: Vec<_> = cfg
                .directions()
                .into_iter()
                .filter(|d| p.has_variant(d.source) && p.has_variant(d.target))
                .collect();
            let mut solo: Vec<Dsl> = directions
                .iter()
                .flat_map(|d| [d.source, d.target])
                .collect();
            solo.sort();
            solo.dedup();
            let targets: BTreeSet<Dsl> = directions.iter().map(|d| d.target).collect();
            for r in 0..cfg.runs {
                for &dsl in &solo {
                    units.insert(Unit {
                        model: m.label.clone(),
                        problem: p.id().into(),
                        dsl,
                        condition: Condition::Solo,
                        run: r,
                    });
                }
                for &dsl in &targets {
                    units.insert(Unit {
                        model: m.label.clone(),
                        problem: p.id().into(),
                        dsl,
                        condition: Condition::Conditioned,
                        run: r,
                    });
                    if cfg.controls.placebo {
                        units.insert(Unit {
                            model: m.label.clone(),
                            problem: p.id().into(),
                            dsl,
                            condition: Condition::Placebo,
                            run: r,
                        });
                    }
                    if cfg.controls.repeat_solo {
                        units.insert(Unit {
                            model: m.label.clone(),
                            problem: p.id().into(),
                            dsl,
                            condition: Condition::RepeatSolo,
                            run: r,
                        });
                    }
                }
            }
        }
    }
    let mut v: Vec<Unit> = units.into_iter().collect();
    v.sort_by_key(|u| (u.condition.has_skill(), u.clone()));
    v
}

/// What a run did and did not do.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    pub planned: usize,
    pub already_done: usize,
    pub attempts_done: usize,
    pub finals_done: usize,
    pub final_groups_planned: usize,
    /// Units left for a later run, with why (e.g. the DSL is not installed here).
    pub deferred: Vec<(String, String)>,
    /// Things this machine cannot do at all (no GPU, ...).
    pub limitations: Vec<String>,
    pub final_mode: Option<EvalMode>,
    /// (attempts, final evaluations) found in the store that were not results (provider
    /// errors, infrastructure failures) and were removed to be redone.
    pub forgotten: (usize, usize),
}

impl RunSummary {
    pub fn complete(&self) -> bool {
        self.deferred.is_empty()
    }
}

struct Shared<E> {
    cfg: ExperimentConfig,
    run_dir: PathBuf,
    store: Mutex<Store>,
    pool: E,
    providers: BTreeMap<String, Provider>,
    problems: BTreeMap<String, Problem>,
    dsls: DslRegistry,
    briefs: BTreeMap<Dsl, String>,
    deferred: Mutex<Vec<(String, String)>>,
    /// Set when a provider refused the run: nothing more is stored.
    stopping: AtomicBool,
}

/// Run (or resume) an experiment.
pub async fn run_experiment(cfg: ExperimentConfig, opts: &RunOptions) -> Result<RunSummary> {
    let dsls = DslRegistry::load_root(&opts.root).map_err(|errs| {
        anyhow!(
            "DSL descriptors are invalid:\n{}",
            errs.iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    for dsl in cfg.solo_dsls() {
        dsls.require(dsl).map_err(|e| {
            anyhow!(
                "config field `{}`: {e}",
                if cfg.dsls.is_empty() {
                    "directions"
                } else {
                    "dsls"
                }
            )
        })?;
    }
    let registry = Registry::load(&opts.root.join("problems"), &dsls).map_err(|errs| {
        anyhow!(
            "problem files are invalid:\n{}",
            errs.iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let problems = registry
        .select(&cfg.problems)
        .map_err(|e| anyhow!("config field `problems`: {e}"))?;
    let run_dir = cfg.run_dir(&opts.runs_dir);
    // Held until this function returns: a second `mkb run` on the folder stops here.
    let _lock = crate::lock::RunLock::acquire(&run_dir)?;
    // Compile-mode evaluations never run reference.py: check every one here, in every mode.
    let references: Vec<PathBuf> = problems
        .iter()
        .map(|p| p.dir.join("reference.py"))
        .collect();
    mkb_eval::pool::check_reference_files(
        &opts.python,
        &opts.root,
        &references,
        Duration::from_secs(300),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let mut store = Store::open(&run_dir)?;
    crate::config::check_fingerprint(store.meta("config_fingerprint")?.as_deref(), &cfg)?;
    let forgotten = store.forget_not_final()?;
    if forgotten != (0, 0) {
        tracing::warn!(
            attempts = forgotten.0,
            final_evals = forgotten.1,
            "removed stored provider errors and infrastructure failures; they are redone now"
        );
    }
    store.set_meta("config_fingerprint", &cfg.fingerprint())?;
    store.set_meta("config", &serde_json::to_string(&cfg)?)?;
    store.set_meta("name", &cfg.name)?;

    let mut briefs = BTreeMap::new();
    for dsl in cfg.solo_dsls() {
        let desc = dsls.require(dsl).map_err(anyhow::Error::msg)?;
        let b = read_brief(desc)
            .with_context(|| format!("reading the {dsl} brief {}", desc.brief_path().display()))?;
        briefs.insert(dsl, b);
    }
    let mut providers = BTreeMap::new();
    for m in &cfg.models {
        let p =
            Provider::from_config(&m.provider).map_err(|e| anyhow!("model {:?}: {e}", m.label))?;
        providers.insert(m.label.clone(), p);
    }

    let gpus = crate::parse_gpus(opts.gpus.as_deref().unwrap_or(&cfg.eval.gpus))?;
    let pool = EvalPool::start(PoolConfig {
        python: opts.python.clone(),
        root: opts.root.clone(),
        gpus,
        cpu_workers: cfg.eval.cpu_workers,
        log_dir: Some(run_dir.join("logs")),
        start_timeout: Duration::from_secs(300),
        judges_per_gpu: cfg.eval.judges_per_gpu(),
        backend: cfg.eval.backend()?,
    })
    .await
    .context("starting the evaluator")?;
    crate::provenance::record(&store, &crate::provenance::collect(&pool))?;

    run_planned(Setup {
        cfg,
        run_dir,
        store,
        pool,
        providers,
        problems: &problems,
        dsls,
        briefs,
        forgotten,
        progress: opts.progress,
    })
    .await
}

/// A run once its store, providers and evaluator are ready.
struct Setup<'a, E> {
    cfg: ExperimentConfig,
    run_dir: PathBuf,
    store: Store,
    pool: E,
    providers: BTreeMap<String, Provider>,
    problems: &'a [&'a Problem],
    dsls: DslRegistry,
    briefs: BTreeMap<Dsl, String>,
    forgotten: (usize, usize),
    progress: bool,
}

/// The plan of a run, executed against `setup.pool`: solo-type attempts (with their
/// distillation), then the attempts that need a skill, then the final evaluations.
async fn run_planned<E: Evaluator + 'static>(setup: Setup<'_, E>) -> Result<RunSummary> {
    let Setup {
        cfg,
        run_dir,
        store,
        pool,
        providers,
        problems,
        dsls,
        briefs,
        forgotten,
        progress,
    } = setup;
    let mut summary = RunSummary {
        forgotten,
        ..RunSummary::default()
    };
    if !pool.has_gpu() {
        summary.limitations.push(
            "no GPU: agents' test and benchmark tools answered \"unavailable\", and final evaluations are compile-only (no correctness, no runtime, score 0)".into(),
        );
    }
    for dsl in cfg.solo_dsls() {
        if !pool.dsl_available(dsl, EvalMode::Compile) {
            summary.limitations.push(format!(
                "the {dsl} DSL is not installed for the evaluator here: its attempts are deferred"
            ));
        }
    }
    let final_mode = match cfg.eval.final_mode.as_str() {
        "compile" => EvalMode::Compile,
        "full" => EvalMode::Full,
        _ => {
            if pool.has_gpu() {
                EvalMode::Full
            } else {
                EvalMode::Compile
            }
        }
    };
    if final_mode.needs_gpu() && !pool.has_gpu() {
        anyhow::bail!("eval.final_mode = \"full\" needs a GPU and none is available here");
    }
    summary.final_mode = Some(final_mode);

    let units = plan(&cfg, problems);
    summary.planned = units.len();
    let problems_map: BTreeMap<String, Problem> = problems
        .iter()
        .map(|p| (p.id().to_string(), (*p).clone()))
        .collect();
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        run_dir: run_dir.clone(),
        store: Mutex::new(store),
        pool,
        providers,
        problems: problems_map,
        dsls,
        briefs,
        deferred: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
    });

    let done: BTreeSet<String> = shared
        .store
        .lock()
        .await
        .attempts()?
        .into_iter()
        .map(|a| a.id)
        .collect();
    summary.already_done = units.iter().filter(|u| done.contains(&u.id())).count();

    let mp = if progress {
        MultiProgress::new()
    } else {
        MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
    };
    let style = ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");

    // Phase 1: solo-type attempts; phase 2: attempts that need a skill.
    for (phase, want_skill) in [("solo", false), ("conditioned", true)] {
        let todo: Vec<Unit> = units
            .iter()
            .filter(|u| u.condition.has_skill() == want_skill && !done.contains(&u.id()))
            .cloned()
            .collect();
        let n_phase = units
            .iter()
            .filter(|u| u.condition.has_skill() == want_skill)
            .count();
        let bar = mp.add(ProgressBar::new(n_phase as u64));
        bar.set_style(style.clone());
        bar.set_prefix(phase);
        bar.set_position((n_phase - todo.len()) as u64);
        let sem = Arc::new(Semaphore::new(cfg.concurrency));
        let mut tasks = Vec::new();
        for u in todo {
            let shared = shared.clone();
            let sem = sem.clone();
            let bar = bar.clone();
            tasks.push(tokio::spawn(async move {
                let _permit = sem.acquire_owned().await;
                if shared.stopping.load(Ordering::SeqCst) {
                    return Ok(false);
                }
                bar.set_message(u.id());
                let r = run_unit(&shared, &u).await;
                bar.inc(1);
                match r {
                    Ok(true) => {
                        bar.println(format!("done   {}", u.id()));
                        Ok(true)
                    }
                    Ok(false) => Ok(false),
                    Err(e) => Err(anyhow!("{}: {e:#}", u.id())),
                }
            }));
        }
        for t in tasks {
            match t.await {
                Ok(Ok(true)) => summary.attempts_done += 1,
                Ok(Ok(false)) => {}
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(anyhow!("an attempt task panicked: {e}")),
            }
        }
        bar.finish_with_message("");
    }

    // Phase 3: final evaluations, one group per (problem, DSL), conditions interleaved.
    let (groups, n_done) = final_groups(&shared, &units, final_mode).await?;
    summary.final_groups_planned = groups.len() + n_done;
    let bar = mp.add(ProgressBar::new(summary.final_groups_planned as u64));
    bar.set_style(style);
    bar.set_prefix("final eval");
    bar.set_position(n_done as u64);
    for (key, attempts) in groups {
        bar.set_message(key.clone());
        if let Some(n) = final_eval_group(&shared, &key, &attempts, final_mode).await? {
            summary.finals_done += n;
            bar.println(format!("final  {key}: {n} kernel(s)"));
        }
        bar.inc(1);
    }
    bar.finish_with_message("");
    record_eval_queue(&*shared.store.lock().await, &shared.pool)?;
    summary.deferred = shared.deferred.lock().await.clone();
    Ok(summary)
}

/// Run one attempt unless it is stored already. Ok(false): deferred (recorded in `deferred`).
async fn run_unit<E: Evaluator>(shared: &Shared<E>, u: &Unit) -> Result<bool> {
    let id = u.id();
    let problem = shared
        .problems
        .get(&u.problem)
        .ok_or_else(|| anyhow!("unknown problem {}", u.problem))?;
    if !shared.pool.dsl_available(u.dsl, EvalMode::Compile) {
        shared
            .deferred
            .lock()
            .await
            .push((id, format!("the {} evaluator is not installed here", u.dsl)));
        return Ok(false);
    }
    // The skill, for conditioned and placebo attempts.
    let skill: Option<SkillRecord> = match u.condition {
        Condition::Conditioned => {
            let src = Unit {
                condition: Condition::Solo,
                dsl: source_dsl(shared, u)?,
                ..u.clone()
            };
            match shared.store.lock().await.skill_for_attempt(&src.id())? {
                Some(s) => Some(s),
                None => {
                    shared
                        .deferred
                        .lock()
                        .await
                        .push((id, format!("waits for the skill of {}", src.id())));
                    return Ok(false);
                }
            }
        }
        Condition::Placebo => match placebo_skill(shared, u).await? {
            Ok(s) => Some(s),
            Err(why) => {
                shared.deferred.lock().await.push((id, why));
                return Ok(false);
            }
        },
        _ => None,
    };
    let skill_text = match &skill {
        Some(s) => Some(
            std::fs::read_to_string(shared.run_dir.join(&s.path))
                .with_context(|| format!("reading skill {}", s.path))?,
        ),
        None => None,
    };

    let rel_dir = u.rel_dir();
    let dir = shared.run_dir.join(&rel_dir);
    // A unit that was in flight when a previous process died starts over.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let desc = shared.dsls.require(u.dsl).map_err(anyhow::Error::msg)?;
    let vp = variant_prompt(problem, desc, &shared.cfg.budget)?;
    let mut user_prompt = vp.render();
    if let Some(t) = &skill_text {
        user_prompt.push_str(&skill_slot(t));
    }
    let model_cfg = shared
        .cfg
        .models
        .iter()
        .find(|m| m.label == u.model)
        .ok_or_else(|| anyhow!("unknown model {}", u.model))?;
    let spec = AttemptSpec {
        attempt_id: id.clone(),
        key: ConversationKey {
            model_label: u.model.clone(),
            problem: u.problem.clone(),
            dsl: u.dsl,
            condition: u.condition,
            run: u.run,
        },
        problem_dir: problem.dir.clone(),
        dsl: u.dsl,
        user_prompt,
        brief: shared.briefs[&u.dsl].clone(),
        starter: std::fs::read_to_string(problem.starter_path(u.dsl))?,
        budget: shared.cfg.budget,
        sampling: model_cfg.provider.sampling.clone(),
        distill_max_chars: (u.condition == Condition::Solo).then_some(shared.cfg.skill.max_chars),
        audit_markers: shared
            .cfg
            .targets_of(u.dsl)
            .into_iter()
            .filter_map(|t| shared.dsls.get(t))
            .flat_map(|d| d.leak_markers().iter().cloned())
            .collect(),
        dir: dir.clone(),
        rel_dir: rel_dir.clone(),
        gpu_available: shared.pool.has_gpu(),
        max_log_chars: shared.cfg.eval.max_log_chars,
        tool_timing: shared.cfg.eval.tool_timing,
    };
    let provider = &shared.providers[&u.model];
    let outcome = match run_attempt(&spec, provider, &shared.pool).await {
        Ok(o) => o,
        Err(AttemptError::Io(e)) => return Err(e.into()),
        Err(AttemptError::ProviderFatal(msg)) => {
            shared.stopping.store(true, Ordering::SeqCst);
            // The attempt's folder holds a fault, not an attempt.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(anyhow!(
                "model {:?}: {msg}\nThe run stopped: no attempt was stored for this fault. Check \
                 the model's provider settings (api_key_env and its key, model, base_url) and run \
                 the same command again.",
                u.model
            ));
        }
        Err(e) => {
            shared.deferred.lock().await.push((id, e.to_string()));
            return Ok(false);
        }
    };
    if shared.stopping.load(Ordering::SeqCst) {
        // Another attempt found the provider refusing the run: store nothing more.
        return Ok(false);
    }
    let skill_rec = match &outcome.skill {
        Some((sk, usage)) => {
            let rel = format!("{rel_dir}/SKILL.md");
            let md = sk.to_markdown();
            write_atomic(&shared.run_dir.join(&rel), md.as_bytes())?;
            Some(SkillRecord {
                id: format!("skill:{id}"),
                source_attempt: id.clone(),
                model: u.model.clone(),
                problem: u.problem.clone(),
                source_dsl: u.dsl,
                name: sk.name.clone(),
                description: sk.description.clone(),
                path: rel,
                chars: md.chars().count() as u64,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                flags: sk.flags.clone(),
            })
        }
        None => None,
    };
    let record = AttemptRecord {
        id: id.clone(),
        model: u.model.clone(),
        problem: u.problem.clone(),
        family: problem.family.to_string(),
        dsl: u.dsl,
        condition: u.condition,
        run: u.run,
        skill_id: skill.as_ref().map(|s| s.id.clone()),
        end_reason: outcome.end_reason,
        turns: outcome.turns,
        input_tokens: outcome.usage.input_tokens,
        output_tokens: outcome.usage.output_tokens,
        tool_evals: outcome.evals.len() as u32,
        wall_s: outcome.wall_s,
        eval_wait_s: Some(outcome.eval_wait_s),
        final_kernel: outcome.final_kernel.clone(),
        final_source: outcome.final_source.to_string(),
        trajectory: outcome.trajectory.clone(),
        error: outcome.error.clone(),
        finished_at: crate::utc_now(),
    };
    let evals: Vec<ToolEvalRecord> = outcome
        .evals
        .iter()
        .map(|e| ToolEvalRecord {
            seq: e.seq,
            tool: e.tool.clone(),
            mode: e.mode.as_str().into(),
            verdict: e.report.verdict.as_str().into(),
            kernel: e.kernel.clone(),
            report: e.report.clone(),
        })
        .collect();
    let mut store = shared.store.lock().await;
    store.record_attempt(&record, &evals, skill_rec.as_ref())?;
    record_throttling(&store, &shared.providers)?;
    record_eval_queue(&store, &shared.pool)?;
    Ok(true)
}

/// How the evaluator's judges and queues were used so far (this `mkb run` process): meta
/// `eval_queue` (`mkb_eval::pool::PoolStats`: per judge the time idle while a request waited,
/// and the queue waits), updated after each attempt and after the final evaluations.
fn record_eval_queue<E: Evaluator>(store: &Store, pool: &E) -> Result<()> {
    if let Some(stats) = pool.stats() {
        store.set_meta("eval_queue", &serde_json::to_string(&stats)?)?;
        tracing::debug!(
            idle_while_waiting_s = stats.idle_while_waiting_s(),
            "evaluator queue stats recorded"
        );
    }
    Ok(())
}

/// What the providers' shared rate limits cost so far (this `mkb run` process), for `mkb status`.
fn record_throttling(store: &Store, providers: &BTreeMap<String, Provider>) -> Result<()> {
    let stats: BTreeMap<&String, mkb_agent::provider::ThrottleStats> = providers
        .iter()
        .filter_map(|(label, p)| p.throttle_stats().map(|s| (label, s)))
        .collect();
    if !stats.is_empty() {
        store.set_meta("throttle", &serde_json::to_string(&stats)?)?;
    }
    Ok(())
}

/// The source DSL of the direction into the unit's DSL.
fn source_dsl<E>(shared: &Shared<E>, u: &Unit) -> Result<Dsl> {
    shared.cfg.source_of(u.dsl).ok_or_else(|| {
        anyhow!(
            "{}: no direction of the experiment goes into {}",
            u.id(),
            u.dsl
        )
    })
}

/// The placebo skill: the same model's skill for another problem, same source DSL and run,
/// closest in length to the real skill. Err(reason) when none exists (yet).
async fn placebo_skill<E>(
    shared: &Shared<E>,
    u: &Unit,
) -> Result<std::result::Result<SkillRecord, String>> {
    let source = source_dsl(shared, u)?;
    let store = shared.store.lock().await;
    let own_src = Unit {
        condition: Condition::Solo,
        dsl: source,
        ..u.clone()
    };
    let Some(own) = store.skill_for_attempt(&own_src.id())? else {
        return Ok(Err(format!("waits for the skill of {}", own_src.id())));
    };
    let suffix = format!("/{}/solo/r{}", source, u.run);
    let mut candidates: Vec<SkillRecord> = store
        .skills()?
        .into_iter()
        .filter(|s| {
            s.model == u.model
                && s.problem != u.problem
                && s.source_dsl == source
                && s.source_attempt.ends_with(&suffix)
        })
        .collect();
    // Other problems' solo attempts may still be pending in this run.
    let others_planned = shared.problems.len().saturating_sub(1);
    if candidates.is_empty() {
        return Ok(Err(if others_planned == 0 {
            "no other problem in this run to take a placebo skill from".to_string()
        } else {
            "waits for another problem's skill".to_string()
        }));
    }
    if candidates.len() < others_planned {
        let done_problems: BTreeSet<&str> = candidates.iter().map(|c| c.problem.as_str()).collect();
        let missing = shared
            .problems
            .keys()
            .any(|p| p != &u.problem && !done_problems.contains(p.as_str()));
        if missing {
            return Ok(Err(
                "waits for every other problem's skill (the placebo is the closest in length)"
                    .to_string(),
            ));
        }
    }
    candidates.sort_by_key(|c| ((c.chars as i64 - own.chars as i64).abs(), c.problem.clone()));
    Ok(Ok(candidates.remove(0)))
}

/// Groups of attempts (per problem and DSL) ready for their final evaluation, and how many
/// groups are already fully evaluated.
async fn final_groups<E: Evaluator>(
    shared: &Shared<E>,
    units: &[Unit],
    mode: EvalMode,
) -> Result<(Vec<(String, Vec<AttemptRecord>)>, usize)> {
    let store = shared.store.lock().await;
    let attempts: BTreeMap<String, AttemptRecord> = store
        .attempts()?
        .into_iter()
        .map(|a| (a.id.clone(), a))
        .collect();
    let finals: BTreeSet<String> = store
        .final_evals()?
        .into_iter()
        .map(|f| f.attempt_id)
        .collect();
    let mut by_group: BTreeMap<String, Vec<&Unit>> = BTreeMap::new();
    for u in units {
        by_group
            .entry(format!("{}/{}", u.problem, u.dsl))
            .or_default()
            .push(u);
    }
    let mut ready = Vec::new();
    let mut n_done = 0;
    let mut deferred = shared.deferred.lock().await;
    for (key, us) in by_group {
        let recorded: Vec<AttemptRecord> = us
            .iter()
            .filter_map(|u| attempts.get(&u.id()).cloned())
            .collect();
        if recorded.len() == us.len() && recorded.iter().all(|a| finals.contains(&a.id)) {
            n_done += 1;
            continue;
        }
        let dsl: Dsl = key
            .rsplit('/')
            .next()
            .unwrap_or("")
            .parse()
            .map_err(anyhow::Error::msg)?;
        if recorded.len() < us.len() {
            deferred.push((
                format!("final {key}"),
                format!(
                    "waits for {} attempt(s) of the group",
                    us.len() - recorded.len()
                ),
            ));
            continue;
        }
        if !shared.pool.dsl_available(dsl, mode) {
            deferred.push((
                format!("final {key}"),
                format!("the {dsl} evaluator is not installed here"),
            ));
            continue;
        }
        ready.push((
            key,
            recorded
                .into_iter()
                .filter(|a| !finals.contains(&a.id))
                .collect(),
        ));
    }
    Ok((ready, n_done))
}

/// Evaluate the final kernels of one group in one judge session (timing interleaved) and
/// store the results in one transaction. None when deferred.
async fn final_eval_group<E: Evaluator>(
    shared: &Shared<E>,
    key: &str,
    attempts: &[AttemptRecord],
    mode: EvalMode,
) -> Result<Option<usize>> {
    let Some(first) = attempts.first() else {
        return Ok(Some(0));
    };
    let problem = shared
        .problems
        .get(&first.problem)
        .ok_or_else(|| anyhow!("unknown problem {}", first.problem))?;
    let (rows, deferred) = match evaluate_group(
        &shared.pool,
        &shared.run_dir,
        problem,
        key,
        attempts,
        mode,
        &shared.cfg.eval,
    )
    .await?
    {
        Ok(x) => x,
        Err(e) => {
            shared
                .deferred
                .lock()
                .await
                .push((format!("final {key}"), e));
            return Ok(None);
        }
    };
    shared.deferred.lock().await.extend(deferred);
    let n = shared.store.lock().await.record_final_group(&rows)?;
    Ok(Some(n))
}

/// The final evaluation of one group (problem, DSL): every attempt's final kernel in one judge
/// session, timing interleaved, each record carrying the kernel's sha256 and the problem's
/// hash. In full mode the solo attempts' kernels that passed are then timed in
/// `eval.timing_sessions - 1` more sessions (their medians measure the timing noise the tie
/// band comes from). Returns the records and the (unit, why) of kernels not evaluated for
/// infrastructure reasons; the inner Err is the reason the whole group could not run.
pub async fn evaluate_group<E: Evaluator>(
    pool: &E,
    run_dir: &std::path::Path,
    problem: &Problem,
    key: &str,
    attempts: &[AttemptRecord],
    mode: EvalMode,
    eval: &crate::config::EvalConfig,
) -> Result<std::result::Result<(Vec<FinalEvalRecord>, Vec<(String, String)>), String>> {
    let Some(first) = attempts.first() else {
        return Ok(Ok((Vec::new(), Vec::new())));
    };
    let dsl = first.dsl;
    let problem_hash = crate::provenance::problem_hash(problem, dsl);
    let mut rows = Vec::new();
    let mut deferred = Vec::new();
    let mut cands = Vec::new();
    let mut hashes: BTreeMap<String, String> = BTreeMap::new();
    for a in attempts {
        match &a.final_kernel {
            Some(k) => {
                let path = run_dir.join(k);
                // A missing file is the judge's to report (per candidate), not a run error.
                if let Ok(h) = crate::provenance::file_sha256(&path) {
                    hashes.insert(a.id.clone(), h);
                }
                cands.push(Candidate {
                    key: a.id.clone(),
                    path,
                })
            }
            None => rows.push(FinalEvalRecord {
                attempt_id: a.id.clone(),
                group: key.to_string(),
                mode: mode.as_str().into(),
                report: EvalReport::infrastructure(
                    mode,
                    Verdict::CompileError,
                    "no_kernel",
                    "the attempt wrote no kernel".into(),
                ),
                finished_at: crate::utc_now(),
                kernel_sha256: None,
                problem_hash: Some(problem_hash.clone()),
                session_medians_us: Vec::new(),
            }),
        }
    }
    if cands.is_empty() {
        return Ok(Ok((rows, deferred)));
    }
    let request = |cands: Vec<Candidate>| EvalRequest {
        problem_dir: problem.dir.clone(),
        dsl,
        mode,
        candidates: cands,
        limits: Limits::default(),
        timing: eval.final_timing,
    };
    let resp = match pool.evaluate(request(cands.clone())).await {
        Ok(r) => r,
        Err(e) => return Ok(Err(e.to_string())),
    };
    let solo: BTreeSet<&str> = attempts
        .iter()
        .filter(|a| a.condition == Condition::Solo)
        .map(|a| a.id.as_str())
        .collect();
    let mut timed: Vec<Candidate> = Vec::new();
    for kr in resp.reports {
        // Not evaluated (the machine failed, after the pool's retries): not a score. It
        // stays pending and the next run evaluates it again.
        if kr.report.is_infrastructure() {
            deferred.push((
                format!("final {}", kr.key),
                format!(
                    "not evaluated ({}): {}",
                    kr.report.reason.as_deref().unwrap_or("?"),
                    mkb_eval::protocol::trim(&kr.report.message, 300)
                ),
            ));
            continue;
        }
        let median = kr.report.runtime.as_ref().map(|t| t.median_us);
        if let (Some(_), true, true) = (
            median,
            solo.contains(kr.key.as_str()),
            kr.report.verdict == Verdict::Correct,
        ) {
            if let Some(c) = cands.iter().find(|c| c.key == kr.key) {
                timed.push(c.clone());
            }
        }
        rows.push(FinalEvalRecord {
            kernel_sha256: hashes.get(&kr.key).cloned(),
            problem_hash: Some(problem_hash.clone()),
            session_medians_us: median.into_iter().collect(),
            attempt_id: kr.key,
            group: key.to_string(),
            mode: mode.as_str().into(),
            report: kr.report,
            finished_at: crate::utc_now(),
        });
    }
    // Repeated timing sessions of the solo kernels that passed (full mode only).
    if mode == EvalMode::Full && !timed.is_empty() {
        for _ in 1..eval.timing_sessions() {
            let Ok(resp) = pool.evaluate(request(timed.clone())).await else {
                tracing::warn!(group = key, "a repeated timing session failed; skipped");
                continue;
            };
            for kr in resp.reports {
                let Some(t) = kr.report.runtime.as_ref().map(|t| t.median_us) else {
                    continue;
                };
                if kr.report.verdict != Verdict::Correct {
                    continue;
                }
                if let Some(r) = rows.iter_mut().find(|r| r.attempt_id == kr.key) {
                    r.session_medians_us.push(t);
                }
            }
        }
    }
    Ok(Ok((rows, deferred)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mkb_core::Timing;
    use mkb_eval::{EvalError, EvalResponse, KeyedReport};
    use std::path::Path;
    use std::sync::Mutex as StdMutex;

    /// One request the fake evaluator received.
    #[derive(Debug, Clone)]
    struct Seen {
        mode: EvalMode,
        dsl: Dsl,
        /// Candidate keys: "candidate" for a tool call, attempt ids for final evaluations.
        keys: Vec<String>,
        /// The attempt folder (e.g. `A01_cute_solo_r0`) of each candidate.
        attempts: Vec<String>,
        /// Attempt folders holding a SKILL.md when the request came.
        skills: BTreeSet<String>,
    }

    impl Seen {
        fn is_final(&self) -> bool {
            self.keys.iter().all(|k| k != "candidate")
        }
        /// The condition of a tool call's attempt, from its folder name.
        fn condition(&self) -> &str {
            let name = self.attempts[0].rsplit_once('_').map_or("", |(n, _)| n);
            name.splitn(3, '_').nth(2).unwrap_or("")
        }
    }

    /// A scripted evaluator: every tool call is correct (100 us when timed); each final
    /// evaluation of a candidate gets a distinct runtime (1000 us + its number), placebo
    /// kernels are `incorrect`, and the attempt `infra` gets an infrastructure report.
    struct FakeEvaluator {
        run_dir: PathBuf,
        gpu: bool,
        missing: Option<Dsl>,
        infra: Option<String>,
        seen: StdMutex<Vec<Seen>>,
        /// Runtimes handed out in final evaluations, per attempt id, in order.
        finals: StdMutex<BTreeMap<String, Vec<f64>>>,
    }

    impl FakeEvaluator {
        fn new(run_dir: &Path) -> FakeEvaluator {
            FakeEvaluator {
                run_dir: run_dir.to_path_buf(),
                gpu: true,
                missing: None,
                infra: None,
                seen: StdMutex::new(Vec::new()),
                finals: StdMutex::new(BTreeMap::new()),
            }
        }

        fn skills_now(&self) -> BTreeSet<String> {
            let mut out = BTreeSet::new();
            let Ok(models) = std::fs::read_dir(self.run_dir.join("attempts")) else {
                return out;
            };
            for m in models.flatten() {
                for a in std::fs::read_dir(m.path()).into_iter().flatten().flatten() {
                    if a.path().join("SKILL.md").exists() {
                        out.insert(a.file_name().to_string_lossy().into_owned());
                    }
                }
            }
            out
        }

        fn respond(&self, req: &EvalRequest) -> EvalResponse {
            let mut finals = self.finals.lock().unwrap();
            let n_final: usize = finals.values().map(Vec::len).sum();
            let reports = req
                .candidates
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let mut r = EvalReport::infrastructure(
                        req.mode,
                        Verdict::Correct,
                        "fake",
                        "from the fake".into(),
                    );
                    r.reason = None;
                    let timed = matches!(req.mode, EvalMode::Bench | EvalMode::Full);
                    let median = if c.key == "candidate" {
                        100.0
                    } else {
                        1000.0 + (n_final + i) as f64
                    };
                    if timed {
                        r.runtime = Some(Timing {
                            median_us: median,
                            iqr_us: 0.0,
                            reps: 10,
                            timer: "fake".into(),
                            wall_us_per_call: None,
                        });
                    }
                    if c.key != "candidate" {
                        if c.key.contains("/placebo/") {
                            r.verdict = Verdict::Incorrect;
                            r.runtime = None;
                        }
                        if self.infra.as_deref() == Some(c.key.as_str()) {
                            r = EvalReport::infrastructure(
                                req.mode,
                                Verdict::Crashed,
                                "host_overload",
                                "the host is overloaded".into(),
                            );
                        }
                        finals.entry(c.key.clone()).or_default().push(median);
                    }
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
    }

    impl Evaluator for FakeEvaluator {
        fn evaluate(
            &self,
            req: EvalRequest,
        ) -> impl std::future::Future<Output = Result<EvalResponse, EvalError>> + Send {
            let attempts = req
                .candidates
                .iter()
                .map(|c| {
                    let rel = c.path.strip_prefix(&self.run_dir).unwrap_or(&c.path);
                    // attempts/<model>/<attempt folder>/...
                    rel.components()
                        .nth(2)
                        .map(|x| x.as_os_str().to_string_lossy().into_owned())
                        .unwrap_or_default()
                })
                .collect();
            self.seen.lock().unwrap().push(Seen {
                mode: req.mode,
                dsl: req.dsl,
                keys: req.candidates.iter().map(|c| c.key.clone()).collect(),
                attempts,
                skills: self.skills_now(),
            });
            let resp = if !self.dsl_available(req.dsl, req.mode) {
                Err(EvalError::Rejected(
                    "asked for a DSL it does not have".into(),
                ))
            } else if req.mode.needs_gpu() && !self.gpu {
                Err(EvalError::NoGpu)
            } else {
                Ok(self.respond(&req))
            };
            std::future::ready(resp)
        }
        fn has_gpu(&self) -> bool {
            self.gpu
        }
        fn dsl_available(&self, dsl: Dsl, _mode: EvalMode) -> bool {
            self.missing != Some(dsl)
        }
        /// Stats that count the requests seen, so a test can tell when they were recorded.
        fn stats(&self) -> Option<mkb_eval::pool::PoolStats> {
            Some(mkb_eval::pool::PoolStats {
                elapsed_s: self.seen.lock().unwrap().len() as f64,
                ..Default::default()
            })
        }
    }

    fn repo_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The replay demo (its recorded conversations), on A01 and C01, direction cute -> tirx,
    /// one attempt at a time, run against `fake`.
    async fn run_demo(fake: FakeEvaluator, run_dir: &Path) -> (RunSummary, Arc<FakeEvaluator>) {
        let root = repo_root();
        let mut cfg = ExperimentConfig::load(&root.join("examples/replay.toml")).unwrap();
        cfg.problems = vec!["A01".into(), "C01".into()];
        cfg.directions = vec!["cute->tirx".into()];
        cfg.concurrency = 1;
        cfg.eval.timing_sessions = Some(3);
        let dsls = DslRegistry::load_root(&root).unwrap();
        let registry = Registry::load(&root.join("problems"), &dsls).unwrap();
        let problems = registry.select(&cfg.problems).unwrap();
        let briefs = cfg
            .solo_dsls()
            .into_iter()
            .map(|d| (d, read_brief(dsls.require(d).unwrap()).unwrap()))
            .collect();
        let providers = cfg
            .models
            .iter()
            .map(|m| (m.label.clone(), Provider::from_config(&m.provider).unwrap()))
            .collect();
        let fake = Arc::new(fake);
        let summary = run_planned(Setup {
            cfg,
            run_dir: run_dir.to_path_buf(),
            store: Store::open(run_dir).unwrap(),
            pool: fake.clone(),
            providers,
            problems: &problems,
            dsls,
            briefs,
            forgotten: (0, 0),
            progress: false,
        })
        .await
        .unwrap();
        (summary, fake)
    }

    #[tokio::test]
    async fn phases_run_in_order_and_finals_store_the_evaluators_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let mut fake = FakeEvaluator::new(&run_dir);
        fake.infra = Some("replay-demo/A01/tirx/placebo/r0".into());
        let (summary, fake) = run_demo(fake, &run_dir).await;

        // Per problem: solo cute and tirx, repeat-solo, conditioned and placebo on tirx.
        assert_eq!(summary.planned, 10);
        assert_eq!(summary.attempts_done, 10);
        assert_eq!(summary.final_mode, Some(EvalMode::Full));
        assert_eq!(summary.final_groups_planned, 4);
        assert_eq!(summary.finals_done, 9);
        assert_eq!(summary.deferred.len(), 1, "{:?}", summary.deferred);
        let (what, why) = &summary.deferred[0];
        assert_eq!(what, "final replay-demo/A01/tirx/placebo/r0");
        assert!(why.contains("host_overload"), "{why}");
        assert!(!summary.complete());

        let seen = fake.seen.lock().unwrap().clone();
        let first_final = seen.iter().position(Seen::is_final).unwrap();
        let (tools, finals) = seen.split_at(first_final);
        assert!(finals.iter().all(Seen::is_final), "tool calls after finals");
        assert!(finals.iter().all(|s| s.mode == EvalMode::Full));
        // Solo-type attempts (no skill) all ran before any attempt that needs a skill, and by
        // then every solo attempt's distilled skill was stored.
        let needs_skill = |s: &Seen| matches!(s.condition(), "conditioned" | "placebo");
        let first_skilled = tools.iter().position(needs_skill).unwrap();
        assert!(tools[..first_skilled].iter().all(|s| !needs_skill(s)));
        assert!(tools[first_skilled..].iter().all(needs_skill));
        assert!(tools[..first_skilled]
            .iter()
            .any(|s| s.condition() == "repeat_solo"));
        assert!(tools[0].skills.is_empty());
        let solo_skills: BTreeSet<String> = ["A01_cute_solo_r0", "A01_tirx_solo_r0"]
            .into_iter()
            .chain(["C01_cute_solo_r0", "C01_tirx_solo_r0"])
            .map(String::from)
            .collect();
        assert_eq!(tools[first_skilled].skills, solo_skills);
        assert!(tools[first_skilled..].iter().all(|s| s.dsl == Dsl::TIRX));

        let store = Store::open_existing(&run_dir).unwrap();
        let attempts = store.attempts().unwrap();
        assert_eq!(attempts.len(), 10);
        for a in &attempts {
            // The store counts exactly the tool evaluations the fake answered for it.
            let folder = a.trajectory.split('/').nth(2).unwrap();
            let n = tools.iter().filter(|s| s.attempts[0] == folder).count();
            assert_eq!(a.tool_evals as usize, n, "{}", a.id);
            // A conditioned attempt uses the skill of the solo attempt in the other DSL.
            if a.condition == Condition::Conditioned {
                let src = a.id.replace("/tirx/conditioned/", "/cute/solo/");
                assert_eq!(a.skill_id.as_deref(), Some(format!("skill:{src}").as_str()));
            }
        }
        let handed = fake.finals.lock().unwrap().clone();
        let stored = store.final_evals().unwrap();
        assert_eq!(stored.len(), 9);
        for f in &stored {
            let given = &handed[&f.attempt_id];
            if f.attempt_id.contains("/placebo/") {
                assert_eq!(f.report.verdict, Verdict::Incorrect, "{}", f.attempt_id);
                assert!(f.session_medians_us.is_empty());
            } else {
                assert_eq!(f.report.verdict, Verdict::Correct, "{}", f.attempt_id);
                let median = f.report.runtime.as_ref().unwrap().median_us;
                assert_eq!(median, given[0], "{}", f.attempt_id);
                // Solo kernels are timed in 3 sessions, the others once.
                let sessions = if f.attempt_id.contains("/solo/") {
                    3
                } else {
                    1
                };
                assert_eq!(f.session_medians_us, given[..sessions], "{}", f.attempt_id);
            }
        }
        assert!(!stored
            .iter()
            .any(|f| f.attempt_id == "replay-demo/A01/tirx/placebo/r0"));
        // The evaluator's queue stats are recorded, last after the final evaluations.
        let q: mkb_eval::pool::PoolStats =
            serde_json::from_str(&store.meta("eval_queue").unwrap().unwrap()).unwrap();
        assert_eq!(q.elapsed_s, seen.len() as f64);
    }

    #[test]
    fn the_plan_follows_the_directions_and_the_variants() {
        let root = repo_root();
        let mut cfg = ExperimentConfig::load(&root.join("examples/replay.toml")).unwrap();
        cfg.controls.placebo = false;
        cfg.controls.repeat_solo = false;
        let dsls = DslRegistry::load_root(&root).unwrap();
        let registry = Registry::load(&root.join("problems"), &dsls).unwrap();
        let mut a01 = registry.get("A01").unwrap().clone();
        let toy = Dsl::new("toy").unwrap();
        a01.variants.push(toy);
        let c01 = registry.get("C01").unwrap().clone();
        let ids = |cfg: &ExperimentConfig| -> Vec<String> {
            plan(cfg, &[&a01, &c01]).iter().map(Unit::id).collect()
        };
        // The default: cute and tirx both ways, for both problems.
        assert_eq!(ids(&cfg).len(), 8);
        // cute and toy: only A01 is posed in toy.
        cfg.dsls = vec!["cute".into(), "toy".into()];
        let got = ids(&cfg);
        assert_eq!(
            got,
            vec![
                "replay-demo/A01/cute/solo/r0",
                "replay-demo/A01/toy/solo/r0",
                "replay-demo/A01/cute/conditioned/r0",
                "replay-demo/A01/toy/conditioned/r0",
            ]
        );
    }

    #[tokio::test]
    async fn without_gpu_or_dsl_units_are_deferred_and_finals_compile_only() {
        let tmp = tempfile::tempdir().unwrap();
        let run_dir = tmp.path().join("run");
        let mut fake = FakeEvaluator::new(&run_dir);
        fake.gpu = false;
        fake.missing = Some(Dsl::TIRX);
        let (summary, fake) = run_demo(fake, &run_dir).await;

        assert_eq!(summary.final_mode, Some(EvalMode::Compile));
        assert!(summary.limitations.iter().any(|l| l.starts_with("no GPU")));
        assert!(summary
            .limitations
            .iter()
            .any(|l| l.contains("the tirx DSL is not installed")));
        // Only the solo cute attempts ran; every tirx unit waits.
        assert_eq!(summary.attempts_done, 2);
        let tirx_deferred = summary
            .deferred
            .iter()
            .filter(|(_, why)| why == "the tirx evaluator is not installed here")
            .count();
        assert_eq!(tirx_deferred, 8, "{:?}", summary.deferred);
        let seen = fake.seen.lock().unwrap().clone();
        assert!(seen
            .iter()
            .all(|s| s.dsl == Dsl::CUTE && s.mode == EvalMode::Compile));
        // The cute groups are complete and evaluated; the tirx groups wait for their attempts.
        assert_eq!(summary.finals_done, 2);
        assert_eq!(seen.iter().filter(|s| s.is_final()).count(), 2);
        let stored = Store::open_existing(&run_dir)
            .unwrap()
            .final_evals()
            .unwrap();
        assert_eq!(stored.len(), 2);
        assert!(stored
            .iter()
            .all(|f| f.mode == "compile" && f.report.verdict == Verdict::Correct));
    }
}
