//! mkb-store: the run store (one SQLite file per run directory): its schema and migrations,
//! the records `mkb run` and `mkb rescore` write (attempts, skills, tool and final evaluations,
//! evaluation sets), and the few fields of the stored run config that readers need. mkb-run
//! writes it; mkb-analysis and the CLI's analysis commands read it without depending on the
//! runner (no async runtime, no HTTP client).

mod run_config;
mod store;

pub use run_config::{Price, StoredConfig, StoredModel, CONFIG_META};
pub use store::{
    parse_end_reason, write_atomic, AttemptRecord, EvalSetRecord, FinalEvalRecord, SkillRecord,
    Store, ToolEvalRecord, MIGRATIONS, OLDEST_READABLE, ORIGINAL_SET, SCHEMA_VERSION,
};
