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

pub fn solutions_markdown(rows: &[serde_json::Value]) -> String {
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
