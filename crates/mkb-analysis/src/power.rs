//! `mkb power`: how many problems and runs are needed to detect a given lift. Power is
//! estimated by simulation with the same generative model as `mkb simulate` (noise levels
//! from a [`SimConfig`], optionally fitted to a pilot run with [`fit_sim_config`]) and the
//! same analysis as `mkb analyze`: for each (problems, runs) point, the share of simulated
//! experiments whose lift CI excludes 0 on the side of the true lift, and the share whose
//! Wilcoxon test is significant in that direction.

use crate::analysis::{analyze, par_map, AnalysisOptions};
use crate::row::AttemptRow;
use crate::simulate::{simulate, SimConfig, SimModel};
use crate::stats;
use crate::table::text_table;
use mkb_core::Condition;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Settings of a power study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PowerConfig {
    /// Noise levels, pass rates and so on; its models are replaced by one model whose
    /// conditioned lift is `lift` in both directions (each direction counts as an experiment).
    pub sim: SimConfig,
    /// The true lift to detect.
    pub lift: f64,
    /// Problem counts to try.
    pub problems: Vec<usize>,
    /// Runs per problem to try.
    pub runs: Vec<u32>,
    /// Simulated experiments per point (two directions each).
    pub simulations: usize,
    /// Analysis options (resamples default to 1,000 here to keep the study quick; the
    /// interval end points move little beyond that).
    pub options: AnalysisOptions,
    /// Power to reach.
    pub target_power: f64,
    pub seed: u64,
}

impl Default for PowerConfig {
    fn default() -> Self {
        PowerConfig {
            sim: SimConfig {
                controls: false,
                ..SimConfig::default()
            },
            lift: 0.2,
            problems: vec![12, 24, 37, 50, 74, 100, 150],
            runs: vec![1, 2, 3, 5],
            simulations: 200,
            options: AnalysisOptions {
                resamples: 1000,
                ..AnalysisOptions::default()
            },
            target_power: 0.8,
            seed: 1,
        }
    }
}

/// Power at one design point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerPoint {
    pub problems: usize,
    pub runs: u32,
    /// Experiments simulated (cells with a defined lift).
    pub experiments: usize,
    /// Share whose CI excludes 0 on the side of the true lift.
    pub power_ci: f64,
    /// Share with Wilcoxon p < 1 - confidence and W+ on the side of the true lift.
    pub power_wilcoxon: f64,
    /// Median CI width (hi - lo) of the lift.
    pub median_ci_width: f64,
    /// Mean attempts the design costs per model (both DSLs, solo + conditioned).
    pub attempts_per_model: usize,
}

/// Result of a power study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerReport {
    pub lift: f64,
    pub target_power: f64,
    pub confidence: f64,
    pub simulations: usize,
    pub points: Vec<PowerPoint>,
    /// For each run count: the fewest problems of the grid reaching the target power by the
    /// CI criterion (`None`: none of the grid does).
    pub min_problems: BTreeMap<u32, Option<usize>>,
    /// The simulation settings used (noise levels decide everything; see `notes`).
    pub sim: SimConfig,
    pub notes: Vec<String>,
}

impl PowerConfig {
    /// Check the study's settings; the error names the setting (as `mkb power` spells it).
    pub fn validate(&self) -> Result<(), String> {
        if !self.lift.is_finite() || self.lift <= -1.0 {
            return Err(format!(
                "--lift must be a finite number > -1, got {}",
                self.lift
            ));
        }
        if self.problems.is_empty() || self.problems.iter().any(|&n| n < 2) {
            return Err(format!(
                "--problems: every problem count must be at least 2 (a CI needs two problems), got {:?}",
                self.problems
            ));
        }
        if self.runs.is_empty() || self.runs.contains(&0) {
            return Err(format!(
                "--runs: every run count must be at least 1, got {:?}",
                self.runs
            ));
        }
        if self.simulations == 0 {
            return Err("--simulations must be at least 1".into());
        }
        if !(self.target_power > 0.0 && self.target_power <= 1.0) {
            return Err(format!(
                "--target-power must lie in (0, 1], got {}",
                self.target_power
            ));
        }
        let probe = SimConfig {
            models: vec![SimModel {
                name: "m".into(),
                lift_cute_to_tirx: self.lift,
                lift_tirx_to_cute: self.lift,
            }],
            ..self.sim.clone()
        };
        probe
            .validate()
            .map_err(|e| format!("simulation settings: {e}"))
    }
}

/// Run the power study; an invalid config is an error naming the setting.
pub fn power(cfg: &PowerConfig) -> Result<PowerReport, String> {
    cfg.validate()?;
    let threads = cfg.options.worker_threads();
    let opts = cfg.options.for_one_of_many();
    let alpha = 1.0 - opts.confidence;
    let sign = if cfg.lift >= 0.0 { 1.0 } else { -1.0 };
    let mut jobs = Vec::new();
    for &n in &cfg.problems {
        for &r in &cfg.runs {
            for s in 0..cfg.simulations {
                jobs.push((n, r, s));
            }
        }
    }
    let results = par_map(&jobs, threads, |&(n, r, s)| {
        let sim = SimConfig {
            problems: n,
            runs: r,
            controls: false,
            models: vec![SimModel {
                name: "m".into(),
                lift_cute_to_tirx: cfg.lift,
                lift_tirx_to_cute: cfg.lift,
            }],
            ..cfg.sim.clone()
        };
        let seed = cfg.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
            ^ ((n as u64) << 40)
            ^ ((r as u64) << 32)
            ^ s as u64;
        let rows = simulate(&sim, seed);
        let a = analyze(
            &rows,
            &AnalysisOptions {
                seed: seed ^ 0x5A5A,
                ..opts.clone()
            },
        );
        let mut out = Vec::new();
        for c in a
            .cells
            .iter()
            .filter(|c| c.condition == Condition::Conditioned)
        {
            let Some(ci) = c.lift_ci else { continue };
            let ci_hit = if sign > 0.0 {
                ci.lo.is_some_and(|l| l > 0.0)
            } else {
                ci.hi.is_some_and(|h| h < 0.0)
            };
            let w_hit = c.wilcoxon.as_ref().is_some_and(|w| {
                let mid = w.n as f64 * (w.n as f64 + 1.0) / 4.0;
                w.p_value < alpha && (w.w_plus - mid) * sign > 0.0
            });
            let width = match (ci.lo, ci.hi) {
                (Some(l), Some(h)) => h - l,
                _ => f64::INFINITY,
            };
            out.push((ci_hit, w_hit, width));
        }
        out
    });
    let mut points = Vec::new();
    for &n in &cfg.problems {
        for &r in &cfg.runs {
            let exps: Vec<(bool, bool, f64)> = jobs
                .iter()
                .zip(&results)
                .filter(|((jn, jr, _), _)| *jn == n && *jr == r)
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            let k = exps.len().max(1) as f64;
            let widths: Vec<f64> = exps.iter().map(|e| e.2).collect();
            points.push(PowerPoint {
                problems: n,
                runs: r,
                experiments: exps.len(),
                power_ci: exps.iter().filter(|e| e.0).count() as f64 / k,
                power_wilcoxon: exps.iter().filter(|e| e.1).count() as f64 / k,
                median_ci_width: stats::median(&widths),
                attempts_per_model: n * r as usize * 4,
            });
        }
    }
    let mut min_problems = BTreeMap::new();
    for &r in &cfg.runs {
        let best = points
            .iter()
            .filter(|p| p.runs == r && p.power_ci >= cfg.target_power)
            .map(|p| p.problems)
            .min();
        min_problems.insert(r, best);
    }
    let notes = vec![
        format!(
            "power by simulation: {} experiments per point x 2 directions; noise: pass rate solo {:.2} / conditioned {:.2}, problem_sd {:.2}, run_sd {:.2}, lift_sd {:.2}",
            cfg.simulations, cfg.sim.pass_rate_solo, cfg.sim.pass_rate_conditioned, cfg.sim.problem_sd, cfg.sim.run_sd, cfg.sim.lift_sd
        ),
        "the answer depends on these noise levels: fit them to a pilot run (fit_sim_config) rather than trusting the defaults".into(),
        "the suite has 74 problems: larger problem counts are hypothetical and only show the trend".into(),
    ];
    Ok(PowerReport {
        lift: cfg.lift,
        target_power: cfg.target_power,
        confidence: opts.confidence,
        simulations: cfg.simulations,
        points,
        min_problems,
        sim: cfg.sim.clone(),
        notes,
    })
}

/// The power study as terminal text.
pub fn render_power(r: &PowerReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Power to detect a lift of {:+.1}% at {:.0}% confidence (target power {:.0}%)",
        r.lift * 100.0,
        r.confidence * 100.0,
        r.target_power * 100.0
    );
    let rows: Vec<Vec<String>> = r
        .points
        .iter()
        .map(|p| {
            vec![
                p.problems.to_string(),
                p.runs.to_string(),
                format!("{:.0}%", p.power_ci * 100.0),
                format!("{:.0}%", p.power_wilcoxon * 100.0),
                if p.median_ci_width.is_finite() {
                    format!("{:.1}pp", p.median_ci_width * 100.0)
                } else {
                    "unbounded".into()
                },
                p.attempts_per_model.to_string(),
                p.experiments.to_string(),
            ]
        })
        .collect();
    out.push_str(&text_table(
        &[
            "problems",
            "runs",
            "power (CI)",
            "power (Wilcoxon)",
            "median CI width",
            "attempts/model",
            "experiments",
        ],
        &rows,
        &[true; 7],
    ));
    for (runs, n) in &r.min_problems {
        let _ = writeln!(
            out,
            "R = {runs}: {}",
            match n {
                Some(n) => format!("{n} problems reach {:.0}% power", r.target_power * 100.0),
                None => "no problem count of the grid reaches the target".into(),
            }
        );
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Estimate the simulator's noise levels from a (pilot) run: pass rates of solo and
/// conditioned attempts, the spread of log scores across problems and across runs of one
/// problem (one-way variance components of correct solo attempts' log scores), and the TIRx
/// offset. The lifts and `lift_sd` are not estimated (the lift is what power asks about).
/// Pass rates are kept in [0.02, 0.98] and `source_dependence` is lowered where the fitted
/// pass rate requires it. An error when the pilot has no correct solo attempt (e.g. its final
/// evaluations were compile-only): nothing can be fitted then.
pub fn fit_sim_config(rows: &[AttemptRow], base: &SimConfig) -> Result<SimConfig, String> {
    let solo = rows.iter().filter(|r| r.condition == Condition::Solo);
    let (n_solo, n_correct) = solo.fold((0, 0), |(n, c), r| (n + 1, c + r.correct as usize));
    if n_solo == 0 {
        return Err("the pilot run has no solo attempt".into());
    }
    if n_correct == 0 {
        let compile = rows
            .iter()
            .filter(|r| r.eval_mode.as_deref() == Some("compile"))
            .count();
        return Err(format!(
            "the pilot run has no correct solo attempt ({n_solo} solo attempts{}), so no score spread can be fitted",
            if compile > 0 {
                format!("; {compile} attempts were evaluated compile-only: evaluate on a GPU")
            } else {
                String::new()
            }
        ));
    }
    let share = |c: Condition| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.condition == c)
            .map(|r| if r.correct { 1.0 } else { 0.0 })
            .collect();
        if v.is_empty() {
            None
        } else {
            Some(stats::mean(&v).clamp(0.02, 0.98))
        }
    };
    let mut cfg = base.clone();
    if let Some(p) = share(Condition::Solo) {
        cfg.pass_rate_solo = p;
    }
    if let Some(p) = share(Condition::Conditioned) {
        cfg.pass_rate_conditioned = p;
    }
    // Log scores of correct solo attempts grouped by (model, target, problem).
    let mut groups: BTreeMap<(&str, mkb_core::Dsl, &str), Vec<f64>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.condition == Condition::Solo && r.effective_score() > 0.0)
    {
        groups
            .entry((r.model.as_str(), r.target, r.problem.as_str()))
            .or_default()
            .push(r.effective_score().ln());
    }
    let (mut ss_w, mut df_w) = (0.0, 0.0);
    for v in groups.values().filter(|v| v.len() >= 2) {
        let m = stats::mean(v);
        ss_w += v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        df_w += (v.len() - 1) as f64;
    }
    let within = if df_w > 0.0 { Some(ss_w / df_w) } else { None };
    if let Some(w) = within {
        cfg.run_sd = w.sqrt();
    }
    let means: Vec<(mkb_core::Dsl, f64, usize)> = groups
        .iter()
        .map(|((_, t, _), v)| (*t, stats::mean(v), v.len()))
        .collect();
    if means.len() >= 3 {
        // Remove the DSL offset before the between-problem spread.
        let by = |d| {
            means
                .iter()
                .filter(|m| m.0 == d)
                .map(|m| m.1)
                .collect::<Vec<f64>>()
        };
        let (cute, tirx) = (by(mkb_core::Dsl::CUTE), by(mkb_core::Dsl::TIRX));
        if !cute.is_empty() && !tirx.is_empty() {
            cfg.tirx_log_offset = stats::mean(&tirx) - stats::mean(&cute);
        }
        let centered: Vec<f64> = means
            .iter()
            .map(|m| {
                m.1 - if m.0 == mkb_core::Dsl::TIRX {
                    stats::mean(&tirx)
                } else {
                    stats::mean(&cute)
                }
            })
            .collect();
        let var_means = centered.iter().map(|x| x * x).sum::<f64>() / (centered.len() - 1) as f64;
        let mean_inv_n = means.iter().map(|m| 1.0 / m.2 as f64).sum::<f64>() / means.len() as f64;
        let between = (var_means - within.unwrap_or(cfg.run_sd * cfg.run_sd) * mean_inv_n).max(0.0);
        // The simulator's problem level has variance problem_sd^2 * (1 + 1/4).
        cfg.problem_sd = (between / 1.25).sqrt();
    }
    if let Some(e) = rows
        .first()
        .map(|r| r.eps_or(crate::row::DEFAULT_NOISE_EPS))
    {
        cfg.noise_eps = e;
    }
    let p = cfg.pass_rate_solo;
    if p < 1.0 && cfg.source_dependence * p / (1.0 - p) >= 1.0 {
        cfg.source_dependence = 0.9 * (1.0 - p) / p;
    }
    cfg.validate().map(|_| cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_grows_with_problems_and_is_low_for_tiny_designs() {
        let cfg = PowerConfig {
            lift: 0.5,
            problems: vec![6, 60],
            runs: vec![3],
            simulations: 20,
            options: AnalysisOptions {
                resamples: 300,
                ..AnalysisOptions::default()
            },
            sim: SimConfig {
                lift_sd: 0.0,
                source_dependence: 0.0,
                ..SimConfig::default()
            },
            ..PowerConfig::default()
        };
        let r = power(&cfg).unwrap();
        assert_eq!(r.points.len(), 2);
        let small = &r.points[0];
        let big = &r.points[1];
        assert_eq!(small.experiments, 40);
        assert!(big.power_ci > small.power_ci + 0.2, "{small:?} {big:?}");
        assert!(big.power_ci > 0.6, "{big:?}");
        assert!(big.median_ci_width < small.median_ci_width);
        let text = render_power(&r);
        assert!(text.contains("power (CI)") && text.contains("R = 3"));
    }

    #[test]
    fn fitted_noise_levels_recover_the_simulation() {
        let truth = SimConfig {
            problems: 300,
            runs: 3,
            problem_sd: 0.6,
            run_sd: 0.25,
            pass_rate_solo: 0.5,
            tirx_log_offset: -0.3,
            ..SimConfig::default()
        };
        let rows = simulate(&truth, 3);
        let fit = fit_sim_config(&rows, &SimConfig::default()).unwrap();
        assert!(
            (fit.pass_rate_solo - 0.5).abs() < 0.03,
            "{}",
            fit.pass_rate_solo
        );
        assert!(
            (fit.pass_rate_conditioned - 0.7).abs() < 0.03,
            "{}",
            fit.pass_rate_conditioned
        );
        assert!((fit.run_sd - 0.25).abs() < 0.03, "{}", fit.run_sd);
        assert!((fit.problem_sd - 0.6).abs() < 0.08, "{}", fit.problem_sd);
        assert!(
            (fit.tirx_log_offset + 0.3).abs() < 0.1,
            "{}",
            fit.tirx_log_offset
        );
    }
}
