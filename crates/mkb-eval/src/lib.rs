//! mkb-eval: the evaluator pool that drives the Python GPU workers over JSON lines
//! (docs/protocol.md): judge processes, their supervision, and GPU exclusivity; the problem
//! spec and the red-team manifest as the Python side receives them.

pub mod evaluator;
pub mod judge;
pub mod pool;
pub mod protocol;
pub mod redteam;
pub mod spec;

pub use evaluator::Evaluator;
pub use judge::{Backend, Judge, JudgeError, JudgeSpec};
pub use pool::{EvalError, EvalPool, GpuSelection, PoolConfig, DEFAULT_JUDGES_PER_GPU};
pub use protocol::{
    Candidate, EvalRequest, EvalResponse, Hello, KeyedReport, Limits, TimingOptions,
};
pub use spec::{ProblemSpec, SpecBundle};
