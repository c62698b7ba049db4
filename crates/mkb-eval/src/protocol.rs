//! Wire types of the JSON-lines protocol between `mkb` and the Python judge
//! (docs/protocol.md). Requests are built here, each carrying the problem spec (crate::spec) and
//! the report template; responses are parsed strictly into `mkb_core` types.

use crate::spec::ProblemSpec;
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

/// How the judge times candidates and baselines (docs/evaluator.md "Timing"): at least `rounds`
/// rounds and `min_reps` repetitions, then until the median's 95% CI half-width is under
/// `ci_rel` x the median, at most `max_reps`; `checked` repetitions of every round (at least 3)
/// are verified in secret. The judge's defaults (`DEFAULT_TIMING` in python/mkb_eval/evaluation.py)
/// are these (a test compares them); it refuses a key it does not know.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimingOptions {
    pub min_reps: u32,
    pub max_reps: u32,
    pub warmup: u32,
    pub rounds: u32,
    pub checked: u32,
    pub ci_rel: f64,
    /// Timing v1's fixed measuring time: read from configs written before timing v2, ignored.
    #[serde(skip_serializing)]
    pub min_time_s: Option<f64>,
    /// Timing v1's checkpoints (now every round has secret checks): read, ignored.
    #[serde(skip_serializing)]
    pub checkpoints: Option<u32>,
}

impl Default for TimingOptions {
    fn default() -> Self {
        TimingOptions {
            min_reps: 100,
            max_reps: 1000,
            warmup: 10,
            rounds: 3,
            checked: 3,
            ci_rel: 0.005,
            min_time_s: None,
            checkpoints: None,
        }
    }
}

impl TimingOptions {
    /// Lighter timing for an agent's benchmark tool calls: quick feedback, same method (one
    /// round, its secret checks included). Final evaluations use the default.
    pub fn quick() -> Self {
        TimingOptions {
            min_reps: 50,
            max_reps: 300,
            warmup: 5,
            rounds: 1,
            ..TimingOptions::default()
        }
    }
}

#[cfg(test)]
mod timing_tests {
    use super::*;

    #[test]
    fn timing_options_match_the_judge_and_read_old_configs() {
        // The judge's defaults, as python/mkb_eval/evaluation.py writes them.
        let py = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../python/mkb_eval/evaluation.py"),
        )
        .unwrap();
        let line = py
            .lines()
            .skip_while(|l| !l.starts_with("DEFAULT_TIMING"))
            .take_while(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let d = TimingOptions::default();
        for (k, v) in [
            ("min_reps", d.min_reps.to_string()),
            ("max_reps", d.max_reps.to_string()),
            ("warmup", d.warmup.to_string()),
            ("rounds", d.rounds.to_string()),
            ("checked", d.checked.to_string()),
            ("ci_rel", d.ci_rel.to_string()),
        ] {
            assert!(
                line.contains(&format!("\"{k}\": {v}")),
                "DEFAULT_TIMING lacks {k}: {v}: {line}"
            );
        }
        // A config of timing v1 still reads; its old keys are not sent on.
        let old: TimingOptions = serde_json::from_str(
            r#"{"min_reps":50,"min_time_s":0.3,"warmup":5,"rounds":1,"checkpoints":1}"#,
        )
        .unwrap();
        assert_eq!(old.min_reps, 50);
        assert_eq!(old.max_reps, 1000);
        let sent = serde_json::to_value(old).unwrap();
        assert!(sent.get("min_time_s").is_none() && sent.get("checkpoints").is_none());
        assert_eq!(sent["checked"], 3);
        // An unknown key is refused, naming it.
        let e = serde_json::from_str::<TimingOptions>(r#"{"min_repz":5}"#).unwrap_err();
        assert!(e.to_string().contains("min_repz"), "{e}");
    }
}

/// One candidate of a group, named by a caller-chosen key (e.g. an attempt id or a condition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub key: String,
    pub path: PathBuf,
}

/// An `evaluate` request: candidates of one problem in one DSL, timed interleaved. The problem
/// is named by its folder; the judge receives its spec, loaded when the request is sent.
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

    /// The request as one JSON line, with a request id, the secret seed (never stored), the
    /// problem's spec and the report template the judge fills for each candidate.
    pub fn to_wire(&self, id: &str, seed: u64, problem: &ProblemSpec) -> serde_json::Value {
        serde_json::json!({
            "v": PROTOCOL_VERSION,
            "id": id,
            "op": "evaluate",
            "problem": problem,
            "report": EvalReport::template(self.mode),
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
    /// A Ray bridge's facts (docs/cluster.md): `address`, `role`, `slots` (requests it serves at
    /// once: 1), `cluster` (`gpus`, `cpus`, `nodes`) and its actor's `placement`. Absent for a
    /// local judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ray: Option<serde_json::Value>,
}

impl Hello {
    /// The GPUs of the Ray cluster a bridge's hello reports (None from a local judge).
    pub fn ray_cluster_gpus(&self) -> Option<u32> {
        let n = self.ray.as_ref()?.get("cluster")?.get("gpus")?.as_u64()?;
        u32::try_from(n).ok()
    }

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
#[serde(deny_unknown_fields)]
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

impl EvalResponse {
    /// Parse the body of a successful evaluate response: `reports` as `[{"key", "report"}]`,
    /// each report holding exactly the fields of the template ([`EvalReport::from_wire`]);
    /// errors name the candidate and the field.
    pub fn from_wire(body: &serde_json::Value) -> Result<EvalResponse, String> {
        let reports = body
            .get("reports")
            .and_then(|r| r.as_array())
            .ok_or("the response has no `reports` list")?;
        let mut out = Vec::with_capacity(reports.len());
        for (i, r) in reports.iter().enumerate() {
            let obj = r
                .as_object()
                .ok_or_else(|| format!("reports[{i}] is not an object"))?;
            if let Some(k) = obj.keys().find(|k| *k != "key" && *k != "report") {
                return Err(format!("reports[{i}]: unknown field `{k}` (key, report)"));
            }
            let key = obj
                .get("key")
                .and_then(|k| k.as_str())
                .ok_or_else(|| format!("reports[{i}]: field `key` is missing or not a string"))?;
            let report = obj
                .get("report")
                .ok_or_else(|| format!("reports[{i}] ({key}): field `report` is missing"))?;
            let report =
                EvalReport::from_wire(report).map_err(|e| format!("reports[{i}] ({key}): {e}"))?;
            out.push(KeyedReport {
                key: key.to_string(),
                report,
            });
        }
        Ok(EvalResponse {
            reports: out,
            session: body
                .get("session")
                .cloned()
                .unwrap_or(serde_json::Value::Null),
        })
    }
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

    fn a01() -> ProblemSpec {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../problems/A/A01_bias_gelu");
        let dsls = mkb_core::DslRegistry::load_root(&dir.join("../../..")).unwrap();
        ProblemSpec::load(&dir, &dsls).unwrap()
    }

    #[test]
    fn a_ray_bridge_hello_gives_the_clusters_gpus() {
        let local: Hello =
            serde_json::from_value(serde_json::json!({"pid": 1, "can_run": true})).unwrap();
        assert_eq!(local.ray_cluster_gpus(), None);
        assert!(!serde_json::to_string(&local).unwrap().contains("ray"));
        let bridge: Hello = serde_json::from_value(serde_json::json!({"pid": 1, "can_run": true,
            "ray": {"address": "h:6379", "role": "gpu", "slots": 1,
                    "cluster": {"gpus": 16, "cpus": 256, "nodes": 2}}}))
        .unwrap();
        assert_eq!(bridge.ray_cluster_gpus(), Some(16));
    }

    #[test]
    fn request_wire_shape() {
        let spec = a01();
        let r = EvalRequest::single(spec.dir.clone(), Dsl::TIRX, EvalMode::Bench, "/k.py".into());
        let w = r.to_wire("e1", 42, &spec);
        assert_eq!(w["v"], PROTOCOL_VERSION);
        assert_eq!(w["problem"]["id"], "A01");
        assert_eq!(w["problem"]["outputs"][0]["atol"], 0.01);
        assert_eq!(w["report"], EvalReport::template(EvalMode::Bench));
        assert!(w.get("problem_dir").is_none());
        assert_eq!(w["op"], "evaluate");
        assert_eq!(w["dsl"], "tirx");
        assert_eq!(w["mode"], "bench");
        assert_eq!(w["seed"], 42);
        assert_eq!(w["candidates"][0]["path"], "/k.py");
        assert_eq!(w["limits"]["build_s"], 300.0);
    }

    #[test]
    fn responses_are_parsed_strictly() {
        let rep = EvalReport::template(EvalMode::Compile);
        let body =
            serde_json::json!({"reports": [{"key": "a", "report": rep}], "session": {"gpu": null}});
        let r = EvalResponse::from_wire(&body).unwrap();
        assert_eq!(r.reports[0].key, "a");
        let mut bad = rep.clone();
        bad["speedup"] = 2.into();
        let e =
            EvalResponse::from_wire(&serde_json::json!({"reports": [{"key": "a", "report": bad}]}))
                .unwrap_err();
        assert!(
            e.contains("(a)") && e.contains("`speedup` is unknown"),
            "{e}"
        );
        let e = EvalResponse::from_wire(
            &serde_json::json!({"reports": [{"key": "a", "report": rep, "x": 1}]}),
        )
        .unwrap_err();
        assert!(e.contains("`x`"), "{e}");
        assert!(EvalResponse::from_wire(&serde_json::json!({"ok": true})).is_err());
    }

    #[test]
    fn parses_lines() {
        assert!(matches!(
            parse_line(r#"{"v":2,"id":"a","ok":true}"#),
            Ok(Incoming::Response { ok: true, .. })
        ));
        assert!(matches!(
            parse_line(r#"{"v":2,"id":"a","event":"progress"}"#),
            Ok(Incoming::Event { .. })
        ));
        assert!(parse_line(r#"{"v":1,"id":"a","ok":true}"#)
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
