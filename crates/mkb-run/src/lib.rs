//! mkb-run: experiment config, scheduler, SQLite store and resume.

pub mod config;
pub mod lock;
pub mod provenance;
pub mod rescore;
pub mod rows;
pub mod scheduler;
pub mod store;

pub use config::ExperimentConfig;
pub use mkb_core::utc_now;
pub use mkb_eval::pool::parse_gpus;
pub use scheduler::{run_experiment, RunOptions, RunSummary};
