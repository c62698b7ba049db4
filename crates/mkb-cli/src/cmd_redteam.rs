//! `mkb redteam`: run the red-team set of tests/adversarial/ through the pool and compare each
//! verdict with the manifest's (crates/mkb-eval/src/redteam.rs parses and checks it);
//! `mkb redteam --list` prints the checked cases as JSON instead, for the Python tools
//! (python -m mkb_eval.redteam, .selfcheck), so the manifest has one parser.

use crate::cmd_eval::{describe, PoolArgs};
use crate::common::{ensure_file, Context};
use crate::evidence::{redteam_markdown, write_evidence};
use anyhow::{anyhow, Context as _, Result};
use clap::{Args, ValueEnum};
use mkb_core::{Dsl, EvalMode};
use mkb_eval::redteam::{Layer, Manifest};
use mkb_eval::EvalRequest;
use std::path::PathBuf;
use std::process::ExitCode;

/// `--layer`: the defence a case is aimed at (the manifest's `layer`).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerArg {
    Static,
    Sandbox,
    Deadline,
    Dynamic,
    Correctness,
    Timing,
    Crash,
}

impl From<LayerArg> for Layer {
    fn from(l: LayerArg) -> Layer {
        match l {
            LayerArg::Static => Layer::Static,
            LayerArg::Sandbox => Layer::Sandbox,
            LayerArg::Deadline => Layer::Deadline,
            LayerArg::Dynamic => Layer::Dynamic,
            LayerArg::Correctness => Layer::Correctness,
            LayerArg::Timing => Layer::Timing,
            LayerArg::Crash => Layer::Crash,
        }
    }
}

#[derive(Args, Debug)]
pub struct RedteamArgs {
    /// The manifest (default tests/adversarial/manifest.toml).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Only cases that need no GPU (static and compile-time verdicts).
    #[arg(long)]
    pub cpu_only: bool,
    /// Only cases of this DSL.
    #[arg(long)]
    pub dsl: Option<Dsl>,
    /// Only cases aimed at this defence.
    #[arg(long, value_enum)]
    pub layer: Option<LayerArg>,
    /// Print the checked cases as JSON (root folder and cases) and run nothing.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub pool: PoolArgs,
    #[arg(long)]
    pub evidence_dir: Option<PathBuf>,
    #[arg(long, default_value = "redteam")]
    pub evidence_name: String,
}

pub async fn redteam(ctx: &Context, args: RedteamArgs) -> Result<ExitCode> {
    let reg = ctx.registry()?;
    let manifest_path = args
        .manifest
        .clone()
        .unwrap_or_else(|| ctx.root.join("tests/adversarial/manifest.toml"));
    let mut manifest = Manifest::load(&manifest_path, &reg).map_err(|e| anyhow!(e))?;
    manifest.root = manifest
        .root
        .canonicalize()
        .with_context(|| format!("{}", manifest.root.display()))?;
    let dsl = args.dsl.map(|d| ctx.dsl(d)).transpose()?;
    let layer = args.layer.map(Layer::from);
    manifest
        .cases
        .retain(|c| dsl.is_none_or(|d| d == c.dsl) && layer.is_none_or(|l| l == c.layer));
    if args.list {
        manifest.cases.retain(|c| !(args.cpu_only && c.needs_gpu));
        println!("{}", serde_json::to_string_pretty(&manifest)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (pool, mode) = args.pool.start(ctx).await?;
    let pool = std::sync::Arc::new(pool);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut mismatches = 0;
    let mut ran = 0;
    let mut jobs = Vec::new();
    for c in &manifest.cases {
        if c.needs_gpu && (args.cpu_only || !pool.has_gpu()) {
            skipped.push(format!("{}: needs a GPU", c.file));
            continue;
        }
        let p = reg
            .get(&c.problem_id)
            .ok_or_else(|| anyhow!("case {}: no problem {}", c.file, c.problem_id))?;
        let file = ensure_file(&manifest.root.join(&c.file))?;
        // On a GPU machine a case runs in its own mode (default test); without one, compile.
        let case_mode = if mode.needs_gpu() {
            c.mode
        } else {
            EvalMode::Compile
        };
        if !pool.dsl_available(c.dsl, case_mode) {
            skipped.push(format!(
                "{}: the {} DSL is not installed here",
                c.file, c.dsl
            ));
            continue;
        }
        let mut req = EvalRequest::single(p.dir.clone(), c.dsl, case_mode, file);
        req.timing = args.pool.timing();
        req.limits = c.limits();
        let pool = pool.clone();
        jobs.push((c, tokio::spawn(async move { pool.evaluate_one(req).await })));
    }
    for (c, handle) in jobs {
        let rep = handle
            .await
            .map_err(|e| anyhow!("case {}: {e}", c.file))?
            .with_context(|| format!("case {}", c.file))?;
        ran += 1;
        let ok = c.reached(&rep);
        if !ok {
            mismatches += 1;
        }
        let expected = format!("{}/{}", c.verdict.as_str(), c.reasons.join("|"));
        let got = format!(
            "{}/{}",
            rep.verdict.as_str(),
            rep.reason.as_deref().unwrap_or("")
        );
        println!(
            "{} {:<32} {:<11} expected {:<44} got {:<40} {}",
            if ok { "ok  " } else { "FAIL" },
            c.file,
            c.layer.as_str(),
            expected,
            got,
            c.what
        );
        if !ok {
            print!("{}", describe(&format!("  {}", c.file), &rep, true));
        }
        rows.push(serde_json::json!({
            "file": c.file, "problem": c.problem, "dsl": c.dsl, "layer": c.layer, "what": c.what,
            "expected_verdict": c.verdict, "expected_reason": c.reasons, "needs_gpu": c.needs_gpu,
            "mode": rep.mode, "ok": ok, "report": rep
        }));
    }
    for s in &skipped {
        println!("skipped: {s}");
    }
    println!("{ran} cases, {mismatches} with an unexpected verdict");
    if let Some(dir) = &args.evidence_dir {
        write_evidence(
            dir,
            &args.evidence_name,
            &pool,
            mode,
            &rows,
            &skipped,
            &redteam_markdown(&rows),
        )?;
    }
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
