//! `mkb eval`, `mkb solutions` and `mkb redteam`: evaluate kernel files through the pool and
//! print verdicts; optionally write an evidence file (command, date, GPU, versions, results).

use crate::common::{command_line, ensure_file, utc_now, Context};
use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use mkb_core::{Dsl, EvalMode, EvalReport, Verdict};
use mkb_eval::{EvalPool, EvalRequest, Limits, TimingOptions};
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug, Clone)]
pub struct PoolArgs {
    /// Mode: auto (full with a GPU, else compile), compile, test, bench, full.
    #[arg(long, default_value = "auto")]
    pub mode: String,
    /// GPUs: auto, none, or a list like 0,1.
    #[arg(long, default_value = "auto")]
    pub gpus: String,
    /// GPU-less evaluator processes for compile-only work.
    #[arg(long, default_value_t = 2)]
    pub cpu_workers: usize,
    /// Timed repetitions at least (the judge also times at least --min-time-s).
    #[arg(long)]
    pub min_reps: Option<u32>,
    #[arg(long)]
    pub min_time_s: Option<f64>,
    /// Folder for the evaluator processes' logs (stderr of each judge).
    #[arg(long)]
    pub log_dir: Option<PathBuf>,
}

impl PoolArgs {
    async fn start(&self, ctx: &Context) -> Result<(EvalPool, EvalMode)> {
        let pool = ctx
            .pool(&self.gpus, self.cpu_workers, self.log_dir.clone())
            .await?;
        let mode = match self.mode.as_str() {
            "auto" => {
                if pool.has_gpu() {
                    EvalMode::Full
                } else {
                    EvalMode::Compile
                }
            }
            m => m.parse::<EvalMode>().map_err(|e| anyhow!("--mode: {e}"))?,
        };
        if mode.needs_gpu() && !pool.has_gpu() {
            bail!(
                "--mode {} needs a GPU and none is available here (use --mode compile)",
                mode.as_str()
            );
        }
        Ok((pool, mode))
    }

    fn timing(&self) -> TimingOptions {
        let mut t = TimingOptions::default();
        if let Some(r) = self.min_reps {
            t.min_reps = r;
        }
        if let Some(s) = self.min_time_s {
            t.min_time_s = s;
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
    let (pool, mode) = args.pool.start(ctx).await?;
    let mut req = EvalRequest::single(p.dir.clone(), args.dsl, mode, file);
    req.timing = args.pool.timing();
    let report = pool.evaluate_one(req).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            describe(
                &format!("{} {} [{}]", p.id(), p.slug(), args.dsl),
                &report,
                true
            )
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
        let _ = writeln!(s, "  phases    {}", phases_line(p));
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

#[derive(Args, Debug)]
pub struct SolutionsArgs {
    /// Problems (ids, slugs or family letters); default all with solutions.
    pub problems: Vec<String>,
    /// Only this DSL.
    #[arg(long)]
    pub dsl: Option<Dsl>,
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Write <DIR>/<NAME>.json and .md with the command, date, GPU and versions.
    #[arg(long)]
    pub evidence_dir: Option<PathBuf>,
    #[arg(long, default_value = "solutions")]
    pub evidence_name: String,
}

pub async fn solutions(ctx: &Context, args: SolutionsArgs) -> Result<ExitCode> {
    let reg = ctx.registry()?;
    let problems = reg.select(&args.problems).map_err(|e| anyhow!(e))?;
    let (pool, mode) = args.pool.start(ctx).await?;
    let dsls: Vec<Dsl> = args
        .dsl
        .map(|d| vec![d])
        .unwrap_or_else(|| Dsl::ALL.to_vec());
    let pool = std::sync::Arc::new(pool);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut all_ok = true;
    // Every evaluation is sent at once: the pool runs them on its judges (one per GPU, or the
    // GPU-less ones for compile mode) and we print them in order.
    let mut jobs = Vec::new();
    for p in problems {
        for &dsl in &dsls {
            if !p.has_solution(dsl) {
                continue;
            }
            if !pool.dsl_available(dsl, mode) {
                skipped.push(format!(
                    "{} [{dsl}]: the {dsl} DSL is not installed here",
                    p.id()
                ));
                continue;
            }
            let mut req = EvalRequest::single(p.dir.clone(), dsl, mode, p.solution_path(dsl));
            req.timing = args.pool.timing();
            let pool = pool.clone();
            let handle = tokio::spawn(async move { pool.evaluate_one(req).await });
            jobs.push((p.id().to_string(), p.slug().to_string(), dsl, handle));
        }
    }
    eprintln!(
        "evaluating {} solution(s) ({})...",
        jobs.len(),
        mode.as_str()
    );
    for (id, slug, dsl, handle) in jobs {
        let report = handle
            .await
            .map_err(|e| anyhow!("{id} [{dsl}]: {e}"))?
            .with_context(|| format!("{id} [{dsl}]"))?;
        print!(
            "{}",
            describe(
                &format!("{id} {slug} [{dsl}]"),
                &report,
                !report.is_correct()
            )
        );
        all_ok &= report.is_correct();
        rows.push(serde_json::json!({"problem": id, "slug": slug, "dsl": dsl, "report": report}));
    }
    for s in &skipped {
        println!("skipped: {s}");
    }
    print_summary(&rows);
    if let Some(dir) = &args.evidence_dir {
        write_evidence(
            dir,
            &args.evidence_name,
            &pool,
            mode,
            &rows,
            &skipped,
            &solutions_markdown(&rows),
        )?;
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_summary(rows: &[serde_json::Value]) {
    println!(
        "\n{:<4} {:<5} {:<20} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9}",
        "id", "dsl", "verdict", "compile s", "run us", "eager us", "x eager", "x comp.", "eval s"
    );
    for r in rows {
        let rep: EvalReport = match serde_json::from_value(r["report"].clone()) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let f =
            |x: Option<f64>, p: usize| x.map(|v| format!("{v:.p$}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<4} {:<5} {:<20} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9.1}",
            r["problem"].as_str().unwrap_or(""),
            r["dsl"].as_str().unwrap_or(""),
            rep.verdict.as_str(),
            f(rep.compile_s, 2),
            f(rep.runtime.as_ref().map(|t| t.median_us), 1),
            f(rep.t_ref_us, 1),
            f(rep.speedup_eager, 2),
            f(rep.speedup_compile, 2),
            rep.eval_s
        );
        if let Some(p) = &rep.phases {
            println!("     phases: {}", phases_line(p));
        }
    }
}

/// `static 0.01 s, load 0.52 s, ...` (phases that took no time are left out).
fn phases_line(p: &mkb_core::eval::Phases) -> String {
    p.items()
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(k, v)| format!("{k} {v:.2} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn solutions_markdown(rows: &[serde_json::Value]) -> String {
    let mut s = String::from("| problem | DSL | verdict | compile s | runtime us (IQR) | t_ref us (formulation) | speedup vs eager | speedup vs torch.compile | floor us | ideal us | eval s | phases |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let Ok(rep) = serde_json::from_value::<EvalReport>(r["report"].clone()) else {
            continue;
        };
        let f =
            |x: Option<f64>, p: usize| x.map(|v| format!("{v:.p$}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "| {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            r["problem"].as_str().unwrap_or(""),
            r["slug"].as_str().unwrap_or(""),
            r["dsl"].as_str().unwrap_or(""),
            rep.verdict.as_str(),
            f(rep.compile_s, 2),
            rep.runtime
                .as_ref()
                .map(|t| format!("{:.1} ({:.1})", t.median_us, t.iqr_us))
                .unwrap_or_else(|| "-".into()),
            rep.t_ref_us
                .map(|t| format!("{t:.1} ({})", rep.t_ref_name.as_deref().unwrap_or("?")))
                .unwrap_or_else(|| "-".into()),
            f(rep.speedup_eager, 2),
            f(rep.speedup_compile, 2),
            f(rep.floor_us, 1),
            f(rep.ideal_us, 1),
            rep.eval_s,
            rep.phases
                .as_ref()
                .map(phases_line)
                .unwrap_or_else(|| "-".into())
        );
    }
    s
}

/// Write `<dir>/<name>.json` (everything) and `<dir>/<name>.md` (a table), both headed with the
/// command, the date, the GPU and the versions the judges reported.
pub fn write_evidence(
    dir: &Path,
    name: &str,
    pool: &EvalPool,
    mode: EvalMode,
    rows: &[serde_json::Value],
    skipped: &[String],
    table_md: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let hello = pool.gpu_hello.as_ref().unwrap_or(&pool.cpu_hello);
    let meta = serde_json::json!({
        "command": command_line(),
        "date": utc_now(),
        "mode": mode,
        "gpu": hello.gpu,
        "python": hello.python,
        "torch": hello.torch,
        "cuda": hello.cuda,
        "dsls": hello.dsls,
        "mkb_version": env!("CARGO_PKG_VERSION"),
    });
    let evals: Vec<f64> = rows
        .iter()
        .filter_map(|r| r["report"]["eval_s"].as_f64())
        .collect();
    let median_eval = median(&evals);
    let doc = serde_json::json!({"meta": meta, "median_eval_s": median_eval, "skipped": skipped, "results": rows});
    let json_path = dir.join(format!("{name}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(&doc)?)?;
    let mut md = String::new();
    let _ = writeln!(md, "# {name}\n");
    let _ = writeln!(
        md,
        "- command: `{}`",
        meta["command"].as_str().unwrap_or("")
    );
    let _ = writeln!(md, "- date: {}", meta["date"].as_str().unwrap_or(""));
    let _ = writeln!(
        md,
        "- GPU: {}",
        hello.gpu.as_deref().unwrap_or("none (compile-only)")
    );
    let _ = writeln!(
        md,
        "- python {}, torch {}, CUDA {}",
        hello.python,
        hello.torch.as_deref().unwrap_or("?"),
        hello.cuda.as_deref().unwrap_or("?")
    );
    for (k, v) in &hello.dsls {
        let _ = writeln!(
            md,
            "- {k}: {}",
            if v.available {
                v.version.clone().unwrap_or_default()
            } else {
                format!("not installed ({})", v.error.clone().unwrap_or_default())
            }
        );
    }
    let _ = writeln!(md, "- mode: {}", mode.as_str());
    if let Some(m) = median_eval {
        let _ = writeln!(
            md,
            "- median seconds per evaluation (compile + checks + timing): {m:.1}"
        );
    }
    let _ = writeln!(md, "\n{table_md}");
    for s in skipped {
        let _ = writeln!(md, "- skipped: {s}");
    }
    std::fs::write(dir.join(format!("{name}.md")), md)?;
    eprintln!("wrote {} and {name}.md", json_path.display());
    Ok(())
}

fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
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
    #[command(flatten)]
    pub pool: PoolArgs,
    #[arg(long)]
    pub evidence_dir: Option<PathBuf>,
    #[arg(long, default_value = "redteam")]
    pub evidence_name: String,
}

/// One red-team case of tests/adversarial/manifest.toml (the manifest documents the fields).
#[derive(Debug, Deserialize)]
struct RedteamCase {
    file: String,
    /// A problem id, slug, folder name, or `<family>/<folder>` path.
    problem: String,
    dsl: Dsl,
    verdict: Verdict,
    #[serde(default)]
    reason: Option<ReasonSpec>,
    #[serde(default)]
    needs_gpu: bool,
    /// Mode on a GPU machine (default "test").
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    what: Option<String>,
    #[serde(default)]
    limits: Option<PartialLimits>,
}

/// Acceptable reason prefixes: one, or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ReasonSpec {
    One(String),
    Many(Vec<String>),
}

impl ReasonSpec {
    fn prefixes(&self) -> Vec<&str> {
        match self {
            ReasonSpec::One(s) => vec![s.as_str()],
            ReasonSpec::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[derive(Debug, Deserialize)]
struct PartialLimits {
    build_s: Option<f64>,
    call_s: Option<f64>,
    total_s: Option<f64>,
    rss_mb: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Manifest {
    case: Vec<RedteamCase>,
}

pub async fn redteam(ctx: &Context, args: RedteamArgs) -> Result<ExitCode> {
    let reg = ctx.registry()?;
    let manifest_path = args
        .manifest
        .clone()
        .unwrap_or_else(|| ctx.root.join("tests/adversarial/manifest.toml"));
    let text = std::fs::read_to_string(&manifest_path)
        .with_context(|| format!("reading {}", manifest_path.display()))?;
    let manifest: Manifest =
        toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", manifest_path.display()))?;
    let base = manifest_path
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let (pool, mode) = args.pool.start(ctx).await?;
    let pool = std::sync::Arc::new(pool);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let mut mismatches = 0;
    let mut ran = 0;
    let mut jobs = Vec::new();
    for c in &manifest.case {
        if args.dsl.is_some_and(|d| d != c.dsl) {
            continue;
        }
        if c.needs_gpu && (args.cpu_only || !pool.has_gpu()) {
            skipped.push(format!("{}: needs a GPU", c.file));
            continue;
        }
        let key = c.problem.rsplit('/').next().unwrap_or(&c.problem);
        let p = reg.get(key).ok_or_else(|| {
            anyhow!(
                "{}: case {}: no problem {:?}",
                manifest_path.display(),
                c.file,
                c.problem
            )
        })?;
        let file = ensure_file(&base.join(&c.file))?;
        // On a GPU machine a case runs in its own mode (default test); without one, compile.
        let case_mode = if mode.needs_gpu() {
            c.mode
                .as_deref()
                .unwrap_or("test")
                .parse::<EvalMode>()
                .map_err(|e| anyhow!("case {}: {e}", c.file))?
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
        let mut limits = Limits {
            call_s: 20.0,
            total_s: 600.0,
            ..Limits::default()
        };
        if let Some(l) = &c.limits {
            limits.build_s = l.build_s.unwrap_or(limits.build_s);
            limits.call_s = l.call_s.unwrap_or(limits.call_s);
            limits.total_s = l.total_s.unwrap_or(limits.total_s);
            limits.rss_mb = l.rss_mb.unwrap_or(limits.rss_mb);
        }
        req.limits = limits;
        let pool = pool.clone();
        jobs.push((c, tokio::spawn(async move { pool.evaluate_one(req).await })));
    }
    for (c, handle) in jobs {
        let rep = handle
            .await
            .map_err(|e| anyhow!("case {}: {e}", c.file))?
            .with_context(|| format!("case {}", c.file))?;
        ran += 1;
        let wanted: Vec<&str> = c.reason.as_ref().map(|r| r.prefixes()).unwrap_or_default();
        let reason_ok = wanted.is_empty()
            || rep
                .reason
                .as_deref()
                .is_some_and(|got| wanted.iter().any(|w| got.starts_with(w)));
        let ok = rep.verdict == c.verdict && reason_ok;
        if !ok {
            mismatches += 1;
        }
        let expected = format!("{}/{}", c.verdict.as_str(), wanted.join("|"));
        let got = format!(
            "{}/{}",
            rep.verdict.as_str(),
            rep.reason.as_deref().unwrap_or("")
        );
        println!(
            "{} {:<32} {:<11} expected {:<44} got {:<40} {}",
            if ok { "ok  " } else { "FAIL" },
            c.file,
            c.layer.as_deref().unwrap_or(""),
            expected,
            got,
            c.what.as_deref().unwrap_or("")
        );
        if !ok {
            print!("{}", describe(&format!("  {}", c.file), &rep, true));
        }
        rows.push(serde_json::json!({
            "file": c.file, "problem": c.problem, "dsl": c.dsl, "layer": c.layer, "what": c.what,
            "expected_verdict": c.verdict, "expected_reason": wanted, "needs_gpu": c.needs_gpu,
            "mode": rep.mode, "ok": ok, "report": rep
        }));
    }
    for s in &skipped {
        println!("skipped: {s}");
    }
    println!("{ran} cases, {mismatches} with an unexpected verdict");
    if let Some(dir) = &args.evidence_dir {
        let mut md = String::from(
            "| case | problem | DSL | expected | got | ok |\n|---|---|---|---|---|---|\n",
        );
        for r in &rows {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} {} | {} {} | {} |",
                r["file"].as_str().unwrap_or(""),
                r["problem"].as_str().unwrap_or(""),
                r["dsl"].as_str().unwrap_or(""),
                r["expected_verdict"].as_str().unwrap_or(""),
                r["expected_reason"]
                    .as_array()
                    .map(|a| a
                        .iter()
                        .filter_map(|x| x.as_str())
                        .collect::<Vec<_>>()
                        .join("|"))
                    .unwrap_or_default(),
                r["report"]["verdict"].as_str().unwrap_or(""),
                r["report"]["reason"].as_str().unwrap_or(""),
                if r["ok"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "NO"
                }
            );
        }
        write_evidence(dir, &args.evidence_name, &pool, mode, &rows, &skipped, &md)?;
    }
    Ok(if mismatches == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
