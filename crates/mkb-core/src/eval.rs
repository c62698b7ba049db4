//! The result of evaluating one candidate kernel: the verdict and, when it ran on a GPU,
//! its timing against the PyTorch baselines. This is the Rust mirror of the evaluator's
//! JSON response (docs/protocol.md); every stage after evaluation reads these types.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Final verdict of one evaluation. Ordered from "failed earliest" to "passed".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The kernel did not compile (or `build` raised) in the variant's DSL.
    CompileError,
    /// The static DSL-use check rejected the source.
    StaticCheckFailed,
    /// Wrong outputs, mutated inputs, a forbidden op or kernel at run time, or timing integrity.
    Incorrect,
    /// A phase ran past its time limit.
    Timeout,
    /// The candidate's process died or raised at run time (CUDA fault, exception, OOM).
    Crashed,
    /// Compiled (compile mode) or passed every check (test / bench / full modes).
    Correct,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::CompileError => "compile_error",
            Verdict::StaticCheckFailed => "static_check_failed",
            Verdict::Incorrect => "incorrect",
            Verdict::Timeout => "timeout",
            Verdict::Crashed => "crashed",
            Verdict::Correct => "correct",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an evaluation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalMode {
    /// Static check + build for every shape set, no execution (runs without a GPU, sm_90a).
    Compile,
    /// + correctness on the check shapes (GPU).
    Test,
    /// + correctness on the benchmark shape and timing against eager PyTorch (GPU).
    Bench,
    /// The final evaluation: everything, including torch.compile and the end-to-end floor.
    Full,
}

impl EvalMode {
    pub fn as_str(self) -> &'static str {
        match self {
            EvalMode::Compile => "compile",
            EvalMode::Test => "test",
            EvalMode::Bench => "bench",
            EvalMode::Full => "full",
        }
    }
    pub fn needs_gpu(self) -> bool {
        !matches!(self, EvalMode::Compile)
    }
}

impl std::str::FromStr for EvalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compile" => Ok(EvalMode::Compile),
            "test" => Ok(EvalMode::Test),
            "bench" => Ok(EvalMode::Bench),
            "full" => Ok(EvalMode::Full),
            _ => Err(format!("unknown mode {s:?} (compile, test, bench, full)")),
        }
    }
}

/// Runtime statistics of one timed callable, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub median_us: f64,
    /// Interquartile range (p75 - p25).
    pub iqr_us: f64,
    pub reps: u32,
    /// Which timer produced the numbers (e.g. "cuda_event").
    pub timer: String,
    /// Per-call wall clock over a batch of calls closed by a device-wide sync (cross-check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_us_per_call: Option<f64>,
}

/// A PyTorch baseline timed in the same session as the candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub name: String,
    /// "eager" or "compile".
    pub kind: String,
    pub timing: Timing,
}

/// One evaluation's outcome, as the judge reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub verdict: Verdict,
    pub mode: EvalMode,
    /// Machine-readable failure code (e.g. "mismatch", "input_mutated", "forbidden_kernel").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One human-readable paragraph: what failed where, or a summary of the pass.
    #[serde(default)]
    pub message: String,
    /// Seconds spent in `build()` summed over shape sets (never counted as runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Timing>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub baselines: Vec<Baseline>,
    /// Fastest eager formulation (t_ref) and its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ref_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ref_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_eager: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_compile: Option<f64>,
    /// End-to-end floor: an empty kernel timed the same way, in the same session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub floor_us: Option<f64>,
    /// Names of the GPU kernels a checked call launched (from the candidate's DSL module).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<String>,
    /// Free-form facts: GPU, clocks, versions, per-check details.
    #[serde(default)]
    pub env: serde_json::Value,
    #[serde(default)]
    pub checks: serde_json::Value,
    /// The candidate's captured output and the evaluator's notes, trimmed.
    #[serde(default)]
    pub log: String,
    /// Wall seconds the whole evaluation took (compile + checks + timing).
    #[serde(default)]
    pub eval_s: f64,
}

impl EvalReport {
    pub fn is_correct(&self) -> bool {
        self.verdict == Verdict::Correct
    }

    /// Score of ARCHITECTURE.md: t_ref / t when correct with a runtime, else 0.
    pub fn score(&self) -> f64 {
        match (&self.runtime, self.t_ref_us, self.verdict) {
            (Some(rt), Some(tref), Verdict::Correct) if rt.median_us > 0.0 => tref / rt.median_us,
            _ => 0.0,
        }
    }

    /// A report for a failure the evaluator itself could not run into (e.g. the worker died).
    pub fn infrastructure(mode: EvalMode, verdict: Verdict, reason: &str, message: String) -> Self {
        EvalReport {
            verdict,
            mode,
            reason: Some(reason.to_string()),
            message,
            compile_s: None,
            runtime: None,
            baselines: vec![],
            t_ref_us: None,
            t_ref_name: None,
            speedup_eager: None,
            speedup_compile: None,
            floor_us: None,
            kernels: vec![],
            env: serde_json::Value::Null,
            checks: serde_json::Value::Null,
            log: String::new(),
            eval_s: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_is_zero_unless_correct() {
        let mut r =
            EvalReport::infrastructure(EvalMode::Full, Verdict::Incorrect, "x", String::new());
        r.runtime = Some(Timing {
            median_us: 50.0,
            iqr_us: 1.0,
            reps: 100,
            timer: "cuda_event".into(),
            wall_us_per_call: None,
        });
        r.t_ref_us = Some(100.0);
        assert_eq!(r.score(), 0.0);
        r.verdict = Verdict::Correct;
        assert!((r.score() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn parses_minimal_json() {
        let r: EvalReport = serde_json::from_str(
            r#"{"verdict":"compile_error","mode":"compile","message":"boom"}"#,
        )
        .unwrap();
        assert_eq!(r.verdict, Verdict::CompileError);
        assert_eq!(r.message, "boom");
    }
}
