//! `mkb problems list` and `mkb problems show`: the registry as a table (with each problem's
//! variants, one per registered DSL it is posed in), one problem in detail, and the exact
//! prompt an agent sees for one variant; `mkb problems spec`: the problem specs and the report
//! template as the judge receives them (crates/mkb-eval/src/spec.rs), for the Python tools;
//! `mkb problems validate`: every validation check (cmd_problems_validate.rs).

use crate::common::Context;
use anyhow::{anyhow, Result};
use clap::Subcommand;
use mkb_core::prompt::variant_prompt;
use mkb_core::registry::dims_literal;
use mkb_core::{Budget, Dsl};
use mkb_eval::SpecBundle;
use std::process::ExitCode;

#[path = "cmd_problems_validate.rs"]
mod validate;

#[derive(Subcommand, Debug)]
pub enum ProblemsCmd {
    /// One line per problem: id, title, benchmark shape, ideal time, variants, expert solutions.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One problem: its declaration, or with --prompt exactly what an agent sees.
    Show {
        /// Id (C01), slug (softmax) or folder name (C01_softmax).
        problem: String,
        /// The variant (needed with --prompt).
        #[arg(long)]
        dsl: Option<Dsl>,
        /// Print the variant prompt (default budget) instead of the declaration.
        #[arg(long)]
        prompt: bool,
        #[arg(long)]
        json: bool,
    },
    /// JSON of what every evaluate request carries: the protocol version, the report template
    /// and the resolved spec of each problem (python -m mkb_eval.cli and friends read it).
    Spec {
        /// Problems (ids, slugs or family letters); default all.
        problems: Vec<String>,
    },
    /// Validate problems (docs/problems.md): static checks, then the reference,
    /// the [validate] formulations and the inputs' influence in Python (on the GPU with
    /// --device cuda, plus the baselines' timing). Prints a table; exit status 1 on a failure.
    Validate(validate::ValidateArgs),
}

pub fn run(ctx: &Context, cmd: ProblemsCmd) -> Result<ExitCode> {
    if let ProblemsCmd::Validate(args) = cmd {
        return validate::validate(ctx, args);
    }
    let reg = ctx.registry()?;
    match cmd {
        ProblemsCmd::Validate(_) => unreachable!("handled above"),
        ProblemsCmd::Spec { problems } => {
            let selected = reg.select(&problems).map_err(|e| anyhow!(e))?;
            let bundle = SpecBundle::new(selected, None).map_err(|e| anyhow!(e))?;
            crate::common::emit(&(serde_json::to_string_pretty(&bundle)? + "\n"))?;
        }
        ProblemsCmd::List { json } => {
            if json {
                let rows: Vec<serde_json::Value> = reg
                    .problems()
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "id": p.id(), "slug": p.slug(), "family": p.family, "title": p.title(),
                            "benchmark": p.benchmark_shape().dims,
                            "ideal_us": p.ideal_us(p.benchmark_shape()).ok(),
                            "variants": p.variants,
                            "solutions": p.variants.iter().filter(|d| p.has_solution(**d)).map(|d| d.as_str()).collect::<Vec<_>>(),
                            "dir": p.dir,
                        })
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!(
                    "{:<4} {:<22} {:<34} {:<26} {:>9}  {:<16} solutions",
                    "id", "slug", "title", "benchmark shape", "ideal us", "variants"
                );
                for p in reg.problems() {
                    let variants: Vec<&str> = p.variants.iter().map(|d| d.as_str()).collect();
                    let sols: Vec<&str> = p
                        .variants
                        .iter()
                        .filter(|d| p.has_solution(**d))
                        .map(|d| d.as_str())
                        .collect();
                    println!(
                        "{:<4} {:<22} {:<34} {:<26} {:>9.1}  {:<16} {}",
                        p.id(),
                        p.slug(),
                        truncate(p.title(), 34),
                        dims_literal(&p.benchmark_shape().dims),
                        p.ideal_us(p.benchmark_shape()).unwrap_or(f64::NAN),
                        variants.join(","),
                        if sols.is_empty() {
                            "-".to_string()
                        } else {
                            sols.join(",")
                        }
                    );
                }
                println!("{} problems", reg.problems().len());
            }
        }
        ProblemsCmd::Show {
            problem,
            dsl,
            prompt,
            json,
        } => {
            let p = reg
                .get(&problem)
                .ok_or_else(|| anyhow!("no problem {problem:?}; see `mkb problems list`"))?;
            if prompt {
                let names: Vec<&str> = p.variants.iter().map(|d| d.as_str()).collect();
                let dsl = dsl.ok_or_else(|| anyhow!("--prompt needs --dsl {}", names.join("|")))?;
                let dsl = ctx.dsl(dsl)?;
                if !p.has_variant(dsl) {
                    return Err(anyhow!(
                        "{} is not posed in {dsl} (its variants: {})",
                        p.id(),
                        names.join(", ")
                    ));
                }
                let desc = ctx.dsls.require(dsl).map_err(|e| anyhow!(e))?;
                let vp = variant_prompt(p, desc, &Budget::default()).map_err(|e| {
                    anyhow!(
                        "building the prompt of {} ({dsl}): {e} (is {} there?)",
                        p.id(),
                        desc.brief_path().display()
                    )
                })?;
                if json {
                    println!(
                        "{}",
                        serde_json::json!({"common": vp.common, "dsl_section": vp.dsl_section})
                    );
                } else {
                    print!("{}", vp.render());
                }
            } else if json {
                println!("{}", serde_json::to_string_pretty(p)?);
            } else {
                println!(
                    "{} {} ({}): {}",
                    p.id(),
                    p.slug(),
                    p.family.title(),
                    p.title()
                );
                println!("folder: {}", p.dir.display());
                for i in &p.file.inputs {
                    println!(
                        "  input  {:<8} {:<10} {:?}",
                        i.name,
                        i.dtype.as_str(),
                        i.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>()
                    );
                }
                for o in &p.file.outputs {
                    let t = o.tolerance();
                    println!(
                        "  output {:<8} {:<10} {:?} atol {}xRMS rtol {}",
                        o.name,
                        o.dtype.as_str(),
                        o.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
                        t.atol,
                        t.rtol
                    );
                }
                for s in &p.file.shapes {
                    println!(
                        "  shape  {:<10} {:<9} {}",
                        s.name,
                        format!("{:?}", s.kind).to_lowercase(),
                        dims_literal(&s.dims)
                    );
                }
                println!("  eager baselines: {}", p.file.eager.join(", "));
                println!(
                    "  ideal time of the benchmark shape: {:.1} us",
                    p.ideal_us(p.benchmark_shape()).unwrap_or(f64::NAN)
                );
                println!(
                    "  variants: {}",
                    p.variants
                        .iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                let sols: Vec<&str> = p
                    .variants
                    .iter()
                    .filter(|d| p.has_solution(**d))
                    .map(|d| d.as_str())
                    .collect();
                println!(
                    "  expert solutions: {}",
                    if sols.is_empty() {
                        "none".into()
                    } else {
                        sols.join(", ")
                    }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}
