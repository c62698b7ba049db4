//! Evidence of `mkb solutions` and `mkb redteam`: `<dir>/<name>.json` (every report) and
//! `<dir>/<name>.md` (a table), both headed with the command, the date, the GPU and the versions
//! the judges reported; and the markdown tables and one-line phase summaries they hold.

use crate::common::{command_line, utc_now};
use anyhow::{Context as _, Result};
use mkb_core::{EvalMode, EvalReport};
use mkb_eval::EvalPool;
use std::fmt::Write as _;
use std::path::Path;

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

/// `static 0.01 s, load 0.52 s, ...` (phases that took no time are left out).
pub fn phases_line(p: &mkb_core::eval::Phases) -> String {
    p.items()
        .iter()
        .filter(|(_, v)| *v > 0.0)
        .map(|(k, v)| format!("{k} {v:.2} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One evaluated solution, as the summary tables need it.
struct Solved {
    problem: String,
    family: String,
    dsl: String,
    correct: bool,
    runtime_us: Option<f64>,
    pct_ideal: Option<f64>,
    speedup_eager: Option<f64>,
    speedup_compile: Option<f64>,
}

fn solved(rows: &[serde_json::Value]) -> Vec<Solved> {
    rows.iter()
        .filter_map(|r| {
            let rep = serde_json::from_value::<EvalReport>(r["report"].clone()).ok()?;
            let problem = r["problem"].as_str().unwrap_or("").to_string();
            let runtime_us = rep.runtime.as_ref().map(|t| t.median_us);
            Some(Solved {
                family: problem.chars().next().map(String::from).unwrap_or_default(),
                problem,
                dsl: r["dsl"].as_str().unwrap_or("").to_string(),
                correct: rep.verdict.as_str() == "correct",
                pct_ideal: match (rep.ideal_us, runtime_us) {
                    (Some(i), Some(t)) if t > 0.0 => Some(100.0 * i / t),
                    _ => None,
                },
                runtime_us,
                speedup_eager: rep.speedup_eager,
                speedup_compile: rep.speedup_compile,
            })
        })
        .collect()
}

/// A number with `p` decimals, or "-" where there is none.
fn opt(x: Option<f64>, p: usize) -> String {
    x.map(|v| format!("{v:.p$}")).unwrap_or_else(|| "-".into())
}

fn geomean(xs: &[f64]) -> Option<f64> {
    let xs: Vec<f64> = xs.iter().copied().filter(|x| *x > 0.0).collect();
    (!xs.is_empty()).then(|| (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// Per family and DSL: correct / evaluated, % of the roofline ideal (ideal / runtime: min and
/// median), geometric-mean speed-ups over eager and torch.compile (correct solutions only); then
/// per problem the two DSLs' runtimes and their ratio (slower / faster).
pub fn solutions_summary(rows: &[serde_json::Value]) -> String {
    let all = solved(rows);
    let mut s = String::from("| family | DSL | correct | % of ideal: min | median | geomean speedup vs eager | vs torch.compile |\n|---|---|---|---|---|---|---|\n");
    let mut groups: Vec<(String, String)> = all
        .iter()
        .map(|x| (x.family.clone(), x.dsl.clone()))
        .collect();
    groups.sort();
    groups.dedup();
    let f = opt;
    for (fam, dsl) in &groups {
        let g: Vec<&Solved> = all
            .iter()
            .filter(|x| &x.family == fam && &x.dsl == dsl)
            .collect();
        let ok: Vec<&&Solved> = g.iter().filter(|x| x.correct).collect();
        let pct: Vec<f64> = ok.iter().filter_map(|x| x.pct_ideal).collect();
        let eager: Vec<f64> = ok.iter().filter_map(|x| x.speedup_eager).collect();
        let comp: Vec<f64> = ok.iter().filter_map(|x| x.speedup_compile).collect();
        let _ = writeln!(
            s,
            "| {fam} | {dsl} | {} / {} | {} | {} | {} | {} |",
            ok.len(),
            g.len(),
            f(pct.iter().copied().reduce(f64::min), 1),
            f(median(&pct), 1),
            f(geomean(&eager), 2),
            f(geomean(&comp), 2),
        );
    }
    let mut problems: Vec<&str> = all.iter().map(|x| x.problem.as_str()).collect();
    problems.sort();
    problems.dedup();
    let mut pairs = String::new();
    for p in problems {
        let rt = |dsl: &str| {
            all.iter()
                .find(|x| x.problem == p && x.dsl == dsl && x.correct)
                .and_then(|x| x.runtime_us)
        };
        if let (Some(c), Some(t)) = (rt("cute"), rt("tirx")) {
            let _ = writeln!(
                pairs,
                "| {p} | {c:.1} | {t:.1} | {:.3} | {} |",
                c.max(t) / c.min(t),
                if c <= t { "cute" } else { "tirx" }
            );
        }
    }
    if !pairs.is_empty() {
        s.push_str(
            "\n| problem | cute us | tirx us | slower / faster | faster |\n|---|---|---|---|---|\n",
        );
        s.push_str(&pairs);
    }
    s
}

pub fn solutions_markdown(rows: &[serde_json::Value]) -> String {
    let mut s = String::from("| problem | DSL | verdict | compile s | runtime us (IQR) | t_ref us (formulation) | speedup vs eager | speedup vs torch.compile | floor us | ideal us | % of ideal | eval s | phases |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let Ok(rep) = serde_json::from_value::<EvalReport>(r["report"].clone()) else {
            continue;
        };
        let f = opt;
        let _ = writeln!(
            s,
            "| {} {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
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
            f(
                rep.ideal_us
                    .zip(rep.runtime.as_ref().map(|t| t.median_us))
                    .filter(|(_, t)| *t > 0.0)
                    .map(|(i, t)| 100.0 * i / t),
                1
            ),
            rep.eval_s,
            rep.phases
                .as_ref()
                .map(phases_line)
                .unwrap_or_else(|| "-".into())
        );
    }
    s
}

/// The red team's table: each case with the verdict it expected and the one it got.
pub fn redteam_markdown(rows: &[serde_json::Value]) -> String {
    let mut md =
        String::from("| case | problem | DSL | expected | got | ok |\n|---|---|---|---|---|---|\n");
    for r in rows {
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
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        problem: &str,
        dsl: &str,
        verdict: &str,
        us: f64,
        ideal: f64,
        se: f64,
        sc: f64,
    ) -> serde_json::Value {
        serde_json::json!({"problem": problem, "slug": "x", "dsl": dsl, "report": {
            "verdict": verdict, "mode": "full", "ideal_us": ideal, "speedup_eager": se, "speedup_compile": sc,
            "runtime": {"median_us": us, "iqr_us": 1.0, "reps": 100, "timer": "cuda_event"}}})
    }

    #[test]
    fn the_summary_gives_family_figures_and_dsl_ratios() {
        let rows = vec![
            row("A01", "cute", "correct", 100.0, 90.0, 4.0, 1.0),
            row("A02", "cute", "correct", 200.0, 160.0, 1.0, 1.21),
            row("A01", "tirx", "correct", 125.0, 90.0, 2.0, 1.0),
            // An incorrect solution counts in "evaluated", not in the figures.
            row("A02", "tirx", "incorrect", 10.0, 160.0, 50.0, 50.0),
        ];
        let s = solutions_summary(&rows);
        // cute: 90% and 80% of ideal; geomeans 2.00 and 1.10.
        assert!(
            s.contains("| A | cute | 2 / 2 | 80.0 | 85.0 | 2.00 | 1.10 |"),
            "{s}"
        );
        assert!(
            s.contains("| A | tirx | 1 / 2 | 72.0 | 72.0 | 2.00 | 1.00 |"),
            "{s}"
        );
        // A01's two DSLs: 125 / 100; A02 has no correct tirx row, so no ratio.
        assert!(s.contains("| A01 | 100.0 | 125.0 | 1.250 | cute |"), "{s}");
        assert!(!s.contains("| A02 |"), "{s}");
        let t = solutions_markdown(&rows);
        assert!(t.contains("| 90.0 |") && t.contains("| 72.0 |"), "{t}");
    }
}
