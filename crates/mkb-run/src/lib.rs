//! mkb-run: experiment config, scheduler and resume. The run store it writes is the
//! mkb-store crate; the analysis reads that store without this crate.

pub mod config;
pub mod lock;
pub mod provenance;
pub mod rescore;
pub mod scheduler;

pub use config::ExperimentConfig;
pub use mkb_core::utc_now;
pub use mkb_eval::pool::parse_gpus;
pub use scheduler::{run_experiment, RunOptions, RunSummary};

#[cfg(test)]
mod tests {
    use super::*;

    /// Readers of a store take the prices and the budget from the config `mkb run` stores,
    /// through `mkb_store::StoredConfig` (not this crate): the two must agree.
    #[test]
    fn the_stored_config_reads_back_as_the_store_sees_it() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("exp.toml");
        std::fs::write(
            &path,
            "name = \"x\"\nproblems = [\"A01\"]\n[budget]\nmax_turns = 4\nmax_output_tokens = 100\nmax_tool_evals = 2\nmax_wall_s = 60\n[[models]]\nlabel = \"m\"\n[models.provider]\nkind = \"replay\"\ndir = \"r\"\n[models.price]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0\n[[models]]\nlabel = \"free\"\n[models.provider]\nkind = \"replay\"\ndir = \"r\"\n",
        )
        .unwrap();
        let cfg = ExperimentConfig::load(&path).unwrap();
        let seen = mkb_store::StoredConfig::parse(&serde_json::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(seen.budget, Some(cfg.budget));
        let expect: std::collections::BTreeMap<String, (f64, f64)> = cfg
            .models
            .iter()
            .filter_map(|m| {
                m.price
                    .map(|p| (m.label.clone(), (p.input_per_mtok, p.output_per_mtok)))
            })
            .collect();
        let got: std::collections::BTreeMap<String, (f64, f64)> = seen
            .prices()
            .into_iter()
            .map(|(l, p)| (l, (p.input_per_mtok, p.output_per_mtok)))
            .collect();
        assert_eq!(got, expect);
        assert_eq!(got.len(), 1);
    }
}
