//! `mkb problems validate`: every check of docs/problems.md on the selected problems,
//! as one table (problem, check, measured number, limit, status) and optionally JSON and
//! markdown files; the exit status is 1 when a check fails. The static checks are mkb-core's
//! (crates/mkb-core/src/validate.rs); the dynamic ones (reference deterministic and finite, every
//! input matters, correct formulations pass with a 4x margin, planted slips fail, starters parse;
//! with `--device cuda` also the baselines' timing) run in python/mkb_eval/validate.py, which gets
//! the problem specs exactly as the judge does (crates/mkb-eval/src/spec.rs) as JSON on stdin and
//! answers in JSON lines.

use crate::common::Context;
use anyhow::{anyhow, Context as _, Result};
use clap::{Args, ValueEnum};
use mkb_core::registry::load_problem;
use mkb_core::validate::{
    starters, static_checks, validate_job_entry, CheckRow, Measured, Status, COMPILE_NEAR_IDEAL,
    CORRECT_MAX_RATIO,
};
use mkb_core::{LoadError, Problem};
use mkb_eval::judge::{judge_env, JudgeSpec};
use mkb_eval::ProblemSpec;
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// Version of the job and line format between this command and mkb_eval.validate.
pub const VALIDATE_FORMAT: u32 = 1;

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    /// Check shapes on the CPU (CI).
    Cpu,
    /// Check shapes and the benchmark shape on GPU 0, plus the baselines' timing.
    Cuda,
}

#[derive(Args, Debug)]
pub struct ValidateArgs {
    /// Problems (ids, slugs or family letters); default all.
    pub problems: Vec<String>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub device: Device,
    /// Write every row (and, on cuda, the timing) as JSON here (rewritten after each problem).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a markdown summary here (rewritten after each problem).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Seed of the input draws (fixed, so a run is reproducible).
    #[arg(long, default_value_t = 20261201)]
    pub seed: u64,
    /// The static checks only (no Python).
    #[arg(long)]
    pub static_only: bool,
    /// Print only the rows that did not pass (and one line per problem).
    #[arg(long)]
    pub failures_only: bool,
}

/// One problem's result.
#[derive(Debug, Clone, Serialize)]
struct ProblemResult {
    id: String,
    title: String,
    ok: bool,
    rows: Vec<CheckRow>,
    /// `--device cuda`: the baselines, floor and ideal times of the benchmark shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<Value>,
}

struct Report {
    device: Device,
    seed: u64,
    command: String,
    created: String,
    results: Vec<ProblemResult>,
}

/// A problem folder that failed to load: its folder name and the errors.
struct Broken {
    folder: String,
    family: String,
    errors: Vec<LoadError>,
}

/// Every problem folder under `problems/`, each loaded on its own (so that one half-written
/// problem does not stop the validation of the others, as it stops `Registry::load`).
fn load_each(ctx: &Context) -> Result<(Vec<Problem>, Vec<Broken>)> {
    let mut ok = Vec::new();
    let mut broken = Vec::new();
    let root = ctx.problems_dir();
    let mut fams: Vec<PathBuf> = std::fs::read_dir(&root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    fams.sort();
    for fam in fams {
        let family = file_name(&fam);
        if family.starts_with(['.', '_']) {
            continue;
        }
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&fam)
            .with_context(|| format!("reading {}", fam.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && !file_name(p).starts_with(['.', '_']))
            .collect();
        dirs.sort();
        for dir in dirs {
            match load_problem(&dir, &ctx.dsls) {
                Ok(p) => ok.push(p),
                Err(errors) => broken.push(Broken {
                    folder: file_name(&dir),
                    family: family.clone(),
                    errors,
                }),
            }
        }
    }
    Ok((ok, broken))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string()
}

/// The problems `keys` name (ids, slugs, folder names, family letters; none: all), loaded or not.
fn select<'a>(
    keys: &[String],
    ok: &'a [Problem],
    broken: &'a [Broken],
) -> Result<(Vec<&'a Problem>, Vec<&'a Broken>)> {
    if keys.is_empty() {
        return Ok((ok.iter().collect(), broken.iter().collect()));
    }
    let (mut ps, mut bs): (Vec<&Problem>, Vec<&Broken>) = (Vec::new(), Vec::new());
    for key in keys {
        let k = key.to_ascii_lowercase();
        let is_family = key.len() == 1;
        let before = ps.len() + bs.len();
        ps.extend(ok.iter().filter(|p| {
            if is_family {
                p.family.letter().to_ascii_lowercase().to_string() == k
            } else {
                p.id().to_ascii_lowercase() == k
                    || p.slug() == k
                    || p.folder_name().to_ascii_lowercase() == k
            }
        }));
        bs.extend(broken.iter().filter(|b| {
            let f = b.folder.to_ascii_lowercase();
            if is_family {
                b.family.to_ascii_lowercase() == k
            } else {
                f == k || f.split('_').next() == Some(k.as_str()) || f.ends_with(&format!("_{k}"))
            }
        }));
        if ps.len() + bs.len() == before {
            let known: Vec<&str> = ok.iter().map(|p| p.id()).collect();
            return Err(anyhow!("no problem {key:?} (known: {})", known.join(", ")));
        }
    }
    ps.sort_by(|a, b| a.id().cmp(b.id()));
    ps.dedup_by(|a, b| a.id() == b.id());
    bs.sort_by(|a, b| a.folder.cmp(&b.folder));
    bs.dedup_by(|a, b| a.folder == b.folder);
    Ok((ps, bs))
}

pub fn validate(ctx: &Context, args: ValidateArgs) -> Result<ExitCode> {
    let (loaded, broken) = load_each(ctx)?;
    let (selected, broken) = select(&args.problems, &loaded, &broken)?;
    let mut results: Vec<ProblemResult> = selected
        .iter()
        .map(|p| ProblemResult {
            id: p.id().to_string(),
            title: p.title().to_string(),
            ok: true,
            rows: static_checks(p, &ctx.dsls, true),
            timing: None,
        })
        .collect();
    let mut report = Report {
        device: args.device,
        seed: args.seed,
        command: crate::common::command_line(),
        created: crate::common::utc_now(),
        results: Vec::new(),
    };
    let mut printer = Printer::new(args.failures_only);
    // A problem the registry refuses: its load errors are its rows.
    for b in &broken {
        let id = b.folder.split('_').next().unwrap_or("?").to_string();
        let rows: Vec<CheckRow> = b
            .errors
            .iter()
            .map(|e| {
                CheckRow::new(
                    &id,
                    "load",
                    None,
                    "loads",
                    false,
                    short_load_error(e, &ctx.root),
                )
            })
            .collect();
        let r = ProblemResult {
            id,
            title: b.folder.clone(),
            ok: false,
            rows,
            timing: None,
        };
        printer.problem(&r);
        report.results.push(r);
    }
    if args.static_only {
        for r in &mut results {
            r.ok = !r.rows.iter().any(|x| x.status == Status::Fail);
            printer.problem(r);
        }
        report.results.extend(results);
        write_files(&report, &args)?;
    } else {
        run_python(
            ctx,
            &args,
            &selected,
            &mut results,
            &mut report,
            &mut printer,
        )?;
    }
    let failed: Vec<&str> = report
        .results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.id.as_str())
        .collect();
    let rows: Vec<&CheckRow> = report.results.iter().flat_map(|r| &r.rows).collect();
    let count = |s: Status| rows.iter().filter(|r| r.status == s).count();
    println!(
        "{} problems, {} checks: {} failed, {} waived, {} warnings{}",
        report.results.len(),
        rows.len(),
        count(Status::Fail),
        count(Status::Waived),
        count(Status::Warn),
        if failed.is_empty() {
            String::new()
        } else {
            format!("; failing problems: {}", failed.join(", "))
        }
    );
    Ok(if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The job mkb_eval.validate reads on stdin.
fn job(args: &ValidateArgs, problems: &[&Problem]) -> Result<Value> {
    let mut entries = Vec::new();
    for p in problems {
        let spec = ProblemSpec::from_problem(p).map_err(|e| anyhow!(e))?;
        entries.push(json!({
            "spec": spec,
            "validate": validate_job_entry(p),
            "starters": starters(p),
            "ideal_us": p.ideal_us(p.benchmark_shape()).map_err(|e| anyhow!(e))?,
        }));
    }
    Ok(json!({
        "format": VALIDATE_FORMAT,
        "device": args.device,
        "seed": args.seed,
        "correct_max_ratio": CORRECT_MAX_RATIO,
        "compile_near_ideal": COMPILE_NEAR_IDEAL,
        "problems": entries,
    }))
}

fn run_python(
    ctx: &Context,
    args: &ValidateArgs,
    selected: &[&Problem],
    results: &mut [ProblemResult],
    report: &mut Report,
    printer: &mut Printer,
) -> Result<()> {
    let job = job(args, selected)?;
    let spec = JudgeSpec {
        python: ctx.python.clone(),
        root: ctx.root.clone(),
        gpu: (args.device == Device::Cuda).then_some(0),
        log_file: None,
        backend: Default::default(),
    };
    let mut env = judge_env(&spec);
    if let Ok(v) = std::env::var("MKB_CACHE_DIR") {
        env.push(("MKB_CACHE_DIR".into(), v));
    }
    let mut child = Command::new(&ctx.python)
        .args(["-m", "mkb_eval.validate"])
        .current_dir(&ctx.root)
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} -m mkb_eval.validate", ctx.python.display()))?;
    {
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(serde_json::to_string(&job)?.as_bytes())?;
        stdin.write_all(b"\n")?;
    }
    let index: BTreeMap<String, usize> = results
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.clone(), i))
        .collect();
    let mut done = vec![false; results.len()];
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            eprintln!("mkb_eval.validate: {line}");
            continue;
        };
        let Some(i) = msg["problem"]
            .as_str()
            .and_then(|id| index.get(id))
            .copied()
        else {
            eprintln!("mkb_eval.validate: a line for no selected problem: {line}");
            continue;
        };
        let r = &mut results[i];
        if let Some(row) = msg.get("row") {
            let mut row: CheckRow = serde_json::from_value(row.clone())
                .with_context(|| format!("a row of mkb_eval.validate: {line}"))?;
            if let Some(v) = &selected[i].file.validate {
                row.apply_waivers(&v.waive);
            }
            r.rows.push(row);
        } else if let Some(t) = msg.get("timing") {
            r.timing = Some(t.clone());
        } else if msg.get("done").is_some() {
            done[i] = true;
            r.ok = !r.rows.iter().any(|x| x.status == Status::Fail);
            printer.problem(r);
            report.results.push(r.clone());
            write_files(report, args)?;
        }
    }
    let status = child.wait()?;
    for (i, r) in results.iter_mut().enumerate() {
        if done[i] {
            continue;
        }
        r.rows.push(CheckRow::new(
            &r.id,
            "reference",
            None,
            "validated",
            false,
            format!("mkb_eval.validate ended ({status}) before finishing this problem"),
        ));
        r.ok = false;
        printer.problem(r);
        report.results.push(r.clone());
    }
    write_files(report, args)?;
    Ok(())
}

/// The table on stdout, one problem at a time.
struct Printer {
    failures_only: bool,
    header: bool,
}

impl Printer {
    fn new(failures_only: bool) -> Printer {
        Printer {
            failures_only,
            header: false,
        }
    }

    fn problem(&mut self, r: &ProblemResult) {
        if !self.header {
            println!(
                "{:<4} {:<34} {:>11} {:<22} {:<6}  detail",
                "id", "check", "measured", "limit", "status"
            );
            self.header = true;
        }
        for row in &r.rows {
            if self.failures_only && row.status == Status::Pass {
                continue;
            }
            println!(
                "{:<4} {:<34} {:>11} {:<22} {:<6}  {}",
                row.problem,
                row.check,
                measured(row),
                row.limit,
                row.status,
                row.detail
            );
        }
        if let Some(t) = &r.timing {
            println!("{:<4} {}", r.id, timing_line(t));
        }
        if self.failures_only {
            let n = r.rows.iter().filter(|x| x.status == Status::Fail).count();
            println!(
                "{:<4} {} ({} checks, {n} failed)",
                r.id,
                if r.ok { "ok" } else { "FAILED" },
                r.rows.len()
            );
        }
    }
}

fn short_load_error(e: &LoadError, root: &Path) -> String {
    let mut e = e.clone();
    if let Ok(p) = e.path.strip_prefix(root) {
        e.path = p.to_path_buf();
    }
    e.to_string()
}

fn measured(row: &CheckRow) -> String {
    row.measured
        .as_ref()
        .map(Measured::to_string)
        .unwrap_or_else(|| "-".into())
}

fn num(v: &Value) -> String {
    v.as_f64()
        .map(|x| format!("{x:.1}"))
        .unwrap_or_else(|| "-".into())
}

fn timing_line(t: &Value) -> String {
    format!(
        "timing: t_ref {} us ({}), torch.compile {} us, floor {} us, ideal {} us (measured ceilings {} us)",
        num(&t["t_ref_us"]),
        t["t_ref_name"].as_str().unwrap_or("-"),
        num(&t["t_compile_us"]),
        num(&t["floor_us"]),
        num(&t["ideal_us"]),
        num(&t["ideal_measured_us"]),
    )
}

fn json_doc(report: &Report) -> Value {
    let rows: Vec<&CheckRow> = report.results.iter().flat_map(|r| &r.rows).collect();
    let count = |s: Status| rows.iter().filter(|r| r.status == s).count();
    json!({
        "format": VALIDATE_FORMAT,
        "device": report.device,
        "seed": report.seed,
        "command": report.command,
        "created": report.created,
        "summary": {
            "problems": report.results.len(),
            "failed_problems": report.results.iter().filter(|r| !r.ok).map(|r| r.id.clone()).collect::<Vec<_>>(),
            "checks": rows.len(),
            "failed": count(Status::Fail),
            "waived": count(Status::Waived),
            "warnings": count(Status::Warn),
        },
        "problems": report.results,
    })
}

fn markdown(report: &Report) -> String {
    let mut s = String::new();
    let doc = json_doc(report);
    let sum = &doc["summary"];
    s.push_str(&format!(
        "# mkb problems validate --device {}\n\n{} (seed {}; `{}`)\n\n{} problems, {} checks: {} failed, {} waived, {} warnings.\n\n",
        match report.device { Device::Cpu => "cpu", Device::Cuda => "cuda" },
        report.created,
        report.seed,
        report.command,
        sum["problems"],
        sum["checks"],
        sum["failed"],
        sum["waived"],
        sum["warnings"]
    ));
    if report.results.iter().any(|r| r.timing.is_some()) {
        s.push_str("## Benchmark shape timing (H200)\n\n| problem | t_ref us | t_ref formulation | torch.compile us | floor us | ideal us | ideal (measured ceilings) us | compile / ideal | eager us |\n|---|---|---|---|---|---|---|---|---|\n");
        for r in &report.results {
            let Some(t) = &r.timing else { continue };
            let eager = t["eager_us"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k} {}", num(v)))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let ratio = match (t["t_compile_us"].as_f64(), t["ideal_us"].as_f64()) {
                (Some(c), Some(i)) if i > 0.0 => format!("{:.2}", c / i),
                _ => "-".into(),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.id,
                num(&t["t_ref_us"]),
                t["t_ref_name"].as_str().unwrap_or("-"),
                num(&t["t_compile_us"]),
                num(&t["floor_us"]),
                num(&t["ideal_us"]),
                num(&t["ideal_measured_us"]),
                ratio,
                eager
            ));
        }
        s.push('\n');
    }
    s.push_str("## Problems\n\n| problem | result | checks | not passed |\n|---|---|---|---|\n");
    for r in &report.results {
        let bad: Vec<String> = r
            .rows
            .iter()
            .filter(|x| x.status != Status::Pass)
            .map(|x| format!("{} ({}, {})", x.check, measured(x), x.status))
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.id,
            if r.ok { "ok" } else { "**FAILED**" },
            r.rows.len(),
            md_cell(&bad.join("; "))
        ));
    }
    s.push_str("\n## Rows not passed\n\n| problem | check | measured | limit | status | detail |\n|---|---|---|---|---|---|\n");
    for row in report.results.iter().flat_map(|r| &r.rows) {
        if row.status != Status::Pass {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                row.problem,
                row.check,
                measured(row),
                md_cell(&row.limit),
                row.status,
                md_cell(&row.detail)
            ));
        }
    }
    s
}

fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn write_files(report: &Report, args: &ValidateArgs) -> Result<()> {
    if let Some(p) = &args.json {
        write_atomic(
            p,
            &(serde_json::to_string_pretty(&json_doc(report))? + "\n"),
        )?;
    }
    if let Some(p) = &args.markdown {
        write_atomic(p, &markdown(report))?;
    }
    Ok(())
}

fn write_atomic(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut bad = CheckRow::new("A01", "wrong:wrong_x", Some(0.4), "> 1", false, "a | b");
        bad.detail = "passes | everywhere".into();
        Report {
            device: Device::Cuda,
            seed: 1,
            command: "mkb problems validate".into(),
            created: "2026-12-01T00:00:00Z".into(),
            results: vec![ProblemResult {
                id: "A01".into(),
                title: "t".into(),
                ok: false,
                rows: vec![
                    CheckRow::new("A01", "ideal_time", Some(223.7), ">= 40 us", true, ""),
                    bad,
                ],
                timing: Some(
                    json!({"t_ref_us": 300.0, "t_ref_name": "f", "t_compile_us": 240.0,
                    "floor_us": 16.0, "ideal_us": 223.7, "ideal_measured_us": 225.0,
                    "eager_us": {"f": 300.0, "g": 310.0}}),
                ),
            }],
        }
    }

    #[test]
    fn json_and_markdown_name_failures_and_timing() {
        let r = report();
        let doc = json_doc(&r);
        assert_eq!(doc["summary"]["failed"], 1);
        assert_eq!(doc["summary"]["failed_problems"], json!(["A01"]));
        assert_eq!(doc["problems"][0]["rows"][1]["status"], "fail");
        assert_eq!(doc["problems"][0]["timing"]["t_ref_name"], "f");
        let md = markdown(&r);
        assert!(md.contains("| A01 | 300.0 | f | 240.0 |"), "{md}");
        assert!(md.contains("| 1.07 |"), "{md}");
        assert!(
            md.contains("| A01 | wrong:wrong_x | 0.4 | > 1 | FAIL | passes \\| everywhere |"),
            "{md}"
        );
        assert!(!md.contains("| A01 | ideal_time"), "{md}");
    }

    #[test]
    fn files_are_written_where_asked() {
        let tmp = tempfile::tempdir().unwrap();
        let args = ValidateArgs {
            problems: vec![],
            device: Device::Cpu,
            json: Some(tmp.path().join("sub/v.json")),
            markdown: Some(tmp.path().join("v.md")),
            seed: 1,
            static_only: true,
            failures_only: false,
        };
        write_files(&report(), &args).unwrap();
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(tmp.path().join("sub/v.json")).unwrap())
                .unwrap();
        assert_eq!(v["problems"][0]["id"], "A01");
        assert!(std::fs::read_to_string(tmp.path().join("v.md"))
            .unwrap()
            .contains("FAILED"));
    }
}
