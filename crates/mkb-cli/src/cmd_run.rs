//! `mkb run CONFIG` (run or resume an experiment) and `mkb status RUN` (what a run holds and
//! what it still lacks, read-only). Both print through `common::emit`, so a closed stdout
//! (`mkb run ... | head`) neither panics nor changes the exit code.

use crate::common::{emit, Context};
use anyhow::{anyhow, Context as _, Result};
use clap::Args;
use mkb_agent::provider::ThrottleStats;
use mkb_core::Condition;
use mkb_eval::pool::PoolStats;
use mkb_run::scheduler::plan;
use mkb_run::{run_experiment, ExperimentConfig, RunOptions};
use mkb_store::{AttemptRecord, FinalEvalRecord, SkillRecord, Store};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Experiment config (TOML), e.g. examples/replay.toml.
    pub config: PathBuf,
    /// Parent folder of run folders (default <root>/runs).
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
    /// GPUs for the evaluator: auto, none, or a list like 0,1 (overrides eval.gpus).
    #[arg(long)]
    pub gpus: Option<String>,
    /// GPU-less evaluator processes for compile-only work (overrides eval.cpu_workers).
    #[arg(long)]
    pub cpu_workers: Option<usize>,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
}

pub async fn run(ctx: &Context, args: RunArgs) -> Result<ExitCode> {
    let mut cfg = ExperimentConfig::load(&args.config)?;
    if let Some(n) = args.cpu_workers {
        // Machine-specific, so not part of the run's fingerprint (taken at load).
        cfg.eval.cpu_workers = n.max(1);
    }
    let runs_dir = args
        .runs_dir
        .clone()
        .unwrap_or_else(|| ctx.root.join("runs"));
    let opts = RunOptions {
        root: ctx.root.clone(),
        python: ctx.python.clone(),
        runs_dir: runs_dir.clone(),
        gpus: args.gpus.clone(),
        progress: !args.no_progress && std::io::stderr().is_terminal(),
    };
    let run_dir = cfg.run_dir(&runs_dir);
    eprintln!("run {:?} -> {}", cfg.name, run_dir.display());
    let s = run_experiment(cfg, &opts).await?;
    let mut out = String::new();
    writeln!(out, "\nrun folder: {}", run_dir.display())?;
    if s.forgotten != (0, 0) {
        writeln!(
            out,
            "redone: {} stored attempt(s) that ended in a provider error and {} final evaluation(s) that failed for infrastructure reasons were not results",
            s.forgotten.0, s.forgotten.1
        )?;
    }
    writeln!(
        out,
        "attempts: {} planned, {} already in the store, {} done now; final evaluations: {} new ({} mode), {} groups planned",
        s.planned,
        s.already_done,
        s.attempts_done,
        s.finals_done,
        s.final_mode.map(|m| m.as_str()).unwrap_or("?"),
        s.final_groups_planned
    )?;
    for l in &s.limitations {
        writeln!(out, "could not: {l}")?;
    }
    let code = if s.complete() {
        writeln!(
            out,
            "complete: every planned unit is in the store. Next: mkb analyze {}",
            run_dir.display()
        )?;
        ExitCode::SUCCESS
    } else {
        writeln!(out, "incomplete: {} unit(s) deferred; re-run the same command where they can run to finish:", s.deferred.len())?;
        for (unit, why) in s.deferred.iter().take(30) {
            writeln!(out, "  {unit}: {why}")?;
        }
        if s.deferred.len() > 30 {
            writeln!(out, "  ... and {} more", s.deferred.len() - 30)?;
        }
        ExitCode::from(4)
    };
    emit(&out)?;
    Ok(code)
}

#[derive(Args, Debug)]
pub struct RescoreArgs {
    /// A run folder, or a run name under <root>/runs.
    pub run: PathBuf,
    /// GPUs for the evaluator: auto, none, or a list like 0,1 (default: the run's eval.gpus).
    #[arg(long)]
    pub gpus: Option<String>,
    /// GPU-less evaluator processes for compile-only work (default: the run's).
    #[arg(long)]
    pub cpu_workers: Option<usize>,
    /// Name of the new evaluation set (default rescore-<UTC time>); an existing set of that
    /// name is completed (only what it lacks is evaluated).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long, value_enum, default_value_t = RescoreMode::Auto)]
    pub mode: RescoreMode,
}

/// `mkb rescore --mode`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RescoreMode {
    /// full with a GPU, else compile
    Auto,
    /// the final evaluation (GPU)
    Full,
    /// build only, nothing runs
    Compile,
}

impl RescoreMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RescoreMode::Auto => "auto",
            RescoreMode::Full => "full",
            RescoreMode::Compile => "compile",
        }
    }
}

/// `mkb rescore RUN`: every final kernel evaluated again into a new, named evaluation set.
pub async fn rescore(ctx: &Context, args: RescoreArgs) -> Result<ExitCode> {
    let dir = resolve_run(ctx, &args.run);
    let opts = mkb_run::rescore::RescoreOptions {
        root: ctx.root.clone(),
        python: ctx.python.clone(),
        gpus: args.gpus.clone(),
        cpu_workers: args.cpu_workers,
        name: args.name.clone(),
        mode: args.mode.as_str().into(),
        command: crate::common::command_line(),
    };
    let s = mkb_run::rescore::rescore(&dir, &opts).await?;
    let mut out = String::new();
    writeln!(
        out,
        "evaluation set {:?} of {} ({} mode): {} kernel evaluation(s) new, {} already there",
        s.name,
        dir.display(),
        s.mode,
        s.evaluated,
        s.already
    )?;
    writeln!(
        out,
        "verdicts: {} of {} compared with the run's own final evaluations are the same",
        s.compared - s.changed_verdicts.len(),
        s.compared
    )?;
    for (id, old, new) in s.changed_verdicts.iter().take(20) {
        writeln!(out, "  changed {id}: {old} -> {new}")?;
    }
    let code = if s.deferred.is_empty() {
        writeln!(
            out,
            "complete. Next: mkb analyze {} --eval-set {}",
            dir.display(),
            s.name
        )?;
        ExitCode::SUCCESS
    } else {
        writeln!(
            out,
            "incomplete: {} unit(s) left; run the same command with --name {} to finish:",
            s.deferred.len(),
            s.name
        )?;
        for (unit, why) in s.deferred.iter().take(30) {
            writeln!(out, "  {unit}: {why}")?;
        }
        ExitCode::from(4)
    };
    emit(&out)?;
    Ok(code)
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// A run folder, or a run name under <root>/runs.
    pub run: PathBuf,
    #[arg(long)]
    pub json: bool,
    /// Also list every attempt: how it ended, the verdict of each evaluation its tools ran,
    /// and its final evaluation.
    #[arg(long)]
    pub attempts: bool,
}

fn short_verdict(v: &str) -> &str {
    match v {
        "compile_error" => "cerr",
        "static_check_failed" => "static",
        "incorrect" => "wrong",
        "timeout" => "timeout",
        "crashed" => "crash",
        "correct" => "ok",
        other => other,
    }
}

/// A run folder from a path or a name.
pub fn resolve_run(ctx: &Context, run: &Path) -> PathBuf {
    if run.join("mkb.sqlite").is_file() {
        run.to_path_buf()
    } else {
        ctx.root.join("runs").join(run)
    }
}

pub fn status(ctx: &Context, args: StatusArgs) -> Result<ExitCode> {
    let dir = resolve_run(ctx, &args.run);
    let store = Store::open_existing(&dir)?;
    let cfg: ExperimentConfig = serde_json::from_str(
        &store
            .meta("config")?
            .ok_or_else(|| anyhow!("{}: the store holds no config", dir.display()))?,
    )
    .context("reading the run's config from the store")?;
    let reg = ctx.registry()?;
    let problems = reg.select(&cfg.problems).map_err(|e| anyhow!(e))?;
    let units = plan(&cfg, &problems);
    // A provider error is not an attempt and an infrastructure failure not an evaluation
    // (stores written before that rule): both count as pending, as the next run redoes them.
    let attempts: Vec<AttemptRecord> = store
        .attempts()?
        .into_iter()
        .filter(|a| a.end_reason != mkb_core::EndReason::ProviderError)
        .collect();
    let done: BTreeMap<String, &AttemptRecord> =
        attempts.iter().map(|a| (a.id.clone(), a)).collect();
    let (finals, not_evaluated): (Vec<_>, Vec<_>) = store
        .final_evals()?
        .into_iter()
        .filter(|f| done.contains_key(&f.attempt_id))
        .partition(|f| !f.report.is_infrastructure());
    let finals_pending: Vec<String> = attempts
        .iter()
        .filter(|a| !finals.iter().any(|f| f.attempt_id == a.id))
        .map(|a| a.id.clone())
        .collect();
    let skills = store.skills()?;
    let mut by_cond: BTreeMap<(Condition, String), (usize, usize)> = BTreeMap::new();
    for u in &units {
        let e = by_cond.entry((u.condition, u.dsl.to_string())).or_default();
        e.1 += 1;
        if done.contains_key(&u.id()) {
            e.0 += 1;
        }
    }
    let pending: Vec<String> = units
        .iter()
        .filter(|u| !done.contains_key(&u.id()))
        .map(|u| u.id())
        .collect();
    let flagged: Vec<&SkillRecord> = skills.iter().filter(|s| !s.flags.is_empty()).collect();
    // Per model: what the providers' shared rate limits cost (the last `mkb run` process).
    let throttle: BTreeMap<String, ThrottleStats> = match store.meta("throttle")? {
        Some(t) => serde_json::from_str(&t)
            .with_context(|| format!("{}: the store's throttle record", dir.display()))?,
        None => BTreeMap::new(),
    };
    // The evaluator's queues (the last `mkb run` process): waits and judges idle beside work.
    let eval_queue: Option<PoolStats> = match store.meta("eval_queue")? {
        Some(t) => Some(
            serde_json::from_str(&t)
                .with_context(|| format!("{}: the store's eval_queue record", dir.display()))?,
        ),
        None => None,
    };
    if args.json {
        let v = serde_json::json!({
            "run": cfg.name, "dir": dir, "attempts_done": attempts.len(), "attempts_planned": units.len(),
            "skills": skills.len(), "final_evals": finals.len(), "pending": pending,
            "final_evals_pending": finals_pending,
            "not_evaluated": not_evaluated.iter().map(|f| serde_json::json!({"attempt": f.attempt_id, "reason": f.report.reason})).collect::<Vec<_>>(),
            "by_condition": by_cond.iter().map(|((c, d), (a, b))| serde_json::json!({"condition": c, "dsl": d, "done": a, "planned": b})).collect::<Vec<_>>(),
            "eval_sets": store.eval_sets()?.iter().map(|e| serde_json::json!({"name": e.name, "mode": e.mode, "created_at": e.created_at})).collect::<Vec<_>>(),
            "provenance": store.meta("provenance")?.and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok()),
            "flagged_skills": flagged.iter().map(|s| serde_json::json!({"id": s.id, "flags": s.flags})).collect::<Vec<_>>(),
            "throttle": throttle,
            "eval_queue": eval_queue,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("run {:?} at {}", cfg.name, dir.display());
    println!("{:<12} {:<5} {:>6} / planned", "condition", "dsl", "done");
    for ((c, d), (a, b)) in &by_cond {
        println!("{:<12} {:<5} {:>6} / {}", c.as_str(), d, a, b);
    }
    for (model, t) in &throttle {
        println!(
            "provider limits, {model}: {} requests, {} waited ({:.1} s in all), {} answered 429, {} tokens",
            t.requests, t.waits, t.waited_s, t.rate_limited, t.tokens
        );
    }
    if let Some(q) = &eval_queue {
        for (name, qs) in [("gpu", q.gpu.as_ref()), ("cpu", Some(&q.cpu))] {
            let Some(qs) = qs else { continue };
            println!(
                "evaluator queue, {name}: {} requests, wait p50 {:.1} s / p95 {:.1} s / max {:.1} s, at most {} waiting, judges idle while work waited {:.1} s",
                qs.requests,
                qs.wait_p50_s,
                qs.wait_p95_s,
                qs.wait_max_s,
                qs.max_waiting,
                qs.idle_while_waiting_s()
            );
        }
    }
    println!("skills: {} ({} flagged)", skills.len(), flagged.len());
    for s in &flagged {
        println!("  {}: {}", s.id, s.flags.join(", "));
    }
    let mut verdicts: BTreeMap<String, usize> = BTreeMap::new();
    for f in &finals {
        *verdicts
            .entry(format!("{}/{}", f.mode, f.report.verdict.as_str()))
            .or_default() += 1;
    }
    println!(
        "final evaluations: {} of {} attempts ({})",
        finals.len(),
        units.len(),
        verdicts
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !finals_pending.is_empty() {
        println!(
            "{} final evaluation(s) pending (not evaluated yet; `mkb run` evaluates them): {}",
            finals_pending.len(),
            finals_pending
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let sets = store.eval_sets()?;
    if !sets.is_empty() {
        println!(
            "evaluation sets: original (the run's own), {}",
            sets.iter()
                .map(|e| format!("{} ({} mode)", e.name, e.mode))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    match store
        .meta("provenance")?
        .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
    {
        Some(p) => println!("from: {}", mkb_analysis::practice::provenance_line(&p)),
        None => println!("from: provenance not recorded (a run from before it was stored)"),
    }
    if pending.is_empty() {
        println!("no attempt pending");
    } else {
        println!(
            "{} attempt(s) pending, e.g. {}",
            pending.len(),
            pending
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if args.attempts {
        let finals_by: BTreeMap<&str, &FinalEvalRecord> =
            finals.iter().map(|f| (f.attempt_id.as_str(), f)).collect();
        println!(
            "\n{:<40} {:<10} {:>5} {:<58} {:<10} {:>9} {:>7}",
            "attempt",
            "end",
            "turns",
            "tool evaluations (tool:verdict)",
            "final",
            "run us",
            "score"
        );
        for a in &attempts {
            let evals = store.tool_evals(&a.id)?;
            let seq: Vec<String> = evals
                .iter()
                .map(|e| format!("{}:{}", e.tool, short_verdict(&e.verdict)))
                .collect();
            let (fv, rt, sc) = match finals_by.get(a.id.as_str()) {
                Some(f) => (
                    format!("{}/{}", f.mode, short_verdict(f.report.verdict.as_str())),
                    f.report
                        .runtime
                        .as_ref()
                        .map(|t| format!("{:.1}", t.median_us))
                        .unwrap_or_else(|| "-".into()),
                    format!("{:.3}", f.report.score()),
                ),
                None => ("-".into(), "-".into(), "-".into()),
            };
            println!(
                "{:<40} {:<10} {:>5} {:<58} {:<10} {:>9} {:>7}",
                a.id,
                a.end_reason.as_str(),
                a.turns,
                seq.join(" "),
                fv,
                rt,
                sc
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
