//! Problem validation (`mkb problems validate`, docs/problems.md): the `[validate]`
//! section of problem.toml (formulations that must pass, planted slips that must fail, waivers),
//! the rows every check reports (problem, check, measured number, limit, status), and the static
//! checks that need no Python: the size rule (the benchmark shape's ideal time), the memory cap
//! of the largest shape set, the number of formulations, both suite variants posed, and variant
//! prompts that differ only in the DSL section.
//!
//! The registry refuses a problem that fails a load-time check ([`LOAD_CHECKS`]) unless its
//! `[validate] waive` names the check; the others ([`COMMAND_CHECKS`]: a `[validate]` section at
//! all, both suite variants) fail `mkb problems validate` only. The dynamic checks
//! (python/mkb_eval/validate.py) report in the same rows and obey the same waivers.

use crate::attempt::Budget;
use crate::dsl::{DslRegistry, DEFAULT_DSLS};
use crate::model::{Problem, MIN_IDEAL_US};
use crate::prompt::{variant_prompt, DSL_SECTION_MARKER};
use crate::registry::{defines_function, LoadError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// `[validate]` of problem.toml.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateSection {
    /// Independent correct formulations in reference.py (`fn(*inputs, **params)` returning the
    /// outputs): each must pass with max |out - ref| / bound <= [`CORRECT_MAX_RATIO`] at every
    /// shape set validated.
    #[serde(default)]
    pub correct: Vec<String>,
    /// Planted slips in reference.py: each must fail (bound ratio > 1) at some shape set.
    #[serde(default)]
    pub wrong: Vec<String>,
    /// Checks this problem may fail, each with the reason (`{ ideal_time = "..." }`); a key
    /// names a check (`influence`) or one subject of it (`influence:x`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub waive: BTreeMap<String, String>,
}

/// At least this many `correct` formulations.
pub const MIN_CORRECT: usize = 2;
/// At least this many `wrong` formulations.
pub const MIN_WRONG: usize = 3;
/// All inputs and outputs of the largest shape set must fit in this many bytes (10 GB).
pub const MAX_SET_BYTES: u64 = 10_000_000_000;
/// A correct formulation passes with this margin: max |out - ref| / bound at most this.
pub const CORRECT_MAX_RATIO: f64 = 0.25;
/// On the GPU, a problem whose torch.compile baseline is within this factor of the ideal time
/// is flagged: a kernel cannot beat it by much.
pub const COMPILE_NEAR_IDEAL: f64 = 1.10;

/// Static checks the registry enforces at load (unless waived).
pub const LOAD_CHECKS: &[&str] = &[
    "ideal_time",
    "max_bytes",
    "correct_count",
    "wrong_count",
    "prompt_parity",
];
/// Static checks that only `mkb problems validate` enforces (see the module doc).
pub const COMMAND_CHECKS: &[&str] = &["validate_section", "variants"];
/// Checks of python/mkb_eval/validate.py (a row's check is `name` or `name:subject`).
pub const DYNAMIC_CHECKS: &[&str] = &[
    "reference",
    "starter_syntax",
    "finite",
    "deterministic",
    "influence",
    "correct",
    "wrong",
    "eager",
    "timing",
    "compile_headroom",
    "runtime",
];

/// Is `key` a check name, or `name:subject` of one (a valid waive key)?
pub fn is_check_name(key: &str) -> bool {
    let base = key.split(':').next().unwrap_or("");
    LOAD_CHECKS
        .iter()
        .chain(COMMAND_CHECKS)
        .chain(DYNAMIC_CHECKS)
        .any(|c| *c == base)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    /// Reported, never fails the run (e.g. torch.compile near the ideal time).
    Warn,
    /// Failed or flagged (`Warn`), but `[validate] waive` names the check (the reason is in
    /// the detail).
    Waived,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Warn => "warn",
            Status::Waived => "waived",
        })
    }
}

/// A measured number, or a word where there is none (`inf`, `nan`, `error`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Measured {
    Num(f64),
    Text(String),
}

impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Measured::Num(x) if *x == 0.0 => f.write_str("0"),
            Measured::Num(x) if (1e-3..1e6).contains(&x.abs()) => {
                // Four significant digits (one decimal from 100 up), trailing zeros dropped.
                let decimals = (3 - x.abs().log10().floor() as i32).clamp(1, 6) as usize;
                let s = format!("{x:.decimals$}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                f.write_str(s)
            }
            Measured::Num(x) => write!(f, "{x:.3e}"),
            Measured::Text(s) => f.write_str(s),
        }
    }
}

/// One line of the validation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRow {
    pub problem: String,
    /// `name` or `name:subject` (`correct:alt_fp64`, `influence:x`, `deterministic:ragged`).
    pub check: String,
    #[serde(default)]
    pub measured: Option<Measured>,
    /// What passes, in words (`>= 40 us`, `<= 0.25`).
    pub limit: String,
    pub status: Status,
    #[serde(default)]
    pub detail: String,
}

impl CheckRow {
    pub fn new(
        problem: &str,
        check: impl Into<String>,
        measured: Option<f64>,
        limit: impl Into<String>,
        pass: bool,
        detail: impl Into<String>,
    ) -> CheckRow {
        CheckRow {
            problem: problem.to_string(),
            check: check.into(),
            measured: measured.map(Measured::Num),
            limit: limit.into(),
            status: if pass { Status::Pass } else { Status::Fail },
            detail: detail.into(),
        }
    }

    /// The check's name without its subject.
    pub fn base(&self) -> &str {
        self.check.split(':').next().unwrap_or("")
    }

    /// A failed or flagged row that `waive` names becomes `Waived` (the reason appended to the
    /// detail): a flag such as `compile_headroom` is then answered by the problem's own reason.
    pub fn apply_waivers(&mut self, waive: &BTreeMap<String, String>) {
        if self.status != Status::Fail && self.status != Status::Warn {
            return;
        }
        let reason = waive.get(&self.check).or_else(|| waive.get(self.base()));
        if let Some(r) = reason {
            self.status = Status::Waived;
            self.detail = if self.detail.is_empty() {
                format!("waived: {r}")
            } else {
                format!("{}; waived: {r}", self.detail)
            };
        }
    }
}

/// Bytes of every input and output of the largest shape set, and its name.
pub fn largest_set_bytes(p: &Problem) -> Result<(u64, String), String> {
    let mut best = (0u64, String::new());
    for s in &p.file.shapes {
        let b = p.tensor_bytes(s)?;
        if b >= best.0 {
            best = (b, s.name.clone());
        }
    }
    Ok(best)
}

/// Words that name a registered DSL, lowercase: its name, aliases and display name (split into
/// words, "DSL" left out) and its Python modules (whole, `tvm_tirx`). The shared part of a
/// prompt may contain none of them as a word.
fn dsl_words(dsls: &DslRegistry) -> BTreeSet<String> {
    let mut words = BTreeSet::new();
    for d in dsls.descriptors() {
        let f = &d.file;
        let names = std::iter::once(f.name.as_str())
            .chain(f.aliases.iter().map(String::as_str))
            .chain(std::iter::once(f.display_name.as_str()));
        for t in names {
            words.extend(split_words(t, false).filter(|w| w != "dsl" && w.len() > 2));
        }
        let modules = std::iter::once(f.python.import.as_str())
            .chain(f.static_rules.roots.iter().map(String::as_str))
            .chain(f.static_rules.owned_modules.iter().map(String::as_str));
        for m in modules {
            words.extend(split_words(m, true));
        }
    }
    words
}

/// Lowercase words of `text`: runs of letters and digits (and `_` with `underscore`; dotted
/// module paths are split at the dots either way).
fn split_words(text: &str, underscore: bool) -> impl Iterator<Item = String> + '_ {
    text.split(move |c: char| !(c.is_ascii_alphanumeric() || (underscore && c == '_')))
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
}

/// The variant prompts of `p` (one per DSL it is posed in) differ only in the DSL section: the
/// shared part is identical, each rendered prompt is the shared part then its DSL section (one
/// marker), and the shared part names no DSL. `Err` says what differs.
pub fn prompt_parity(p: &Problem, dsls: &DslRegistry) -> Result<usize, String> {
    let budget = Budget::default();
    let mut common: Option<(String, String)> = None;
    for dsl in &p.variants {
        let desc = dsls.require(*dsl)?;
        let vp = variant_prompt(p, desc, &budget)
            .map_err(|e| format!("cannot render the {dsl} prompt: {e}"))?;
        let rendered = vp.render();
        if rendered.matches(DSL_SECTION_MARKER).count() != 1
            || !vp.dsl_section.starts_with(DSL_SECTION_MARKER)
            || rendered.find(DSL_SECTION_MARKER) != Some(vp.common.len())
        {
            return Err(format!(
                "the {dsl} prompt must contain the DSL section marker {:?} exactly once, right after the shared part (does statement.md or reference.py contain it?)",
                DSL_SECTION_MARKER.trim()
            ));
        }
        match &common {
            None => common = Some((dsl.to_string(), vp.common)),
            Some((first, c)) if *c != vp.common => {
                let at = c
                    .chars()
                    .zip(vp.common.chars())
                    .take_while(|(a, b)| a == b)
                    .count();
                return Err(format!(
                    "the shared part of the {first} and {dsl} prompts differ (from character {at})"
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((_, c)) = &common {
        let words = dsl_words(dsls);
        let named: BTreeSet<String> = split_words(c, false)
            .chain(split_words(c, true))
            .filter(|w| words.contains(w))
            .collect();
        if !named.is_empty() {
            let names = |text: &str| {
                split_words(text, false)
                    .chain(split_words(text, true))
                    .any(|w| named.contains(&w))
            };
            let mut files: Vec<&str> = Vec::new();
            if names(&p.statement) {
                files.push("statement.md");
            }
            if names(&p.reference) {
                files.push("reference.py");
            }
            return Err(format!(
                "the shared part of the prompts names a DSL ({}), in {}: the statement and the reference must be DSL-neutral",
                named.into_iter().collect::<Vec<_>>().join(", "),
                if files.is_empty() { "the generated interface text".to_string() } else { files.join(" and ") }
            ));
        }
    }
    Ok(p.variants.len())
}

/// Every static check of `p` as rows, waivers applied. With `command` the checks that only
/// `mkb problems validate` enforces are included.
pub fn static_checks(p: &Problem, dsls: &DslRegistry, command: bool) -> Vec<CheckRow> {
    let id = p.id();
    let v = p.file.validate.as_ref();
    let mut rows = Vec::new();
    let bench = p.benchmark_shape();
    rows.push(match p.ideal_us(bench) {
        Ok(us) => CheckRow::new(
            id,
            "ideal_time",
            Some(us),
            format!(">= {MIN_IDEAL_US} us"),
            us >= MIN_IDEAL_US,
            format!(
                "benchmark shape {:?}: max(bytes / copy rate, flops / {} rate)",
                bench.name,
                p.flops_format().as_str()
            ),
        ),
        Err(e) => CheckRow::new(id, "ideal_time", None, ">= 40 us", false, e),
    });
    let gb = MAX_SET_BYTES as f64 / 1e9;
    rows.push(match largest_set_bytes(p) {
        Ok((b, name)) => CheckRow::new(
            id,
            "max_bytes",
            Some(b as f64 / 1e9),
            format!("<= {gb} GB"),
            b <= MAX_SET_BYTES,
            format!("inputs + outputs of shape set {name:?}, GB"),
        ),
        Err(e) => CheckRow::new(id, "max_bytes", None, format!("<= {gb} GB"), false, e),
    });
    if command {
        rows.push(CheckRow::new(
            id,
            "validate_section",
            None,
            "present",
            v.is_some(),
            if v.is_some() {
                ""
            } else {
                "problem.toml has no [validate] section (correct = [...], wrong = [...])"
            },
        ));
    }
    if let Some(v) = v {
        rows.push(CheckRow::new(
            id,
            "correct_count",
            Some(v.correct.len() as f64),
            format!(">= {MIN_CORRECT}"),
            v.correct.len() >= MIN_CORRECT,
            v.correct.join(", "),
        ));
        rows.push(CheckRow::new(
            id,
            "wrong_count",
            Some(v.wrong.len() as f64),
            format!(">= {MIN_WRONG}"),
            v.wrong.len() >= MIN_WRONG,
            v.wrong.join(", "),
        ));
    }
    if command {
        let missing: Vec<&str> = DEFAULT_DSLS
            .iter()
            .filter(|d| dsls.contains(**d) && !p.has_variant(**d))
            .map(|d| d.as_str())
            .collect();
        rows.push(CheckRow::new(
            id,
            "variants",
            Some(p.variants.len() as f64),
            "cute and tirx",
            missing.is_empty(),
            if missing.is_empty() {
                String::new()
            } else {
                format!("no <dsl>/starter.py for {}", missing.join(", "))
            },
        ));
    }
    rows.push(match prompt_parity(p, dsls) {
        Ok(n) => CheckRow::new(
            id,
            "prompt_parity",
            Some(n as f64),
            "differ only in the DSL section",
            true,
            "",
        ),
        Err(e) => CheckRow::new(
            id,
            "prompt_parity",
            None,
            "differ only in the DSL section",
            false,
            e,
        ),
    });
    if let Some(v) = v {
        for r in &mut rows {
            r.apply_waivers(&v.waive);
        }
    }
    rows
}

/// The file of a problem folder that holds its `[validate]` formulations: never part of the
/// agent's prompt (reference.py is), so planted slips and alternative formulations stay private.
pub const CHECKS_FILE: &str = "checks.py";

/// What the registry refuses in a loaded problem: a malformed `[validate]` section (unknown
/// formulations or waive keys), and every failed, unwaived load-time check. Errors name
/// problem.toml and the field.
pub fn load_errors(p: &Problem, dsls: &DslRegistry) -> Vec<LoadError> {
    let toml_path = p.dir.join("problem.toml");
    let err = |field: &str, msg: String| LoadError::new(&toml_path, field, msg);
    let mut errors = Vec::new();
    if let Some(v) = &p.file.validate {
        // The formulations live in checks.py (kept out of the prompt) or, for eager ones, in
        // reference.py.
        let checks = std::fs::read_to_string(p.dir.join(CHECKS_FILE)).unwrap_or_default();
        let mut seen = BTreeSet::new();
        for (list, names) in [("correct", &v.correct), ("wrong", &v.wrong)] {
            for (i, name) in names.iter().enumerate() {
                if !defines_function(&p.reference, name) && !defines_function(&checks, name) {
                    errors.push(err(
                        &format!("validate.{list}[{i}]"),
                        format!(
                            "neither {CHECKS_FILE} nor reference.py defines a top-level function {name:?}"
                        ),
                    ));
                }
                if name == "reference" {
                    errors.push(err(
                        &format!("validate.{list}[{i}]"),
                        "`reference` is what the formulations are compared with; list other functions".into(),
                    ));
                }
                if !seen.insert(name.as_str()) {
                    errors.push(err(
                        &format!("validate.{list}[{i}]"),
                        format!("{name:?} is listed twice"),
                    ));
                }
            }
        }
        for (key, reason) in &v.waive {
            if !is_check_name(key) {
                errors.push(err(
                    &format!("validate.waive.{key}"),
                    format!(
                        "no check is named {key:?} (checks: {})",
                        LOAD_CHECKS
                            .iter()
                            .chain(COMMAND_CHECKS)
                            .chain(DYNAMIC_CHECKS)
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if reason.trim().is_empty() {
                errors.push(err(
                    &format!("validate.waive.{key}"),
                    "a waiver needs its reason".into(),
                ));
            }
        }
    }
    for row in static_checks(p, dsls, false) {
        if row.status != Status::Fail || !LOAD_CHECKS.contains(&row.base()) {
            continue;
        }
        let field = match row.base() {
            "ideal_time" | "max_bytes" => "shapes",
            "correct_count" => "validate.correct",
            "wrong_count" => "validate.wrong",
            _ => "",
        };
        let measured = row.measured.as_ref().map(|m| m.to_string());
        let msg = match row.base() {
            "ideal_time" => match measured {
                Some(m) => format!("the benchmark shape's ideal time is {m} us, under the {MIN_IDEAL_US} us floor of the size rule (docs/suite.md): enlarge it"),
                None => row.detail.clone(),
            },
            "max_bytes" => format!(
                "{} GB: {} (limit {}); shrink it",
                measured.unwrap_or_default(), row.detail, row.limit
            ),
            _ => format!(
                "check {} failed: {}{}",
                row.check,
                measured.map(|m| format!("{m}, limit {}. ", row.limit)).unwrap_or_default(),
                row.detail
            ),
        };
        errors.push(err(
            field,
            format!(
                "{msg} (or waive it: [validate] waive = {{ {} = \"reason\" }})",
                row.base()
            ),
        ));
    }
    errors
}

/// The `[validate]` lists as the Python validator receives them.
pub fn validate_job_entry(p: &Problem) -> serde_json::Value {
    let v = p.file.validate.clone().unwrap_or_default();
    serde_json::json!({"correct": v.correct, "wrong": v.wrong})
}

/// The starter file of each variant, by DSL name.
pub fn starters(p: &Problem) -> BTreeMap<String, std::path::PathBuf> {
    p.variants
        .iter()
        .map(|d| (d.as_str().to_string(), p.starter_path(*d)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{load_problem, Registry};
    use std::fs;
    use std::path::PathBuf;

    fn dsls() -> DslRegistry {
        DslRegistry::load_root(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap()
    }

    const TOML: &str = r#"
id = "A01"
slug = "bias_gelu"
family = "A"
title = "Bias + GELU"
eager = ["gelu_add"]
bytes = "4*T*H + 2*H"

[[inputs]]
name = "x"
dtype = "bfloat16"
shape = ["T", "H"]

[[inputs]]
name = "b"
dtype = "bfloat16"
shape = ["H"]

[[outputs]]
name = "y"
dtype = "bfloat16"
shape = ["T", "H"]

[[shapes]]
name = "benchmark"
kind = "benchmark"
dims = { T = 16384, H = 14336 }

[[shapes]]
name = "small"
kind = "check"
dims = { T = 128, H = 256 }

[[shapes]]
name = "ragged"
kind = "check"
dims = { T = 333, H = 1000 }
"#;

    const VALIDATE: &str = r#"
[validate]
correct = ["alt_a", "alt_b"]
wrong = ["wrong_a", "wrong_b", "wrong_c"]
"#;

    const REFERENCE: &str = "def reference(x, b, y):\n    pass\n\ndef gelu_add(x, b):\n    pass\n\n\
        def alt_a(x, b):\n    pass\n\ndef alt_b(x, b):\n    pass\n\ndef wrong_a(x, b):\n    pass\n\n\
        def wrong_b(x, b):\n    pass\n\ndef wrong_c(x, b):\n    pass\n";

    fn write(root: &std::path::Path, toml_text: &str, statement: &str) -> PathBuf {
        let dir = root.join("A").join("A01_bias_gelu");
        for d in ["cute", "tirx"] {
            fs::create_dir_all(dir.join(d)).unwrap();
            fs::write(
                dir.join(d).join("starter.py"),
                format!("# {d}\ndef build(spec):\n    pass\n"),
            )
            .unwrap();
        }
        fs::write(dir.join("problem.toml"), toml_text).unwrap();
        fs::write(dir.join("statement.md"), statement).unwrap();
        fs::write(dir.join("reference.py"), REFERENCE).unwrap();
        dir
    }

    /// The problem loaded from a temporary folder, kept with it (prompts read the starters).
    fn load(
        toml_text: &str,
        statement: &str,
    ) -> Result<(Problem, tempfile::TempDir), Vec<LoadError>> {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write(tmp.path(), toml_text, statement);
        load_problem(&dir, &dsls()).map(|p| (p, tmp))
    }

    fn row<'a>(rows: &'a [CheckRow], check: &str) -> &'a CheckRow {
        rows.iter()
            .find(|r| r.check == check)
            .unwrap_or_else(|| panic!("no row {check}: {rows:?}"))
    }

    #[test]
    fn formulations_in_checks_py_count_and_stay_out_of_the_prompt() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write(
            tmp.path(),
            &format!("{TOML}{VALIDATE}"),
            "Compute gelu(x + b).",
        );
        let (shared, private) = REFERENCE.split_at(REFERENCE.find("def alt_a").unwrap());
        fs::write(dir.join("reference.py"), shared).unwrap();
        fs::write(dir.join(CHECKS_FILE), private).unwrap();
        let p = load_problem(&dir, &dsls()).unwrap();
        // The prompt shows `p.reference` (reference.py) whole, and only it.
        assert!(
            p.reference.contains("def gelu_add(") && !p.reference.contains("wrong_a"),
            "{}",
            p.reference
        );
        assert_eq!(
            row(&static_checks(&p, &dsls(), true), "prompt_parity").status,
            Status::Pass
        );
        // A name in neither file is refused at load, naming both files.
        fs::write(
            dir.join(CHECKS_FILE),
            private.replace("def wrong_c(", "def wrong_z("),
        )
        .unwrap();
        let errs = load_problem(&dir, &dsls()).unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.to_string().contains("validate.wrong[2]")
                    && e.to_string().contains(CHECKS_FILE)),
            "{errs:?}"
        );
    }

    #[test]
    fn a_complete_problem_passes_every_static_check() {
        let (p, _t) = load(&format!("{TOML}{VALIDATE}"), "Compute gelu(x + b).").unwrap();
        let rows = static_checks(&p, &dsls(), true);
        assert!(rows.iter().all(|r| r.status == Status::Pass), "{rows:?}");
        let ideal = row(&rows, "ideal_time");
        let want = (4.0 * 16384.0 * 14336.0 + 2.0 * 14336.0) / 4.2e12 * 1e6;
        assert!(
            matches!(ideal.measured, Some(Measured::Num(x)) if (x - want).abs() < 1e-9),
            "{ideal:?}"
        );
        assert_eq!(
            row(&rows, "max_bytes").measured,
            Some(Measured::Num((4 * 16384 * 14336 + 2 * 14336) as f64 / 1e9))
        );
        assert_eq!(
            row(&rows, "prompt_parity").measured,
            Some(Measured::Num(2.0))
        );
        assert_eq!(
            p.file.validate.as_ref().unwrap().wrong,
            ["wrong_a", "wrong_b", "wrong_c"]
        );
    }

    #[test]
    fn a_missing_section_fails_the_command_but_not_the_load() {
        let (p, _t) = load(TOML, "Compute gelu(x + b).").unwrap();
        let rows = static_checks(&p, &dsls(), true);
        assert_eq!(row(&rows, "validate_section").status, Status::Fail);
        assert!(!rows.iter().any(|r| r.check == "correct_count"));
        assert!(static_checks(&p, &dsls(), false)
            .iter()
            .all(|r| r.status == Status::Pass));
    }

    #[test]
    fn too_few_formulations_are_refused_at_load_unless_waived() {
        let few = VALIDATE.replace("\"alt_a\", \"alt_b\"", "\"alt_a\"");
        let errs = load(&format!("{TOML}{few}"), "s").unwrap_err();
        assert!(
            errs.iter().any(|e| e.field == "validate.correct"
                && e.message.contains("correct_count")
                && e.message.contains("1, limit >= 2")
                && e.path.ends_with("problem.toml")),
            "{errs:?}"
        );
        let waived = format!("{TOML}{few}waive = {{ correct_count = \"only one exists\" }}\n");
        let (p, _t) = load(&waived, "s").unwrap();
        let rows = static_checks(&p, &dsls(), true);
        let r = row(&rows, "correct_count");
        assert_eq!(r.status, Status::Waived);
        assert!(r.detail.contains("only one exists"), "{r:?}");

        let two_wrong = VALIDATE.replace(", \"wrong_c\"", "");
        let errs = load(&format!("{TOML}{two_wrong}"), "s").unwrap_err();
        assert!(errs.iter().any(|e| e.field == "validate.wrong"), "{errs:?}");
    }

    #[test]
    fn unknown_names_and_waive_keys_are_load_errors() {
        let bad = VALIDATE.replace("\"alt_b\"", "\"alt_nope\"");
        let errs = load(&format!("{TOML}{bad}"), "s").unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.field == "validate.correct[1]" && e.message.contains("alt_nope")),
            "{errs:?}"
        );
        let dup = VALIDATE.replace("\"wrong_c\"", "\"alt_a\"");
        let errs = load(&format!("{TOML}{dup}"), "s").unwrap_err();
        assert!(
            errs.iter().any(|e| e.message.contains("listed twice")),
            "{errs:?}"
        );
        let errs = load(
            &format!("{TOML}{VALIDATE}waive = {{ ideal_tme = \"typo\" }}\n"),
            "s",
        )
        .unwrap_err();
        assert!(
            errs.iter().any(|e| e.field == "validate.waive.ideal_tme"),
            "{errs:?}"
        );
        let errs = load(
            &format!("{TOML}{VALIDATE}waive = {{ \"influence:b\" = \" \" }}\n"),
            "s",
        )
        .unwrap_err();
        assert!(
            errs.iter().any(|e| e.message.contains("reason")),
            "{errs:?}"
        );
        let errs = load(&format!("{TOML}{VALIDATE}colour = 1\n"), "s").unwrap_err();
        assert!(errs[0].message.contains("colour"), "{errs:?}");
    }

    #[test]
    fn the_size_rule_and_the_memory_cap_are_load_checks_with_waivers() {
        let small = TOML.replace("T = 16384, H = 14336", "T = 16, H = 64");
        let errs = load(&small, "s").unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.field == "shapes" && e.message.contains("size rule")),
            "{errs:?}"
        );
        let (p, _t) = load(
            &format!("{small}{VALIDATE}waive = {{ ideal_time = \"a decode shape\" }}\n"),
            "s",
        )
        .unwrap();
        assert_eq!(
            row(&static_checks(&p, &dsls(), true), "ideal_time").status,
            Status::Waived
        );
        // x and y, 4 bytes per element of 2^32: 17.2 GB, over the cap.
        let big = TOML.replace("T = 16384, H = 14336", "T = 2097152, H = 2048");
        let errs = load(&big, "s").unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.field == "shapes" && e.message.contains("<= 10 GB")),
            "{errs:?}"
        );
    }

    #[test]
    fn a_dsl_named_in_the_statement_breaks_prompt_parity() {
        let errs = load(
            &format!("{TOML}{VALIDATE}"),
            "Compute gelu(x + b) with TIRx vector loads.",
        )
        .unwrap_err();
        assert!(
            errs.iter().any(|e| e.message.contains("prompt_parity")
                && e.message.contains("(tirx), in statement.md")),
            "{errs:?}"
        );
        let errs = load(
            &format!("{TOML}{VALIDATE}"),
            "Compute gelu.\n# Your DSL: none\n",
        )
        .unwrap_err();
        assert!(
            errs.iter().any(|e| e.message.contains("marker")),
            "{errs:?}"
        );
        // "execute" contains "cute" but is not the word.
        assert!(load(&format!("{TOML}{VALIDATE}"), "Execute gelu(x + b).").is_ok());
    }

    #[test]
    fn a_missing_variant_fails_the_command() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write(tmp.path(), &format!("{TOML}{VALIDATE}"), "s");
        fs::remove_dir_all(dir.join("tirx")).unwrap();
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let rows = static_checks(reg.get("A01").unwrap(), &dsls(), true);
        let r = row(&rows, "variants");
        assert_eq!(r.status, Status::Fail);
        assert!(r.detail.contains("tirx"), "{r:?}");
    }

    #[test]
    fn waivers_match_a_check_or_one_subject() {
        let mut w = BTreeMap::new();
        w.insert("influence:b".to_string(), "b is a tiny bias".to_string());
        let mut a = CheckRow::new("A01", "influence:b", Some(0.5), "> 1", false, "");
        let mut b = CheckRow::new("A01", "influence:x", Some(0.5), "> 1", false, "");
        let mut c = CheckRow::new("A01", "influence:b", Some(2.0), "> 1", true, "");
        a.apply_waivers(&w);
        b.apply_waivers(&w);
        c.apply_waivers(&w);
        assert_eq!(
            (a.status, b.status, c.status),
            (Status::Waived, Status::Fail, Status::Pass)
        );
        w.insert("influence".into(), "none matter".into());
        b.apply_waivers(&w);
        assert_eq!(b.status, Status::Waived);
        // a flag (warn) is answered by a waiver too; an unnamed one stays a flag
        let mut flag = CheckRow::new("A07", "compile_headroom", Some(1.01), "> 1.1", true, "");
        flag.status = Status::Warn;
        let mut other = flag.clone();
        other.check = "timing".into();
        w.insert(
            "compile_headroom".into(),
            "Triton reaches the bandwidth here".into(),
        );
        flag.apply_waivers(&w);
        other.apply_waivers(&w);
        assert_eq!((flag.status, other.status), (Status::Waived, Status::Warn));
        assert!(flag.detail.contains("waived: Triton"), "{flag:?}");
        assert!(is_check_name("correct:alt") && !is_check_name("colour"));
    }

    #[test]
    fn measured_numbers_print_short() {
        assert_eq!(Measured::Num(40.0).to_string(), "40");
        assert_eq!(Measured::Num(0.123456).to_string(), "0.1235");
        assert_eq!(Measured::Num(223.703).to_string(), "223.7");
        assert_eq!(Measured::Num(12.0).to_string(), "12");
        assert_eq!(Measured::Num(0.0).to_string(), "0");
        assert_eq!(Measured::Num(3.0e-7).to_string(), "3.000e-7");
        assert_eq!(Measured::Text("inf".into()).to_string(), "inf");
    }
}
