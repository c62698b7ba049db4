//! The simulated example report: a simulated run with a fixed seed, analysed with the default
//! options (`cargo run --release -p mkb-analysis --example example_report -- PATH` writes it).
//! The committed docs/example-report.html is not this one but the report of the replay
//! experiment (`mkb report bench/h200/replay-demo -o docs/example-report.html`, README).

use super::{render_report_with, ReportOptions};
use crate::analysis::Analysis;
use crate::row::AttemptRow;

/// Seed of the simulated example report.
pub const EXAMPLE_SEED: u64 = 20261129;

/// The example report: simulate [`crate::SimConfig::example`] with `seed`, analyse it with
/// the default options and render it, with `command` (how it was made) in the header.
/// Returns the rows, the analysis and the HTML.
pub fn example_report(seed: u64, command: &str) -> (Vec<AttemptRow>, Analysis, String) {
    let cfg = crate::SimConfig::example();
    let rows = crate::simulate(&cfg, seed);
    let a = crate::analyze(&rows, &crate::AnalysisOptions::default());
    let opts = ReportOptions {
        title: Some(format!(
            "MetaKernelBench example report (simulated run {}, seed {seed})",
            cfg.run_name
        )),
        link_prefix: String::new(),
        command: Some(command.to_string()),
    };
    let html = render_report_with(&a, &rows, &opts);
    (rows, a, html)
}

/// Write the example report to `path` (see [`example_report`]).
pub fn write_example_report(
    path: &std::path::Path,
    seed: u64,
    command: &str,
) -> anyhow::Result<Analysis> {
    let (_, a, html) = example_report(seed, command);
    std::fs::write(path, html).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(a)
}
