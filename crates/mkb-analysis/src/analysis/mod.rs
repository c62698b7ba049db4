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
//!
//! Layout: `group` turns rows into arms, `cells` computes the paired statistics of
//! each cell, `sources` the source tables and problem summaries, `usage` the token and
//! wall-time table, `methods` the statement of the methods; this module holds the options,
//! the [`Analysis`] result and [`analyze`], which puts them together.

mod cells;
mod group;
mod methods;
mod sources;
mod usage;

pub use cells::{ArmStats, CellStats, FastP};
pub use methods::Methods;
pub use sources::{ProblemArm, ProblemSummary, SourceGroup, SourceRelation, SourceTable};
pub use usage::UsageStats;

use crate::bootstrap::{IntervalMethod, Resampling};
use crate::headline::{Headline, HeadlineOptions};
use crate::row::{AttemptRow, DEFAULT_NOISE_EPS};
use cells::{cell_jobs, cell_stats};
use group::group_rows;
use methods::methods;
use mkb_core::{Condition, Direction, Dsl};
use serde::{Deserialize, Serialize};
use sources::source_tables_and_problems;
use std::collections::BTreeSet;
use usage::usage_table;

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
        t.sort_by_key(|d| g.direction(*d));
        t
    };

    let jobs = cell_jobs(&g, &models, &targets, opts);
    let results = par_map(&jobs, opts.worker_threads(), |job| cell_stats(job, opts));
    let mut cells = Vec::new();
    let mut family_cells = Vec::new();
    for (job, cell) in jobs.iter().zip(results) {
        if job.family.is_none() {
            if job.unpaired > 0 {
                warnings.push(format!(
                    "{} {} {}: {} problem(s) have only one of solo / {} and are left out",
                    job.model, job.direction, job.condition, job.unpaired, job.condition
                ));
            }
            if cell.problems > 0 && cell.lift.is_none() {
                warnings.push(format!(
                    "{} {} {}: the solo mean score is 0, so the lift is undefined",
                    job.model, job.direction, job.condition
                ));
            }
            if cell.problems > 0 && cell.problems < MIN_PROBLEMS_FOR_CI {
                warnings.push(format!(
                    "{} {} {}: only {} paired problem(s); the bootstrap CI is not reliable below {MIN_PROBLEMS_FOR_CI}",
                    job.model,
                    job.direction,
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
    let (source_tables, problems, missing_source) =
        source_tables_and_problems(&g, &models, &targets, opts);
    if missing_source > 0 {
        warnings.push(format!("{missing_source} conditioned attempts have no source score (grouped as source_unknown)"));
    }

    // Usage.
    let usage = usage_table(&g, &models, &targets);

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

/// Map `f` over `items` on up to `threads` worker threads (a rayon pool of that size),
/// keeping the order. Results do not depend on the thread count: every item draws from its
/// own seeded stream.
pub(crate) fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use rayon::prelude::*;
    let threads = threads.max(1).min(items.len().max(1));
    if threads <= 1 {
        return items.iter().map(&f).collect();
    }
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| items.par_iter().map(&f).collect()),
        Err(e) => {
            tracing::warn!("no worker threads ({e}); running on this thread");
            items.iter().map(&f).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::test_row;
    use mkb_core::Family;

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
            rows.push(test_row("m", p, Dsl::TIRX, Condition::Solo, 0, solo[i]));
            let mut c = test_row("m", p, Dsl::TIRX, Condition::Conditioned, 0, cond[i]);
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
                Direction::default_into(Dsl::TIRX).unwrap(),
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
                Dsl::CUTE,
                Condition::Solo,
                r as u32,
                *s,
            ));
            rows.push(test_row(
                "m",
                "A01",
                Dsl::CUTE,
                Condition::Conditioned,
                r as u32,
                *c,
            ));
            rows.push(test_row(
                "m",
                "A02",
                Dsl::CUTE,
                Condition::Solo,
                r as u32,
                2.0,
            ));
            rows.push(test_row(
                "m",
                "A02",
                Dsl::CUTE,
                Condition::Conditioned,
                r as u32,
                2.0,
            ));
        }
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::default_into(Dsl::CUTE).unwrap(),
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
            test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 0.0),
            test_row("m", "A01", Dsl::TIRX, Condition::Conditioned, 0, 1.0),
            test_row("m", "A02", Dsl::TIRX, Condition::Solo, 0, 0.0),
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
            test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 1.0),
            test_row("m", "A01", Dsl::TIRX, Condition::Conditioned, 0, 2.0),
        ];
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::default_into(Dsl::TIRX).unwrap(),
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
            rows.push(test_row("m", &p, Dsl::TIRX, Condition::Solo, 0, s));
            rows.push(test_row(
                "m",
                &p,
                Dsl::TIRX,
                Condition::Conditioned,
                0,
                s * (1.4 + 0.01 * i as f64),
            ));
            rows.push(test_row(
                "m",
                &p,
                Dsl::TIRX,
                Condition::RepeatSolo,
                0,
                s * (1.0 + if i % 2 == 0 { 0.01 } else { -0.01 }),
            ));
        }
        let a = analyze(&rows, &opts());
        let c = a
            .cell(
                "m",
                Direction::default_into(Dsl::TIRX).unwrap(),
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
                Direction::default_into(Dsl::TIRX).unwrap(),
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
