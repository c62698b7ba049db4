//! `mkb solutions`: evaluate the expert solutions of the selected problems in every DSL (all
//! at once, through the pool), print each report and a summary table, and optionally write the
//! evidence files (crate::evidence).

use crate::cmd_eval::{describe, PoolArgs};
use crate::common::Context;
use crate::evidence::{phases_line, solutions_markdown, solutions_summary, write_evidence};
use anyhow::{anyhow, Context as _, Result};
use clap::Args;
use mkb_core::{Dsl, EvalReport};
use mkb_eval::EvalRequest;
use std::path::PathBuf;
use std::process::ExitCode;

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
    let dsls: Vec<Dsl> = match args.dsl {
        Some(d) => vec![ctx.dsl(d)?],
        None => ctx.dsls.dsls(),
    };
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
            &format!(
                "{}\n{}",
                solutions_summary(&rows),
                solutions_markdown(&rows)
            ),
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
