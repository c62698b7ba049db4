//! `mkb analyze`, `mkb export`, `mkb report`, `mkb simulate` and `mkb power`: the analysis
//! of a run's store (crates/mkb-analysis) and synthetic runs with a known truth.

use crate::cmd_run::resolve_run;
use crate::common::{command_line, Context};
use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use mkb_analysis::{
    analyze, export, power, render_power, render_report_with, render_tables, rows_from_eval_set,
    to_csv, try_simulate, write_simulated, Analysis, AnalysisOptions, AttemptRow, ExportFormat,
    PowerConfig, ReportOptions, SimConfig, SimModel, DEFAULT_SEED,
};
use mkb_store::{Store, ORIGINAL_SET};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What the analysis reads from a run besides its rows: its provenance, the evaluation set
/// read, and the budget it ran under.
pub struct RunInfo {
    pub eval_set: String,
    /// The run's provenance (meta `provenance`), with the evaluation set's own when it is not
    /// the original.
    pub provenance: Option<serde_json::Value>,
    pub budget: Option<mkb_core::Budget>,
}

/// The rows of a run folder (or run name). Errors name the store.
fn load_rows(ctx: &Context, run: &Path) -> Result<(PathBuf, Vec<AttemptRow>)> {
    let (dir, rows, _) = load_run(ctx, run, None)?;
    Ok((dir, rows))
}

/// The rows of a run folder (or run name) from one evaluation set (default: the run's own),
/// with what else the analysis reports. Errors name the store.
fn load_run(
    ctx: &Context,
    run: &Path,
    eval_set: Option<&str>,
) -> Result<(PathBuf, Vec<AttemptRow>, RunInfo)> {
    let dir = resolve_run(ctx, run);
    let db = dir.join("mkb.sqlite");
    // A zero-byte file is not a store: refuse it before anything could write a schema into it.
    if std::fs::metadata(&db).is_ok_and(|m| m.is_file() && m.len() == 0) {
        bail!(
            "{}: the run store is empty (0 bytes), not a run; was the run ever started?",
            db.display()
        );
    }
    // TODO(read-only): open through the store's read-only opener once it lands.
    let store = Store::open_existing(&dir)?;
    let name = store
        .meta("name")
        .with_context(|| format!("reading {}", db.display()))?
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default()
        });
    let set = eval_set.unwrap_or(ORIGINAL_SET);
    let rows = rows_from_eval_set(&store, &name, set)
        .with_context(|| format!("reading the attempts of {}", db.display()))?;
    let mut provenance: Option<serde_json::Value> = store
        .meta("provenance")?
        .and_then(|p| serde_json::from_str(&p).ok());
    if set != ORIGINAL_SET {
        if let Some(e) = store.eval_sets()?.into_iter().find(|e| e.name == set) {
            let p = serde_json::json!({
                "run": provenance.take(),
                "eval_set": {"name": e.name, "mode": e.mode, "created_at": e.created_at, "command": e.command,
                    "provenance": serde_json::from_str::<serde_json::Value>(&e.provenance).ok()},
            });
            provenance = Some(p);
        }
    }
    // A config this build cannot read only leaves the budget out of the report.
    let budget = store.run_config().ok().flatten().and_then(|c| c.budget);
    let info = RunInfo {
        eval_set: set.to_string(),
        provenance,
        budget,
    };
    if rows.is_empty() {
        bail!("{}: the run holds no finished attempt yet", dir.display());
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| {
            !r.score.is_finite()
                || r.score < 0.0
                || !r.wall_s.is_finite()
                || r.source_score.is_some_and(|x| !x.is_finite())
        })
        .take(3)
        .map(|r| r.label())
        .collect();
    if !bad.is_empty() {
        bail!(
            "{}: attempts with a score, source score or wall time that is not a finite, non-negative number (e.g. {})",
            db.display(),
            bad.join(", ")
        );
    }
    Ok((dir, rows, info))
}

/// `--resamples`: 0 (point estimates only) or at least 100 (CIs are starred from 1,000 on).
fn check_resamples(n: usize) -> Result<()> {
    if n > 0 && n < 100 {
        bail!("--resamples {n}: use 0 (point estimates only) or at least 100 (a CI is starred only with >= {} resamples)", mkb_analysis::analysis::MIN_RESAMPLES_FOR_CI);
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// A run folder, or a run name under <root>/runs.
    pub run: PathBuf,
    /// The whole analysis as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// One CSV row per (model, direction, condition) cell.
    #[arg(long)]
    pub csv: bool,
    /// Bootstrap resamples (docs/design.md: 10,000); 0 = point estimates only.
    #[arg(long, default_value_t = 10_000)]
    pub resamples: usize,
    /// Bootstrap seed (the same default for analyze and report).
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// The evaluation set to analyse: "original" (the run's own final evaluations, the
    /// default) or one `mkb rescore` made.
    #[arg(long, default_value = ORIGINAL_SET)]
    pub eval_set: String,
}

/// The analysis of a run's rows with what the store adds (provenance, evaluation set, budget).
fn analyze_run(rows: &[AttemptRow], info: &RunInfo, resamples: usize, seed: u64) -> Analysis {
    let opts = AnalysisOptions {
        resamples,
        seed,
        budget: info.budget,
        ..AnalysisOptions::default()
    };
    let mut a = analyze(rows, &opts);
    a.eval_set = Some(info.eval_set.clone());
    a.provenance = info.provenance.clone();
    a
}

pub fn analyze_cmd(ctx: &Context, args: AnalyzeArgs) -> Result<ExitCode> {
    check_resamples(args.resamples)?;
    let (_dir, rows, info) = load_run(ctx, &args.run, Some(&args.eval_set))?;
    let a = analyze_run(&rows, &info, args.resamples, args.seed);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&a)?);
    } else if args.csv {
        print!("{}", to_csv(&a));
    } else {
        print!("{}", render_tables(&a));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    pub run: PathBuf,
    /// The file format (schema: docs/analysis.md).
    #[arg(long, value_enum, default_value_t = FormatArg::Parquet)]
    pub format: FormatArg,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
    /// The evaluation set to export (see `mkb analyze --eval-set`).
    #[arg(long, default_value = ORIGINAL_SET)]
    pub eval_set: String,
}

/// `mkb export --format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatArg {
    Parquet,
    Csv,
    #[value(alias = "ndjson")]
    Jsonl,
}

impl From<FormatArg> for ExportFormat {
    fn from(f: FormatArg) -> ExportFormat {
        match f {
            FormatArg::Parquet => ExportFormat::Parquet,
            FormatArg::Csv => ExportFormat::Csv,
            FormatArg::Jsonl => ExportFormat::Jsonl,
        }
    }
}

pub fn export_cmd(ctx: &Context, args: ExportArgs) -> Result<ExitCode> {
    let (_dir, rows, _) = load_run(ctx, &args.run, Some(&args.eval_set))?;
    export(&rows, args.format.into(), &args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {} rows to {}", rows.len(), args.out.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    pub run: PathBuf,
    /// The HTML file to write.
    #[arg(short, long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 10_000)]
    pub resamples: usize,
    /// Bootstrap seed (the same default as `mkb analyze`); printed, and shown in the report.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// The evaluation set to report (see `mkb analyze --eval-set`).
    #[arg(long, default_value = ORIGINAL_SET)]
    pub eval_set: String,
}

/// `to`'s path relative to the folder `from` (both made absolute), for links in the report.
fn relative(from: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from), abs(to));
    let fc: Vec<_> = from.components().collect();
    let tc: Vec<_> = to.components().collect();
    let common = fc.iter().zip(&tc).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = std::iter::repeat_n("..".to_string(), fc.len() - common).collect();
    parts.extend(
        tc[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().to_string()),
    );
    if parts.is_empty() {
        String::new()
    } else {
        format!("{}/", parts.join("/"))
    }
}

pub fn report_cmd(ctx: &Context, args: ReportArgs) -> Result<ExitCode> {
    check_resamples(args.resamples)?;
    let (dir, rows, info) = load_run(ctx, &args.run, Some(&args.eval_set))?;
    eprintln!(
        "bootstrap: {} resamples, seed {}; evaluation set {}",
        args.resamples, args.seed, info.eval_set
    );
    let a = analyze_run(&rows, &info, args.resamples, args.seed);
    let out_dir = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let opts = ReportOptions {
        title: None,
        link_prefix: relative(out_dir, &dir),
        command: Some(command_line()),
    };
    let html = render_report_with(&a, &rows, &opts);
    std::fs::write(&args.out, html).with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Name of the simulated run (its folder is <runs-dir>/<name>).
    #[arg(long, default_value = "sim")]
    pub name: String,
    #[arg(long)]
    pub runs_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 74)]
    pub problems: usize,
    /// Runs per cell.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// A model as NAME:LIFT_CUTE_TO_TIRX:LIFT_TIRX_TO_CUTE (repeat for several models);
    /// without it one model with --lift-cute-to-tirx / --lift-tirx-to-cute.
    #[arg(long = "model", value_name = "NAME:L1:L2")]
    pub models: Vec<String>,
    /// True lift of conditioned over solo, CuTe -> TIRx.
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
    pub lift_cute_to_tirx: f64,
    /// True lift, TIRx -> CuTe.
    #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
    pub lift_tirx_to_cute: f64,
    /// Solo pass rate, in (0, 1].
    #[arg(long, default_value_t = 0.6)]
    pub pass_rate: f64,
    /// Conditioned pass rate, in (0, 1].
    #[arg(long, default_value_t = 0.7)]
    pub pass_rate_conditioned: f64,
    /// Run-to-run noise of log scores.
    #[arg(long, default_value_t = 0.3)]
    pub run_sd: f64,
    /// Spread of log scores across problems.
    #[arg(long, default_value_t = 0.7)]
    pub problem_sd: f64,
    /// Spread of the lift across problems (log scale).
    #[arg(long, default_value_t = 0.2)]
    pub lift_sd: f64,
    /// How much more a skill helps when its source attempt passed, in [0, (1-p)/p).
    #[arg(long, default_value_t = 0.3)]
    pub source_dependence: f64,
    /// Planted relative-standing effect (>= 0): a skill whose source scored above the
    /// target's true median solo score helps more (docs/analysis.md, "Simulation").
    #[arg(long, default_value_t = 0.0)]
    pub standing_effect: f64,
    /// True lift of the placebo control.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub placebo_lift: f64,
    /// Leave out the placebo and repeat-solo controls.
    #[arg(long)]
    pub no_controls: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replace an existing run of that name.
    #[arg(long)]
    pub force: bool,
}

/// `NAME:LIFT_CUTE_TO_TIRX:LIFT_TIRX_TO_CUTE`.
fn parse_model(spec: &str) -> Result<SimModel> {
    let parts: Vec<&str> = spec.split(':').collect();
    let num = |s: &str, what: &str| -> Result<f64> {
        let x: f64 = s.trim().parse().map_err(|_| {
            anyhow!("--model {spec:?}: {what} {s:?} is not a number (expected NAME:LIFT_CUTE_TO_TIRX:LIFT_TIRX_TO_CUTE)")
        })?;
        if !x.is_finite() {
            bail!("--model {spec:?}: {what} must be a finite number");
        }
        Ok(x)
    };
    match parts.as_slice() {
        [name, a, b] if !name.trim().is_empty() => Ok(SimModel {
            name: name.trim().to_string(),
            lift_cute_to_tirx: num(a, "the cute->tirx lift")?,
            lift_tirx_to_cute: num(b, "the tirx->cute lift")?,
        }),
        _ => bail!("--model {spec:?}: expected NAME:LIFT_CUTE_TO_TIRX:LIFT_TIRX_TO_CUTE, e.g. model-a:0.2:-0.1"),
    }
}

/// A `SimConfig::validate` message with the field named as its `mkb simulate` flag.
fn flag_error(msg: &str) -> String {
    const FLAGS: [(&str, &str); 12] = [
        ("pass_rate_solo", "--pass-rate"),
        ("pass_rate_conditioned", "--pass-rate-conditioned"),
        ("problem_sd", "--problem-sd"),
        ("run_sd", "--run-sd"),
        ("lift_sd", "--lift-sd"),
        ("source_dependence", "--source-dependence"),
        ("standing_effect", "--standing-effect"),
        ("placebo_lift", "--placebo-lift"),
        ("problems", "--problems"),
        ("runs", "--runs"),
        ("models", "--model"),
        ("model ", "--model / --lift-*: model "),
    ];
    for (field, flag) in FLAGS {
        if let Some(rest) = msg.strip_prefix(field) {
            return format!("{flag}{rest}");
        }
    }
    msg.to_string()
}

pub fn simulate_cmd(ctx: &Context, args: SimulateArgs) -> Result<ExitCode> {
    let models = if args.models.is_empty() {
        vec![SimModel {
            name: "simulated-model".into(),
            lift_cute_to_tirx: args.lift_cute_to_tirx,
            lift_tirx_to_cute: args.lift_tirx_to_cute,
        }]
    } else {
        args.models
            .iter()
            .map(|m| parse_model(m))
            .collect::<Result<Vec<_>>>()?
    };
    let cfg = SimConfig {
        run_name: args.name.clone(),
        models,
        problems: args.problems,
        runs: args.runs,
        pass_rate_solo: args.pass_rate,
        pass_rate_conditioned: args.pass_rate_conditioned,
        run_sd: args.run_sd,
        problem_sd: args.problem_sd,
        lift_sd: args.lift_sd,
        source_dependence: args.source_dependence,
        standing_effect: args.standing_effect,
        placebo_lift: args.placebo_lift,
        controls: !args.no_controls,
        ..SimConfig::default()
    };
    if args.name.trim().is_empty() || args.name.contains(['/', '\\']) || args.name == ".." {
        bail!(
            "--name {:?}: a run name must be non-empty and contain no path separator",
            args.name
        );
    }
    // Validate before touching the file system.
    let rows = try_simulate(&cfg, args.seed).map_err(|e| anyhow!("{}", flag_error(&e)))?;
    let dir = args
        .runs_dir
        .clone()
        .unwrap_or_else(|| ctx.root.join("runs"))
        .join(&args.name);
    if dir.join("mkb.sqlite").exists() {
        if !args.force {
            bail!(
                "{} already holds a run; pass --force to replace it",
                dir.display()
            );
        }
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut store = Store::open(&dir)?;
    store.set_meta("name", &args.name)?;
    let truth: serde_json::Map<String, serde_json::Value> = cfg
        .models
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                serde_json::json!({"cute->tirx": m.lift_cute_to_tirx, "tirx->cute": m.lift_tirx_to_cute}),
            )
        })
        .collect();
    store.set_meta(
        "simulation",
        &serde_json::to_string(&serde_json::json!({
            "seed": args.seed, "config": &cfg, "true_lift": truth, "command": command_line(),
        }))?,
    )?;
    let n = write_simulated(&mut store, &rows)?;
    println!(
        "wrote {n} simulated attempts ({} model(s)) to {}",
        cfg.models.len(),
        dir.display(),
    );
    for m in &cfg.models {
        println!(
            "  {}: true lift cute->tirx {}, tirx->cute {}",
            m.name, m.lift_cute_to_tirx, m.lift_tirx_to_cute
        );
    }
    println!("next: mkb analyze {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct PowerArgs {
    /// The lift to detect (> -1).
    #[arg(long, default_value_t = 0.2, allow_negative_numbers = true)]
    pub lift: f64,
    /// Problem counts to try (comma-separated).
    #[arg(long, default_value = "12,24,37,50,74")]
    pub problems: String,
    /// Runs per problem to try (comma-separated).
    #[arg(long, default_value = "1,2,3,5")]
    pub runs: String,
    /// Simulated experiments per point.
    #[arg(long, default_value_t = 200)]
    pub simulations: usize,
    #[arg(long, default_value_t = 0.8)]
    pub target_power: f64,
    /// Fit the noise, pass rates and spreads to a pilot run first.
    #[arg(long)]
    pub pilot: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn parse_list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<T>()
                .map_err(|_| anyhow!("--{what}: {x:?} is not a number"))
        })
        .collect()
}

pub fn power_cmd(ctx: &Context, args: PowerArgs) -> Result<ExitCode> {
    let mut cfg = PowerConfig {
        lift: args.lift,
        problems: parse_list(&args.problems, "problems")?,
        runs: parse_list(&args.runs, "runs")?,
        simulations: args.simulations,
        target_power: args.target_power,
        seed: args.seed,
        ..PowerConfig::default()
    };
    // Check the grid before fitting a pilot (cheap errors first).
    cfg.validate().map_err(|e| anyhow!("{e}"))?;
    if let Some(p) = &args.pilot {
        let (dir, rows) = load_rows(ctx, p)?;
        cfg.sim = mkb_analysis::fit_sim_config(&rows, &cfg.sim)
            .map_err(|e| anyhow!("--pilot {}: {e}", dir.display()))?;
    }
    let report = power(&cfg).map_err(|e| anyhow!("{e}"))?;
    print!("{}", render_power(&report));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::relative;
    use std::path::Path;

    #[test]
    fn relative_paths_for_links() {
        assert_eq!(
            relative(Path::new("/a/b"), Path::new("/a/b/runs/x")),
            "runs/x/"
        );
        assert_eq!(
            relative(Path::new("/a/docs"), Path::new("/a/runs/x")),
            "../runs/x/"
        );
        assert_eq!(relative(Path::new("/a"), Path::new("/a")), "");
    }
}
