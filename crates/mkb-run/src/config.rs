//! Experiment configuration (TOML): models and their providers, problems or families, the
//! DSLs or directions, runs per cell, budgets, controls, concurrency and GPUs. Errors name the
//! file and the field.

use anyhow::{anyhow, bail, Result};
use mkb_agent::ProviderConfig;
use mkb_core::{Budget, Direction, Dsl};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// The run's name: its folder is `<runs_dir>/<name>`.
    pub name: String,
    /// Problem ids, slugs or family letters; empty means every problem.
    #[serde(default)]
    pub problems: Vec<String>,
    /// Transfer directions, "source->target" (default: "cute->tirx" and "tirx->cute").
    #[serde(default = "both_directions")]
    pub directions: Vec<String>,
    /// The DSLs of the experiment: its directions are then every ordered pair of them
    /// (`["cute", "toy"]`: cute->toy and toy->cute), instead of `directions`. Left out of
    /// the config's fingerprint while unset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dsls: Vec<String>,
    /// Runs per (model, problem, condition) cell.
    #[serde(default = "one")]
    pub runs: u32,
    /// Attempts in flight at once.
    #[serde(default = "four")]
    pub concurrency: usize,
    /// The per-attempt budget, the same for every condition.
    #[serde(default)]
    pub budget: Budget,
    #[serde(default)]
    pub controls: Controls,
    #[serde(default)]
    pub skill: SkillConfig,
    #[serde(default)]
    pub eval: EvalConfig,
    pub models: Vec<ModelConfig>,
    /// Fingerprint of the config as written (before paths are resolved), set by `load`.
    #[serde(skip)]
    pub written_fingerprint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Controls {
    /// A placebo attempt: the same model's skill for a different problem, same source DSL.
    #[serde(default = "yes")]
    pub placebo: bool,
    /// A second solo attempt: the run-to-run noise of the solo condition.
    #[serde(default = "yes")]
    pub repeat_solo: bool,
}

impl Default for Controls {
    fn default() -> Self {
        Controls {
            placebo: true,
            repeat_solo: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillConfig {
    /// Hard cap on a skill's length in characters.
    #[serde(default = "max_chars")]
    pub max_chars: usize,
}

impl Default for SkillConfig {
    fn default() -> Self {
        SkillConfig {
            max_chars: max_chars(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalConfig {
    /// "auto", "none" or a list like "0,1".
    #[serde(default = "auto")]
    pub gpus: String,
    /// GPU-less evaluator processes for compile-only work.
    #[serde(default = "two")]
    pub cpu_workers: usize,
    /// Mode of the final evaluation: "auto" (full with a GPU, else compile), "compile", "full".
    #[serde(default = "auto")]
    pub final_mode: String,
    /// Longest evaluator log an agent reads back from one tool call.
    #[serde(default = "max_log")]
    pub max_log_chars: usize,
    /// Timing of an agent's benchmark tool calls (default: quick).
    #[serde(default = "mkb_eval::TimingOptions::quick")]
    pub tool_timing: mkb_eval::TimingOptions,
    /// Timing of the final evaluation (default: at least 100 reps and 3 rounds, then until the
    /// median's 95% CI is within 0.5%, at most 1000 reps).
    #[serde(default)]
    pub final_timing: mkb_eval::TimingOptions,
    /// Timing sessions of each solo attempt's final kernel (default 3, at least 1): their
    /// medians' spread is the measured timing noise the tie band comes from (docs/analysis.md).
    /// Left out of the config's fingerprint while unset, so runs started before it resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_sessions: Option<u32>,
    /// Judges sharing each GPU (default 2: one builds while another holds the GPU; GPU work never
    /// overlaps, docs/evaluator.md "Several judges per GPU"). Left out of the fingerprint while unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judges_per_gpu: Option<usize>,
    /// Where the judges run: "local" (default) or "ray" (docs/cluster.md). Never part of the
    /// fingerprint: a run may resume on another backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The Ray cluster of backend "ray": HOST:PORT of its head, or "auto".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// Timing sessions of a solo attempt's final kernel when `eval.timing_sessions` is unset.
pub const DEFAULT_TIMING_SESSIONS: u32 = 3;

impl EvalConfig {
    /// `timing_sessions`, or its default.
    pub fn timing_sessions(&self) -> u32 {
        self.timing_sessions
            .unwrap_or(DEFAULT_TIMING_SESSIONS)
            .max(1)
    }

    /// `judges_per_gpu`, or its default (at least 1).
    pub fn judges_per_gpu(&self) -> usize {
        self.judges_per_gpu
            .unwrap_or(mkb_eval::DEFAULT_JUDGES_PER_GPU)
            .max(1)
    }

    /// `backend` and `address` as the evaluator pool's backend (checked by `validate`).
    pub fn backend(&self) -> Result<mkb_eval::Backend> {
        mkb_eval::Backend::parse(self.backend.as_deref(), self.address.as_deref())
            .map_err(|e| anyhow!("eval.backend: {e}"))
    }
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            gpus: auto(),
            cpu_workers: two(),
            final_mode: auto(),
            max_log_chars: max_log(),
            tool_timing: mkb_eval::TimingOptions::quick(),
            final_timing: mkb_eval::TimingOptions::default(),
            timing_sessions: None,
            judges_per_gpu: None,
            backend: None,
            address: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The name results are reported under (and the replay/record folder name).
    pub label: String,
    pub provider: ProviderConfig,
    /// Prices of the model's tokens, for the cost per attempt, condition and lift point
    /// (optional; left out of the fingerprint while unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
}

/// What a model's tokens cost: one type for the config and the store's readers.
pub use mkb_store::Price;

fn both_directions() -> Vec<String> {
    Direction::all_pairs(&mkb_core::DEFAULT_DSLS)
        .into_iter()
        .map(Direction::label)
        .collect()
}
fn one() -> u32 {
    1
}
fn two() -> usize {
    2
}
fn four() -> usize {
    4
}
fn yes() -> bool {
    true
}
fn auto() -> String {
    "auto".into()
}
fn max_chars() -> usize {
    mkb_agent::skill::DEFAULT_MAX_CHARS
}
fn max_log() -> usize {
    4000
}

pub fn parse_direction(s: &str) -> Result<Direction, String> {
    let (a, b) = s
        .split_once("->")
        .ok_or_else(|| format!("{s:?} is not a direction like \"cute->tirx\""))?;
    let source: Dsl = a.trim().parse()?;
    let target: Dsl = b.trim().parse()?;
    if source == target {
        return Err(format!("{s:?}: source and target must differ"));
    }
    Ok(Direction { source, target })
}

impl ExperimentConfig {
    /// Read and validate a config file; relative provider folders (replay `dir`, `record_dir`)
    /// are resolved against the config file's folder.
    pub fn load(path: &Path) -> Result<ExperimentConfig> {
        let text = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        let mut cfg: ExperimentConfig = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| {
                    format!(
                        " (line {})",
                        text[..s.start.min(text.len())].lines().count().max(1)
                    )
                })
                .unwrap_or_default();
            anyhow!("{}: {}{line}", path.display(), e.message())
        })?;
        cfg.written_fingerprint = Some(cfg.fingerprint());
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for m in &mut cfg.models {
            for p in [&mut m.provider.dir, &mut m.provider.record_dir]
                .into_iter()
                .flatten()
            {
                if p.is_relative() {
                    *p = base.join(&*p);
                }
            }
        }
        cfg.validate()
            .map_err(|(field, msg)| anyhow!("{}: field `{field}`: {msg}", path.display()))?;
        Ok(cfg)
    }

    /// Semantic checks; the error is (field, message).
    pub fn validate(&self) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_string(), m));
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            || self.name.starts_with('.')
        {
            return err(
                "name",
                format!("{:?}: use letters, digits, '-', '_' and '.'", self.name),
            );
        }
        if self.directions.is_empty() {
            return err("directions", "list at least one direction".into());
        }
        for (i, d) in self.directions.iter().enumerate() {
            if let Err(e) = parse_direction(d) {
                return err(&format!("directions[{i}]"), e);
            }
        }
        if !self.dsls.is_empty() {
            if self.directions != both_directions() {
                return err(
                    "dsls",
                    "give either `dsls` (every ordered pair of them) or `directions`, not both"
                        .into(),
                );
            }
            let mut seen = std::collections::BTreeSet::new();
            for (i, d) in self.dsls.iter().enumerate() {
                match d.parse::<Dsl>() {
                    Ok(d) if !seen.insert(d) => {
                        return err(&format!("dsls[{i}]"), format!("{d} is listed twice"))
                    }
                    Ok(_) => {}
                    Err(e) => return err(&format!("dsls[{i}]"), e),
                }
            }
            if seen.len() < 2 {
                return err(
                    "dsls",
                    "list at least two DSLs (a direction needs a source and a target)".into(),
                );
            }
        }
        // An attempt in a target is keyed by its target (the store's attempt ids): each
        // target takes its skills from one source DSL per experiment.
        let mut source_of: std::collections::BTreeMap<Dsl, Dsl> = Default::default();
        for d in self.directions() {
            if let Some(s) = source_of.insert(d.target, d.source) {
                if s != d.source {
                    let field = if self.dsls.is_empty() {
                        "directions"
                    } else {
                        "dsls"
                    };
                    return err(
                        field,
                        format!(
                            "{} would take skills from both {s} and {}: an experiment gives each target DSL one source (list `directions` instead, e.g. a cycle a->b, b->c, c->a, or run one experiment per source)",
                            d.target, d.source
                        ),
                    );
                }
            }
        }
        if self.runs == 0 {
            return err("runs", "must be at least 1".into());
        }
        if self.concurrency == 0 {
            return err("concurrency", "must be at least 1".into());
        }
        let b = &self.budget;
        if b.max_turns == 0
            || b.max_output_tokens == 0
            || b.max_tool_evals == 0
            || b.max_wall_s == 0
        {
            return err("budget", "every limit must be positive".into());
        }
        if b.max_input_tokens == Some(0) {
            return err(
                "budget.max_input_tokens",
                "must be positive when set".into(),
            );
        }
        if let Err(e) =
            mkb_eval::Backend::parse(self.eval.backend.as_deref(), self.eval.address.as_deref())
        {
            let local = self.eval.backend.as_deref().unwrap_or("local") == "local";
            let field = if local && self.eval.address.is_some() {
                "eval.address"
            } else {
                "eval.backend"
            };
            return err(field, e);
        }
        if self.eval.timing_sessions == Some(0) {
            return err("eval.timing_sessions", "must be at least 1".into());
        }
        for (i, m) in self.models.iter().enumerate() {
            if let Some(p) = &m.price {
                for (f, x) in [
                    ("input_per_mtok", p.input_per_mtok),
                    ("output_per_mtok", p.output_per_mtok),
                ] {
                    if !x.is_finite() || x < 0.0 {
                        return err(
                            &format!("models[{i}].price.{f}"),
                            format!("{x}: a price must be a finite number >= 0"),
                        );
                    }
                }
            }
        }
        if self.skill.max_chars < 200 {
            return err("skill.max_chars", "must be at least 200".into());
        }
        if !["auto", "compile", "full"].contains(&self.eval.final_mode.as_str()) {
            return err(
                "eval.final_mode",
                format!("{:?}: expected auto, compile or full", self.eval.final_mode),
            );
        }
        if self.models.is_empty() {
            return err("models", "list at least one [[models]] entry".into());
        }
        let mut labels = std::collections::BTreeSet::new();
        for (i, m) in self.models.iter().enumerate() {
            if m.label.is_empty() {
                return err(&format!("models[{i}].label"), "must not be empty".into());
            }
            if !labels.insert(&m.label) {
                return err(
                    &format!("models[{i}].label"),
                    format!("duplicate label {:?}", m.label),
                );
            }
            if let Err(e) = m.provider.validate() {
                return err(&format!("models[{i}].provider"), e.to_string());
            }
        }
        Ok(())
    }

    /// The experiment's directions: every ordered pair of `dsls` when given, else `directions`.
    pub fn directions(&self) -> Vec<Direction> {
        if !self.dsls.is_empty() {
            let dsls: Vec<Dsl> = self.dsls.iter().filter_map(|d| d.parse().ok()).collect();
            return Direction::all_pairs(&dsls);
        }
        self.directions
            .iter()
            .filter_map(|d| parse_direction(d).ok())
            .collect()
    }

    /// The source DSL of the direction into `target` (validated: at most one).
    pub fn source_of(&self, target: Dsl) -> Option<Dsl> {
        self.directions()
            .into_iter()
            .find(|d| d.target == target)
            .map(|d| d.source)
    }

    /// The targets whose skills come from `source`: the DSLs its solo attempts' skills are
    /// given to (the leak audit checks a skill against each).
    pub fn targets_of(&self, source: Dsl) -> Vec<Dsl> {
        self.directions()
            .into_iter()
            .filter(|d| d.source == source)
            .map(|d| d.target)
            .collect()
    }

    /// DSLs that need solo attempts: every source (for skills) and every target (baseline).
    pub fn solo_dsls(&self) -> Vec<Dsl> {
        let mut v: Vec<Dsl> = self
            .directions()
            .iter()
            .flat_map(|d| [d.source, d.target])
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// A stable fingerprint of what the run computes (a resumed run must match it): that of
    /// the config as written when it was loaded from a file, so the checkout's location does
    /// not matter.
    pub fn fingerprint(&self) -> String {
        if let Some(fp) = &self.written_fingerprint {
            return fp.clone();
        }
        use sha2::{Digest, Sha256};
        // Where the judges run does not change what the run computes.
        let mut what = self.clone();
        what.eval.backend = None;
        what.eval.address = None;
        let json = serde_json::to_string(&what).unwrap_or_default();
        hex::encode(Sha256::digest(json.as_bytes()))
    }

    pub fn run_dir(&self, runs_dir: &Path) -> PathBuf {
        runs_dir.join(&self.name)
    }
}

/// Refuse a config whose fingerprint differs from the one the run started with.
pub fn check_fingerprint(stored: Option<&str>, cfg: &ExperimentConfig) -> Result<()> {
    match stored {
        Some(fp) if fp != cfg.fingerprint() => bail!(
            "run {:?} was started with a different configuration; resume it with the same config file, or give the new config another name",
            cfg.name
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("exp.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    const GOOD: &str = r#"
name = "demo"
problems = ["A01"]

[[models]]
label = "replay-demo"
[models.provider]
kind = "replay"
dir = "replay"
"#;

    #[test]
    fn loads_with_defaults_and_resolves_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        assert_eq!(cfg.runs, 1);
        assert_eq!(cfg.directions().len(), 2);
        assert_eq!(cfg.solo_dsls(), vec![Dsl::CUTE, Dsl::TIRX]);
        assert!(cfg.controls.placebo && cfg.controls.repeat_solo);
        assert_eq!(
            cfg.models[0].provider.dir.as_deref(),
            Some(tmp.path().join("replay").as_path())
        );
        assert_eq!(cfg.fingerprint(), cfg.clone().fingerprint());
    }

    #[test]
    fn dsls_give_every_ordered_pair() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = ExperimentConfig::load(&write(
            tmp.path(),
            &format!("dsls = [\"cute\", \"toy\"]\n{GOOD}"),
        ))
        .unwrap();
        let labels: Vec<String> = cfg.directions().into_iter().map(|d| d.label()).collect();
        assert_eq!(labels, vec!["cute->toy", "toy->cute"]);
        let toy = Dsl::new("toy").unwrap();
        assert_eq!(cfg.source_of(toy), Some(Dsl::CUTE));
        assert_eq!(cfg.targets_of(Dsl::CUTE), vec![toy]);
        assert_eq!(cfg.solo_dsls(), vec![Dsl::CUTE, toy]);
        // The default keeps cute and tirx, both ways, and an unchanged fingerprint field set.
        let plain = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        assert_eq!(plain.source_of(Dsl::TIRX), Some(Dsl::CUTE));
        assert!(!serde_json::to_string(&plain).unwrap().contains("\"dsls\""));
        // A cycle of three gives each target one source; three DSLs as all pairs do not.
        let cycle = ExperimentConfig::load(&write(
            tmp.path(),
            &format!("directions = [\"cute->tirx\", \"tirx->toy\", \"toy->cute\"]\n{GOOD}"),
        ))
        .unwrap();
        assert_eq!(cycle.source_of(Dsl::CUTE), Some(toy));
        for (text, field) in [
            ("dsls = [\"cute\", \"tirx\", \"toy\"]", "`dsls`"),
            ("dsls = [\"cute\"]", "`dsls`"),
            ("dsls = [\"cute\", \"Bad Name\"]", "`dsls[1]`"),
            (
                "dsls = [\"cute\", \"toy\"]\ndirections = [\"cute->toy\"]",
                "`dsls`",
            ),
            (
                "directions = [\"cute->toy\", \"tirx->toy\"]",
                "`directions`",
            ),
        ] {
            let e = ExperimentConfig::load(&write(tmp.path(), &format!("{text}\n{GOOD}")))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{text}: {e}");
        }
    }

    #[test]
    fn errors_name_file_and_field() {
        let tmp = tempfile::tempdir().unwrap();
        let e = ExperimentConfig::load(&write(tmp.path(), &GOOD.replace("problems", "problemz")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("exp.toml") && e.contains("problemz"), "{e}");
        let e = ExperimentConfig::load(&write(
            tmp.path(),
            &format!("directions = [\"cute->cute\"]\n{GOOD}"),
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("directions[0]"), "{e}");
        let e = ExperimentConfig::load(&write(tmp.path(), &format!("runs = 0\n{GOOD}")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`runs`"), "{e}");
        let e = ExperimentConfig::load(&write(tmp.path(), "name = \"x\"\nmodels = []\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`models`"), "{e}");
    }

    #[test]
    fn prices_sessions_and_input_cap_are_read_and_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        assert_eq!(cfg.eval.timing_sessions(), DEFAULT_TIMING_SESSIONS);
        assert_eq!(cfg.budget.max_input_tokens, None);
        assert!(cfg.models[0].price.is_none());
        let priced = GOOD.replace(
            "dir = \"replay\"",
            "dir = \"replay\"\n[models.price]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0",
        );
        let text = format!(
            "[eval]\ntiming_sessions = 5\n[budget]\nmax_turns = 4\nmax_output_tokens = 100\nmax_tool_evals = 2\nmax_wall_s = 60\nmax_input_tokens = 5000\n{priced}"
        );
        // TOML: top-level keys before tables.
        let text = format!(
            "name = \"demo\"\nproblems = [\"A01\"]\n{}",
            text.replace("name = \"demo\"\nproblems = [\"A01\"]\n", "")
        );
        let cfg = ExperimentConfig::load(&write(tmp.path(), &text)).unwrap();
        assert_eq!(cfg.eval.timing_sessions(), 5);
        assert_eq!(cfg.budget.max_input_tokens, Some(5000));
        let p = cfg.models[0].price.unwrap();
        assert!((p.cost(1_000_000, 100_000) - 4.5).abs() < 1e-12);
        let bad = text.replace("output_per_mtok = 15.0", "output_per_mtok = -1.0");
        let e = ExperimentConfig::load(&write(tmp.path(), &bad))
            .unwrap_err()
            .to_string();
        assert!(e.contains("models[0].price.output_per_mtok"), "{e}");
        let bad = text.replace("timing_sessions = 5", "timing_sessions = 0");
        let e = ExperimentConfig::load(&write(tmp.path(), &bad))
            .unwrap_err()
            .to_string();
        assert!(e.contains("eval.timing_sessions"), "{e}");
    }

    #[test]
    fn unset_new_fields_keep_old_fingerprints() {
        // A config without the fields added later serializes exactly as before them, so a
        // run started before them resumes (its stored fingerprint still matches).
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        cfg.written_fingerprint = None;
        let json = serde_json::to_string(&cfg).unwrap();
        for f in ["timing_sessions", "price", "max_input_tokens", "dsls"] {
            assert!(!json.contains(f), "{f} in {json}");
        }
    }

    #[test]
    fn the_ray_backend_is_checked_and_left_out_of_the_fingerprint() {
        let tmp = tempfile::tempdir().unwrap();
        let with_eval = |lines: &str| format!("{GOOD}\n[eval]\n{lines}\n");
        let local = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        assert_eq!(local.eval.backend().unwrap(), mkb_eval::Backend::Local);
        let ray = with_eval("backend = \"ray\"\naddress = \"127.0.0.1:6379\"");
        let cfg = ExperimentConfig::load(&write(tmp.path(), &ray)).unwrap();
        assert_eq!(
            cfg.eval.backend().unwrap(),
            mkb_eval::Backend::Ray {
                address: "127.0.0.1:6379".into()
            }
        );
        // The same run, resumable on either backend.
        assert_eq!(cfg.fingerprint(), local.fingerprint());
        for (lines, field) in [
            ("backend = \"ray\"", "eval.backend"),
            ("backend = \"slurm\"", "eval.backend"),
            ("address = \"127.0.0.1:6379\"", "eval.address"),
        ] {
            let e = ExperimentConfig::load(&write(tmp.path(), &with_eval(lines)))
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{field}: {e}");
        }
    }

    #[test]
    fn fingerprint_guards_resume() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = ExperimentConfig::load(&write(tmp.path(), GOOD)).unwrap();
        assert!(check_fingerprint(Some(&cfg.fingerprint()), &cfg).is_ok());
        let mut other = cfg.clone();
        other.runs = 2;
        other.written_fingerprint = None;
        assert!(check_fingerprint(Some(&cfg.fingerprint()), &other).is_err());
        assert!(check_fingerprint(None, &other).is_ok());
    }
}
