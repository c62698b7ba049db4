//! mkb-core: the data model shared by every stage of the pipeline
//! (problems -> agent -> evaluation -> store -> analysis -> report)
//! and the problem registry that loads and validates `problems/`.

pub mod attempt;
pub mod dsl;
pub mod eval;
pub mod model;
pub mod prompt;
pub mod registry;
pub mod secret;
pub mod shape;
pub mod time;
pub mod validate;

pub use attempt::{AttemptKind, Budget, Condition, Direction, EndReason};
pub use dsl::{DslDescriptor, DslRegistry, DEFAULT_DSLS};
pub use eval::{Baseline, EvalMode, EvalReport, Timing, Verdict, INFRA_REASONS};
pub use model::{
    DType, Distribution, Dsl, Family, InputDecl, OutputDecl, Problem, ShapeKind, ShapeSet,
};
pub use registry::{LoadError, Registry};
pub use time::utc_now;

/// Version of the JSON-lines protocol spoken between `mkb` (Rust) and the Python evaluator.
/// Bump it on any incompatible change; both sides refuse a mismatch.
pub const PROTOCOL_VERSION: u32 = 2;
