//! Per problem: the summaries of every arm (the report's per-problem table), and per model and
//! direction the source-above / level / below table of the conditioned attempts: each
//! attempt's source score against its target's mean solo score, and how often it improved or
//! regressed against that solo mean.

use super::group::{problem_eps, share, Grouped};
use super::AnalysisOptions;
use crate::row::{compare, Outcome};
use crate::stats;
use mkb_core::{Condition, Direction, Dsl, Family};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The relation of a conditioned attempt's source score to its target's solo score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceRelation {
    /// Source score above the target's solo score (beyond noise).
    Above,
    /// Within noise of each other (including both failed).
    Level,
    /// Source score below the target's solo score.
    Below,
    /// The row has no source score.
    Unknown,
}

impl SourceRelation {
    pub const ALL: [SourceRelation; 4] = [
        SourceRelation::Above,
        SourceRelation::Level,
        SourceRelation::Below,
        SourceRelation::Unknown,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            SourceRelation::Above => "source_above",
            SourceRelation::Level => "source_level",
            SourceRelation::Below => "source_below",
            SourceRelation::Unknown => "source_unknown",
        }
    }
}

/// One group of the source-relative-to-target table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceGroup {
    pub relation: SourceRelation,
    /// Conditioned attempts in the group (= problems when R = 1).
    pub attempts: usize,
    pub problems: usize,
    pub improved: usize,
    pub regressed: usize,
    pub tied: usize,
    pub improved_share: f64,
    pub regressed_share: f64,
}

/// The source-above / source-below table of one model and direction (and family or all).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceTable {
    pub model: String,
    pub direction: Direction,
    pub family: Option<Family>,
    pub groups: Vec<SourceGroup>,
}

/// One run of one arm of a problem (for the per-problem table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemArm {
    pub condition: Condition,
    pub runs: usize,
    pub correct: usize,
    pub mean_score: f64,
    /// Scores by run, in run order.
    pub scores: Vec<f64>,
    /// Outcome against the solo mean (treated arms only).
    pub outcome: Option<Outcome>,
    /// Mean source score (conditioned/placebo arms with source scores).
    pub mean_source_score: Option<f64>,
}

/// One problem of one model and direction: every arm present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemSummary {
    pub model: String,
    pub direction: Direction,
    pub problem: String,
    pub family: Family,
    pub eps: f64,
    pub arms: Vec<ProblemArm>,
}

impl ProblemSummary {
    pub fn arm(&self, c: Condition) -> Option<&ProblemArm> {
        self.arms.iter().find(|a| a.condition == c)
    }
}

/// The source tables (per model and direction, all families and per family), the problem
/// summaries (with `per_problem`) and the number of conditioned attempts without a source
/// score.
pub(super) fn source_tables_and_problems(
    g: &Grouped<'_>,
    models: &[String],
    targets: &[Dsl],
    opts: &AnalysisOptions,
) -> (Vec<SourceTable>, Vec<ProblemSummary>, usize) {
    let eps_default = opts.default_noise_eps;
    let mut source_tables = Vec::new();
    let mut problems = Vec::new();
    let mut missing_source = 0;
    for model in models {
        for &target in targets {
            let direction = g.direction(target);
            let keys: Vec<&str> = g
                .arms
                .keys()
                .filter(|(m, t, _, _)| *m == model.as_str() && *t == target)
                .map(|(_, _, p, _)| *p)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            // relation -> (attempts, problems set, improved, regressed, tied), per family key
            type Acc<'b> =
                BTreeMap<SourceRelation, (usize, BTreeSet<&'b str>, usize, usize, usize)>;
            let mut by_family: BTreeMap<Option<Family>, Acc> = BTreeMap::new();
            let mut any_conditioned = false;
            for p in keys {
                let fam = g.family.get(p).copied().unwrap_or(Family::A);
                let solo = g.arms.get(&(model.as_str(), target, p, Condition::Solo));
                let eps = problem_eps(
                    Condition::ALL
                        .iter()
                        .filter_map(|c| g.arms.get(&(model.as_str(), target, p, *c)))
                        .flat_map(|v| v.iter().copied()),
                    eps_default,
                );
                let solo_mean = solo.map(|v| {
                    stats::mean(&v.iter().map(|r| r.effective_score()).collect::<Vec<_>>())
                });
                let mut arms = Vec::new();
                for c in Condition::ALL {
                    let Some(v) = g.arms.get(&(model.as_str(), target, p, c)) else {
                        continue;
                    };
                    let scores: Vec<f64> = v.iter().map(|r| r.effective_score()).collect();
                    let mean_score = stats::mean(&scores);
                    let src: Vec<f64> = v
                        .iter()
                        .filter_map(|r| r.source_score)
                        .filter(|x| x.is_finite())
                        .collect();
                    let outcome = match (c, solo_mean) {
                        (Condition::Solo, _) | (_, None) => None,
                        (_, Some(sm)) => Some(compare(mean_score, sm, eps)),
                    };
                    arms.push(ProblemArm {
                        condition: c,
                        runs: v.len(),
                        correct: v.iter().filter(|r| r.correct).count(),
                        mean_score,
                        scores,
                        outcome,
                        mean_source_score: if src.is_empty() {
                            None
                        } else {
                            Some(stats::mean(&src))
                        },
                    });
                    if c == Condition::Conditioned {
                        any_conditioned = true;
                        if let Some(sm) = solo_mean {
                            for r in v.iter() {
                                let rel = match r.source_score.filter(|x| x.is_finite()) {
                                    None => {
                                        missing_source += 1;
                                        SourceRelation::Unknown
                                    }
                                    Some(src) => match compare(src.max(0.0), sm, eps) {
                                        Outcome::Improved => SourceRelation::Above,
                                        Outcome::Regressed => SourceRelation::Below,
                                        Outcome::Tied => SourceRelation::Level,
                                    },
                                };
                                let out = compare(r.effective_score(), sm, eps);
                                for fk in [None, Some(fam)] {
                                    if fk.is_some() && !opts.per_family {
                                        continue;
                                    }
                                    let e =
                                        by_family.entry(fk).or_default().entry(rel).or_default();
                                    e.0 += 1;
                                    e.1.insert(p);
                                    match out {
                                        Outcome::Improved => e.2 += 1,
                                        Outcome::Regressed => e.3 += 1,
                                        Outcome::Tied => e.4 += 1,
                                    }
                                }
                            }
                        }
                    }
                }
                if opts.per_problem {
                    problems.push(ProblemSummary {
                        model: model.clone(),
                        direction,
                        problem: p.to_string(),
                        family: fam,
                        eps,
                        arms,
                    });
                }
            }
            if any_conditioned {
                for (family, acc) in by_family {
                    let groups = SourceRelation::ALL
                        .iter()
                        .filter(|rel| **rel != SourceRelation::Unknown || acc.contains_key(rel))
                        .map(|rel| {
                            let (n, ps, i, r, t) = acc.get(rel).cloned().unwrap_or_default();
                            SourceGroup {
                                relation: *rel,
                                attempts: n,
                                problems: ps.len(),
                                improved: i,
                                regressed: r,
                                tied: t,
                                improved_share: share(i, n),
                                regressed_share: share(r, n),
                            }
                        })
                        .collect();
                    source_tables.push(SourceTable {
                        model: model.clone(),
                        direction,
                        family,
                        groups,
                    });
                }
            }
        }
    }
    (source_tables, problems, missing_source)
}
