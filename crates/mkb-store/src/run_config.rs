//! The few fields of a run's config that readers of a store need: the models' token prices
//! (cost per attempt) and the per-attempt budget. `mkb run` stores its whole experiment config
//! as JSON in meta `config` (mkb-run's `ExperimentConfig`); readers that must not depend on
//! mkb-run (the analysis) take just these fields from it, ignoring everything else, so a
//! config field added later never breaks them.

use crate::Store;
use anyhow::{Context as _, Result};
use mkb_core::Budget;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The meta key holding the run's experiment config (JSON).
pub const CONFIG_META: &str = "config";

/// What a model's tokens cost, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    /// The cost in US dollars of `input` and `output` tokens.
    pub fn cost(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.input_per_mtok + output as f64 * self.output_per_mtok) / 1e6
    }
}

/// The parts of a stored experiment config readers use. Unknown fields are ignored on purpose.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct StoredConfig {
    #[serde(default)]
    pub budget: Option<Budget>,
    #[serde(default)]
    pub models: Vec<StoredModel>,
}

/// One model of a stored config: its label and its price, where one was set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StoredModel {
    pub label: String,
    #[serde(default)]
    pub price: Option<Price>,
}

impl StoredConfig {
    /// Parse the JSON of meta `config`.
    pub fn parse(json: &str) -> Result<StoredConfig> {
        Ok(serde_json::from_str(json)?)
    }

    /// Each priced model's price, by label.
    pub fn prices(&self) -> BTreeMap<String, Price> {
        self.models
            .iter()
            .filter_map(|m| m.price.map(|p| (m.label.clone(), p)))
            .collect()
    }
}

impl Store {
    /// The run's config as readers see it; `None` where none is stored (a simulated run).
    /// A config that does not parse is an error naming the store.
    pub fn run_config(&self) -> Result<Option<StoredConfig>> {
        match self.meta(CONFIG_META)? {
            Some(json) => StoredConfig::parse(&json).map(Some).with_context(|| {
                format!(
                    "{}: meta {CONFIG_META:?} is not a readable run config",
                    self.dir.join("mkb.sqlite").display()
                )
            }),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_and_budget_come_from_the_config_and_the_rest_is_ignored() {
        let json = r#"{"name":"x","problems":["A01"],"future_field":{"a":1},
            "budget":{"max_turns":4,"max_output_tokens":100,"max_tool_evals":2,"max_wall_s":60},
            "models":[{"label":"m","provider":{"kind":"replay"},"price":{"input_per_mtok":2.0,"output_per_mtok":10.0}},
                      {"label":"free","provider":{"kind":"replay"}}]}"#;
        let c = StoredConfig::parse(json).unwrap();
        assert_eq!(c.budget.unwrap().max_turns, 4);
        let p = c.prices();
        assert_eq!(p.len(), 1);
        // $2 per million input, $10 per million output.
        assert!((p["m"].cost(1_000_000, 100_000) - 3.0).abs() < 1e-12);
        assert!(StoredConfig::parse("[1, 2]").is_err());
    }

    #[test]
    fn the_store_reads_its_config_or_names_itself() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Store::open(tmp.path()).unwrap();
        assert_eq!(s.run_config().unwrap(), None);
        s.set_meta(CONFIG_META, r#"{"models":[]}"#).unwrap();
        assert_eq!(s.run_config().unwrap(), Some(StoredConfig::default()));
        s.set_meta(CONFIG_META, "not json").unwrap();
        let e = format!("{:#}", s.run_config().unwrap_err());
        assert!(e.contains("mkb.sqlite") && e.contains("config"), "{e}");
    }
}
