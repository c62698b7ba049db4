//! Coverage of the paired-bootstrap CI on simulated runs with a known true lift, and the false
//! positives on zero-lift cells (placebo with lift 0, repeat solo). Each simulated experiment is
//! a full run (both directions, conditioned + placebo + repeat solo) analysed exactly like a
//! real one; the conditioned cells check coverage, the zero-lift cells false positives.
//!
//! - `coverage_per_family_size` (n = 12 problems, R = 3; always runs, about a minute in debug):
//!   1,000 experiments, 1,000 resamples in debug builds and 2,000 in release.
//! - `coverage_full_suite` (n = 74, R = 3) and `coverage_single_run` (n = 74, R = 1): release
//!   builds (CI runs `cargo test --release`), or debug with MKB_COVERAGE=1. 1,000 experiments,
//!   2,000 resamples.
//!
//! Resamples are below the analysis default of 10,000 to keep CI time reasonable; the number of
//! resamples only adds Monte Carlo noise to the interval ends. MKB_COVERAGE_SIMS and
//! MKB_COVERAGE_RESAMPLES override the sizes. Seeds are fixed: the result is deterministic.

use mkb_analysis::{
    coverage_study, AnalysisOptions, CoverageConfig, CoverageReport, SimConfig, SimModel,
};

const SEED: u64 = 20261129;

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn heavy_enabled() -> bool {
    !cfg!(debug_assertions) || std::env::var("MKB_COVERAGE").is_ok_and(|v| v == "1")
}

fn study(problems: usize, runs: u32, sims: usize, resamples: usize) -> CoverageReport {
    let sim = SimConfig {
        run_name: "coverage".into(),
        problems,
        runs,
        models: vec![SimModel {
            name: "m".into(),
            lift_cute_to_tirx: 0.2,
            lift_tirx_to_cute: 0.1,
        }],
        ..SimConfig::default()
    };
    let sims = env_usize("MKB_COVERAGE_SIMS").unwrap_or(sims);
    let resamples = env_usize("MKB_COVERAGE_RESAMPLES").unwrap_or(resamples);
    let t = std::time::Instant::now();
    let r = coverage_study(&CoverageConfig {
        sim,
        simulations: sims,
        options: AnalysisOptions {
            resamples,
            ..AnalysisOptions::default()
        },
        seed: SEED,
    });
    eprintln!(
        "n = {problems}, R = {runs}: {} experiments x {} resamples: coverage {:.2}% ({}/{}), zero-lift cells called significant: CI {:.2}%, Wilcoxon {:.2}% ({} cells) [{:.0} s]",
        r.simulations,
        r.resamples,
        100.0 * r.coverage(),
        r.covered,
        r.checked,
        100.0 * r.ci_false_positive_rate(),
        100.0 * r.wilcoxon_false_positive_rate(),
        r.null_cells,
        t.elapsed().as_secs_f64()
    );
    assert!(
        r.simulations >= 200,
        "the acceptance criterion asks for at least 200 simulations"
    );
    assert_eq!(
        r.checked,
        2 * r.simulations,
        "every experiment gives two conditioned cells with a CI"
    );
    r
}

fn check_coverage(r: &CoverageReport) {
    let c = r.coverage();
    assert!(
        (0.93..=0.97).contains(&c),
        "95% CI covered the true lift in {:.2}% of experiments (want 93-97%)",
        100.0 * c
    );
}

/// "No more than about 5%": 5% plus about three standard errors of the estimate (the 4,000
/// zero-lift cells of 1,000 experiments are correlated in pairs).
const FP_MAX: f64 = 0.065;

#[test]
fn coverage_per_family_size() {
    let resamples = if cfg!(debug_assertions) { 1000 } else { 2000 };
    let r = study(12, 3, 1000, resamples);
    check_coverage(&r);
    assert!(
        r.ci_false_positive_rate() <= FP_MAX,
        "zero-lift CI false positives {:.2}%",
        100.0 * r.ci_false_positive_rate()
    );
    assert!(
        r.wilcoxon_false_positive_rate() <= FP_MAX,
        "zero-lift Wilcoxon false positives {:.2}%",
        100.0 * r.wilcoxon_false_positive_rate()
    );
}

#[test]
fn coverage_full_suite() {
    if !heavy_enabled() {
        eprintln!("skipped in debug builds: run with --release (CI does) or MKB_COVERAGE=1");
        return;
    }
    let r = study(74, 3, 1000, 2000);
    check_coverage(&r);
    assert!(
        r.ci_false_positive_rate() <= FP_MAX,
        "zero-lift CI false positives {:.2}%",
        100.0 * r.ci_false_positive_rate()
    );
    assert!(
        r.wilcoxon_false_positive_rate() <= FP_MAX,
        "zero-lift Wilcoxon false positives {:.2}%",
        100.0 * r.wilcoxon_false_positive_rate()
    );
}

/// R = 1 (problems resampled, expanded percentile interval). Known limitation, measured and
/// documented in docs/analysis.md: the CI calls zero-lift cells significant somewhat more
/// often than 5% (5.5-7.5% in our studies); the Wilcoxon test stays near 5%. The CI bound
/// here is therefore 8%, not 6.5%.
#[test]
fn coverage_single_run() {
    if !heavy_enabled() {
        eprintln!("skipped in debug builds: run with --release (CI does) or MKB_COVERAGE=1");
        return;
    }
    let r = study(74, 1, 1000, 2000);
    check_coverage(&r);
    assert!(
        r.ci_false_positive_rate() <= 0.08,
        "zero-lift CI false positives {:.2}%",
        100.0 * r.ci_false_positive_rate()
    );
    assert!(
        r.wilcoxon_false_positive_rate() <= FP_MAX,
        "zero-lift Wilcoxon false positives {:.2}%",
        100.0 * r.wilcoxon_false_positive_rate()
    );
}
