//! mkb-eval: the evaluator pool that drives the Python GPU workers over JSON lines
//! (docs/protocol.md): judge processes, their supervision, and GPU exclusivity.

pub mod evaluator;
pub mod judge;
pub mod pool;
pub mod protocol;

pub use evaluator::Evaluator;
pub use judge::{Judge, JudgeError, JudgeSpec};
pub use pool::{EvalError, EvalPool, GpuSelection, PoolConfig};
pub use protocol::{
    Candidate, EvalRequest, EvalResponse, Hello, KeyedReport, Limits, TimingOptions,
};
