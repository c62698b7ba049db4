//! `analyze`: from attempt rows to the paired statistics of docs/design.md ("Scoring"), per
//! model and direction, per family, for the conditioned attempts and for the two controls
//! (placebo and repeat solo), plus the source-above / source-below table and token / wall-time
//! usage. The result ([`Analysis`]) is what `mkb analyze --json` prints.
//!
//! Definitions (all per model and direction; a direction is named by its target DSL, whose
//! solo attempts are the baseline):
//! - s = correct ? t_ref / t : 0 per attempt; runs are averaged within a problem first.
//! - lift = mean_P s(treated) / mean_P s(solo) - 1 over the problems with both arms, with a
//!   paired bootstrap CI (see [`crate::bootstrap`]) and the exact Wilcoxon signed-rank
//!   p-value of the per-problem differences s(treated) - s(solo).
//! - improved / regressed / tied per problem with the tie band eps * max(both) (eps = the
//!   largest `noise_eps` among the problem's rows); both failing is a tie.
//! - geometric-mean lift = exp(mean_P of the per-problem difference of mean_r ln max(1, s)) minus
//!   1: a failed or slower-than-eager kernel counts as shipping eager PyTorch (speedup 1), so
//!   one huge speedup cannot dominate.
//! - pass-rate lift = mean_P pass(treated) - mean_P pass(solo) (a difference of shares).
//! - fast_p = mean_P (share of runs correct with s > p); fast_0 is the pass rate.
//! - source relative to target (conditioned attempts): each conditioned attempt's source
//!   score vs the mean solo score of its target problem (same tie rule): "above", "level"
//!   (within noise, incl. both failed) or "below"; in each group the share of conditioned
//!   attempts that improved / regressed against that solo mean.

use crate::bootstrap::{
    interval, Ci, IntervalMethod, PairedData, PairedProblem, Resampling, StatKind,
};
use crate::headline::{Headline, HeadlineOptions};
use crate::rng::Rng;
use crate::row::{compare, AttemptRow, Outcome, DEFAULT_NOISE_EPS};
use crate::stats::{self, wilcoxon_signed_rank, Wilcoxon};
use mkb_core::{Condition, Direction, Dsl, Family};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Version of the [`Analysis`] JSON layout; bump on incompatible changes (2: `headline`,
/// the significance rule of [`MIN_PROBLEMS_FOR_CI`] and [`MIN_RESAMPLES_FOR_CI`]).
pub const ANALYSIS_SCHEMA_VERSION: u32 = 2;

/// Below this many paired problems the output warns that the CI is not reliable, and no CI
/// is starred as significant.
pub const MIN_PROBLEMS_FOR_CI: usize = 8;

/// Below this many bootstrap resamples no CI is starred as significant (the interval's end
/// points are themselves too noisy).
pub const MIN_RESAMPLES_FOR_CI: usize = 1000;

/// The one default bootstrap seed of `mkb analyze`, `mkb report` and `mkb export` (and of
/// [`AnalysisOptions::default`]), so one run shows the same CIs everywhere.
pub const DEFAULT_SEED: u64 = 20261129;

/// The treated conditions, in report order.
pub const TREATMENTS: [Condition; 3] = [
    Condition::Conditioned,
    Condition::Placebo,
    Condition::RepeatSolo,
];

/// Knobs of the analysis. `Default` is what `mkb analyze` uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalysisOptions {
    /// Bootstrap resamples per cell (docs/design.md: 10,000); 0 = point estimates only.
    pub resamples: usize,
    /// Confidence level of every interval.
    pub confidence: f64,
    /// Seed of the bootstrap; each cell draws from its own stream derived from it and the
    /// cell's name, so results do not depend on thread count or cell order.
    pub seed: u64,
    /// Interval construction from the replicates; `None` = automatic: BCa when runs are
    /// resampled within problems (two-stage schemes), expanded percentile when only problems
    /// are resampled (R = 1). This pairing had the best measured coverage (docs/analysis.md).
    pub interval: Option<IntervalMethod>,
    /// Resampling scheme; `None` = automatic: two-stage adjusted when every paired problem
    /// has >= 2 runs in both arms, problems only otherwise.
    pub resampling: Option<Resampling>,
    /// Largest number of differences for the exact Wilcoxon distribution; the normal
    /// approximation is used above (and said so in the output).
    pub wilcoxon_exact_max_n: usize,
    /// Thresholds p of fast_p.
    pub fast_p: Vec<f64>,
    /// Noise threshold for rows whose `noise_eps` is missing or invalid.
    pub default_noise_eps: f64,
    /// Compute the per-family cells.
    pub per_family: bool,
    /// Include the per-problem summaries (the report's table).
    pub per_problem: bool,
    /// Worker threads for the bootstrap (0 = all available cores).
    pub threads: usize,
    /// Compute the headline (pooled standing tables, controls, association test).
    pub headline: bool,
    /// The run's per-attempt budget, for the check that budgets were matched in practice
    /// (`None`: unknown, e.g. a simulation).
    pub budget: Option<mkb_core::Budget>,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            resamples: 10_000,
            confidence: 0.95,
            seed: DEFAULT_SEED,
            interval: None,
            resampling: None,
            wilcoxon_exact_max_n: 100,
            fast_p: vec![0.0, 1.0, 1.5, 2.0],
            default_noise_eps: DEFAULT_NOISE_EPS,
            per_family: true,
            per_problem: true,
            threads: 0,
            headline: true,
            budget: None,
        }
    }
}

impl AnalysisOptions {
    /// The number of worker threads `threads` asks for (0 = all available cores).
    pub fn worker_threads(&self) -> usize {
        if self.threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            self.threads
        }
    }

    /// These options for one experiment among many analysed in parallel: single-threaded,
    /// overall cells only.
    pub fn for_one_of_many(&self) -> AnalysisOptions {
        AnalysisOptions {
            threads: 1,
            per_family: false,
            per_problem: false,
            headline: false,
            ..self.clone()
        }
    }
}

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

/// Tokens and wall time per attempt of one model, direction and condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStats {
    pub model: String,
    pub direction: Direction,
    pub condition: Condition,
    pub attempts: usize,
    pub correct: usize,
    pub mean_input_tokens: f64,
    pub median_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub median_output_tokens: f64,
    /// Mean distillation tokens over the rows that have them (`None` if none do).
    pub mean_skill_tokens: Option<f64>,
    pub mean_wall_s: f64,
    pub median_wall_s: f64,
    pub mean_turns: f64,
    pub mean_tool_evals: f64,
    /// Attempts per end reason ("none" when unknown).
    pub end_reasons: BTreeMap<String, usize>,
    /// Attempts per verdict ("none" when not evaluated).
    pub verdicts: BTreeMap<String, usize>,
    /// Attempts whose skill carries leak-audit or format flags.
    pub flagged_skills: usize,
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

/// Human-readable statement of the methods, carried in the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Methods {
    pub score: String,
    pub lift: String,
    pub interval: String,
    pub wilcoxon: String,
    pub ties: String,
    pub geo_lift: String,
    pub source_table: String,
}

/// Everything `mkb analyze` computes (the `--json` output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    pub schema_version: u32,
    /// Run names found in the rows.
    pub runs: Vec<String>,
    pub rows: usize,
    pub models: Vec<String>,
    pub options: AnalysisOptions,
    pub methods: Methods,
    /// Per model, direction and treated condition, all families.
    pub cells: Vec<CellStats>,
    /// The same per family.
    pub family_cells: Vec<CellStats>,
    /// Source above / below, per model and direction (family None) and per family.
    pub source_tables: Vec<SourceTable>,
    pub usage: Vec<UsageStats>,
    pub problems: Vec<ProblemSummary>,
    /// The headline claims (lift range, models gaining in both directions, pooled standing
    /// tables with their controls, the association test): [`crate::headline`].
    #[serde(default)]
    pub headline: Headline,
    /// The tie band per problem variant and how it was obtained.
    #[serde(default)]
    pub tie_band: crate::practice::TieBand,
    /// Budget use per condition and whether it was matched in practice.
    #[serde(default)]
    pub budgets: crate::practice::BudgetCheck,
    /// Costs at the configured model prices (empty without prices).
    #[serde(default)]
    pub costs: crate::practice::CostReport,
    /// The evaluation set analysed ("original", or one `mkb rescore` made); set by the caller.
    #[serde(default)]
    pub eval_set: Option<String>,
    /// Where the run came from (mkb version and commit, packages, GPU, driver); set by the
    /// caller from the run's store.
    #[serde(default)]
    pub provenance: Option<serde_json::Value>,
    pub warnings: Vec<String>,
}

impl Analysis {
    /// The cell of (model, direction, condition) over all families.
    pub fn cell(
        &self,
        model: &str,
        direction: Direction,
        condition: Condition,
    ) -> Option<&CellStats> {
        self.cells
            .iter()
            .find(|c| c.model == model && c.direction == direction && c.condition == condition)
    }
    /// Directions present in the cells, in order.
    pub fn directions(&self) -> Vec<Direction> {
        let set: BTreeSet<Direction> = self
            .cells
            .iter()
            .map(|c| c.direction)
            .chain(self.usage.iter().map(|u| u.direction))
            .collect();
        set.into_iter().collect()
    }
}

/// Key of a problem's runs: (model, target, problem, condition).
type ArmKey<'a> = (&'a str, Dsl, &'a str, Condition);

struct Grouped<'a> {
    arms: BTreeMap<ArmKey<'a>, Vec<&'a AttemptRow>>,
    family: BTreeMap<&'a str, Family>,
}

fn group_rows<'a>(rows: &'a [AttemptRow], warnings: &mut Vec<String>) -> Grouped<'a> {
    let mut arms: BTreeMap<ArmKey<'a>, Vec<&'a AttemptRow>> = BTreeMap::new();
    let mut family: BTreeMap<&'a str, Family> = BTreeMap::new();
    let mut seen: BTreeMap<(&str, &str, Dsl, Condition, u32, &str), usize> = BTreeMap::new();
    let mut bad_score = 0;
    for r in rows {
        arms.entry((r.model.as_str(), r.target, r.problem.as_str(), r.condition))
            .or_default()
            .push(r);
        if let Some(f) = family.insert(r.problem.as_str(), r.family) {
            if f != r.family {
                warnings.push(format!(
                    "problem {} appears in families {} and {}; using {}",
                    r.problem, f, r.family, r.family
                ));
            }
        }
        *seen
            .entry((
                r.model.as_str(),
                r.problem.as_str(),
                r.target,
                r.condition,
                r.run_index,
                r.run_name.as_str(),
            ))
            .or_default() += 1;
        if (!r.correct && r.score != 0.0) || !r.score.is_finite() || r.score < 0.0 {
            bad_score += 1;
        }
    }
    let dups = seen.values().filter(|&&c| c > 1).count();
    if dups > 0 {
        warnings.push(format!("{dups} (model, problem, dsl, condition, run, run_name) keys appear more than once; each row counts as a run"));
    }
    if bad_score > 0 {
        warnings.push(format!("{bad_score} rows have a score inconsistent with `correct` (or not a finite, non-negative number); they count as 0 unless correct"));
    }
    for v in arms.values_mut() {
        v.sort_by_key(|r| (r.run_index, r.run_name.as_str()));
    }
    Grouped { arms, family }
}

/// Per-run metric values used by the bootstrap: [score, pass, ln max(1, score)].
const K: usize = 3;
const KINDS: [StatKind; K] = [StatKind::Ratio, StatKind::Diff, StatKind::ExpDiff];

fn run_metrics(r: &AttemptRow) -> [f64; K] {
    let s = r.effective_score();
    [s, if r.correct { 1.0 } else { 0.0 }, s.max(1.0).ln()]
}

/// A unit of bootstrap work: one cell.
struct CellJob<'a> {
    model: &'a str,
    target: Dsl,
    family: Option<Family>,
    condition: Condition,
    problems: Vec<(&'a str, &'a [&'a AttemptRow], &'a [&'a AttemptRow])>,
    unpaired: usize,
}

/// Analyse attempt rows. Pure: the same rows and options always give the same result.
pub fn analyze(rows: &[AttemptRow], opts: &AnalysisOptions) -> Analysis {
    let mut warnings = Vec::new();
    let g = group_rows(rows, &mut warnings);
    let models: Vec<String> = rows
        .iter()
        .map(|r| r.model.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let runs: Vec<String> = rows
        .iter()
        .map(|r| r.run_name.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let targets: Vec<Dsl> = rows
        .iter()
        .map(|r| r.target)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Order directions cute->tirx first: target tirx first.
    let targets: Vec<Dsl> = {
        let mut t = targets;
        t.sort_by_key(|d| Direction::into_target(*d));
        t
    };
    let eps_default = opts.default_noise_eps;

    // Build the cell jobs.
    let mut jobs: Vec<CellJob> = Vec::new();
    for model in &models {
        for &target in &targets {
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
                        target,
                        family,
                        condition,
                        problems: paired,
                        unpaired,
                    });
                }
            }
        }
    }

    let results = par_map(&jobs, opts.worker_threads(), |job| cell_stats(job, opts));
    let mut cells = Vec::new();
    let mut family_cells = Vec::new();
    for (job, cell) in jobs.iter().zip(results) {
        if job.family.is_none() {
            if job.unpaired > 0 {
                warnings.push(format!(
                    "{} {} {}: {} problem(s) have only one of solo / {} and are left out",
                    job.model,
                    Direction::into_target(job.target),
                    job.condition,
                    job.unpaired,
                    job.condition
                ));
            }
            if cell.problems > 0 && cell.lift.is_none() {
                warnings.push(format!(
                    "{} {} {}: the solo mean score is 0, so the lift is undefined",
                    job.model,
                    Direction::into_target(job.target),
                    job.condition
                ));
            }
            if cell.problems > 0 && cell.problems < MIN_PROBLEMS_FOR_CI {
                warnings.push(format!(
                    "{} {} {}: only {} paired problem(s); the bootstrap CI is not reliable below {MIN_PROBLEMS_FOR_CI}",
                    job.model,
                    Direction::into_target(job.target),
                    job.condition,
                    cell.problems
                ));
            }
            cells.push(cell);
        } else {
            family_cells.push(cell);
        }
    }

    // Source tables and per-problem summaries.
    let mut source_tables = Vec::new();
    let mut problems = Vec::new();
    let mut missing_source = 0;
    for model in &models {
        for &target in &targets {
            let direction = Direction::into_target(target);
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
    if missing_source > 0 {
        warnings.push(format!("{missing_source} conditioned attempts have no source score (grouped as source_unknown)"));
    }

    // Usage.
    let mut usage = Vec::new();
    for model in &models {
        for &target in &targets {
            for c in Condition::ALL {
                let rs: Vec<&AttemptRow> = g
                    .arms
                    .iter()
                    .filter(|((m, t, _, cc), _)| *m == model.as_str() && *t == target && *cc == c)
                    .flat_map(|(_, v)| v.iter().copied())
                    .collect();
                if rs.is_empty() {
                    continue;
                }
                usage.push(usage_stats(model, Direction::into_target(target), c, &rs));
            }
        }
    }

    if opts.resamples > 0 && opts.resamples < MIN_RESAMPLES_FOR_CI {
        warnings.push(format!(
            "{} bootstrap resamples: CIs are shown but none is starred below {MIN_RESAMPLES_FOR_CI}",
            opts.resamples
        ));
    }
    let compile_only = rows
        .iter()
        .filter(|r| r.eval_mode.as_deref() == Some("compile"))
        .count();
    if compile_only > 0 {
        warnings.push(format!(
            "{compile_only} attempt(s) were evaluated compile-only (no correctness check, no timing): they count as not correct"
        ));
    }
    let headline = if !opts.headline {
        Headline::default()
    } else {
        crate::headline::headline(
            &cells,
            rows,
            &HeadlineOptions {
                resamples: opts.resamples,
                confidence: opts.confidence,
                seed: opts.seed,
                default_noise_eps: opts.default_noise_eps,
                min_clusters: MIN_PROBLEMS_FOR_CI,
                min_resamples: MIN_RESAMPLES_FOR_CI,
            },
        )
    };
    let costs = crate::practice::cost_report(rows, &cells);
    Analysis {
        schema_version: ANALYSIS_SCHEMA_VERSION,
        runs,
        rows: rows.len(),
        models,
        options: opts.clone(),
        methods: methods(opts),
        cells,
        family_cells,
        source_tables,
        usage,
        problems,
        headline,
        tie_band: crate::practice::tie_band(rows),
        budgets: crate::practice::budget_check(rows, opts.budget),
        costs,
        eval_set: None,
        provenance: None,
        warnings,
    }
}

fn methods(opts: &AnalysisOptions) -> Methods {
    let conf = opts.confidence * 100.0;
    Methods {
        score: "s = correct ? t_ref / t : 0 (t_ref: fastest eager PyTorch formulation, same session); runs averaged within a problem".into(),
        lift: "paired lift = mean_P s(treated) / mean_P s(solo) - 1 over problems with both arms".into(),
        interval: match opts.interval {
            None => format!(
                "{conf:.0}% paired bootstrap, {} resamples: {} with a BCa interval when every problem has >= 2 runs per arm, else {} with an expanded percentile interval",
                opts.resamples,
                opts.resampling.unwrap_or(Resampling::TwoStageAdjusted).describe(),
                Resampling::Problems.describe()
            ),
            Some(m) => format!(
                "{conf:.0}% paired bootstrap, {} resamples, {} interval; resampling: {} when every problem has >= 2 runs per arm, else {}",
                opts.resamples,
                m.describe(),
                opts.resampling.unwrap_or(Resampling::TwoStageAdjusted).describe(),
                Resampling::Problems.describe()
            ),
        },
        wilcoxon: format!(
            "two-sided Wilcoxon signed-rank on per-problem differences s(treated) - s(solo); average ranks for ties; zeros ranked and split (zsplit, = Pratt under the permutation distribution); exact permutation distribution for n <= {}, normal approximation above",
            opts.wilcoxon_exact_max_n
        ),
        ties: "tie when |s(treated) - s(solo)| <= eps * max(both), eps per problem variant = max(1%, 2 x the median relative range of its solo kernels' repeated timing-session medians), the fixed 0.03 where only one session exists (see the tie band line); both failing is a tie".into(),
        geo_lift: "exp(mean_P [mean_r ln max(1, s_treated) - mean_r ln max(1, s_solo)]) - 1: a failed or slower-than-eager kernel counts as eager (speedup 1)".into(),
        source_table: "per conditioned attempt: source score (its own DSL) vs the target's mean solo score, same tie rule; shares of attempts improved / regressed vs that solo mean".into(),
    }
}

fn share(k: usize, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        k as f64 / n as f64
    }
}

fn problem_eps<'a>(rows: impl Iterator<Item = &'a AttemptRow>, default: f64) -> f64 {
    let mut eps: Option<f64> = None;
    for r in rows {
        let e = r.eps_or(default);
        eps = Some(eps.map_or(e, |x: f64| x.max(e)));
    }
    eps.unwrap_or(default)
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

fn cell_stats(job: &CellJob, opts: &AnalysisOptions) -> CellStats {
    let solo_v: Vec<&[&AttemptRow]> = job.problems.iter().map(|(_, s, _)| *s).collect();
    let treat_v: Vec<&[&AttemptRow]> = job.problems.iter().map(|(_, _, t)| *t).collect();
    let solo = arm_stats(&solo_v, &opts.fast_p);
    let treated = arm_stats(&treat_v, &opts.fast_p);
    let n = job.problems.len();
    let direction = Direction::into_target(job.target);

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

fn usage_stats(
    model: &str,
    direction: Direction,
    condition: Condition,
    rs: &[&AttemptRow],
) -> UsageStats {
    let col = |f: &dyn Fn(&AttemptRow) -> f64| rs.iter().map(|r| f(r)).collect::<Vec<f64>>();
    let inp = col(&|r| r.input_tokens as f64);
    let out = col(&|r| r.output_tokens as f64);
    let wall = col(&|r| r.wall_s);
    let skill: Vec<f64> = rs
        .iter()
        .filter_map(|r| r.skill_tokens.map(|x| x as f64))
        .collect();
    let mut end_reasons = BTreeMap::new();
    let mut verdicts = BTreeMap::new();
    for r in rs {
        *end_reasons
            .entry(
                r.end_reason
                    .map_or("none".to_string(), |e| e.as_str().to_string()),
            )
            .or_insert(0) += 1;
        *verdicts
            .entry(
                r.verdict_label()
                    .map_or("none".to_string(), |v| v.to_string()),
            )
            .or_insert(0) += 1;
    }
    UsageStats {
        model: model.to_string(),
        direction,
        condition,
        attempts: rs.len(),
        correct: rs.iter().filter(|r| r.correct).count(),
        mean_input_tokens: stats::mean(&inp),
        median_input_tokens: stats::median(&inp),
        mean_output_tokens: stats::mean(&out),
        median_output_tokens: stats::median(&out),
        mean_skill_tokens: if skill.is_empty() {
            None
        } else {
            Some(stats::mean(&skill))
        },
        mean_wall_s: stats::mean(&wall),
        median_wall_s: stats::median(&wall),
        mean_turns: stats::mean(&col(&|r| r.turns as f64)),
        mean_tool_evals: stats::mean(&col(&|r| r.tool_evals as f64)),
        end_reasons,
        verdicts,
        flagged_skills: rs.iter().filter(|r| !r.skill_flags.is_empty()).count(),
    }
}

/// Map `f` over `items` on up to `threads` scoped threads, keeping the order.
pub(crate) fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.max(1).min(items.len().max(1));
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                results.lock().expect("no panics while holding the lock")[i] = Some(r);
            });
        }
    });
    out.into_iter()
        .map(|r| r.expect("every item mapped"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::test_row;

    fn opts() -> AnalysisOptions {
        AnalysisOptions {
            resamples: 2000,
            ..Default::default()
        }
    }

    /// Four problems, R = 1, hand-computable: solo [1, 2, 0, 1], conditioned [2, 2, 0, 0.5].
    fn rows() -> Vec<AttemptRow> {
        let solo = [1.0, 2.0, 0.0, 1.0];
        let cond = [2.0, 2.0, 0.0, 0.5];
        let src = [1.5, 0.5, 0.0, 3.0];
        let mut rows = Vec::new();
        for (i, p) in ["A01", "A02", "B01", "B02"].iter().enumerate() {
            rows.push(test_row("m", p, Dsl::Tirx, Condition::Solo, 0, solo[i]));
            let mut c = test_row("m", p, Dsl::Tirx, Condition::Conditioned, 0, cond[i]);
            c.source_score = Some(src[i]);
            rows.push(c);
        }
        rows
    }

    #[test]
    fn hand_computed_cell() {
        let a = analyze(&rows(), &opts());
        let c = a
            .cell(
                "m",
                Direction::into_target(Dsl::Tirx),
                Condition::Conditioned,
            )
            .unwrap();
        assert_eq!(c.problems, 4);
        // mean solo = 1.0, mean cond = 1.125 -> lift 0.125
        assert!((c.solo.mean_score - 1.0).abs() < 1e-12);
        assert!((c.treated.mean_score - 1.125).abs() < 1e-12);
        assert!((c.lift.unwrap() - 0.125).abs() < 1e-12);
        // improved: A01; regressed: B02; tied: A02 (equal), B01 (both failed)
        assert_eq!(
            (c.improved, c.regressed, c.tied, c.both_failed),
            (1, 1, 2, 1)
        );
        assert_eq!(c.improved_share, 0.25);
        // pass rates 3/4 vs 3/4
        assert_eq!(c.solo.pass_rate, 0.75);
        assert_eq!(c.pass_rate_lift, 0.0);
        // geo: ln max(1, s): solo [0, ln2, 0, 0], cond [ln2, ln2, 0, 0] -> exp(ln2 / 4) - 1
        assert!((c.geo_lift - (2f64.ln() / 4.0).exp() + 1.0).abs() < 1e-12);
        // fast_1: solo s > 1: [0, 1, 0, 0] -> 0.25; cond [1, 1, 0, 0] -> 0.5
        let f1 = c.fast_p.iter().find(|f| f.p == 1.0).unwrap();
        assert_eq!((f1.solo, f1.treated), (0.25, 0.5));
        let f0 = c.fast_p.iter().find(|f| f.p == 0.0).unwrap();
        assert_eq!((f0.solo, f0.treated), (0.75, 0.75));
        // Wilcoxon: diffs [1, 0, 0, -0.5]: zeros ranks 1.5 each (split), |-0.5| rank 3, 1 rank 4.
        let w = c.wilcoxon.as_ref().unwrap();
        assert_eq!(w.zeros, 2);
        assert_eq!(w.w_plus, 4.0 + 1.5);
        // Nonzero ranks {3, 4}: W+ part 4 of {0, 3, 4, 7}: P(<= 4) = 3/4, P(>= 4) = 2/4 -> p = 1.
        assert_eq!(w.p_value, 1.0);
        assert_eq!(c.resampling, Resampling::Problems);
        // Source table: A01 src 1.5 > solo 1 -> above, improved; A02 0.5 < 2 -> below, tied;
        // B01 0 vs 0 -> level, tied; B02 3 > 1 -> above, regressed.
        let st = a.source_tables.iter().find(|t| t.family.is_none()).unwrap();
        let g = |rel| st.groups.iter().find(|g| g.relation == rel).unwrap();
        assert_eq!(
            (
                g(SourceRelation::Above).attempts,
                g(SourceRelation::Above).improved,
                g(SourceRelation::Above).regressed
            ),
            (2, 1, 1)
        );
        assert_eq!(
            (
                g(SourceRelation::Below).attempts,
                g(SourceRelation::Below).tied
            ),
            (1, 1)
        );
        assert_eq!(g(SourceRelation::Level).attempts, 1);
        // Families: A and B cells exist; A: solo [1, 2] cond [2, 2] -> lift 1/3.
        let fa = a
            .family_cells
            .iter()
            .find(|c| c.family == Some(Family::A))
            .unwrap();
        assert!((fa.lift.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(a.problems.len(), 4);
        // The only warning: 4 problems are too few for a reliable CI.
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("only 4 paired problem(s)"));
    }

    #[test]
    fn empty_input_gives_an_empty_analysis() {
        let a = analyze(&[], &opts());
        assert!(a.cells.is_empty() && a.usage.is_empty() && a.problems.is_empty());
        assert_eq!(a.rows, 0);
        let t = crate::table::render_tables(&a);
        assert!(t.contains("Paired lift"));
        let h = crate::report::render_report(&a, &[]);
        assert!(h.contains("No lift could be computed"));
    }

    #[test]
    fn runs_are_averaged_within_problems() {
        // One problem with solo runs [1, 3] and conditioned [2, 4]; another [2, 2] vs [2, 2].
        let mut rows = Vec::new();
        for (r, (s, c)) in [(1.0, 2.0), (3.0, 4.0)].iter().enumerate() {
            rows.push(test_row(
                "m",
                "A01",
                Dsl::Cute,
                Condition::Solo,
                r as u32,
                *s,
            ));
            rows.push(test_row(
                "m",
                "A01",
                Dsl::Cute,
                Condition::Conditioned,
                r as u32,
                *c,
            ));
            rows.push(test_row(
                "m",
                "A02",
                Dsl::Cute,
                Condition::Solo,
                r as u32,
                2.0,
            ));
            rows.push(test_row(
                "m",
                "A02",
                Dsl::Cute,
                Condition::Conditioned,
                r as u32,
                2.0,
            ));
        }
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::into_target(Dsl::Cute),
                Condition::Conditioned,
            )
            .unwrap();
        // solo means (2, 2), cond means (3, 2) -> lift 5/4 - 1
        assert!((c.lift.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(
            (c.solo.runs_min, c.solo.runs_max, c.solo.attempts),
            (2, 2, 4)
        );
        assert_eq!(c.resampling, Resampling::TwoStageAdjusted);
        assert_eq!(c.direction.label(), "tirx->cute");
    }

    #[test]
    fn undefined_lift_and_unpaired_problems_are_reported() {
        let mut rows = vec![
            test_row("m", "A01", Dsl::Tirx, Condition::Solo, 0, 0.0),
            test_row("m", "A01", Dsl::Tirx, Condition::Conditioned, 0, 1.0),
            test_row("m", "A02", Dsl::Tirx, Condition::Solo, 0, 0.0),
        ];
        rows[1].source_score = None;
        let a = analyze(&rows, &opts());
        let c = &a.cells[0];
        assert_eq!(c.lift, None);
        assert_eq!(c.lift_ci, None);
        assert!(!c.significant);
        assert_eq!(c.unpaired_problems, 1);
        assert!(
            a.warnings.iter().any(|w| w.contains("undefined")),
            "{:?}",
            a.warnings
        );
        assert!(
            a.warnings.iter().any(|w| w.contains("only one of")),
            "{:?}",
            a.warnings
        );
        assert!(
            a.warnings.iter().any(|w| w.contains("no source score")),
            "{:?}",
            a.warnings
        );
    }

    #[test]
    fn one_paired_problem_is_never_significant() {
        // A single problem (e.g. a family cell with one problem): a point estimate, no CI.
        let rows = vec![
            test_row("m", "A01", Dsl::Tirx, Condition::Solo, 0, 1.0),
            test_row("m", "A01", Dsl::Tirx, Condition::Conditioned, 0, 2.0),
        ];
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::into_target(Dsl::Tirx),
                Condition::Conditioned,
            )
            .unwrap();
        assert!((c.lift.unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(c.lift_ci, None);
        assert!(!c.significant);
    }

    #[test]
    fn strong_effect_is_significant_and_deterministic() {
        // 20 problems where the conditioned score is 1.5x solo: CI well above 0, Wilcoxon tiny.
        let mut rows = Vec::new();
        for i in 0..20 {
            let p = format!("C{:02}", i + 1);
            let s = 0.5 + i as f64 * 0.1;
            rows.push(test_row("m", &p, Dsl::Tirx, Condition::Solo, 0, s));
            rows.push(test_row(
                "m",
                &p,
                Dsl::Tirx,
                Condition::Conditioned,
                0,
                s * (1.4 + 0.01 * i as f64),
            ));
            rows.push(test_row(
                "m",
                &p,
                Dsl::Tirx,
                Condition::RepeatSolo,
                0,
                s * (1.0 + if i % 2 == 0 { 0.01 } else { -0.01 }),
            ));
        }
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::into_target(Dsl::Tirx),
                Condition::Conditioned,
            )
            .unwrap();
        assert!(c.significant);
        let ci = c.lift_ci.unwrap();
        assert!(ci.lo.unwrap() > 0.3 && ci.hi.unwrap() < 0.7, "{ci:?}");
        // All 20 differences positive: exact p = 2 / 2^20.
        assert!((c.wilcoxon.as_ref().unwrap().p_value - 2.0 / (1u64 << 20) as f64).abs() < 1e-18);
        let r = a
            .cell(
                "m",
                Direction::into_target(Dsl::Tirx),
                Condition::RepeatSolo,
            )
            .unwrap();
        assert_eq!(r.tied, 20); // 1% apart, inside the 3% noise band
        let b = analyze(
            &rows,
            &AnalysisOptions {
                threads: 1,
                ..opts()
            },
        );
        assert!(
            a.cells == b.cells && a.family_cells == b.family_cells,
            "results depend on the thread count"
        );
    }
}
