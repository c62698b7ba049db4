//! `mkb eval`: evaluate one kernel file on one problem variant through the pool and print the
//! report; the pool options (`--mode`, `--gpus`, ...) shared with `mkb solutions` and `mkb
//! redteam`, and the human-readable account of a report they all print.

use crate::common::{ensure_file, Context};
use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use mkb_core::{Dsl, EvalMode, EvalReport};
use mkb_eval::{EvalPool, EvalRequest, TimingOptions};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--mode`: what an evaluation does (docs/evaluator.md), or `auto`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeArg {
    /// full with a GPU, else compile
    Auto,
    /// static check and build for sm_90a, nothing runs (no GPU needed)
    Compile,
    /// + correctness on the check shapes (GPU)
    Test,
    /// + correctness on the benchmark shape and timing against eager PyTorch (GPU)
    Bench,
    /// the final evaluation: + torch.compile and the end-to-end floor (GPU)
    Full,
}

impl ModeArg {
    /// The mode it names; None for `auto`.
    pub fn fixed(self) -> Option<EvalMode> {
        match self {
            ModeArg::Auto => None,
            ModeArg::Compile => Some(EvalMode::Compile),
            ModeArg::Test => Some(EvalMode::Test),
            ModeArg::Bench => Some(EvalMode::Bench),
            ModeArg::Full => Some(EvalMode::Full),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct PoolArgs {
    /// What the evaluation does.
    #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,
    /// GPUs: auto, none, or a list like 0,1.
    #[arg(long, default_value = "auto")]
    pub gpus: String,
    /// GPU-less evaluator processes for compile-only work.
    #[arg(long, default_value_t = 2)]
    pub cpu_workers: usize,
    /// Timed repetitions at least (default 100).
    #[arg(long)]
    pub min_reps: Option<u32>,
    /// Timed repetitions at most (default 1000).
    #[arg(long)]
    pub max_reps: Option<u32>,
    /// Folder for the evaluator processes' logs (stderr of each judge).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
    /// Where the judges run: local processes, or actors of a Ray cluster (docs/cluster.md).
    #[arg(long, value_parser = ["local", "ray"], default_value = "local")]
    pub backend: String,
    /// The Ray cluster of `--backend ray`: HOST:PORT of its head, or auto.
    #[arg(long)]
    pub ray_address: Option<String>,
}

impl PoolArgs {
    pub async fn start(&self, ctx: &Context) -> Result<(EvalPool, EvalMode)> {
        let backend = mkb_eval::Backend::parse(Some(&self.backend), self.ray_address.as_deref())
            .map_err(|e| anyhow!("--backend/--ray-address: {e}"))?;
        let pool = ctx
            .pool(&self.gpus, self.cpu_workers, self.log_dir.clone(), backend)
            .await?;
        let mode = match self.mode.fixed() {
            Some(m) => m,
            None if pool.has_gpu() => EvalMode::Full,
            None => EvalMode::Compile,
        };
        if mode.needs_gpu() && !pool.has_gpu() {
            bail!(
                "--mode {} needs a GPU and none is available here (use --mode compile)",
                mode.as_str()
            );
        }
        Ok((pool, mode))
    }

    pub fn timing(&self) -> TimingOptions {
        let mut t = TimingOptions::default();
        if let Some(r) = self.min_reps {
            t.min_reps = r;
        }
        if let Some(r) = self.max_reps {
            t.max_reps = r;
        }
        t
    }
}

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Problem id, slug or folder name.
    pub problem: String,
    #[arg(long)]
    pub dsl: Dsl,
    /// The kernel file (defines build(spec) -> run).
    #[arg(long)]
    pub file: PathBuf,
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Print the full report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn eval(ctx: &Context, args: EvalArgs) -> Result<ExitCode> {
    let reg = ctx.registry()?;
    let p = reg
        .get(&args.problem)
        .ok_or_else(|| anyhow!("no problem {:?}; see `mkb problems list`", args.problem))?;
    let file = ensure_file(&args.file)?;
    let dsl = ctx.dsl(args.dsl)?;
    if !p.has_variant(dsl) {
        bail!(
            "{} is not posed in {dsl} (no {dsl}/starter.py in {})",
            p.id(),
            p.dir.display()
        );
    }
    let (pool, mode) = args.pool.start(ctx).await?;
    let mut req = EvalRequest::single(p.dir.clone(), dsl, mode, file);
    req.timing = args.pool.timing();
    let report = pool.evaluate_one(req).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            describe(&format!("{} {} [{}]", p.id(), p.slug(), dsl), &report, true)
        );
    }
    Ok(if report.is_correct() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A human-readable account of one report.
pub fn describe(title: &str, r: &EvalReport, with_log: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{title} mode={}: {}",
        r.mode.as_str(),
        r.verdict.as_str().to_uppercase()
    );
    if let Some(reason) = &r.reason {
        let _ = writeln!(s, "  reason    {reason}");
    }
    if !r.message.is_empty() {
        let _ = writeln!(s, "  message   {}", r.message.trim());
    }
    if let Some(c) = r.compile_s {
        let _ = writeln!(s, "  compile   {c:.2} s (all shape sets)");
    }
    if let Some(t) = &r.runtime {
        let wall = t
            .wall_us_per_call
            .map(|w| format!("; wall {w:.1} us/call"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  runtime   {:.1} us (IQR {:.1} us, {} reps, {}{wall})",
            t.median_us, t.iqr_us, t.reps, t.timer
        );
    }
    for b in &r.baselines {
        let _ = writeln!(
            s,
            "  {:<9} {:.1} us ({}, IQR {:.1})",
            b.kind, b.timing.median_us, b.name, b.timing.iqr_us
        );
    }
    if let Some(x) = r.speedup_eager {
        let _ = writeln!(
            s,
            "  speedup   {x:.2}x over eager ({})",
            r.t_ref_name.as_deref().unwrap_or("?")
        );
    }
    if let Some(x) = r.speedup_compile {
        let _ = writeln!(s, "  speedup   {x:.2}x over torch.compile");
    }
    if let Some(f) = r.floor_us {
        let _ = writeln!(s, "  floor     {f:.1} us (empty kernel, same timing)");
    }
    if !r.kernels.is_empty() {
        let _ = writeln!(
            s,
            "  kernels   {}",
            r.kernels
                .iter()
                .map(|k| mkb_eval::protocol::trim(k, 60))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(i) = r.ideal_us {
        let pct = r
            .runtime
            .as_ref()
            .filter(|t| t.median_us > 0.0)
            .map(|t| format!(" ({:.0}% of roofline)", 100.0 * i / t.median_us))
            .unwrap_or_default();
        let _ = writeln!(s, "  ideal     {i:.1} us{pct}");
    }
    let _ = writeln!(s, "  eval      {:.1} s", r.eval_s);
    if let Some(p) = &r.phases {
        let _ = writeln!(s, "  phases    {}", crate::evidence::phases_line(p));
    }
    if with_log && !r.log.trim().is_empty() {
        let _ = writeln!(
            s,
            "  log:\n{}",
            r.log
                .lines()
                .map(|l| format!("    {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    s
}
