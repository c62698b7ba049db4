//! `mkb rescore`: evaluate every final kernel of a finished run again, on this machine and
//! with this mkb, into a new named evaluation set. The run's own final evaluations (the
//! `ORIGINAL_SET`) are kept; `mkb analyze/report/export --eval-set NAME` read either. Each
//! kernel must be the one the run evaluated (its sha256 is checked against the original
//! record where one was stored). Resumable: running it again with the same `--name` evaluates
//! only what the set still lacks.

use crate::config::ExperimentConfig;
use crate::scheduler::evaluate_group;
use anyhow::{anyhow, bail, Context as _, Result};
use mkb_core::{EndReason, EvalMode, Registry};
use mkb_eval::{EvalPool, PoolConfig};
use mkb_store::{AttemptRecord, EvalSetRecord, FinalEvalRecord, Store, ORIGINAL_SET};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where and how to re-evaluate.
#[derive(Debug, Clone)]
pub struct RescoreOptions {
    /// Repository root (problems/, python/).
    pub root: PathBuf,
    pub python: PathBuf,
    /// GPUs for the evaluator ("auto", "none", "0,1"); default: the run's `eval.gpus`.
    pub gpus: Option<String>,
    /// GPU-less evaluator processes; default: the run's `eval.cpu_workers`.
    pub cpu_workers: Option<usize>,
    /// The set's name; default `rescore-<UTC time>`.
    pub name: Option<String>,
    /// "auto" (full with a GPU, else compile), "full" or "compile".
    pub mode: String,
    /// The command line, stored with the set.
    pub command: String,
}

/// What a rescore did.
#[derive(Debug, Clone, Default)]
pub struct RescoreSummary {
    pub name: String,
    pub mode: String,
    /// Kernels (attempts) evaluated now, and already in the set from an earlier call.
    pub evaluated: usize,
    pub already: usize,
    /// (attempt, original verdict, new verdict) where both exist and differ.
    pub changed_verdicts: Vec<(String, String, String)>,
    /// Attempts compared with an original verdict.
    pub compared: usize,
    /// (unit, why) left for a later call.
    pub deferred: Vec<(String, String)>,
}

/// A valid evaluation-set name: letters, digits, '-', '_', '.'.
pub fn check_set_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        bail!("--name {name:?}: use letters, digits, '-', '_' and '.'");
    }
    if name == ORIGINAL_SET {
        bail!("--name {name:?}: that names the run's own final evaluations; choose another");
    }
    Ok(())
}

/// Re-evaluate every final kernel of the run in `run_dir` into a new evaluation set.
pub async fn rescore(run_dir: &Path, opts: &RescoreOptions) -> Result<RescoreSummary> {
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => format!(
            "rescore-{}",
            mkb_core::utc_now()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect::<String>()
        ),
    };
    check_set_name(&name)?;
    let db = run_dir.join("mkb.sqlite");
    // Refuse a folder without a store before the lock or the writer creates anything.
    drop(Store::open_existing(run_dir)?);
    let _lock = crate::lock::RunLock::acquire(run_dir)?;
    let store = Store::open(run_dir)?;
    let cfg: ExperimentConfig = serde_json::from_str(&store.meta("config")?.ok_or_else(|| {
        anyhow!(
            "{}: the store holds no config (a simulated run has no kernels to evaluate)",
            db.display()
        )
    })?)
    .with_context(|| format!("{}: reading the run's config", db.display()))?;
    let dsls = mkb_core::DslRegistry::load_root(&opts.root).map_err(|errs| {
        anyhow!(
            "DSL descriptors are invalid:\n{}",
            errs.iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let registry = Registry::load(&opts.root.join("problems"), &dsls).map_err(|errs| {
        anyhow!(
            "problem files are invalid:\n{}",
            errs.iter()
                .map(|e| format!("  {e}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    })?;
    let attempts: Vec<AttemptRecord> = store
        .attempts()?
        .into_iter()
        .filter(|a| a.end_reason != EndReason::ProviderError)
        .collect();
    let originals: BTreeMap<String, FinalEvalRecord> = store
        .final_evals()?
        .into_iter()
        .map(|f| (f.attempt_id.clone(), f))
        .collect();
    // The kernels must be the ones the run evaluated.
    let mut changed = Vec::new();
    for a in &attempts {
        if let (Some(k), Some(want)) = (
            &a.final_kernel,
            originals.get(&a.id).and_then(|f| f.kernel_sha256.as_ref()),
        ) {
            let path = run_dir.join(k);
            let got = crate::provenance::file_sha256(&path)?;
            if &got != want {
                changed.push(format!("{} ({})", a.id, path.display()));
            }
        }
    }
    if !changed.is_empty() {
        bail!(
            "{} final kernel(s) changed since the run evaluated them (sha256 differs), e.g. {}; a rescore evaluates the run's own kernels only",
            changed.len(),
            changed.into_iter().take(3).collect::<Vec<_>>().join(", ")
        );
    }

    let gpus = crate::parse_gpus(opts.gpus.as_deref().unwrap_or(&cfg.eval.gpus))?;
    let pool = EvalPool::start(PoolConfig {
        python: opts.python.clone(),
        root: opts.root.clone(),
        gpus,
        cpu_workers: opts.cpu_workers.unwrap_or(cfg.eval.cpu_workers).max(1),
        log_dir: Some(run_dir.join("logs")),
        start_timeout: Duration::from_secs(300),
        judges_per_gpu: cfg.eval.judges_per_gpu(),
        backend: cfg.eval.backend()?,
    })
    .await
    .context("starting the evaluator")?;
    let mode = match opts.mode.as_str() {
        "compile" => EvalMode::Compile,
        "full" => EvalMode::Full,
        "auto" => {
            if pool.has_gpu() {
                EvalMode::Full
            } else {
                EvalMode::Compile
            }
        }
        other => bail!("--mode {other:?}: expected auto, full or compile"),
    };
    if mode.needs_gpu() && !pool.has_gpu() {
        bail!("--mode full needs a GPU and none is available here");
    }
    let existing = store.eval_sets()?.into_iter().find(|e| e.name == name);
    match &existing {
        Some(e) if e.mode != mode.as_str() => bail!(
            "evaluation set {name:?} exists in {} mode; this call would evaluate in {} mode (pass --mode {} to finish it, or another --name)",
            e.mode,
            mode.as_str(),
            e.mode
        ),
        Some(_) => {}
        None => store.create_eval_set(&EvalSetRecord {
            name: name.clone(),
            mode: mode.as_str().into(),
            created_at: mkb_core::utc_now(),
            provenance: crate::provenance::collect(&pool).to_string(),
            command: opts.command.clone(),
        })?,
    }
    let done: BTreeSet<String> = store
        .set_evals(&name)?
        .into_iter()
        .map(|f| f.attempt_id)
        .collect();
    let mut summary = RescoreSummary {
        name: name.clone(),
        mode: mode.as_str().into(),
        already: attempts.iter().filter(|a| done.contains(&a.id)).count(),
        ..RescoreSummary::default()
    };
    let mut groups: BTreeMap<String, Vec<AttemptRecord>> = BTreeMap::new();
    for a in attempts.into_iter().filter(|a| !done.contains(&a.id)) {
        groups
            .entry(format!("{}/{}", a.problem, a.dsl))
            .or_default()
            .push(a);
    }
    let mut store = store;
    for (key, group) in groups {
        let first = &group[0];
        let Some(problem) = registry.get(&first.problem) else {
            summary.deferred.push((
                format!("final {key}"),
                format!("problem {} is not in this checkout", first.problem),
            ));
            continue;
        };
        if !pool.dsl_available(first.dsl, mode) {
            summary.deferred.push((
                format!("final {key}"),
                format!("the {} evaluator is not installed here", first.dsl),
            ));
            continue;
        }
        eprintln!("rescore {key}: {} kernel(s)", group.len());
        match evaluate_group(&pool, run_dir, problem, &key, &group, mode, &cfg.eval).await? {
            Ok((rows, deferred)) => {
                summary.deferred.extend(deferred);
                summary.evaluated += store.record_set_group(&name, &rows)?;
            }
            Err(e) => summary.deferred.push((format!("final {key}"), e)),
        }
    }
    // Compare with the run's own verdicts.
    for f in store.set_evals(&name)? {
        if let Some(o) = originals.get(&f.attempt_id) {
            summary.compared += 1;
            if o.report.verdict != f.report.verdict || o.mode != f.mode {
                summary.changed_verdicts.push((
                    f.attempt_id.clone(),
                    format!("{}/{}", o.mode, o.report.verdict.as_str()),
                    format!("{}/{}", f.mode, f.report.verdict.as_str()),
                ));
            }
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_names_are_checked() {
        assert!(check_set_name("again-h200_2").is_ok());
        for bad in ["", ".x", "a/b", "a b", ORIGINAL_SET] {
            assert!(check_set_name(bad).is_err(), "{bad:?}");
        }
    }
}
