//! `mkb analyze`, `mkb export`, `mkb report`, `mkb simulate` and `mkb power`: the analysis
//! of a run's store (crates/mkb-analysis) and synthetic runs with a known truth.

use crate::cmd_run::resolve_run;
use crate::common::{command_line, Context};
use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use mkb_analysis::{
    analyze, export, power, render_power, render_report_with, render_tables, simulate, to_csv,
    AnalysisOptions, AttemptRow, ExportFormat, PowerConfig, ReportOptions, SimConfig, SimModel,
};
use mkb_run::rows::{rows_from_store, write_simulated};
use mkb_run::store::Store;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The rows of a run folder (or run name).
fn load_rows(ctx: &Context, run: &Path) -> Result<(PathBuf, Vec<AttemptRow>)> {
    let dir = resolve_run(ctx, run);
    let store = Store::open_existing(&dir)?;
    let name = store.meta("name")?.unwrap_or_else(|| {
        dir.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    });
    let rows = rows_from_store(&store, &name)?;
    if rows.is_empty() {
        bail!("{}: the run holds no finished attempt yet", dir.display());
    }
    Ok((dir, rows))
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
    /// Bootstrap resamples (ARCHITECTURE.md: 10,000).
    #[arg(long, default_value_t = 10_000)]
    pub resamples: usize,
    #[arg(long, default_value_t = 20261129)]
    pub seed: u64,
}

pub fn analyze_cmd(ctx: &Context, args: AnalyzeArgs) -> Result<ExitCode> {
    let (_dir, rows) = load_rows(ctx, &args.run)?;
    let opts = AnalysisOptions {
        resamples: args.resamples,
        seed: args.seed,
        ..AnalysisOptions::default()
    };
    let a = analyze(&rows, &opts);
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
    /// parquet, csv or jsonl (schema: docs/analysis.md).
    #[arg(long, default_value = "parquet")]
    pub format: String,
    /// Output file.
    #[arg(short, long)]
    pub out: PathBuf,
}

pub fn export_cmd(ctx: &Context, args: ExportArgs) -> Result<ExitCode> {
    let (_dir, rows) = load_rows(ctx, &args.run)?;
    let fmt: ExportFormat = args
        .format
        .parse()
        .map_err(|e: String| anyhow!("--format: {e}"))?;
    export(&rows, fmt, &args.out).with_context(|| format!("writing {}", args.out.display()))?;
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
    let (dir, rows) = load_rows(ctx, &args.run)?;
    let a = analyze(
        &rows,
        &AnalysisOptions {
            resamples: args.resamples,
            ..AnalysisOptions::default()
        },
    );
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
    /// True lift of conditioned over solo, CuTe -> TIRx.
    #[arg(long, default_value_t = 0.2)]
    pub lift_cute_to_tirx: f64,
    /// True lift, TIRx -> CuTe.
    #[arg(long, default_value_t = 0.1)]
    pub lift_tirx_to_cute: f64,
    /// Solo pass rate.
    #[arg(long, default_value_t = 0.6)]
    pub pass_rate: f64,
    /// Run-to-run noise of log scores.
    #[arg(long, default_value_t = 0.3)]
    pub run_sd: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replace an existing run of that name.
    #[arg(long)]
    pub force: bool,
}

pub fn simulate_cmd(ctx: &Context, args: SimulateArgs) -> Result<ExitCode> {
    let cfg = SimConfig {
        run_name: args.name.clone(),
        models: vec![SimModel {
            name: "simulated-model".into(),
            lift_cute_to_tirx: args.lift_cute_to_tirx,
            lift_tirx_to_cute: args.lift_tirx_to_cute,
        }],
        problems: args.problems,
        runs: args.runs,
        pass_rate_solo: args.pass_rate,
        run_sd: args.run_sd,
        ..SimConfig::default()
    };
    if args.problems == 0 || args.runs == 0 || !(0.0..=1.0).contains(&args.pass_rate) {
        bail!("--problems and --runs must be positive and --pass-rate in [0, 1]");
    }
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
        std::fs::remove_dir_all(&dir)?;
    }
    let rows = simulate(&cfg, args.seed);
    let mut store = Store::open(&dir)?;
    store.set_meta("name", &args.name)?;
    store.set_meta("simulation", &serde_json::to_string(&serde_json::json!({
        "seed": args.seed, "problems": cfg.problems, "runs": cfg.runs,
        "true_lift": {"cute->tirx": args.lift_cute_to_tirx, "tirx->cute": args.lift_tirx_to_cute},
        "pass_rate_solo": cfg.pass_rate_solo, "run_sd": cfg.run_sd, "command": command_line(),
    }))?)?;
    let n = write_simulated(&mut store, &rows)?;
    println!(
        "wrote {n} simulated attempts to {} (true lift cute->tirx {}, tirx->cute {})",
        dir.display(),
        args.lift_cute_to_tirx,
        args.lift_tirx_to_cute
    );
    println!("next: mkb analyze {}", dir.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct PowerArgs {
    /// The lift to detect.
    #[arg(long, default_value_t = 0.2)]
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
    if let Some(p) = &args.pilot {
        let (_dir, rows) = load_rows(ctx, p)?;
        cfg.sim = mkb_analysis::fit_sim_config(&rows, &cfg.sim);
    }
    print!("{}", render_power(&power(&cfg)));
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
