//! mkb-analysis: paired statistics, tables, exports, the HTML report, simulation and power for
//! MetaKernelBench (docs/design.md, "Scoring"; the user-facing description is docs/analysis.md).
//!
//! Everything starts from a slice of [`AttemptRow`] (one per attempt, from the run store through
//! [`rows_from_store`] / [`rows_from_eval_set`], or from [`simulate()`]) and is pure:
//! - `mkb analyze`: [`analyze`] -> [`Analysis`] (serde: the `--json` output), [`render_tables`]
//!   (terminal), [`to_csv`] (one row per cell; also `table::source_tables_csv`,
//!   `table::usage_csv`);
//! - `mkb export`: [`export()`] (parquet / csv / jsonl, schema [`EXPORT_COLUMNS`]);
//! - `mkb report`: [`render_report`] / [`render_report_with`] (self-contained HTML);
//! - `mkb simulate`: [`simulate()`] with [`SimConfig`]; [`coverage_study`] checks the CI on it;
//! - `mkb power`: [`power()`] with [`PowerConfig`], [`render_power`], [`fit_sim_config`];
//! - the example report of docs/: [`report::write_example_report`].

pub mod analysis;
pub mod bootstrap;
pub mod export;
pub mod from_store;
pub mod headline;
pub mod power;
pub mod practice;
pub mod report;
pub mod rng;
pub mod row;
pub mod simulate;
pub mod stats;
pub mod table;

pub use analysis::{analyze, Analysis, AnalysisOptions, CellStats, DEFAULT_SEED};
pub use export::{export, export_schema_markdown, ExportFormat, EXPORT_COLUMNS};
pub use from_store::{rows_from_eval_set, rows_from_store, write_simulated};
pub use headline::{Classifier, Headline, Standing};
pub use power::{fit_sim_config, power, render_power, PowerConfig, PowerReport};
pub use report::{render_report, render_report_with, ReportOptions};
pub use row::{AttemptRow, Outcome};
pub use simulate::{
    coverage_study, simulate, try_simulate, CoverageConfig, CoverageReport, SimConfig, SimModel,
};
pub use table::{render_tables, to_csv};
