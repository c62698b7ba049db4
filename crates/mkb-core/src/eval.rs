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
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub median_us: f64,
    /// Interquartile range (p75 - p25).
    pub iqr_us: f64,
    pub reps: u32,
    /// Which timer produced the numbers (e.g. "cuda_event").
    pub timer: String,
    /// Per-call wall clock over a batch of calls closed by a device-wide sync (cross-check).
    #[serde(default)]
    pub wall_us_per_call: Option<f64>,
}

/// A PyTorch baseline timed in the same session as the candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub name: String,
    /// "eager" or "compile".
    pub kind: String,
    pub timing: Timing,
}

/// Wall seconds of each phase of one evaluation (docs/evaluator.md "Phases"). Phases that did
/// not run are 0; `total` is the whole evaluation of this candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Phases {
    #[serde(rename = "static")]
    pub static_check: f64,
    pub load: f64,
    pub build: f64,
    pub correctness: f64,
    pub baselines: f64,
    pub timing: f64,
    pub recheck: f64,
    pub total: f64,
}

impl Phases {
    /// `(name, seconds)` in the order the phases run (for text output).
    pub fn items(&self) -> [(&'static str, f64); 8] {
        [
            ("static", self.static_check),
            ("load", self.load),
            ("build", self.build),
            ("correctness", self.correctness),
            ("baselines", self.baselines),
            ("timing", self.timing),
            ("recheck", self.recheck),
            ("total", self.total),
        ]
    }
}

/// One evaluation's outcome, as the judge reports it. This struct is the one definition of the
/// report's shape: every field is always serialized (None as null), so [`EvalReport::template`]
/// lists them all; the judge fills a copy of that template (sent in every evaluate request), and a
/// report on the wire must hold exactly its fields ([`EvalReport::from_wire`]). Stored reports
/// of older versions may lack the later fields (serde defaults); no field was ever removed, so an
/// unknown field is an error everywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalReport {
    pub verdict: Verdict,
    pub mode: EvalMode,
    /// Machine-readable failure code (e.g. "mismatch", "input_mutated", "forbidden_kernel";
    /// "timing_check_failed" when a secretly checked timed repetition was wrong,
    /// "timing_impossible" when the median beats the roofline or the empty-kernel floor; the full
    /// list is in docs/protocol.md).
    #[serde(default)]
    pub reason: Option<String>,
    /// One human-readable paragraph: what failed where, or a summary of the pass.
    #[serde(default)]
    pub message: String,
    /// Seconds spent in `build()` summed over shape sets (never counted as runtime).
    #[serde(default)]
    pub compile_s: Option<f64>,
    #[serde(default)]
    pub runtime: Option<Timing>,
    #[serde(default)]
    pub baselines: Vec<Baseline>,
    /// Fastest eager formulation (t_ref) and its name.
    #[serde(default)]
    pub t_ref_us: Option<f64>,
    #[serde(default)]
    pub t_ref_name: Option<String>,
    #[serde(default)]
    pub speedup_eager: Option<f64>,
    #[serde(default)]
    pub speedup_compile: Option<f64>,
    /// End-to-end floor: an empty kernel timed the same way, in the same session.
    #[serde(default)]
    pub floor_us: Option<f64>,
    /// Names of the GPU kernels a checked call launched (from the candidate's DSL module).
    #[serde(default)]
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
    /// The problem's roofline time on this GPU: max(bytes / bandwidth, flops / peak), with the
    /// ceilings measured by the judge (absent in reports from before it existed).
    #[serde(default)]
    pub ideal_us: Option<f64>,
    /// Per-phase wall seconds.
    #[serde(default)]
    pub phases: Option<Phases>,
}

/// Failure codes that say nothing about the candidate: the machine or the evaluator failed
/// (verdict `crashed`). Python's `mkb_eval.report_text.INFRA_REASONS` is the same list (a test
/// checks that). `mkb` retries such an evaluation and, if it keeps failing, records it as not
/// evaluated, never as a score (docs/protocol.md, "Infrastructure failures").
pub const INFRA_REASONS: [&str; 6] = [
    "no_gpu",
    "dsl_unavailable",
    "judge_error",
    "profiler_error",
    "runner_killed",
    "host_overload",
];

/// Set by `mkb` (not the judge) when the judge process itself died or failed to start on
/// every try: also an infrastructure failure.
pub const JUDGE_FAILED: &str = "judge_failed";

/// The runner was killed from outside (`runner_killed`); when that reproduces on every try it
/// is the candidate's own doing and `mkb` records `crashed` with this reason instead.
pub const PROCESS_DIED: &str = "process_died";

impl EvalReport {
    pub fn is_correct(&self) -> bool {
        self.verdict == Verdict::Correct
    }

    /// Score of docs/design.md: t_ref / t when correct with a runtime, else 0.
    pub fn score(&self) -> f64 {
        match (&self.runtime, self.t_ref_us, self.verdict) {
            (Some(rt), Some(tref), Verdict::Correct) if rt.median_us > 0.0 => tref / rt.median_us,
            _ => 0.0,
        }
    }

    /// Did the machine or the evaluator fail, rather than the candidate (a `crashed` verdict
    /// with a reason of [`INFRA_REASONS`] or [`JUDGE_FAILED`])? Such a report is not a result.
    pub fn is_infrastructure(&self) -> bool {
        self.verdict == Verdict::Crashed
            && self
                .reason
                .as_deref()
                .is_some_and(|r| r == JUDGE_FAILED || INFRA_REASONS.contains(&r))
    }

    /// The blank report the judge fills for every candidate (docs/protocol.md, `report` of an
    /// evaluate request): every field, with a `crashed` / `judge_error` verdict that the judge
    /// always replaces, and empty `env` and `checks` objects.
    pub fn template(mode: EvalMode) -> serde_json::Value {
        let mut r = EvalReport::infrastructure(
            mode,
            Verdict::Crashed,
            "judge_error",
            "the judge filled in no report".into(),
        );
        r.env = serde_json::json!({});
        r.checks = serde_json::json!({});
        serde_json::to_value(r).expect("a report serializes")
    }

    /// A report as the judge sent it: exactly the fields of [`EvalReport::template`] (an unknown
    /// or a missing field is a protocol error naming it), each of its type.
    pub fn from_wire(v: &serde_json::Value) -> Result<EvalReport, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("a report must be a JSON object, got {}", kind_of(v)))?;
        let template = EvalReport::template(EvalMode::Compile);
        let fields = template.as_object().expect("an object");
        if let Some(k) = obj.keys().find(|k| !fields.contains_key(*k)) {
            return Err(format!(
                "report field `{k}` is unknown (EvalReport has {})",
                fields.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        if let Some(k) = fields.keys().find(|k| !obj.contains_key(*k)) {
            return Err(format!("report field `{k}` is missing"));
        }
        serde_json::from_value(v.clone()).map_err(|e| format!("report: {e}"))
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
            ideal_us: None,
            phases: None,
        }
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
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
    fn round_trips_with_and_without_the_new_fields() {
        // An old stored report: no ideal_us, no phases.
        let old = r#"{"verdict":"correct","mode":"full","message":"ok","eval_s":17.5}"#;
        let r: EvalReport = serde_json::from_str(old).unwrap();
        assert_eq!(r.ideal_us, None);
        assert_eq!(r.phases, None);
        let back = serde_json::to_value(&r).unwrap();
        assert!(back["ideal_us"].is_null() && back["phases"].is_null());
        assert_eq!(serde_json::from_value::<EvalReport>(back).unwrap(), r);

        let new = r#"{"verdict":"incorrect","mode":"full","reason":"timing_impossible","message":"m",
            "ideal_us":224.5,"phases":{"static":0.01,"load":0.5,"build":2.0,"correctness":1.5,
            "baselines":0.0,"timing":1.2,"recheck":0.1,"total":5.4}}"#;
        let r: EvalReport = serde_json::from_str(new).unwrap();
        assert_eq!(r.ideal_us, Some(224.5));
        let p = r.phases.clone().unwrap();
        assert_eq!(p.static_check, 0.01);
        assert_eq!(p.total, 5.4);
        assert_eq!(p.items()[0], ("static", 0.01));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["phases"]["static"], 0.01);
        assert_eq!(serde_json::from_value::<EvalReport>(v).unwrap(), r);
        // A phases object missing some phases (a judge that skipped them) still loads.
        let partial: Phases = serde_json::from_str(r#"{"timing": 2.0}"#).unwrap();
        assert_eq!((partial.timing, partial.load), (2.0, 0.0));
    }

    #[test]
    fn infrastructure_reasons_are_not_results() {
        let r =
            |v, reason: &str| EvalReport::infrastructure(EvalMode::Full, v, reason, String::new());
        for reason in INFRA_REASONS.iter().chain([&JUDGE_FAILED]) {
            assert!(r(Verdict::Crashed, reason).is_infrastructure(), "{reason}");
            assert!(
                !r(Verdict::Incorrect, reason).is_infrastructure(),
                "{reason}"
            );
        }
        assert!(!r(Verdict::Crashed, PROCESS_DIED).is_infrastructure());
        assert!(!r(Verdict::Crashed, "runtime_error").is_infrastructure());
        let mut none = r(Verdict::Crashed, "x");
        none.reason = None;
        assert!(!none.is_infrastructure());
    }

    /// The Python evaluator's list and this one are the same list.
    #[test]
    fn infra_reasons_match_python() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../python/mkb_eval/report_text.py"
        );
        let src = std::fs::read_to_string(path).expect("python/mkb_eval/report_text.py");
        // `INFRA_REASONS = (...)` or `INFRA_REASONS: tuple[str, ...] = (...)`, maybe over lines.
        let start = src
            .find("\nINFRA_REASONS")
            .expect("report_text.py defines INFRA_REASONS at module level");
        let rest = &src[start..];
        let eq = rest.find('=').expect("INFRA_REASONS = (...)");
        let open = eq + rest[eq..].find('(').expect("a tuple");
        let close = open + rest[open..].find(')').expect("a closed tuple");
        let mut py: Vec<String> = rest[open..close]
            .split(['"', '\''])
            .enumerate()
            .filter(|(i, _)| i % 2 == 1)
            .map(|(_, s)| s.to_string())
            .collect();
        let mut rs: Vec<String> = INFRA_REASONS.iter().map(|s| s.to_string()).collect();
        py.sort();
        rs.sort();
        assert_eq!(
            py, rs,
            "INFRA_REASONS differ between report_text.py and eval.rs"
        );
    }

    #[test]
    fn the_template_lists_every_field_and_the_wire_must_match_it() {
        let t = EvalReport::template(EvalMode::Full);
        let obj = t.as_object().unwrap();
        for k in [
            "verdict",
            "reason",
            "runtime",
            "baselines",
            "ideal_us",
            "phases",
            "log",
        ] {
            assert!(obj.contains_key(k), "{k} missing from {t}");
        }
        assert_eq!(t["mode"], "full");
        assert!(t["env"].is_object() && t["checks"].is_object());
        let r = EvalReport::from_wire(&t).unwrap();
        assert_eq!(r.verdict, Verdict::Crashed);

        let mut extra = t.clone();
        extra["colour"] = 3.into();
        let e = EvalReport::from_wire(&extra).unwrap_err();
        assert!(e.contains("`colour` is unknown"), "{e}");
        let mut short = t.clone();
        short.as_object_mut().unwrap().remove("phases");
        let e = EvalReport::from_wire(&short).unwrap_err();
        assert!(e.contains("`phases` is missing"), "{e}");
        let mut nested = t.clone();
        nested["runtime"] = serde_json::json!({"median_us": 1.0, "iqr_us": 0.1, "reps": 3,
            "timer": "cuda_event", "wall_us_per_call": null, "mean_us": 1.0});
        let e = EvalReport::from_wire(&nested).unwrap_err();
        assert!(e.contains("mean_us"), "{e}");
        let mut wrong = t;
        wrong["eval_s"] = "soon".into();
        assert!(EvalReport::from_wire(&wrong).is_err());
        assert!(EvalReport::from_wire(&serde_json::json!([1])).is_err());
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
