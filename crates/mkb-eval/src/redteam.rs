//! The red-team manifest (tests/adversarial/manifest.toml): planted cheating or broken
//! candidates and the verdict the evaluator must reach. Parsed and checked here only; `mkb
//! redteam` runs the cases and `mkb redteam --list` hands them, resolved, to the Python tools
//! (python/mkb_eval/redteam.py), so both sides read the same cases with the same required fields.

use crate::protocol::Limits;
use mkb_core::{Dsl, EvalMode, EvalReport, Registry, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Which defence a case is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    Static,
    Sandbox,
    Deadline,
    Dynamic,
    Correctness,
    Timing,
    Crash,
}

impl Layer {
    pub const ALL: [Layer; 7] = [
        Layer::Static,
        Layer::Sandbox,
        Layer::Deadline,
        Layer::Dynamic,
        Layer::Correctness,
        Layer::Timing,
        Layer::Crash,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Static => "static",
            Layer::Sandbox => "sandbox",
            Layer::Deadline => "deadline",
            Layer::Dynamic => "dynamic",
            Layer::Correctness => "correctness",
            Layer::Timing => "timing",
            Layer::Crash => "crash",
        }
    }
}

/// One acceptable reason prefix, or a list of them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum Reasons {
    One(String),
    Many(Vec<String>),
}

/// Limits a case overrides (the rest are [`RedteamCase::limits`]'s defaults).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartialLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_mb: Option<u64>,
}

/// A case as the manifest writes it (its header documents the fields).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestCase {
    file: String,
    problem: String,
    dsl: Dsl,
    verdict: Verdict,
    reason: Reasons,
    layer: Layer,
    needs_gpu: bool,
    what: String,
    #[serde(default)]
    mode: Option<EvalMode>,
    #[serde(default)]
    limits: PartialLimits,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    case: Vec<ManifestCase>,
}

/// One checked case, as `mkb redteam --list` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedteamCase {
    /// The candidate file, relative to the manifest's folder.
    pub file: String,
    /// The problem as the manifest names it (e.g. `A/A01_bias_gelu`) and its id.
    pub problem: String,
    pub problem_id: String,
    pub dsl: Dsl,
    pub verdict: Verdict,
    /// Acceptable reason prefixes (at least one, none empty).
    pub reasons: Vec<String>,
    pub layer: Layer,
    /// false: the verdict is reached in compile mode on a machine without a GPU.
    pub needs_gpu: bool,
    pub what: String,
    /// The mode a GPU machine uses (default test).
    pub mode: EvalMode,
    pub limits: PartialLimits,
}

impl RedteamCase {
    /// The verdict is the expected one and the reason starts with one of the prefixes.
    pub fn reached(&self, r: &EvalReport) -> bool {
        r.verdict == self.verdict
            && r.reason
                .as_deref()
                .is_some_and(|got| self.reasons.iter().any(|w| got.starts_with(w.as_str())))
    }

    /// The evaluate limits of this case: the red team's defaults with the case's overrides.
    pub fn limits(&self) -> Limits {
        let d = Limits {
            call_s: 20.0,
            total_s: 600.0,
            ..Limits::default()
        };
        Limits {
            build_s: self.limits.build_s.unwrap_or(d.build_s),
            call_s: self.limits.call_s.unwrap_or(d.call_s),
            total_s: self.limits.total_s.unwrap_or(d.total_s),
            rss_mb: self.limits.rss_mb.unwrap_or(d.rss_mb),
        }
    }
}

/// A loaded manifest: the folder its files are relative to, and its cases in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub root: PathBuf,
    pub cases: Vec<RedteamCase>,
}

impl Manifest {
    /// Parse and check `path`: every field of every case, its problem in `reg`, its file under
    /// the manifest's folder, no file twice. Errors name the file, the case and the field.
    pub fn load(path: &Path, reg: &Registry) -> Result<Manifest, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let file: ManifestFile =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let root = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut seen = BTreeSet::new();
        let mut cases = Vec::new();
        for (i, c) in file.case.into_iter().enumerate() {
            let at = |field: &str, msg: String| {
                format!(
                    "{}: case[{i}] ({}): field `{field}`: {msg}",
                    path.display(),
                    c.file
                )
            };
            if !seen.insert(c.file.clone()) {
                return Err(at("file", "listed twice".into()));
            }
            if !root.join(&c.file).is_file() {
                return Err(at("file", format!("no such file in {}", root.display())));
            }
            let key = c.problem.rsplit('/').next().unwrap_or(&c.problem);
            let problem_id = reg
                .get(key)
                .map(|p| p.id().to_string())
                .ok_or_else(|| at("problem", format!("no problem {:?}", c.problem)))?;
            let reasons = match &c.reason {
                Reasons::One(r) => vec![r.clone()],
                Reasons::Many(v) => v.clone(),
            };
            if reasons.is_empty() || reasons.iter().any(|r| r.is_empty()) {
                return Err(at("reason", "needs one or more non-empty prefixes".into()));
            }
            if c.what.trim().is_empty() {
                return Err(at("what", "must say what the case does".into()));
            }
            cases.push(RedteamCase {
                problem_id,
                reasons,
                mode: c.mode.unwrap_or(EvalMode::Test),
                file: c.file,
                problem: c.problem,
                dsl: c.dsl,
                verdict: c.verdict,
                layer: c.layer,
                needs_gpu: c.needs_gpu,
                what: c.what,
                limits: c.limits,
            });
        }
        Ok(Manifest { root, cases })
    }

    /// The same manifest with `root` relative to `base` (for committed fixtures).
    pub fn relative_to(mut self, base: &Path) -> Manifest {
        if let Ok(r) = self.root.strip_prefix(base) {
            self.root = r.to_path_buf();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .unwrap()
    }

    fn registry() -> Registry {
        let dsls = mkb_core::DslRegistry::load_root(&repo()).unwrap();
        Registry::load(&repo().join("problems"), &dsls).unwrap()
    }

    #[test]
    fn the_repository_manifest_loads() {
        let m =
            Manifest::load(&repo().join("tests/adversarial/manifest.toml"), &registry()).unwrap();
        assert!(m.cases.len() >= 12);
        let layers: BTreeSet<&str> = m.cases.iter().map(|c| c.layer.as_str()).collect();
        assert_eq!(layers.len(), Layer::ALL.len(), "{layers:?}");
        let s01 = m.cases.iter().find(|c| c.file.starts_with("s01")).unwrap();
        assert_eq!((s01.problem_id.as_str(), s01.mode), ("A01", EvalMode::Test));
        let mut r = EvalReport::infrastructure(
            EvalMode::Compile,
            s01.verdict,
            &format!("{}x", s01.reasons[0]),
            String::new(),
        );
        assert!(s01.reached(&r));
        r.reason = Some("mismatch".into());
        assert!(!s01.reached(&r));
        assert!(m.cases.iter().any(|c| c.limits.build_s == Some(15.0)));
        let with = m.cases.iter().find(|c| c.limits.build_s.is_some()).unwrap();
        assert_eq!(with.limits().build_s, 15.0);
        assert_eq!(with.limits().call_s, 20.0);
    }

    fn load_text(text: &str) -> Result<Manifest, String> {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("x.py"), "").unwrap();
        let path = tmp.path().join("manifest.toml");
        std::fs::write(&path, text).unwrap();
        Manifest::load(&path, &registry())
    }

    const CASE: &str = r#"
[[case]]
file = "x.py"
problem = "A/A01_bias_gelu"
dsl = "cute"
verdict = "incorrect"
reason = ["mismatch", "nan_or_inf"]
layer = "correctness"
needs_gpu = true
what = "writes garbage"
"#;

    #[test]
    fn required_fields_and_bad_values_are_named() {
        let m = load_text(CASE).unwrap();
        assert_eq!(m.cases[0].reasons, ["mismatch", "nan_or_inf"]);
        for (from, to, needle) in [
            ("layer = \"correctness\"\n", "", "layer"),
            ("needs_gpu = true\n", "", "needs_gpu"),
            ("what = \"writes garbage\"\n", "", "what"),
            ("layer = \"correctness\"", "layer = \"luck\"", "luck"),
            ("verdict = \"incorrect\"", "verdict = \"wrong\"", "wrong"),
            (
                "problem = \"A/A01_bias_gelu\"",
                "problem = \"Z99\"",
                "`problem`",
            ),
            ("file = \"x.py\"", "file = \"y.py\"", "`file`"),
            (
                "reason = [\"mismatch\", \"nan_or_inf\"]",
                "reason = []",
                "`reason`",
            ),
            (
                "what = \"writes garbage\"",
                "what = \"w\"\ncolour = 1",
                "colour",
            ),
        ] {
            assert!(CASE.contains(from), "{from}");
            let e = load_text(&CASE.replace(from, to)).unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        let twice = format!("{CASE}{CASE}");
        assert!(load_text(&twice).unwrap_err().contains("listed twice"));
    }
}
