//! Wire types of the JSON-lines protocol between `mkb` and the Python judge
//! (docs/protocol.md). Requests are built here; responses are parsed into `mkb_core` types.

use mkb_core::{Dsl, EvalMode, EvalReport, PROTOCOL_VERSION};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Per-phase limits the judge enforces on a runner.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Seconds for one `build(spec)` call.
    pub build_s: f64,
    /// Seconds for one `run(...)` call.
    pub call_s: f64,
    /// Seconds for the whole evaluation of one candidate.
    pub total_s: f64,
    /// Resident memory of the runner, MiB.
    pub rss_mb: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            build_s: 300.0,
            call_s: 60.0,
            total_s: 1200.0,
            rss_mb: 32768,
        }
    }
}

/// How the judge times candidates and baselines.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingOptions {
    pub min_reps: u32,
    pub min_time_s: f64,
    pub warmup: u32,
    pub rounds: u32,
    pub checkpoints: u32,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            min_reps: 100,
            min_time_s: 1.0,
            warmup: 10,
            rounds: 5,
            checkpoints: 3,
        }
    }
}

impl TimingOptions {
    /// Lighter timing for an agent's benchmark tool calls: quick feedback, same method.
    /// Final evaluations use the default.
    pub fn quick() -> Self {
        TimingOptions {
            min_reps: 50,
            min_time_s: 0.3,
            warmup: 5,
            rounds: 1,
            checkpoints: 1,
        }
    }
}

/// One candidate of a group, named by a caller-chosen key (e.g. an attempt id or a condition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub key: String,
    pub path: PathBuf,
}

/// An `evaluate` request: candidates of one problem in one DSL, timed interleaved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRequest {
    pub problem_dir: PathBuf,
    pub dsl: Dsl,
    pub mode: EvalMode,
    pub candidates: Vec<Candidate>,
    pub limits: Limits,
    pub timing: TimingOptions,
}

impl EvalRequest {
    pub fn single(problem_dir: PathBuf, dsl: Dsl, mode: EvalMode, path: PathBuf) -> Self {
        EvalRequest {
            problem_dir,
            dsl,
            mode,
            candidates: vec![Candidate {
                key: "candidate".into(),
                path,
            }],
            limits: Limits::default(),
            timing: TimingOptions::default(),
        }
    }

    /// The request as one JSON line, with a request id and the secret seed (never stored).
    pub fn to_wire(&self, id: &str, seed: u64) -> serde_json::Value {
        serde_json::json!({
            "v": PROTOCOL_VERSION,
            "id": id,
            "op": "evaluate",
            "problem_dir": self.problem_dir,
            "dsl": self.dsl,
            "mode": self.mode,
            "candidates": self.candidates,
            "seed": seed,
            "limits": self.limits,
            "timing": self.timing,
        })
    }
}

/// What `hello` reports about a judge's machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub python: String,
    #[serde(default)]
    pub torch: Option<String>,
    #[serde(default)]
    pub cuda: Option<String>,
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub can_run: bool,
    #[serde(default)]
    pub dsls: BTreeMap<String, DslInfo>,
    /// How runners are sandboxed (tool, version, uid, namespaces; `unsafe: true` when the
    /// `--unsafe-no-sandbox` opt-out is in force). docs/threat-model.md.
    #[serde(default)]
    pub sandbox: serde_json::Value,
}

impl Hello {
    /// Did the judge start without the OS sandbox (the explicit opt-out)?
    pub fn sandbox_unsafe(&self) -> bool {
        self.sandbox
            .get("unsafe")
            .and_then(|v| v.as_bool())
            .unwrap_or(true)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DslInfo {
    pub available: bool,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

impl Hello {
    pub fn dsl_available(&self, dsl: Dsl) -> bool {
        self.dsls.get(dsl.as_str()).is_some_and(|d| d.available)
    }
}

/// One report of an evaluate response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyedReport {
    pub key: String,
    pub report: EvalReport,
}

/// The parsed `evaluate` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResponse {
    pub reports: Vec<KeyedReport>,
    #[serde(default)]
    pub session: serde_json::Value,
}

/// A line from the judge: either a response to a request id, or a progress event.
#[derive(Debug, Clone)]
pub enum Incoming {
    Response {
        id: String,
        ok: bool,
        body: serde_json::Value,
    },
    Event {
        id: String,
        body: serde_json::Value,
    },
}

/// Parse one line from the judge, checking the protocol version.
pub fn parse_line(line: &str) -> Result<Incoming, String> {
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("not JSON ({e}): {}", trim(line, 200)))?;
    let version = v.get("v").and_then(|x| x.as_u64());
    if version != Some(PROTOCOL_VERSION as u64) {
        return Err(format!(
            "protocol version {version:?} from the judge, expected {PROTOCOL_VERSION}"
        ));
    }
    let id = v
        .get("id")
        .and_then(|x| x.as_str())
        .unwrap_or("")
        .to_string();
    if v.get("event").is_some() {
        return Ok(Incoming::Event { id, body: v });
    }
    let ok = v.get("ok").and_then(|x| x.as_bool()).unwrap_or(false);
    Ok(Incoming::Response { id, ok, body: v })
}

/// Shorten text for messages, saying how much was cut.
pub fn trim(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... [{} more bytes]", &s[..cut], s.len() - cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_wire_shape() {
        let r = EvalRequest::single(
            "/p/A01".into(),
            Dsl::Tirx,
            EvalMode::Compile,
            "/k.py".into(),
        );
        let w = r.to_wire("e1", 42);
        assert_eq!(w["op"], "evaluate");
        assert_eq!(w["dsl"], "tirx");
        assert_eq!(w["mode"], "compile");
        assert_eq!(w["seed"], 42);
        assert_eq!(w["candidates"][0]["path"], "/k.py");
        assert_eq!(w["limits"]["build_s"], 300.0);
    }

    #[test]
    fn parses_lines() {
        assert!(matches!(
            parse_line(r#"{"v":1,"id":"a","ok":true}"#),
            Ok(Incoming::Response { ok: true, .. })
        ));
        assert!(matches!(
            parse_line(r#"{"v":1,"id":"a","event":"progress"}"#),
            Ok(Incoming::Event { .. })
        ));
        assert!(parse_line(r#"{"v":2,"id":"a","ok":true}"#)
            .unwrap_err()
            .contains("version"));
        assert!(parse_line("garbage").is_err());
    }

    #[test]
    fn trims_on_char_boundary() {
        let s = "é".repeat(100);
        let t = trim(&s, 11);
        assert!(t.contains("more bytes"));
    }
}
