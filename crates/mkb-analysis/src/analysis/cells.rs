//! The paired comparison of one cell (model, direction, family or all, treated condition
//! against solo): arm statistics, the lift, pass-rate and geometric-mean lifts with their
//! bootstrap CIs, the Wilcoxon test and the improved / regressed / tied counts.

use super::group::{problem_eps, share, Grouped};
use super::{AnalysisOptions, MIN_PROBLEMS_FOR_CI, MIN_RESAMPLES_FOR_CI, TREATMENTS};
use crate::bootstrap::{
    interval, Ci, IntervalMethod, PairedData, PairedProblem, Resampling, StatKind,
};
use crate::rng::Rng;
use crate::row::{compare, AttemptRow, Outcome};
use crate::stats::{self, wilcoxon_signed_rank, Wilcoxon};
use mkb_core::{Condition, Direction, Dsl, Family};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Statistics of one arm (solo, or the treated condition) over a cell's paired problems.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmStats {
    /// Attempts in the arm (over the paired problems).
    pub attempts: usize,
    /// Fewest and most runs of one problem.
    pub runs_min: usize,
    pub runs_max: usize,
    /// mean_P of the per-problem share of correct runs.
    pub pass_rate: f64,
    /// mean_P of the per-problem mean score.
    pub mean_score: f64,
    /// fast_p values, one per `AnalysisOptions::fast_p` threshold (same order).
    pub fast_p: Vec<f64>,
    /// mean_P of the per-problem mean speedup over torch.compile (0 for failures).
    pub mean_speedup_compile: f64,
}

/// One p of fast_p, both arms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FastP {
    pub p: f64,
    pub solo: f64,
    pub treated: f64,
}

/// The paired comparison of one treated condition against solo, for one model and direction
/// (and one family, or all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellStats {
    pub model: String,
    pub direction: Direction,
    /// `None`: all families.
    pub family: Option<Family>,
    /// The treated condition (conditioned, placebo or repeat_solo), compared with solo.
    pub condition: Condition,
    /// Problems with both arms (the paired sample).
    pub problems: usize,
    /// Problems with only one of the two arms (left out of every statistic here).
    pub unpaired_problems: usize,
    pub solo: ArmStats,
    pub treated: ArmStats,
    /// Paired lift of the mean score; `None` when the solo mean is 0.
    pub lift: Option<f64>,
    pub lift_ci: Option<Ci>,
    /// Starred: the lift's CI excludes 0, with at least [`MIN_PROBLEMS_FOR_CI`] paired
    /// problems and [`MIN_RESAMPLES_FOR_CI`] resamples.
    pub significant: bool,
    /// Geometric-mean lift (fallback semantics, see the module documentation).
    pub geo_lift: f64,
    pub geo_lift_ci: Option<Ci>,
    /// Pass-rate lift: treated minus solo pass rate (a difference of shares).
    pub pass_rate_lift: f64,
    pub pass_rate_lift_ci: Option<Ci>,
    /// Wilcoxon signed-rank test of the per-problem score differences.
    pub wilcoxon: Option<Wilcoxon>,
    pub improved: usize,
    pub regressed: usize,
    /// Ties within the noise band, including `both_failed`.
    pub tied: usize,
    pub both_failed: usize,
    pub improved_share: f64,
    pub regressed_share: f64,
    pub tied_share: f64,
    /// Median over problems of the noise threshold eps used for the tie rule.
    pub noise_eps: f64,
    pub fast_p: Vec<FastP>,
    /// The resampling scheme and the interval method actually used.
    pub resampling: Resampling,
    pub interval: IntervalMethod,
    pub resamples: usize,
    /// Resamples whose solo mean was <= 0 (their lift is +infinity).
    pub degenerate_resamples: usize,
}

/// Per-run metric values used by the bootstrap: [score, pass, ln max(1, score)].
const K: usize = 3;
const KINDS: [StatKind; K] = [StatKind::Ratio, StatKind::Diff, StatKind::ExpDiff];

fn run_metrics(r: &AttemptRow) -> [f64; K] {
    let s = r.effective_score();
    [s, if r.correct { 1.0 } else { 0.0 }, s.max(1.0).ln()]
}

/// A unit of bootstrap work: one cell.
pub(super) struct CellJob<'a> {
    pub(super) model: &'a str,
    pub(super) direction: Direction,
    pub(super) family: Option<Family>,
    pub(super) condition: Condition,
    pub(super) problems: Vec<(&'a str, &'a [&'a AttemptRow], &'a [&'a AttemptRow])>,
    pub(super) unpaired: usize,
}

/// The cells to compute: per model, target and treated condition, all families first, then
/// (with `per_family`) one per family, over the problems with both arms.
pub(super) fn cell_jobs<'a>(
    g: &'a Grouped<'_>,
    models: &'a [String],
    targets: &[Dsl],
    opts: &AnalysisOptions,
) -> Vec<CellJob<'a>> {
    let mut jobs: Vec<CellJob> = Vec::new();
    for model in models {
        for &target in targets {
            let problems_of = |c: Condition| -> BTreeMap<&str, &[&AttemptRow]> {
                g.arms
                    .range((model.as_str(), target, "", c)..)
                    .take_while(|((m, t, _, _), _)| *m == model.as_str() && *t == target)
                    .filter(|((_, _, _, cc), _)| *cc == c)
                    .map(|((_, _, p, _), v)| (*p, v.as_slice()))
                    .collect()
            };
            let solo = problems_of(Condition::Solo);
            for condition in TREATMENTS {
                let treated = problems_of(condition);
                if treated.is_empty() {
                    continue;
                }
                let families: Vec<Option<Family>> = if opts.per_family {
                    std::iter::once(None)
                        .chain(
                            solo.keys()
                                .chain(treated.keys())
                                .filter_map(|p| g.family.get(p).copied())
                                .collect::<BTreeSet<_>>()
                                .into_iter()
                                .map(Some),
                        )
                        .collect()
                } else {
                    vec![None]
                };
                for family in families {
                    let in_family =
                        |p: &str| family.is_none() || g.family.get(p).copied() == family;
                    let paired: Vec<_> = solo
                        .iter()
                        .filter(|(p, _)| in_family(p))
                        .filter_map(|(p, s)| treated.get(p).map(|t| (*p, *s, *t)))
                        .collect();
                    let all: BTreeSet<&str> = solo
                        .keys()
                        .chain(treated.keys())
                        .copied()
                        .filter(|p| in_family(p))
                        .collect();
                    let unpaired = all.len() - paired.len();
                    jobs.push(CellJob {
                        model,
                        direction: g.direction(target),
                        family,
                        condition,
                        problems: paired,
                        unpaired,
                    });
                }
            }
        }
    }

    jobs
}

fn arm_stats(problems: &[&[&AttemptRow]], fast_p: &[f64]) -> ArmStats {
    let per = |f: &dyn Fn(&AttemptRow) -> f64| -> f64 {
        stats::mean(
            &problems
                .iter()
                .map(|v| stats::mean(&v.iter().map(|r| f(r)).collect::<Vec<_>>()))
                .collect::<Vec<_>>(),
        )
    };
    let or0 = |x: f64| if x.is_nan() { 0.0 } else { x };
    ArmStats {
        attempts: problems.iter().map(|v| v.len()).sum(),
        runs_min: problems.iter().map(|v| v.len()).min().unwrap_or(0),
        runs_max: problems.iter().map(|v| v.len()).max().unwrap_or(0),
        pass_rate: or0(per(&|r| if r.correct { 1.0 } else { 0.0 })),
        mean_score: or0(per(&|r| r.effective_score())),
        fast_p: fast_p
            .iter()
            .map(|&p| {
                or0(per(&|r| {
                    if r.correct && (p <= 0.0 || r.effective_score() > p) {
                        1.0
                    } else {
                        0.0
                    }
                }))
            })
            .collect(),
        mean_speedup_compile: or0(per(&|r| r.speedup_compile())),
    }
}

pub(super) fn cell_stats(job: &CellJob, opts: &AnalysisOptions) -> CellStats {
    let solo_v: Vec<&[&AttemptRow]> = job.problems.iter().map(|(_, s, _)| *s).collect();
    let treat_v: Vec<&[&AttemptRow]> = job.problems.iter().map(|(_, _, t)| *t).collect();
    let solo = arm_stats(&solo_v, &opts.fast_p);
    let treated = arm_stats(&treat_v, &opts.fast_p);
    let n = job.problems.len();
    let direction = job.direction;

    // Per-problem means and outcomes.
    let mut diffs = Vec::with_capacity(n);
    let (mut improved, mut regressed, mut tied, mut both_failed) = (0, 0, 0, 0);
    let mut eps_all = Vec::with_capacity(n);
    for (_, s, t) in &job.problems {
        let ms = stats::mean(&s.iter().map(|r| r.effective_score()).collect::<Vec<_>>());
        let mt = stats::mean(&t.iter().map(|r| r.effective_score()).collect::<Vec<_>>());
        let eps = problem_eps(s.iter().chain(t.iter()).copied(), opts.default_noise_eps);
        eps_all.push(eps);
        diffs.push(mt - ms);
        match compare(mt, ms, eps) {
            Outcome::Improved => improved += 1,
            Outcome::Regressed => regressed += 1,
            Outcome::Tied => {
                tied += 1;
                if ms == 0.0 && mt == 0.0 {
                    both_failed += 1;
                }
            }
        }
    }

    let data = PairedData {
        k: K,
        problems: job
            .problems
            .iter()
            .map(|(_, s, t)| PairedProblem {
                solo: s.iter().flat_map(|r| run_metrics(r)).collect(),
                treat: t.iter().flat_map(|r| run_metrics(r)).collect(),
            })
            .collect(),
    };
    let requested = if data.has_replicated_runs() {
        opts.resampling.unwrap_or(Resampling::TwoStageAdjusted)
    } else {
        Resampling::Problems
    };
    let method = opts
        .interval
        .unwrap_or(if requested == Resampling::Problems {
            IntervalMethod::ExpandedPercentile
        } else {
            IntervalMethod::Bca
        });
    let key = format!(
        "{}|{}|{:?}|{}",
        job.model, direction, job.family, job.condition
    );
    let mut rng = Rng::derived(opts.seed, &key);
    let (lift, lift_ci, geo_lift, geo_lift_ci, pass_rate_lift, pass_ci, resampling, degenerate) =
        if n == 0 {
            (None, None, f64::NAN, None, f64::NAN, None, requested, 0)
        } else if n == 1 {
            // One paired problem: a point estimate only. Resampling one problem gives a
            // zero-width interval, which must not read as a significant result.
            let lift = if solo.mean_score > 0.0 {
                Some(data.point(0, KINDS[0]))
            } else {
                None
            };
            (
                lift,
                None,
                data.point(2, KINDS[2]),
                None,
                data.point(1, KINDS[1]),
                None,
                requested,
                0,
            )
        } else {
            let reps = data.bootstrap(&KINDS, opts.resamples, requested, &mut rng);
            let ci_of = |m: usize| {
                let point = data.point(m, KINDS[m]);
                let jk = data.jackknife(m, KINDS[m]);
                (
                    point,
                    interval(point, &reps.values[m], &jk, opts.confidence, method),
                )
            };
            let (l, lci) = ci_of(0);
            let (pr, pci) = ci_of(1);
            let (gl, gci) = ci_of(2);
            let degenerate = reps.values[0].iter().filter(|x| x.is_infinite()).count();
            let lift = if solo.mean_score > 0.0 { Some(l) } else { None };
            (
                lift,
                if lift.is_some() { lci } else { None },
                gl,
                gci,
                pr,
                pci,
                reps.resampling,
                degenerate,
            )
        };
    let significant = n >= MIN_PROBLEMS_FOR_CI
        && opts.resamples >= MIN_RESAMPLES_FOR_CI
        && lift_ci.is_some_and(|c| c.excludes(0.0));
    let wilcoxon = wilcoxon_signed_rank(&diffs, opts.wilcoxon_exact_max_n);
    let fast_p = opts
        .fast_p
        .iter()
        .enumerate()
        .map(|(i, &p)| FastP {
            p,
            solo: solo.fast_p[i],
            treated: treated.fast_p[i],
        })
        .collect();
    CellStats {
        model: job.model.to_string(),
        direction,
        family: job.family,
        condition: job.condition,
        problems: n,
        unpaired_problems: job.unpaired,
        solo,
        treated,
        lift,
        lift_ci,
        significant,
        geo_lift,
        geo_lift_ci,
        pass_rate_lift,
        pass_rate_lift_ci: pass_ci,
        wilcoxon,
        improved,
        regressed,
        tied,
        both_failed,
        improved_share: share(improved, n),
        regressed_share: share(regressed, n),
        tied_share: share(tied, n),
        noise_eps: if eps_all.is_empty() {
            opts.default_noise_eps
        } else {
            stats::median(&eps_all)
        },
        fast_p,
        resampling,
        interval: method,
        resamples: opts.resamples,
        degenerate_resamples: degenerate,
    }
}
