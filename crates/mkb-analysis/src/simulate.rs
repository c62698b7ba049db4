//! `simulate`: synthetic runs with a known true lift, noise and failure rates, in the same
//! rows a real run produces; and the coverage study that checks the bootstrap CI against
//! them.
//!
//! Generative model (per model m, problem i, target DSL T, run r):
//! - problem level: `mu(m, i, T) = mu_i + model_i + offset_T`, with mu_i ~ N(0, problem_sd),
//!   model_i ~ N(0, problem_sd / 2), offset_T = `tirx_log_offset` for TIRx, 0 for CuTe;
//! - solo and repeat solo: correct ~ Bernoulli(pass_rate_solo); if correct,
//!   s = exp(mu + e) with e ~ N(-run_sd^2/2, run_sd) (mean-one run-to-run noise);
//! - conditioned (skill from the solo attempt on the other DSL, same run index): correct ~
//!   Bernoulli(pass_rate_conditioned); if correct, s = exp(mu + e) * m * k_src * h_i where
//!   m = (1 + L) * pass_rate_solo / pass_rate_conditioned, h_i = exp(N(-lift_sd^2/2, lift_sd))
//!   is the problem's own effect, and k_src = 1 + d if the source attempt was correct, else
//!   1 - d * p / (1 - p) (p = pass_rate_solo, d = `source_dependence`), so `E(k_src) = 1`;
//! - relative standing (`standing_effect` g): when the source attempt passed, the conditioned
//!   score is further multiplied by j = 1 + g if the source score lies above the target's
//!   true median solo score exp(mu(m, i, T)), else by 1 - g phi / (1 - phi), phi = P(above |
//!   source passed) = Phi((Delta - run_sd^2/2) / run_sd) with Delta the source-minus-target
//!   level offset; so E(j | source passed) = 1 and the population lift is unchanged;
//! - placebo: as conditioned with lift `placebo_lift`, the solo pass rate, and no source
//!   dependence (its skill is another problem's).
//!
//! Every factor has mean one and is independent of the problem level, so the population
//! lift E[s(treated)] / E[s(solo)] - 1 is exactly L (conditioned), `placebo_lift` (placebo)
//! and 0 (repeat solo), whatever the spread of problems: [`SimConfig::true_lift`].

use crate::analysis::{analyze, AnalysisOptions};
use crate::bootstrap::IntervalMethod;
use crate::rng::Rng;
use crate::row::AttemptRow;
use mkb_core::{Condition, Direction, Dsl, EndReason, Family, Verdict, DEFAULT_DSLS};
use serde::{Deserialize, Serialize};

/// A simulated model and its true lifts per direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimModel {
    pub name: String,
    /// True lift of conditioned over solo for CuTe -> TIRx (target TIRx).
    pub lift_cute_to_tirx: f64,
    /// True lift for TIRx -> CuTe (target CuTe).
    pub lift_tirx_to_cute: f64,
}

/// Parameters of a simulated run. `Default` is a full-suite-sized run with R = 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    pub run_name: String,
    pub models: Vec<SimModel>,
    /// Number of problems; families cycle A..F (ids A01, B01, ..., F01, A02, ...).
    pub problems: usize,
    /// Runs R per (model, problem, DSL, condition).
    pub runs: u32,
    /// Per-attempt pass probability of solo (and repeat-solo, placebo) attempts.
    pub pass_rate_solo: f64,
    /// Per-attempt pass probability of conditioned attempts.
    pub pass_rate_conditioned: f64,
    /// Spread of log scores across problems.
    pub problem_sd: f64,
    /// Run-to-run spread of the log score of one problem (agent outcome plus timing noise).
    pub run_sd: f64,
    /// Spread of the lift across problems (log scale); 0 = the same lift everywhere.
    pub lift_sd: f64,
    /// Mean log-score offset of TIRx relative to CuTe (negative: TIRx kernels are slower).
    pub tirx_log_offset: f64,
    /// How much more (relative) a skill helps when its source attempt passed (0..).
    pub source_dependence: f64,
    /// Planted relative-standing effect g >= 0 (see the module documentation): a skill whose
    /// source scored above the target's true median solo score helps more, beyond the source
    /// having passed. 0 = none (outcomes depend on source success only).
    pub standing_effect: f64,
    /// Also simulate the placebo and repeat-solo controls.
    pub controls: bool,
    pub placebo_lift: f64,
    /// Measured timing noise written into every row (`noise_eps`).
    pub noise_eps: f64,
    /// Share of failed attempts that left no kernel at all (verdict None).
    pub no_kernel_share: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            run_name: "sim".into(),
            models: vec![SimModel {
                name: "model-a".into(),
                lift_cute_to_tirx: 0.2,
                lift_tirx_to_cute: 0.1,
            }],
            problems: 74,
            runs: 3,
            pass_rate_solo: 0.6,
            pass_rate_conditioned: 0.7,
            problem_sd: 0.7,
            run_sd: 0.3,
            lift_sd: 0.2,
            tirx_log_offset: -0.2,
            source_dependence: 0.3,
            standing_effect: 0.0,
            controls: true,
            placebo_lift: 0.0,
            noise_eps: 0.03,
            no_kernel_share: 0.1,
        }
    }
}

impl SimConfig {
    /// The configuration of the example report (docs/): three models with different true
    /// lifts, the full suite, R = 3, controls on.
    pub fn example() -> SimConfig {
        SimConfig {
            run_name: "example-sim".into(),
            models: vec![
                SimModel {
                    name: "model-a".into(),
                    lift_cute_to_tirx: 0.30,
                    lift_tirx_to_cute: 0.15,
                },
                SimModel {
                    name: "model-b".into(),
                    lift_cute_to_tirx: 0.0,
                    lift_tirx_to_cute: -0.15,
                },
                SimModel {
                    name: "model-c".into(),
                    lift_cute_to_tirx: 0.60,
                    lift_tirx_to_cute: 0.40,
                },
            ],
            ..SimConfig::default()
        }
    }

    /// The population lift of `condition` over solo that the simulation is built to have.
    pub fn true_lift(
        &self,
        model: &str,
        direction: Direction,
        condition: Condition,
    ) -> Option<f64> {
        let m = self.models.iter().find(|m| m.name == model)?;
        Some(match condition {
            Condition::Solo | Condition::RepeatSolo => 0.0,
            Condition::Placebo => self.placebo_lift,
            Condition::Conditioned if direction.target == Dsl::TIRX => m.lift_cute_to_tirx,
            Condition::Conditioned => m.lift_tirx_to_cute,
        })
    }

    /// P(the source score lies above the target's true median solo score | source passed)
    /// for the direction into `target` (the `standing_effect` model); `None` when it is 0 or 1
    /// (then the effect cannot be mean-one and is not applied).
    pub fn standing_phi(&self, target: Dsl) -> Option<f64> {
        let delta = if target == Dsl::TIRX {
            -self.tirx_log_offset
        } else {
            self.tirx_log_offset
        };
        let s = self.run_sd;
        let phi = if s > 0.0 {
            crate::stats::norm_cdf((delta - s * s / 2.0) / s)
        } else if delta > 0.0 {
            1.0
        } else {
            0.0
        };
        (phi > 1e-9 && phi < 1.0 - 1e-9).then_some(phi)
    }

    /// Check the parameters; the error names the field that is out of range (every field is
    /// named as in the struct; `mkb simulate` spells them as flags).
    pub fn validate(&self) -> Result<(), String> {
        let p = self.pass_rate_solo;
        let pc = self.pass_rate_conditioned;
        let finite = [
            ("pass_rate_solo", p),
            ("pass_rate_conditioned", pc),
            ("problem_sd", self.problem_sd),
            ("run_sd", self.run_sd),
            ("lift_sd", self.lift_sd),
            ("tirx_log_offset", self.tirx_log_offset),
            ("source_dependence", self.source_dependence),
            ("standing_effect", self.standing_effect),
            ("placebo_lift", self.placebo_lift),
            ("noise_eps", self.noise_eps),
            ("no_kernel_share", self.no_kernel_share),
        ];
        for (name, x) in finite {
            if !x.is_finite() {
                return Err(format!("{name} must be a finite number, got {x}"));
            }
        }
        if !(p > 0.0 && p <= 1.0) {
            return Err(format!(
                "pass_rate_solo must lie in (0, 1], got {p} (0: solo never passes, so no lift is defined)"
            ));
        }
        if !(pc > 0.0 && pc <= 1.0) {
            return Err(format!(
                "pass_rate_conditioned must lie in (0, 1], got {pc}"
            ));
        }
        if self.models.is_empty() {
            return Err("models: need at least one model".into());
        }
        if self.problems == 0 {
            return Err("problems must be at least 1".into());
        }
        if self.runs == 0 {
            return Err("runs must be at least 1".into());
        }
        if self.source_dependence < 0.0
            || (p < 1.0 && self.source_dependence * p / (1.0 - p) >= 1.0)
        {
            return Err(format!(
                "source_dependence must lie in [0, {:.3}) for pass_rate_solo {p}, got {}",
                (1.0 - p) / p,
                self.source_dependence
            ));
        }
        if self.standing_effect < 0.0 {
            return Err(format!(
                "standing_effect must be >= 0, got {}",
                self.standing_effect
            ));
        }
        for t in DEFAULT_DSLS {
            if let Some(phi) = self.standing_phi(t) {
                if self.standing_effect * phi / (1.0 - phi) >= 1.0 {
                    return Err(format!(
                        "standing_effect must be < {:.3} with these spreads (into {t}), got {}",
                        (1.0 - phi) / phi,
                        self.standing_effect
                    ));
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for m in &self.models {
            if m.name.trim().is_empty() || !names.insert(m.name.as_str()) {
                return Err(format!(
                    "models: model names must be non-empty and distinct ({:?})",
                    m.name
                ));
            }
            for (d, l) in [
                ("cute->tirx", m.lift_cute_to_tirx),
                ("tirx->cute", m.lift_tirx_to_cute),
            ] {
                if !l.is_finite() || l <= -1.0 {
                    return Err(format!(
                        "model {}: the {d} lift must be a finite number > -1 (-1 would mean a score of 0), got {l}",
                        m.name
                    ));
                }
            }
        }
        if self.placebo_lift <= -1.0 {
            return Err(format!(
                "placebo_lift must be > -1, got {}",
                self.placebo_lift
            ));
        }
        for (name, x) in [
            ("problem_sd", self.problem_sd),
            ("run_sd", self.run_sd),
            ("lift_sd", self.lift_sd),
            ("noise_eps", self.noise_eps),
        ] {
            if x < 0.0 {
                return Err(format!("{name} must be >= 0, got {x}"));
            }
        }
        if !(0.0..=1.0).contains(&self.no_kernel_share) {
            return Err(format!(
                "no_kernel_share must lie in [0, 1], got {}",
                self.no_kernel_share
            ));
        }
        Ok(())
    }
}

/// Problem id of the i-th simulated problem: families cycle A..F.
pub fn sim_problem_id(i: usize) -> (String, Family) {
    let fam = [
        Family::A,
        Family::B,
        Family::C,
        Family::D,
        Family::E,
        Family::F,
    ][i % 6];
    (format!("{}{:02}", fam.letter(), i / 6 + 1), fam)
}

fn lognormal_mean_one(rng: &mut Rng, sd: f64) -> f64 {
    (sd * rng.normal() - sd * sd / 2.0).exp()
}

/// [`simulate`] for a config that may be invalid: the error names the field.
pub fn try_simulate(cfg: &SimConfig, seed: u64) -> Result<Vec<AttemptRow>, String> {
    cfg.validate()?;
    Ok(simulate(cfg, seed))
}

/// Simulate one run: rows for every model, problem, DSL, condition and run index, in a
/// deterministic order. For a config already validated (tests, studies); input from a user
/// goes through [`try_simulate`]. Panics on an invalid config.
pub fn simulate(cfg: &SimConfig, seed: u64) -> Vec<AttemptRow> {
    if let Err(e) = cfg.validate() {
        panic!("invalid simulation config: {e}");
    }
    let mut rng = Rng::new(seed);
    let ps = cfg.pass_rate_solo;
    let mut rows = Vec::new();
    let problems: Vec<(String, Family, f64, f64)> = (0..cfg.problems)
        .map(|i| {
            let (id, fam) = sim_problem_id(i);
            let mu = cfg.problem_sd * rng.normal();
            // Eager reference time of the benchmark shape, microseconds.
            let t_ref = (150f64.ln() + 0.8 * rng.normal()).exp().max(40.0);
            (id, fam, mu, t_ref)
        })
        .collect();
    for model in &cfg.models {
        // Per problem and target: level, and each run's solo outcome (source of the skill).
        let mut level = vec![[0.0f64; 2]; cfg.problems];
        let mut effect = vec![[1.0f64; 2]; cfg.problems];
        for (i, (_, _, mu, _)) in problems.iter().enumerate() {
            let model_i = cfg.problem_sd / 2.0 * rng.normal();
            for (t, dsl) in DEFAULT_DSLS.iter().enumerate() {
                let off = if *dsl == Dsl::TIRX {
                    cfg.tirx_log_offset
                } else {
                    0.0
                };
                level[i][t] = mu + model_i + off;
                effect[i][t] = lognormal_mean_one(&mut rng, cfg.lift_sd);
            }
        }
        let idx = |d: Dsl| if d == Dsl::CUTE { 0 } else { 1 };
        // Solo attempts first (they are the sources of the skills).
        let mut solo: Vec<Vec<[AttemptRow; 2]>> = Vec::new();
        for (i, p) in problems.iter().enumerate() {
            let mut runs = Vec::new();
            for r in 0..cfg.runs {
                let mk = |rng: &mut Rng, d: Dsl| {
                    let correct = rng.bernoulli(ps);
                    let s = if correct {
                        (level[i][idx(d)]).exp() * lognormal_mean_one(rng, cfg.run_sd)
                    } else {
                        0.0
                    };
                    make_row(cfg, rng, model, p, d, Condition::Solo, r, correct, s, None)
                };
                let c = mk(&mut rng, Dsl::CUTE);
                let t = mk(&mut rng, Dsl::TIRX);
                runs.push([c, t]);
            }
            solo.push(runs);
        }
        for (i, p) in problems.iter().enumerate() {
            for (r, source_runs) in solo[i].iter().enumerate() {
                for target in DEFAULT_DSLS {
                    let dir = Direction::default_into(target).expect("a default DSL");
                    let lift = cfg
                        .true_lift(&model.name, dir, Condition::Conditioned)
                        .unwrap_or(0.0);
                    let pc = cfg.pass_rate_conditioned;
                    let source = &source_runs[idx(dir.source)];
                    let k_src = if source.correct {
                        1.0 + cfg.source_dependence
                    } else {
                        1.0 - cfg.source_dependence * ps / (1.0 - ps)
                    };
                    // Relative standing: against the target's true median solo score.
                    let j = match cfg.standing_phi(target) {
                        Some(phi) if source.correct && cfg.standing_effect > 0.0 => {
                            if source.score > level[i][idx(target)].exp() {
                                1.0 + cfg.standing_effect
                            } else {
                                1.0 - cfg.standing_effect * phi / (1.0 - phi)
                            }
                        }
                        _ => 1.0,
                    };
                    let correct = rng.bernoulli(pc);
                    let m = (1.0 + lift) * ps / pc;
                    let s = if correct {
                        level[i][idx(target)].exp()
                            * lognormal_mean_one(&mut rng, cfg.run_sd)
                            * m
                            * k_src
                            * j
                            * effect[i][idx(target)]
                    } else {
                        0.0
                    };
                    let mut row = make_row(
                        cfg,
                        &mut rng,
                        model,
                        p,
                        target,
                        Condition::Conditioned,
                        r as u32,
                        correct,
                        s,
                        Some(source),
                    );
                    row.source_score = Some(source.score);
                    rows.push(row);
                    if cfg.controls {
                        // Placebo: the skill of the next problem, same source DSL.
                        let other = &solo[(i + 1) % cfg.problems][r][idx(dir.source)];
                        let correct = rng.bernoulli(ps);
                        let s = if correct {
                            level[i][idx(target)].exp()
                                * lognormal_mean_one(&mut rng, cfg.run_sd)
                                * (1.0 + cfg.placebo_lift)
                        } else {
                            0.0
                        };
                        let mut row = make_row(
                            cfg,
                            &mut rng,
                            model,
                            p,
                            target,
                            Condition::Placebo,
                            r as u32,
                            correct,
                            s,
                            Some(other),
                        );
                        row.source_score = Some(other.score);
                        rows.push(row);
                        let correct = rng.bernoulli(ps);
                        let s = if correct {
                            level[i][idx(target)].exp() * lognormal_mean_one(&mut rng, cfg.run_sd)
                        } else {
                            0.0
                        };
                        rows.push(make_row(
                            cfg,
                            &mut rng,
                            model,
                            p,
                            target,
                            Condition::RepeatSolo,
                            r as u32,
                            correct,
                            s,
                            None,
                        ));
                    }
                }
            }
        }
        for runs in solo {
            for [c, t] in runs {
                rows.push(c);
                rows.push(t);
            }
        }
    }
    rows
}

#[allow(clippy::too_many_arguments)]
fn make_row(
    cfg: &SimConfig,
    rng: &mut Rng,
    model: &SimModel,
    p: &(String, Family, f64, f64),
    target: Dsl,
    condition: Condition,
    run: u32,
    correct: bool,
    score: f64,
    source: Option<&AttemptRow>,
) -> AttemptRow {
    let (id, fam, _, t_ref) = p;
    let verdict = if correct {
        Some(Verdict::Correct)
    } else if rng.bernoulli(cfg.no_kernel_share) {
        None
    } else {
        let u = rng.uniform();
        Some(if u < 0.40 {
            Verdict::CompileError
        } else if u < 0.75 {
            Verdict::Incorrect
        } else if u < 0.80 {
            Verdict::StaticCheckFailed
        } else if u < 0.90 {
            Verdict::Timeout
        } else {
            Verdict::Crashed
        })
    };
    let u = rng.uniform();
    let end_reason = if u < 0.70 {
        EndReason::Submitted
    } else if u < 0.85 {
        EndReason::MaxTurns
    } else if u < 0.90 {
        EndReason::WallClock
    } else if u < 0.95 {
        EndReason::MaxOutputTokens
    } else {
        EndReason::Stopped
    };
    let runtime_us = if correct { Some(t_ref / score) } else { None };
    let skill_in_prompt = condition.has_skill();
    let input_tokens = (200_000.0 * lognormal_mean_one(rng, 0.4)
        + if skill_in_prompt { 1_500.0 } else { 0.0 }) as u64;
    let output_tokens = (20_000.0 * lognormal_mean_one(rng, 0.5)) as u64;
    let distilled = matches!(condition, Condition::Solo);
    let aid = format!("{}/{}/{}/{}/{}", model.name, id, target, condition, run);
    AttemptRow {
        run_name: cfg.run_name.clone(),
        attempt_id: Some(aid),
        model: model.name.clone(),
        problem: id.clone(),
        family: *fam,
        target,
        source: Direction::default_into(target).map(|d| d.source),
        condition,
        run_index: run,
        verdict,
        correct,
        runtime_us,
        t_ref_us: Some(*t_ref),
        t_compile_us: Some(t_ref * lognormal_mean_one(rng, 0.2) * 0.85),
        score,
        source_score: None,
        source_attempt_id: source.and_then(|s| s.attempt_id.clone()),
        noise_eps: cfg.noise_eps,
        noise_sessions: 0,
        input_tokens,
        output_tokens,
        skill_tokens: if distilled {
            Some((3_000.0 * lognormal_mean_one(rng, 0.3)) as u64)
        } else {
            None
        },
        wall_s: 900.0 * lognormal_mean_one(rng, 0.5),
        eval_wait_s: None,
        cost_usd: None,
        end_reason: Some(end_reason),
        turns: 5 + rng.index(30) as u32,
        tool_evals: 2 + rng.index(20) as u32,
        skill_flags: if skill_in_prompt && rng.bernoulli(0.03) {
            vec!["target_dsl_code".into()]
        } else {
            vec![]
        },
        kernel_path: None,
        skill_path: None,
        trajectory_path: None,
        eval_mode: verdict.map(|_| "full".to_string()),
    }
}

/// Settings of a coverage study: many simulated experiments, each analysed like a real run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageConfig {
    pub sim: SimConfig,
    pub simulations: usize,
    pub options: AnalysisOptions,
    pub seed: u64,
}

/// Coverage and false-positive counts over the simulated experiments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageReport {
    pub simulations: usize,
    /// Conditioned cells whose true lift is non-zero (or all, when every lift is 0) and how
    /// many of their CIs contained the true lift.
    pub checked: usize,
    pub covered: usize,
    /// Cells with a true lift of exactly 0 (repeat solo, placebo with lift 0, conditioned with
    /// lift 0) and how many were called significant by the CI (excludes 0) or by the
    /// Wilcoxon test (p < 1 - confidence).
    pub null_cells: usize,
    pub null_ci_significant: usize,
    pub null_wilcoxon_significant: usize,
    /// The interval method requested (`None`: automatic, see `AnalysisOptions::interval`).
    pub interval: Option<IntervalMethod>,
    pub resamples: usize,
}

impl CoverageReport {
    pub fn coverage(&self) -> f64 {
        self.covered as f64 / self.checked.max(1) as f64
    }
    pub fn ci_false_positive_rate(&self) -> f64 {
        self.null_ci_significant as f64 / self.null_cells.max(1) as f64
    }
    pub fn wilcoxon_false_positive_rate(&self) -> f64 {
        self.null_wilcoxon_significant as f64 / self.null_cells.max(1) as f64
    }
}

/// Run `simulations` experiments and count CI coverage of the true lifts and false
/// positives on zero-lift cells. Experiments run in parallel (`options.threads`), each
/// analysed single-threaded; the result depends only on the config.
pub fn coverage_study(cfg: &CoverageConfig) -> CoverageReport {
    let threads = cfg.options.worker_threads();
    let opts = cfg.options.for_one_of_many();
    let seeds: Vec<u64> = (0..cfg.simulations as u64)
        .map(|i| cfg.seed.wrapping_mul(0x9E37_79B9).wrapping_add(i))
        .collect();
    let alpha = 1.0 - opts.confidence;
    let per = crate::analysis::par_map(&seeds, threads, |&seed| {
        let rows = simulate(&cfg.sim, seed);
        let a = analyze(
            &rows,
            &AnalysisOptions {
                seed: seed ^ 0xA5A5,
                ..opts.clone()
            },
        );
        let mut out = [0usize; 5];
        for c in &a.cells {
            let Some(truth) = cfg.sim.true_lift(&c.model, c.direction, c.condition) else {
                continue;
            };
            let Some(ci) = c.lift_ci else { continue };
            if truth == 0.0 {
                out[2] += 1;
                out[3] += ci.excludes(0.0) as usize;
                out[4] += c.wilcoxon.as_ref().is_some_and(|w| w.p_value < alpha) as usize;
            }
            if c.condition == Condition::Conditioned {
                out[0] += 1;
                out[1] += ci.contains(truth) as usize;
            }
        }
        out
    });
    let sum = |k: usize| per.iter().map(|o| o[k]).sum::<usize>();
    CoverageReport {
        simulations: cfg.simulations,
        checked: sum(0),
        covered: sum(1),
        null_cells: sum(2),
        null_ci_significant: sum(3),
        null_wilcoxon_significant: sum(4),
        interval: opts.interval,
        resamples: opts.resamples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simulated_rows_are_consistent() {
        let cfg = SimConfig {
            problems: 12,
            runs: 2,
            ..SimConfig::default()
        };
        let rows = simulate(&cfg, 1);
        // 1 model * 12 problems * 2 DSLs * 4 conditions * 2 runs
        assert_eq!(rows.len(), 12 * 2 * 4 * 2);
        for r in &rows {
            assert_eq!(r.correct, r.score > 0.0);
            assert_eq!(r.correct, r.verdict == Some(Verdict::Correct));
            if r.correct {
                let s = AttemptRow::score_from(true, r.runtime_us, r.t_ref_us);
                assert!((s - r.score).abs() < 1e-9 * s);
            }
            assert_eq!(r.source_score.is_some(), r.condition.has_skill());
        }
        assert_eq!(simulate(&cfg, 1), rows);
        assert_ne!(simulate(&cfg, 2), rows);
    }

    #[test]
    fn population_lift_matches_the_truth() {
        // One huge experiment: the estimate must be close to the true lift.
        let cfg = SimConfig {
            problems: 20_000,
            runs: 1,
            controls: true,
            placebo_lift: 0.1,
            ..SimConfig::default()
        };
        let rows = simulate(&cfg, 5);
        let a = analyze(
            &rows,
            &AnalysisOptions {
                resamples: 0,
                per_family: false,
                per_problem: false,
                ..Default::default()
            },
        );
        for c in &a.cells {
            let truth = cfg.true_lift(&c.model, c.direction, c.condition).unwrap();
            let est = c.lift.unwrap();
            // Standard error about 0.015 at this size.
            assert!(
                (est - truth).abs() < 0.05,
                "{} {}: estimate {est} truth {truth}",
                c.direction,
                c.condition
            );
        }
        // Pass rates: solo 0.6, conditioned 0.7.
        let c = a
            .cell(
                "model-a",
                Direction::default_into(Dsl::TIRX).unwrap(),
                Condition::Conditioned,
            )
            .unwrap();
        assert!((c.solo.pass_rate - 0.6).abs() < 0.02 && (c.treated.pass_rate - 0.7).abs() < 0.02);
        // Source dependence: improved share is higher when the source is above.
        let st = a
            .source_tables
            .iter()
            .find(|t| t.direction == c.direction && t.family.is_none())
            .unwrap();
        let above = st
            .groups
            .iter()
            .find(|g| g.relation == crate::analysis::SourceRelation::Above)
            .unwrap();
        let below = st
            .groups
            .iter()
            .find(|g| g.relation == crate::analysis::SourceRelation::Below)
            .unwrap();
        assert!(
            above.improved_share > below.improved_share,
            "{above:?} {below:?}"
        );
    }

    #[test]
    fn invalid_configs_are_rejected() {
        let err = |c: SimConfig| c.validate().err().unwrap_or_default();
        assert!(err(SimConfig {
            pass_rate_solo: 0.0,
            ..SimConfig::default()
        })
        .starts_with("pass_rate_solo"));
        assert!(err(SimConfig {
            pass_rate_solo: 0.8, // 0.3 * 0.8 / 0.2 >= 1
            ..SimConfig::default()
        })
        .starts_with("source_dependence"));
        assert!(err(SimConfig {
            run_sd: f64::NAN,
            ..SimConfig::default()
        })
        .starts_with("run_sd"));
        assert!(err(SimConfig {
            standing_effect: 5.0,
            ..SimConfig::default()
        })
        .starts_with("standing_effect"));
        let mut nan_lift = SimConfig::default();
        nan_lift.models[0].lift_cute_to_tirx = f64::NAN;
        assert!(err(nan_lift).contains("cute->tirx lift"));
        let mut minus_one = SimConfig::default();
        minus_one.models[0].lift_tirx_to_cute = -1.0;
        assert!(err(minus_one).contains("> -1"));
        // Every solo attempt passing is valid (no failed source to balance).
        let all_pass = SimConfig {
            pass_rate_solo: 1.0,
            problems: 6,
            runs: 1,
            ..SimConfig::default()
        };
        assert!(try_simulate(&all_pass, 1).is_ok());
        assert!(SimConfig {
            source_dependence: 5.0,
            ..SimConfig::default()
        }
        .validate()
        .is_err());
        assert!(SimConfig {
            models: vec![],
            ..SimConfig::default()
        }
        .validate()
        .is_err());
        assert!(SimConfig::example().validate().is_ok());
    }
}
