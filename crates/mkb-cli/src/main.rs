//! The `mkb` binary: a thin command-line front end, one module per subcommand.

mod cmd_analysis;
mod cmd_eval;
mod cmd_problems;
mod cmd_redteam;
mod cmd_run;
mod cmd_solutions;
mod common;
mod evidence;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "mkb",
    version,
    about = "MetaKernelBench: cross-DSL skill transfer for GPU kernel agents"
)]
struct Cli {
    /// Repository root (holds problems/, docs/dsl/, python/). Default: found from the current folder.
    #[arg(long, global = true)]
    root: Option<PathBuf>,
    /// Python interpreter of the evaluator. Default: $MKB_PYTHON, else <root>/.venv/bin/python, else python3.
    #[arg(long, global = true)]
    python: Option<PathBuf>,
    /// Run candidate code WITHOUT the OS sandbox (bubblewrap) where it cannot be set up. Unsafe:
    /// a candidate can then read this machine's files and processes; logged and recorded in
    /// every report's env (docs/threat-model.md).
    #[arg(long, global = true)]
    unsafe_no_sandbox: bool,
    /// More logging (-v info, -vv debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List and show problems.
    Problems {
        #[command(subcommand)]
        cmd: cmd_problems::ProblemsCmd,
    },
    /// Evaluate one kernel file on one problem variant.
    Eval(cmd_eval::EvalArgs),
    /// Evaluate the expert solutions (compile-only without a GPU).
    Solutions(cmd_solutions::SolutionsArgs),
    /// Run the red-team set of tests/adversarial/ and compare verdicts with the manifest
    /// (--list: print the checked cases as JSON).
    Redteam(cmd_redteam::RedteamArgs),
    /// Run (or resume) an experiment: solo, distill, skill-conditioned, controls, final evaluation.
    Run(cmd_run::RunArgs),
    /// Evaluate every final kernel of a run again into a new, named evaluation set (the
    /// original kept); `analyze/report/export --eval-set NAME` read it.
    Rescore(cmd_run::RescoreArgs),
    /// What a run holds and what it still lacks.
    Status(cmd_run::StatusArgs),
    /// Paired lift with CIs, regressions, source above/below, controls: tables, --json or --csv.
    Analyze(cmd_analysis::AnalyzeArgs),
    /// A run's attempts as parquet, csv or jsonl (schema: docs/analysis.md).
    Export(cmd_analysis::ExportArgs),
    /// One self-contained HTML report of a run.
    Report(cmd_analysis::ReportArgs),
    /// Write a synthetic run with a known true lift into a store.
    Simulate(cmd_analysis::SimulateArgs),
    /// Problems and runs needed to detect a given lift (by simulation).
    Power(cmd_analysis::PowerArgs),
}

/// A closed stdout or stderr (`mkb analyze | head`) ends the command quietly. Rust ignores
/// SIGPIPE, so `print!` panics on the EPIPE it gets instead; that one panic becomes a quiet
/// exit here, whichever command or thread printed. Every other panic is reported as usual.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let msg = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to std") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = Cli::parse();
    common::init_tracing(cli.verbose);
    if cli.unsafe_no_sandbox {
        // Before any thread exists; judges inherit it through their MKB_EVAL_* allow-list.
        std::env::set_var(mkb_eval::judge::UNSAFE_ENV, "1");
        tracing::warn!("--unsafe-no-sandbox: candidate code will run WITHOUT the OS sandbox");
        eprintln!("WARNING: --unsafe-no-sandbox: candidate code runs without the OS sandbox (docs/threat-model.md)");
    }
    let ctx = match common::Context::new(cli.root.clone(), cli.python.clone()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.cmd {
        Cmd::Problems { cmd } => cmd_problems::run(&ctx, cmd),
        Cmd::Eval(args) => common::block_on(cmd_eval::eval(&ctx, args)),
        Cmd::Solutions(args) => common::block_on(cmd_solutions::solutions(&ctx, args)),
        Cmd::Redteam(args) => common::block_on(cmd_redteam::redteam(&ctx, args)),
        Cmd::Run(args) => common::block_on(cmd_run::run(&ctx, args)),
        Cmd::Rescore(args) => common::block_on(cmd_run::rescore(&ctx, args)),
        Cmd::Status(args) => cmd_run::status(&ctx, args),
        Cmd::Analyze(args) => cmd_analysis::analyze_cmd(&ctx, args),
        Cmd::Export(args) => cmd_analysis::export_cmd(&ctx, args),
        Cmd::Report(args) => cmd_analysis::report_cmd(&ctx, args),
        Cmd::Simulate(args) => cmd_analysis::simulate_cmd(&ctx, args),
        Cmd::Power(args) => cmd_analysis::power_cmd(&ctx, args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
