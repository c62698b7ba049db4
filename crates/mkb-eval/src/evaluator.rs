//! The `Evaluator` trait: what the agent loop and the scheduler need from an evaluator
//! (evaluate a request, is there a GPU, is a DSL installed), so that they run against the real
//! [`EvalPool`] in production and against a scripted fake in unit tests.

use crate::pool::{EvalError, EvalPool, PoolStats};
use crate::protocol::{EvalRequest, EvalResponse};
use mkb_core::{Dsl, EvalMode, EvalReport};
use std::future::Future;

/// An evaluator of candidate kernels. Futures are `Send` so that callers can run them in
/// spawned tasks.
pub trait Evaluator: Send + Sync {
    /// Evaluate a group of candidates (one report per candidate, keyed as requested).
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalResponse, EvalError>> + Send;

    /// Can requests that need a GPU (test, benchmark, full) run here?
    fn has_gpu(&self) -> bool;

    /// Is this DSL importable where requests of `mode` run?
    fn dsl_available(&self, dsl: Dsl, mode: EvalMode) -> bool;

    /// How its judges and queues were used (an evaluator without judges: None).
    fn stats(&self) -> Option<PoolStats> {
        None
    }

    /// Evaluate one candidate and return its report.
    fn evaluate_one(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalReport, EvalError>> + Send {
        async move {
            let mut resp = self.evaluate(req).await?;
            resp.reports
                .pop()
                .map(|k| k.report)
                .ok_or_else(|| EvalError::Rejected("the judge returned no report".into()))
        }
    }
}

impl Evaluator for EvalPool {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalResponse, EvalError>> + Send {
        self.evaluate_with(req, None)
    }

    fn has_gpu(&self) -> bool {
        EvalPool::has_gpu(self)
    }

    fn dsl_available(&self, dsl: Dsl, mode: EvalMode) -> bool {
        EvalPool::dsl_available(self, dsl, mode)
    }

    fn stats(&self) -> Option<PoolStats> {
        Some(EvalPool::stats(self))
    }

    fn evaluate_one(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalReport, EvalError>> + Send {
        EvalPool::evaluate_one(self, req)
    }
}

/// A shared evaluator (e.g. one that a test keeps a handle on) is an evaluator.
impl<T: Evaluator> Evaluator for std::sync::Arc<T> {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalResponse, EvalError>> + Send {
        T::evaluate(self, req)
    }

    fn has_gpu(&self) -> bool {
        T::has_gpu(self)
    }

    fn dsl_available(&self, dsl: Dsl, mode: EvalMode) -> bool {
        T::dsl_available(self, dsl, mode)
    }

    fn stats(&self) -> Option<PoolStats> {
        T::stats(self)
    }

    fn evaluate_one(
        &self,
        req: EvalRequest,
    ) -> impl Future<Output = Result<EvalReport, EvalError>> + Send {
        T::evaluate_one(self, req)
    }
}
