//! Coverage study from the command line (run in release):
//! `cargo run --release -p mkb-analysis --example coverage -- [key=value ...]`
//! keys: sims, problems, runs, lift, lift_sd, problem_sd, run_sd, resamples, seed,
//! interval (percentile|bca|expanded_percentile|expanded_bca), resampling (auto|problems|two_stage|two_stage_adjusted).

use mkb_analysis::bootstrap::{IntervalMethod, Resampling};
use mkb_analysis::{coverage_study, AnalysisOptions, CoverageConfig, SimConfig, SimModel};

fn main() {
    let mut sim = SimConfig::default();
    let mut opts = AnalysisOptions::default();
    let mut sims = 200;
    let mut seed = 1u64;
    let mut lift = 0.2;
    for arg in std::env::args().skip(1) {
        let (k, v) = arg.split_once('=').expect("key=value");
        match k {
            "sims" => sims = v.parse().unwrap(),
            "problems" => sim.problems = v.parse().unwrap(),
            "runs" => sim.runs = v.parse().unwrap(),
            "lift" => lift = v.parse().unwrap(),
            "lift_sd" => sim.lift_sd = v.parse().unwrap(),
            "problem_sd" => sim.problem_sd = v.parse().unwrap(),
            "run_sd" => sim.run_sd = v.parse().unwrap(),
            "resamples" => opts.resamples = v.parse().unwrap(),
            "seed" => seed = v.parse().unwrap(),
            "interval" => {
                opts.interval = if v == "auto" {
                    None
                } else {
                    Some(serde_json::from_str(&format!("\"{v}\"")).unwrap())
                }
            }
            "resampling" => {
                opts.resampling = if v == "auto" {
                    None
                } else {
                    Some(serde_json::from_str::<Resampling>(&format!("\"{v}\"")).unwrap())
                }
            }
            _ => panic!("unknown key {k}"),
        }
    }
    sim.models = vec![SimModel {
        name: "m".into(),
        lift_cute_to_tirx: lift,
        lift_tirx_to_cute: lift,
    }];
    let t = std::time::Instant::now();
    let r = coverage_study(&CoverageConfig {
        sim: sim.clone(),
        simulations: sims,
        options: opts.clone(),
        seed,
    });
    let _ = IntervalMethod::Bca;
    println!(
        "problems={} runs={} lift={} lift_sd={} interval={:?} resampling={:?} sims={} coverage={:.4} ({}/{}) null_ci_fp={:.4} null_wilcoxon_fp={:.4} ({} null cells) {:.1}s",
        sim.problems,
        sim.runs,
        lift,
        sim.lift_sd,
        opts.interval,
        opts.resampling,
        sims,
        r.coverage(),
        r.covered,
        r.checked,
        r.ci_false_positive_rate(),
        r.wilcoxon_false_positive_rate(),
        r.null_cells,
        t.elapsed().as_secs_f64()
    );
}
