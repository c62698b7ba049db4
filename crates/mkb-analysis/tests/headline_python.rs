//! The headline numbers of a simulated run with planted effects (several models, lifts of
//! both signs, source dependence, a relative-standing effect) agree with an independent
//! recomputation in Python (tests/recompute_headline.py: pandas, numpy, scipy): point
//! statistics exactly, bootstrap intervals within bootstrap noise. Runs when MKB_EXPORT_PYTHON
//! names the export-check interpreter (scripts/test.sh builds it with scipy); skipped
//! otherwise unless MKB_REQUIRE_ALL is set.

use mkb_analysis::export::{export, ExportFormat};
use mkb_analysis::{analyze, try_simulate, AnalysisOptions, SimConfig, SimModel};
use std::process::Command;

const RESAMPLES: usize = 2000;

fn check(cfg: &SimConfig, seed: u64, python: &str) {
    let rows = try_simulate(cfg, seed).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rows_path = dir.path().join("rows.jsonl");
    export(&rows, ExportFormat::Jsonl, &rows_path).unwrap();
    let a = analyze(
        &rows,
        &AnalysisOptions {
            resamples: RESAMPLES,
            per_family: false,
            per_problem: false,
            ..AnalysisOptions::default()
        },
    );
    assert!(a.headline.rtm.is_some() && a.headline.association.is_some());
    let a_path = dir.path().join("analysis.json");
    std::fs::write(&a_path, serde_json::to_string(&a).unwrap()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/recompute_headline.py");
    let out = Command::new(python)
        .arg(script)
        .arg(&rows_path)
        .arg(&a_path)
        .arg(RESAMPLES.to_string())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "recomputation failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.starts_with("ok"), "{stdout}");
    eprintln!("R = {}: {stdout}", cfg.runs);
}

#[test]
fn headline_matches_an_independent_python_recomputation() {
    let Ok(python) = std::env::var("MKB_EXPORT_PYTHON") else {
        assert!(
            std::env::var_os("MKB_REQUIRE_ALL").is_none(),
            "MKB_REQUIRE_ALL is set but MKB_EXPORT_PYTHON is not"
        );
        eprintln!("skipped: set MKB_EXPORT_PYTHON to a Python with pandas, numpy and scipy");
        return;
    };
    let models = vec![
        SimModel {
            name: "gains".into(),
            lift_cute_to_tirx: 0.4,
            lift_tirx_to_cute: 0.25,
        },
        SimModel {
            name: "mixed".into(),
            lift_cute_to_tirx: -0.2,
            lift_tirx_to_cute: 0.3,
        },
        SimModel {
            name: "loses".into(),
            lift_cute_to_tirx: -0.15,
            lift_tirx_to_cute: -0.1,
        },
    ];
    let base = SimConfig {
        models,
        problems: 30,
        pass_rate_solo: 0.7,
        pass_rate_conditioned: 0.75,
        source_dependence: 0.2,
        standing_effect: 0.3,
        tirx_log_offset: -0.1,
        ..SimConfig::default()
    };
    // R = 1: held out = the repeat-solo arm; the lift CIs are recomputed too.
    check(
        &SimConfig {
            runs: 1,
            ..base.clone()
        },
        5,
        &python,
    );
    // R = 2: held out = the other solo run.
    check(&SimConfig { runs: 2, ..base }, 6, &python);
}
