//! The tools an agent may call during an attempt, their JSON schemas, and the concise text
//! each evaluation result is turned into (long logs trimmed, saying how much was cut).

use crate::provider::ToolSpec;
use mkb_core::{EvalMode, EvalReport};
use serde_json::json;
use std::fmt::Write as _;

pub const READ_BRIEF: &str = "read_brief";
pub const READ_STARTER: &str = "read_starter";
pub const READ_KERNEL: &str = "read_kernel";
pub const WRITE_KERNEL: &str = "write_kernel";
pub const COMPILE: &str = "compile";
pub const TEST: &str = "test";
pub const BENCHMARK: &str = "benchmark";
pub const SUBMIT: &str = "submit";

/// The evaluation a tool runs, if any.
pub fn eval_mode_of(tool: &str) -> Option<EvalMode> {
    match tool {
        COMPILE => Some(EvalMode::Compile),
        TEST => Some(EvalMode::Test),
        BENCHMARK => Some(EvalMode::Bench),
        _ => None,
    }
}

fn no_args() -> serde_json::Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

/// The tool list of every attempt (solo and conditioned alike).
pub fn tool_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec { name: READ_BRIEF.into(), description: "Return the DSL brief (the DSL section of your task) again.".into(), parameters: no_args() },
        ToolSpec { name: READ_STARTER.into(), description: "Return the starter file of this problem.".into(), parameters: no_args() },
        ToolSpec { name: READ_KERNEL.into(), description: "Return your current kernel file.".into(), parameters: no_args() },
        ToolSpec {
            name: WRITE_KERNEL.into(),
            description: "Replace your kernel file with `source` (a complete Python file defining build(spec) -> run). \
                          Later compile/test/benchmark calls evaluate this file."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"source": {"type": "string", "description": "the complete kernel file"}},
                "required": ["source"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: COMPILE.into(),
            description: "Static DSL-use check and build(spec) for every shape set, without running (sm_90a). \
                          Returns the verdict and compiler errors. Counts as one evaluation."
                .into(),
            parameters: no_args(),
        },
        ToolSpec {
            name: TEST.into(),
            description: "Compile and check correctness on every check shape on the GPU (several trials with fresh random inputs). \
                          Counts as one evaluation."
                .into(),
            parameters: no_args(),
        },
        ToolSpec {
            name: BENCHMARK.into(),
            description: "Everything test does, plus correctness and timing on the benchmark shape against eager PyTorch. \
                          Counts as one evaluation."
                .into(),
            parameters: no_args(),
        },
        ToolSpec {
            name: SUBMIT.into(),
            description: "End the attempt. Your best kernel measured correct by the harness is kept, else the last one you wrote.".into(),
            parameters: no_args(),
        },
    ]
}

/// Keep at most `max` bytes of `s`, cutting in the middle and saying how much was removed.
pub fn trim_middle(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let head = floor_boundary(s, max * 2 / 3);
    let tail_start = ceil_boundary(s, s.len() - (max - head));
    format!(
        "{}\n[... {} characters trimmed ...]\n{}",
        &s[..head],
        tail_start - head,
        &s[tail_start..]
    )
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// The tool result an agent reads for one evaluation.
pub fn describe_report(r: &EvalReport, max_log: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "verdict: {} (mode {})",
        r.verdict.as_str(),
        r.mode.as_str()
    );
    if let Some(reason) = &r.reason {
        let _ = writeln!(s, "reason: {reason}");
    }
    if !r.message.trim().is_empty() {
        let _ = writeln!(s, "message: {}", r.message.trim());
    }
    if let Some(c) = r.compile_s {
        let _ = writeln!(s, "build time: {c:.2} s over all shape sets");
    }
    if let Some(t) = &r.runtime {
        let _ = writeln!(
            s,
            "runtime (benchmark shape): {:.1} us median, IQR {:.1} us, {} reps",
            t.median_us, t.iqr_us, t.reps
        );
    }
    if let (Some(tref), Some(name)) = (r.t_ref_us, &r.t_ref_name) {
        let _ = writeln!(s, "eager PyTorch ({name}): {tref:.1} us");
    }
    if let Some(x) = r.speedup_eager {
        let _ = writeln!(s, "speedup over eager: {x:.2}x (your score if correct)");
    }
    if let Some(x) = r.speedup_compile {
        let _ = writeln!(s, "speedup over torch.compile: {x:.2}x");
    }
    if let Some(f) = r.floor_us {
        let _ = writeln!(s, "timing floor (an empty kernel, same method): {f:.1} us");
    }
    if !r.log.trim().is_empty() {
        let _ = writeln!(s, "log:\n{}", trim_middle(r.log.trim(), max_log));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use mkb_core::Verdict;

    #[test]
    fn schemas_are_objects_and_names_unique() {
        let specs = tool_specs();
        let mut names: Vec<&str> = specs.iter().map(|t| t.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), specs.len());
        assert!(specs.iter().all(|t| t.parameters["type"] == "object"));
        assert_eq!(eval_mode_of(BENCHMARK), Some(EvalMode::Bench));
        assert_eq!(eval_mode_of(WRITE_KERNEL), None);
    }

    #[test]
    fn trims_long_logs_and_says_so() {
        let log = "x".repeat(10_000);
        let t = trim_middle(&log, 1000);
        assert!(t.len() < 1200);
        assert!(t.contains("9000 characters trimmed"), "{t}");
        assert_eq!(trim_middle("short", 100), "short");
        let uni = "é".repeat(3000);
        let _ = trim_middle(&uni, 101); // must not panic on char boundaries
    }

    #[test]
    fn describes_a_failure() {
        let mut r = EvalReport::infrastructure(
            EvalMode::Compile,
            Verdict::CompileError,
            "build_error",
            "build failed on shape set ragged".into(),
        );
        r.log = format!("Traceback\n{}\nError: bad layout", "frame\n".repeat(2000));
        let d = describe_report(&r, 500);
        assert!(d.starts_with("verdict: compile_error"));
        assert!(
            d.contains("build_error")
                && d.contains("ragged")
                && d.contains("trimmed")
                && d.contains("bad layout")
        );
    }
}
