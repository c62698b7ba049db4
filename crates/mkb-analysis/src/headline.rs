//! The headline claims of a run, computed rather than left to the reader (docs/analysis.md,
//! "Headline summary"):
//! - the range of the conditioned lift over model x direction cells (each cell with its CI),
//!   the models that gain in both directions (point estimate; CI excluding 0), the range of
//!   the share of problems that regress;
//! - the source-standing table pooled over every model and direction: the outcome of each
//!   treated attempt against the target's solo baseline, grouped by where its source attempt
//!   stands relative to the target's solo score (above, level, both failed, below), split by
//!   source passed / failed and crossed with the standing, for the conditioned arm and for
//!   the two controls (placebo, repeat solo) that never saw that source;
//! - a control for regression to the mean: the same table with the standing classified
//!   against an *independent* solo measurement of the target (a held-out solo run when
//!   R >= 2, else the repeat-solo arm), so that the classifier and the outcome baseline are
//!   different measurements; the conditioned-minus-placebo difference with a problem-clustered
//!   bootstrap CI, and how much of the naive above/below pattern survives;
//! - an association test of "relative standing predicts the outcome beyond source success":
//!   a linear probability model of improved (and of regressed) on source-above and
//!   source-passed, with problem-clustered bootstrap CIs.

// Index loops over 3x3 matrices and count arrays read clearer than iterator chains here.
#![allow(clippy::needless_range_loop)]

use crate::analysis::{CellStats, TREATMENTS};
use crate::bootstrap::{interval, Ci, IntervalMethod};
use crate::rng::Rng;
use crate::row::{compare, AttemptRow, Outcome};
use crate::stats;
use mkb_core::{Condition, Direction, Dsl};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Where a pair's source attempt stands relative to the target's solo score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Source score above the target's solo score, beyond the noise band.
    Above,
    /// Within the noise band, at least one of them non-zero.
    Level,
    /// Both the source and the target's solo baseline failed (score 0).
    BothFailed,
    /// Source score below the target's solo score, beyond the noise band.
    Below,
    /// No source score known.
    Unknown,
}

impl Standing {
    pub const ALL: [Standing; 5] = [
        Standing::Above,
        Standing::Level,
        Standing::BothFailed,
        Standing::Below,
        Standing::Unknown,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Above => "above",
            Standing::Level => "level",
            Standing::BothFailed => "both_failed",
            Standing::Below => "below",
            Standing::Unknown => "unknown",
        }
    }
    /// Classify a source score against a baseline with the tie rule.
    pub fn classify(source: Option<f64>, baseline: f64, eps: f64) -> Standing {
        match source {
            None => Standing::Unknown,
            Some(s) if s <= 0.0 && baseline <= 0.0 => Standing::BothFailed,
            Some(s) => match compare(s.max(0.0), baseline, eps) {
                Outcome::Improved => Standing::Above,
                Outcome::Regressed => Standing::Below,
                Outcome::Tied => Standing::Level,
            },
        }
    }
}

/// Which solo measurement classifies the standing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classifier {
    /// The target's mean solo score, which is also the outcome's baseline (the published
    /// table; regression to the mean alone produces an above/below pattern with it).
    SoloMean,
    /// An independent solo measurement: with >= 2 solo runs, solo run r classifies and the
    /// mean of the other solo runs is the outcome baseline; with one solo run, the mean of
    /// the repeat-solo runs classifies (the repeat-solo arm itself is then left out).
    HeldOut,
}

impl Classifier {
    pub fn as_str(self) -> &'static str {
        match self {
            Classifier::SoloMean => "solo_mean",
            Classifier::HeldOut => "held_out",
        }
    }
}

/// One row of a pooled standing table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingRow {
    /// e.g. "above", "source passed", "source passed & above".
    pub group: String,
    pub attempts: usize,
    /// Distinct (model, direction, problem) units among the attempts.
    pub problems: usize,
    pub improved: usize,
    pub regressed: usize,
    pub tied: usize,
    pub improved_share: f64,
    pub regressed_share: f64,
}

/// The pooled standing table of one arm under one classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StandingTable {
    pub arm: Condition,
    pub classifier: Classifier,
    pub rows: Vec<StandingRow>,
    /// Treated attempts that could not be classified (no solo baseline, or no independent one).
    pub unclassified: usize,
}

impl StandingTable {
    pub fn row(&self, group: &str) -> Option<&StandingRow> {
        self.rows.iter().find(|r| r.group == group)
    }
}

/// Improved-if-above, regressed-if-below and the gap of one arm and classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    pub arm: Condition,
    pub classifier: Classifier,
    pub above: usize,
    pub below: usize,
    pub improved_if_above: f64,
    pub regressed_if_below: f64,
    pub improved_if_below: f64,
    /// improved_if_above - improved_if_below: how much more often an attempt improves when
    /// its source stands above than when it stands below.
    pub gap: f64,
}

/// Conditioned minus placebo of one statistic (held-out classifier), with its CI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternDiff {
    /// "improved_if_above", "regressed_if_below" or "gap".
    pub statistic: String,
    pub conditioned: f64,
    pub placebo: f64,
    pub diff: f64,
    pub ci: Option<Ci>,
    pub significant: bool,
}

/// The regression-to-the-mean control of the standing table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RtmControl {
    pub patterns: Vec<Pattern>,
    pub diffs: Vec<PatternDiff>,
    /// Held-out (conditioned - placebo) gap over the naive conditioned gap: the share of the
    /// published pattern that survives both controls (`None` when the naive gap is <= 0).
    pub surviving_share: Option<f64>,
    /// Problems (clusters) resampled, and resamples.
    pub clusters: usize,
    pub resamples: usize,
}

/// One coefficient of the association model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coef {
    pub name: String,
    pub estimate: f64,
    pub ci: Option<Ci>,
    /// Two-sided p-value of a normal test with the bootstrap standard error.
    pub p_value: Option<f64>,
    pub significant: bool,
}

/// The association test (linear probability models, problem-clustered bootstrap).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Association {
    pub arm: Condition,
    pub classifier: Classifier,
    /// Attempts in the model (source above or below, source success known).
    pub attempts: usize,
    /// Attempts left out (level, both failed, unknown or unclassified).
    pub excluded: usize,
    /// Problem clusters.
    pub clusters: usize,
    pub resamples: usize,
    /// P(improved) = b0 + b_above * above + b_passed * source_passed: [above, passed].
    pub improved: Vec<Coef>,
    /// The same for P(regressed).
    pub regressed: Vec<Coef>,
    /// Why a model could not be fitted (e.g. every source passed), if so.
    pub note: Option<String>,
}

/// One model x direction cell of the headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineCell {
    pub model: String,
    pub direction: Direction,
    pub problems: usize,
    pub lift: Option<f64>,
    pub lift_ci: Option<Ci>,
    pub significant: bool,
    pub regressed_share: f64,
}

/// Smallest and largest value over cells, with the cells' labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Range {
    pub min: f64,
    pub min_cell: String,
    pub max: f64,
    pub max_cell: String,
}

/// The headline claims of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Headline {
    pub cells: Vec<HeadlineCell>,
    /// Range of the conditioned lift over model x direction cells with a defined lift.
    pub lift_range: Option<Range>,
    /// Range of the share of paired problems that regress.
    pub regressed_range: Option<Range>,
    /// Models with both directions present.
    pub models_with_both: Vec<String>,
    /// Models whose conditioned lift is > 0 in both directions (point estimates).
    pub gain_both_point: Vec<String>,
    /// Models whose conditioned lift is starred (CI excludes 0, on the positive side) in both.
    pub gain_both_ci: Vec<String>,
    /// Pooled standing tables: every treated arm under both classifiers.
    pub standing: Vec<StandingTable>,
    pub rtm: Option<RtmControl>,
    pub association: Option<Association>,
    /// The claims in words (text output and the top of the report).
    pub summary: Vec<String>,
}

impl Headline {
    pub fn table(&self, arm: Condition, classifier: Classifier) -> Option<&StandingTable> {
        self.standing
            .iter()
            .find(|t| t.arm == arm && t.classifier == classifier)
    }
}

/// Options the headline needs.
#[derive(Debug, Clone, Copy)]
pub struct HeadlineOptions {
    pub resamples: usize,
    pub confidence: f64,
    pub seed: u64,
    pub default_noise_eps: f64,
    /// Fewest clusters (problems) and resamples for an interval to count as significant.
    pub min_clusters: usize,
    pub min_resamples: usize,
}

/// One treated attempt with its standing under both classifiers.
#[derive(Debug, Clone)]
pub struct PairRec {
    pub model: String,
    pub direction: Direction,
    pub problem: String,
    pub arm: Condition,
    pub source_passed: Option<bool>,
    pub naive: (Standing, Outcome),
    pub held_out: Option<(Standing, Outcome)>,
}

impl PairRec {
    fn get(&self, c: Classifier) -> Option<(Standing, Outcome)> {
        match c {
            Classifier::SoloMean => Some(self.naive),
            Classifier::HeldOut => self.held_out,
        }
    }
}

type Key<'a> = (&'a str, Dsl, &'a str, Condition);

/// Every treated attempt with a solo baseline, classified both ways.
pub fn pair_records(rows: &[AttemptRow], default_eps: f64) -> Vec<PairRec> {
    let mut arms: BTreeMap<Key, Vec<&AttemptRow>> = BTreeMap::new();
    // The direction into each target (a row that records its source wins).
    let mut directions: BTreeMap<Dsl, Direction> = BTreeMap::new();
    for r in rows {
        arms.entry((r.model.as_str(), r.target, r.problem.as_str(), r.condition))
            .or_default()
            .push(r);
        if r.source.is_some() {
            directions.insert(r.target, r.direction());
        } else {
            directions.entry(r.target).or_insert(r.direction());
        }
    }
    for v in arms.values_mut() {
        v.sort_by_key(|r| (r.run_index, r.run_name.as_str()));
    }
    let units: BTreeSet<(&str, Dsl, &str)> = arms.keys().map(|(m, t, p, _)| (*m, *t, *p)).collect();
    let empty: Vec<&AttemptRow> = Vec::new();
    let mut out = Vec::new();
    for (model, target, problem) in units {
        let get = |c: Condition| arms.get(&(model, target, problem, c)).unwrap_or(&empty);
        let solo = get(Condition::Solo);
        if solo.is_empty() {
            continue;
        }
        let repeat = get(Condition::RepeatSolo);
        let direction = directions[&target];
        let source_dsl = direction.source;
        let source_solo = arms
            .get(&(model, source_dsl, problem, Condition::Solo))
            .unwrap_or(&empty);
        let eps = Condition::ALL
            .iter()
            .flat_map(|c| get(*c).iter())
            .map(|r| r.eps_or(default_eps))
            .fold(None, |a: Option<f64>, e| Some(a.map_or(e, |x| x.max(e))))
            .unwrap_or(default_eps);
        let scores = |v: &[&AttemptRow]| v.iter().map(|r| r.effective_score()).collect::<Vec<_>>();
        let solo_scores = scores(solo);
        let solo_mean = stats::mean(&solo_scores);
        let repeat_mean = (!repeat.is_empty()).then(|| stats::mean(&scores(repeat)));
        for arm in TREATMENTS {
            for t in get(arm) {
                let matched = source_solo
                    .iter()
                    .find(|s| s.run_index == t.run_index)
                    .map(|s| s.effective_score())
                    .or_else(|| {
                        (!source_solo.is_empty()).then(|| stats::mean(&scores(source_solo)))
                    });
                let src = match arm {
                    Condition::Conditioned => t
                        .source_score
                        .filter(|x| x.is_finite())
                        .map(|x| x.max(0.0))
                        .or(matched),
                    _ => matched,
                };
                let y = t.effective_score();
                let naive = (
                    Standing::classify(src, solo_mean, eps),
                    compare(y, solo_mean, eps),
                );
                let held_out = if solo.len() >= 2 {
                    let k = solo
                        .iter()
                        .position(|s| s.run_index == t.run_index)
                        .unwrap_or(t.run_index as usize % solo.len());
                    let rest: Vec<f64> = solo_scores
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != k)
                        .map(|(_, x)| *x)
                        .collect();
                    let base = stats::mean(&rest);
                    Some((
                        Standing::classify(src, solo_scores[k], eps),
                        compare(y, base, eps),
                    ))
                } else {
                    match repeat_mean {
                        Some(rm) if arm != Condition::RepeatSolo => {
                            Some((Standing::classify(src, rm, eps), compare(y, solo_mean, eps)))
                        }
                        _ => None,
                    }
                };
                out.push(PairRec {
                    model: model.to_string(),
                    direction,
                    problem: problem.to_string(),
                    arm,
                    source_passed: src.map(|s| s > 0.0),
                    naive,
                    held_out,
                });
            }
        }
    }
    out
}

#[derive(Default, Clone)]
struct Acc {
    n: usize,
    units: BTreeSet<(String, Direction, String)>,
    imp: usize,
    reg: usize,
    tie: usize,
}

impl Acc {
    fn add(&mut self, p: &PairRec, o: Outcome) {
        self.n += 1;
        self.units
            .insert((p.model.clone(), p.direction, p.problem.clone()));
        match o {
            Outcome::Improved => self.imp += 1,
            Outcome::Regressed => self.reg += 1,
            Outcome::Tied => self.tie += 1,
        }
    }
    fn row(&self, group: String) -> StandingRow {
        StandingRow {
            group,
            attempts: self.n,
            problems: self.units.len(),
            improved: self.imp,
            regressed: self.reg,
            tied: self.tie,
            improved_share: share(self.imp, self.n),
            regressed_share: share(self.reg, self.n),
        }
    }
}

fn share(k: usize, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        k as f64 / n as f64
    }
}

/// The pooled standing table of one arm and classifier.
pub fn standing_table(recs: &[PairRec], arm: Condition, classifier: Classifier) -> StandingTable {
    let mut by: BTreeMap<String, Acc> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut unclassified = 0;
    for p in recs.iter().filter(|p| p.arm == arm) {
        let Some((st, o)) = p.get(classifier) else {
            unclassified += 1;
            continue;
        };
        let passed = match p.source_passed {
            Some(true) => Some("source passed"),
            Some(false) => Some("source failed"),
            None => None,
        };
        let mut keys = vec![st.as_str().to_string()];
        if let Some(ps) = passed {
            keys.push(ps.to_string());
            keys.push(format!("{ps} & {}", st.as_str()));
        }
        for k in keys {
            by.entry(k).or_default().add(p, o);
        }
    }
    for st in Standing::ALL {
        if st != Standing::Unknown || by.contains_key(st.as_str()) {
            order.push(st.as_str().to_string());
        }
    }
    for ps in ["source passed", "source failed"] {
        order.push(ps.to_string());
        for st in Standing::ALL {
            let k = format!("{ps} & {}", st.as_str());
            if by.contains_key(&k) {
                order.push(k);
            }
        }
    }
    let rows = order
        .into_iter()
        .map(|k| by.get(&k).cloned().unwrap_or_default().row(k))
        .collect();
    StandingTable {
        arm,
        classifier,
        rows,
        unclassified,
    }
}

/// Counts per cluster for the pattern statistics: [arm][classifier][above, below][imp, reg, n].
type PatCounts = [[[[f64; 3]; 2]; 2]; 3];

fn arm_index(c: Condition) -> Option<usize> {
    TREATMENTS.iter().position(|t| *t == c)
}

fn pattern_of(c: &PatCounts, arm: usize, cl: usize) -> (f64, f64, f64, f64) {
    let [a, b] = c[arm][cl];
    let ia = if a[2] > 0.0 { a[0] / a[2] } else { f64::NAN };
    let rb = if b[2] > 0.0 { b[1] / b[2] } else { f64::NAN };
    let ib = if b[2] > 0.0 { b[0] / b[2] } else { f64::NAN };
    (ia, rb, ib, ia - ib)
}

fn cluster_ids(recs: &[PairRec]) -> (BTreeMap<&str, usize>, usize) {
    let ids: BTreeMap<&str, usize> = recs
        .iter()
        .map(|p| p.problem.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(i, p)| (p, i))
        .collect();
    let n = ids.len();
    (ids, n)
}

/// The regression-to-the-mean control (`None` without conditioned and placebo records).
pub fn rtm_control(recs: &[PairRec], opts: &HeadlineOptions) -> Option<RtmControl> {
    let has = |c: Condition| recs.iter().any(|p| p.arm == c && p.held_out.is_some());
    if !has(Condition::Conditioned) {
        return None;
    }
    let (ids, n) = cluster_ids(recs);
    let mut per: Vec<PatCounts> = vec![[[[[0.0; 3]; 2]; 2]; 3]; n];
    for p in recs {
        let Some(a) = arm_index(p.arm) else { continue };
        for (ci, cl) in [Classifier::SoloMean, Classifier::HeldOut]
            .iter()
            .enumerate()
        {
            let Some((st, o)) = p.get(*cl) else { continue };
            let g = match st {
                Standing::Above => 0,
                Standing::Below => 1,
                _ => continue,
            };
            let c = &mut per[ids[p.problem.as_str()]][a][ci][g];
            c[2] += 1.0;
            match o {
                Outcome::Improved => c[0] += 1.0,
                Outcome::Regressed => c[1] += 1.0,
                Outcome::Tied => {}
            }
        }
    }
    let total = sum_counts(per.iter());
    let mut patterns = Vec::new();
    for (a, arm) in TREATMENTS.iter().enumerate() {
        for (ci, cl) in [Classifier::SoloMean, Classifier::HeldOut]
            .iter()
            .enumerate()
        {
            let [ab, be] = total[a][ci];
            if ab[2] + be[2] == 0.0 {
                continue;
            }
            let (ia, rb, ib, gap) = pattern_of(&total, a, ci);
            patterns.push(Pattern {
                arm: *arm,
                classifier: *cl,
                above: ab[2] as usize,
                below: be[2] as usize,
                improved_if_above: ia,
                regressed_if_below: rb,
                improved_if_below: ib,
                gap,
            });
        }
    }
    // Conditioned (0) minus placebo (1), held-out classifier (1).
    let diff_stats = |c: &PatCounts| -> [f64; 3] {
        let (ia0, rb0, _, g0) = pattern_of(c, 0, 1);
        let (ia1, rb1, _, g1) = pattern_of(c, 1, 1);
        [ia0 - ia1, rb0 - rb1, g0 - g1]
    };
    let mut diffs = Vec::new();
    if has(Condition::Placebo) {
        let point = diff_stats(&total);
        let mut reps: [Vec<f64>; 3] = Default::default();
        if opts.resamples > 0 && n >= 2 {
            let mut rng = Rng::derived(opts.seed, "headline|rtm");
            for _ in 0..opts.resamples {
                let c = sum_counts((0..n).map(|_| &per[rng.index(n)]));
                let d = diff_stats(&c);
                for k in 0..3 {
                    reps[k].push(d[k]);
                }
            }
        }
        let (c0, c1) = (pattern_of(&total, 0, 1), pattern_of(&total, 1, 1));
        let names = ["improved_if_above", "regressed_if_below", "gap"];
        let cond = [c0.0, c0.1, c0.3];
        let plac = [c1.0, c1.1, c1.3];
        for k in 0..3 {
            let ci = interval(
                point[k],
                &reps[k],
                &vec![0.0; n],
                opts.confidence,
                IntervalMethod::ExpandedPercentile,
            );
            diffs.push(PatternDiff {
                statistic: names[k].to_string(),
                conditioned: cond[k],
                placebo: plac[k],
                diff: point[k],
                significant: starred(ci, n, opts),
                ci,
            });
        }
    }
    let naive_gap = pattern_of(&total, 0, 0).3;
    let surviving_share = diffs
        .iter()
        .find(|d| d.statistic == "gap")
        .filter(|_| naive_gap.is_finite() && naive_gap > 0.0)
        .map(|d| d.diff / naive_gap)
        .filter(|x| x.is_finite());
    Some(RtmControl {
        patterns,
        diffs,
        surviving_share,
        clusters: n,
        resamples: opts.resamples,
    })
}

fn sum_counts<'a>(it: impl Iterator<Item = &'a PatCounts>) -> PatCounts {
    let mut t: PatCounts = [[[[0.0; 3]; 2]; 2]; 3];
    for c in it {
        for a in 0..3 {
            for cl in 0..2 {
                for g in 0..2 {
                    for k in 0..3 {
                        t[a][cl][g][k] += c[a][cl][g][k];
                    }
                }
            }
        }
    }
    t
}

fn starred(ci: Option<Ci>, clusters: usize, opts: &HeadlineOptions) -> bool {
    clusters >= opts.min_clusters
        && opts.resamples >= opts.min_resamples
        && ci.is_some_and(|c| c.excludes(0.0))
}

/// Sufficient statistics of the two linear probability models for one cluster:
/// X'X (3x3) and X'y for improved and for regressed, X = [1, above, passed].
#[derive(Clone, Copy, Default)]
struct Lpm {
    xtx: [[f64; 3]; 3],
    xty: [[f64; 3]; 2],
}

impl Lpm {
    fn add(&mut self, o: &Lpm) {
        for i in 0..3 {
            for j in 0..3 {
                self.xtx[i][j] += o.xtx[i][j];
            }
            for k in 0..2 {
                self.xty[k][i] += o.xty[k][i];
            }
        }
    }
    /// Coefficients [b0, b_above, b_passed] for improved and regressed; `None` if singular.
    fn solve(&self) -> Option<[[f64; 3]; 2]> {
        let inv = invert3(&self.xtx)?;
        let mut out = [[0.0; 3]; 2];
        for k in 0..2 {
            for i in 0..3 {
                out[k][i] = (0..3).map(|j| inv[i][j] * self.xty[k][j]).sum();
            }
        }
        Some(out)
    }
}

fn invert3(m: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    let scale = m.iter().flatten().map(|x| x.abs()).fold(0.0, f64::max);
    if !det.is_finite() || det.abs() <= 1e-9 * scale.powi(3).max(1e-300) {
        return None;
    }
    let c = |i: usize, j: usize| {
        let (r0, r1) = ((i + 1) % 3, (i + 2) % 3);
        let (c0, c1) = ((j + 1) % 3, (j + 2) % 3);
        m[r0][c0] * m[r1][c1] - m[r0][c1] * m[r1][c0]
    };
    let mut inv = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            inv[j][i] = c(i, j) / det;
        }
    }
    Some(inv)
}

/// The association test on one arm under one classifier (`None` without such attempts).
pub fn association(
    recs: &[PairRec],
    arm: Condition,
    classifier: Classifier,
    opts: &HeadlineOptions,
) -> Option<Association> {
    let mine: Vec<&PairRec> = recs.iter().filter(|p| p.arm == arm).collect();
    if mine.is_empty() {
        return None;
    }
    let (ids, _) = cluster_ids(recs);
    let mut per: BTreeMap<usize, Lpm> = BTreeMap::new();
    let (mut used, mut excluded) = (0, 0);
    for p in &mine {
        let (Some((st, o)), Some(passed)) = (p.get(classifier), p.source_passed) else {
            excluded += 1;
            continue;
        };
        let above = match st {
            Standing::Above => 1.0,
            Standing::Below => 0.0,
            _ => {
                excluded += 1;
                continue;
            }
        };
        used += 1;
        let x = [1.0, above, if passed { 1.0 } else { 0.0 }];
        let y = [
            (o == Outcome::Improved) as u8 as f64,
            (o == Outcome::Regressed) as u8 as f64,
        ];
        let e = per.entry(ids[p.problem.as_str()]).or_default();
        for i in 0..3 {
            for j in 0..3 {
                e.xtx[i][j] += x[i] * x[j];
            }
            for k in 0..2 {
                e.xty[k][i] += x[i] * y[k];
            }
        }
    }
    let clusters: Vec<Lpm> = per.into_values().collect();
    let n = clusters.len();
    let mut total = Lpm::default();
    for c in &clusters {
        total.add(c);
    }
    let mut result = Association {
        arm,
        classifier,
        attempts: used,
        excluded,
        clusters: n,
        resamples: opts.resamples,
        improved: Vec::new(),
        regressed: Vec::new(),
        note: None,
    };
    let Some(point) = total.solve() else {
        result.note = Some(
            "the model cannot be fitted: above/below and source passed/failed do not both vary"
                .into(),
        );
        return Some(result);
    };
    let mut reps: [[Vec<f64>; 2]; 2] = Default::default();
    if opts.resamples > 0 && n >= 2 {
        let mut rng = Rng::derived(opts.seed, &format!("headline|assoc|{arm}|{classifier:?}"));
        for _ in 0..opts.resamples {
            let mut t = Lpm::default();
            for _ in 0..n {
                t.add(&clusters[rng.index(n)]);
            }
            // A singular resample (e.g. no failed source drawn) has no estimate; it is left
            // out of the interval (and counted in no tail).
            if let Some(b) = t.solve() {
                for k in 0..2 {
                    for j in 0..2 {
                        reps[k][j].push(b[k][j + 1]);
                    }
                }
            }
        }
    }
    for k in 0..2 {
        let coefs: Vec<Coef> = ["source_above", "source_passed"]
            .iter()
            .enumerate()
            .map(|(j, name)| {
                let est = point[k][j + 1];
                let r = &reps[k][j];
                let ci = interval(
                    est,
                    r,
                    &vec![0.0; n],
                    opts.confidence,
                    IntervalMethod::ExpandedPercentile,
                );
                let sd = if r.len() >= 2 {
                    let m = stats::mean(r);
                    (r.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (r.len() - 1) as f64).sqrt()
                } else {
                    f64::NAN
                };
                let p_value =
                    (sd.is_finite() && sd > 0.0).then(|| 2.0 * stats::norm_cdf(-(est / sd).abs()));
                Coef {
                    name: name.to_string(),
                    estimate: est,
                    significant: starred(ci, n, opts),
                    ci,
                    p_value,
                }
            })
            .collect();
        if k == 0 {
            result.improved = coefs;
        } else {
            result.regressed = coefs;
        }
    }
    Some(result)
}

/// The headline of an analysis: its conditioned cells and the rows it came from.
pub fn headline(cells: &[CellStats], rows: &[AttemptRow], opts: &HeadlineOptions) -> Headline {
    let cond: Vec<&CellStats> = cells
        .iter()
        .filter(|c| c.condition == Condition::Conditioned && c.family.is_none())
        .collect();
    let hcells: Vec<HeadlineCell> = cond
        .iter()
        .map(|c| HeadlineCell {
            model: c.model.clone(),
            direction: c.direction,
            problems: c.problems,
            lift: c.lift,
            lift_ci: c.lift_ci,
            significant: c.significant,
            regressed_share: c.regressed_share,
        })
        .collect();
    let label = |c: &HeadlineCell| format!("{} {}", c.model, c.direction);
    let range = |f: &dyn Fn(&HeadlineCell) -> Option<f64>| -> Option<Range> {
        let vals: Vec<(f64, String)> = hcells
            .iter()
            .filter(|c| c.problems > 0)
            .filter_map(|c| f(c).filter(|x| x.is_finite()).map(|x| (x, label(c))))
            .collect();
        let min = vals.iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
        let max = vals.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
        Some(Range {
            min: min.0,
            min_cell: min.1.clone(),
            max: max.0,
            max_cell: max.1.clone(),
        })
    };
    let lift_range = range(&|c| c.lift);
    let regressed_range = range(&|c| Some(c.regressed_share));
    let models: BTreeSet<&str> = hcells.iter().map(|c| c.model.as_str()).collect();
    let (mut both, mut gain_point, mut gain_ci) = (Vec::new(), Vec::new(), Vec::new());
    for m in models {
        let mine: Vec<&HeadlineCell> = hcells.iter().filter(|c| c.model == m).collect();
        let dirs: BTreeSet<Direction> = mine.iter().map(|c| c.direction).collect();
        if dirs.len() < 2 {
            continue;
        }
        both.push(m.to_string());
        if mine.iter().all(|c| c.lift.is_some_and(|l| l > 0.0)) {
            gain_point.push(m.to_string());
        }
        if mine
            .iter()
            .all(|c| c.significant && c.lift_ci.is_some_and(|ci| ci.lo.is_some_and(|lo| lo > 0.0)))
        {
            gain_ci.push(m.to_string());
        }
    }
    let recs = pair_records(rows, opts.default_noise_eps);
    let mut standing = Vec::new();
    for arm in TREATMENTS {
        if !recs.iter().any(|p| p.arm == arm) {
            continue;
        }
        for cl in [Classifier::SoloMean, Classifier::HeldOut] {
            standing.push(standing_table(&recs, arm, cl));
        }
    }
    let rtm = rtm_control(&recs, opts);
    let association = association(&recs, Condition::Conditioned, Classifier::HeldOut, opts);
    let mut h = Headline {
        cells: hcells,
        lift_range,
        regressed_range,
        models_with_both: both,
        gain_both_point: gain_point,
        gain_both_ci: gain_ci,
        standing,
        rtm,
        association,
        summary: Vec::new(),
    };
    h.summary = summary_sentences(&h);
    h
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.0}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

fn signed_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

fn ci_str(ci: Option<Ci>, scale: f64, unit: &str) -> String {
    match ci {
        None => "no CI".into(),
        Some(c) => {
            let f = |x: Option<f64>, inf: &str| {
                x.map_or(inf.to_string(), |v| format!("{:+.1}{unit}", v * scale))
            };
            format!("[{}, {}]", f(c.lo, "-inf"), f(c.hi, "+inf"))
        }
    }
}

/// The headline in sentences.
pub fn summary_sentences(h: &Headline) -> Vec<String> {
    let mut s = Vec::new();
    if let Some(r) = &h.lift_range {
        s.push(format!(
            "Conditioned lift over {} model x direction cell(s) ranges from {} ({}) to {} ({}).",
            h.cells.iter().filter(|c| c.lift.is_some()).count(),
            signed_pct(r.min),
            r.min_cell,
            signed_pct(r.max),
            r.max_cell
        ));
    } else {
        s.push("No conditioned lift could be computed.".into());
    }
    if !h.models_with_both.is_empty() {
        s.push(format!(
            "{} of {} model(s) gain in both directions by the point estimate ({}); {} with a CI excluding 0 in both ({}).",
            h.gain_both_point.len(),
            h.models_with_both.len(),
            if h.gain_both_point.is_empty() { "none".into() } else { h.gain_both_point.join(", ") },
            h.gain_both_ci.len(),
            if h.gain_both_ci.is_empty() { "none".into() } else { h.gain_both_ci.join(", ") },
        ));
    }
    if let Some(r) = &h.regressed_range {
        s.push(format!(
            "The share of problems that regress ranges from {} ({}) to {} ({}).",
            pct(r.min),
            r.min_cell,
            pct(r.max),
            r.max_cell
        ));
    }
    if let Some(t) = h.table(Condition::Conditioned, Classifier::SoloMean) {
        let (a, b) = (t.row("above"), t.row("below"));
        if let (Some(a), Some(b)) = (a, b) {
            s.push(format!(
                "Pooled over models and directions (source vs the target's solo mean): when the source stands above, {} of {} conditioned attempts improve; when it stands below, {} of {} regress ({} level and {} both-failed attempts reported apart).",
                pct(a.improved_share),
                a.attempts,
                pct(b.regressed_share),
                b.attempts,
                t.row("level").map_or(0, |r| r.attempts),
                t.row("both_failed").map_or(0, |r| r.attempts),
            ));
        }
    }
    if let Some(rtm) = &h.rtm {
        let pat = |arm, cl| {
            rtm.patterns
                .iter()
                .find(|p| p.arm == arm && p.classifier == cl)
        };
        let mut parts = Vec::new();
        for (arm, name) in [
            (Condition::Placebo, "placebo"),
            (Condition::RepeatSolo, "repeat solo"),
        ] {
            if let Some(p) = pat(arm, Classifier::SoloMean) {
                parts.push(format!(
                    "{name} {} / {}",
                    pct(p.improved_if_above),
                    pct(p.regressed_if_below)
                ));
            }
        }
        if !parts.is_empty() {
            s.push(format!(
                "Null reference with the same classifier (improved if above / regressed if below): {}; these arms never saw the source, so a pattern in them is an artifact of the classification (regression to the mean).",
                parts.join(", ")
            ));
        }
        if let Some(d) = rtm.diffs.iter().find(|d| d.statistic == "gap") {
            s.push(format!(
                "Against an independent solo measurement, the above-minus-below gap in the improvement rate is {} (conditioned) vs {} (placebo): difference {} pp, {:.0}% CI {}{}.",
                signed_pct(d.conditioned),
                signed_pct(d.placebo),
                if d.diff.is_finite() { format!("{:+.1}", d.diff * 100.0) } else { "n/a".into() },
                95.0,
                ci_str(d.ci, 100.0, " pp"),
                if d.significant { " (excludes 0)" } else { "" }
            ));
            if let Some(sv) = rtm.surviving_share {
                s.push(format!(
                    "{} of the published above/below gap survives both controls.",
                    pct(sv)
                ));
            }
        } else if let Some(p) = pat(Condition::Conditioned, Classifier::HeldOut) {
            s.push(format!(
                "Against an independent solo measurement the conditioned gap is {}; no placebo arm to compare with.",
                signed_pct(p.gap)
            ));
        }
    }
    if let Some(a) = &h.association {
        match (&a.note, a.improved.first()) {
            (Some(n), _) => s.push(format!("Association test: {n}.")),
            (None, Some(c)) => {
                let pass = a.improved.get(1);
                s.push(format!(
                    "Association (held-out standing, {} attempts, {} problem clusters): source above raises P(improved) by {} pp {}{}; source passed by {} pp {}.",
                    a.attempts,
                    a.clusters,
                    format_pp(c.estimate),
                    ci_str(c.ci, 100.0, ""),
                    if c.significant { " (excludes 0)" } else { "" },
                    pass.map_or("n/a".into(), |p| format_pp(p.estimate)),
                    pass.map_or("".into(), |p| ci_str(p.ci, 100.0, "")),
                ));
            }
            _ => {}
        }
    }
    s
}

fn format_pp(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1}", x * 100.0)
    } else {
        "n/a".into()
    }
}

/// The headline's tables as terminal text (pooled standing tables, the regression-to-the-mean
/// control and the association test); the sentences are `Headline::summary`.
pub fn render_headline_tables(h: &Headline) -> String {
    use crate::table::text_table;
    use std::fmt::Write as _;
    let mut out = String::new();
    for t in &h.standing {
        let _ = writeln!(
            out,
            "== Source standing, pooled over models and directions: {} vs solo, classified by {} ==",
            t.arm,
            match t.classifier {
                Classifier::SoloMean => "the target's solo mean (also the outcome baseline)",
                Classifier::HeldOut => "an independent solo measurement (held-out run / repeat solo)",
            }
        );
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.group.clone(),
                    r.attempts.to_string(),
                    r.problems.to_string(),
                    r.improved.to_string(),
                    r.regressed.to_string(),
                    r.tied.to_string(),
                    pct(if r.attempts > 0 {
                        r.improved_share
                    } else {
                        f64::NAN
                    }),
                    pct(if r.attempts > 0 {
                        r.regressed_share
                    } else {
                        f64::NAN
                    }),
                ]
            })
            .collect();
        out.push_str(&text_table(
            &[
                "group",
                "attempts",
                "units",
                "improved",
                "regressed",
                "tied",
                "% improved",
                "% regressed",
            ],
            &rows,
            &[false, true, true, true, true, true, true, true],
        ));
        if t.unclassified > 0 {
            let _ = writeln!(
                out,
                "({} attempts could not be classified this way)",
                t.unclassified
            );
        }
        out.push('\n');
    }
    if let Some(r) = &h.rtm {
        let _ = writeln!(
            out,
            "== Regression to the mean: the above/below pattern per arm and classifier =="
        );
        let rows: Vec<Vec<String>> = r
            .patterns
            .iter()
            .map(|p| {
                vec![
                    p.arm.to_string(),
                    p.classifier.as_str().to_string(),
                    p.above.to_string(),
                    p.below.to_string(),
                    pct(p.improved_if_above),
                    pct(p.regressed_if_below),
                    pct(p.improved_if_below),
                    signed_pct(p.gap),
                ]
            })
            .collect();
        out.push_str(&text_table(
            &[
                "arm",
                "classifier",
                "above",
                "below",
                "impr | above",
                "regr | below",
                "impr | below",
                "gap",
            ],
            &rows,
            &[false, false, true, true, true, true, true, true],
        ));
        for d in &r.diffs {
            let _ = writeln!(
                out,
                "conditioned - placebo (held out), {}: {} pp, CI {}{}",
                d.statistic,
                format_pp(d.diff),
                ci_str(d.ci, 100.0, ""),
                if d.significant { " *" } else { "" }
            );
        }
        let _ = writeln!(
            out,
            "({} problem clusters, {} resamples; * = CI excludes 0 with >= 8 clusters and >= 1,000 resamples)\n",
            r.clusters, r.resamples
        );
    }
    if let Some(a) = &h.association {
        let _ = writeln!(
            out,
            "== Association: linear probability models, {} {} attempts, {} excluded (level / both failed / unknown), {} problem clusters ==",
            a.attempts, a.arm, a.excluded, a.clusters
        );
        if let Some(n) = &a.note {
            let _ = writeln!(out, "{n}");
        }
        let mut rows = Vec::new();
        for (outcome, coefs) in [("improved", &a.improved), ("regressed", &a.regressed)] {
            for c in coefs {
                rows.push(vec![
                    outcome.to_string(),
                    c.name.clone(),
                    format_pp(c.estimate),
                    ci_str(c.ci, 100.0, ""),
                    c.p_value.map_or("n/a".into(), |p| format!("{p:.3}")),
                    if c.significant {
                        "*".into()
                    } else {
                        String::new()
                    },
                ]);
            }
        }
        out.push_str(&text_table(
            &[
                "outcome",
                "term",
                "effect (pp)",
                "CI (pp)",
                "p (bootstrap SE)",
                "sig",
            ],
            &rows,
            &[false, false, true, true, true, false],
        ));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::test_row;

    #[test]
    fn classification_both_ways_by_hand() {
        // Target tirx, problem A01: solo runs [1.0, 3.0] (mean 2), conditioned run 0 with
        // source 2.5 (above the mean 2; held out: above run 0's 1.0, outcome vs run 1's 3.0).
        let mut rows = vec![
            test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 1.0),
            test_row("m", "A01", Dsl::TIRX, Condition::Solo, 1, 3.0),
            test_row("m", "A01", Dsl::CUTE, Condition::Solo, 0, 2.5),
            test_row("m", "A01", Dsl::CUTE, Condition::Solo, 1, 0.0),
        ];
        let mut c0 = test_row("m", "A01", Dsl::TIRX, Condition::Conditioned, 0, 2.5);
        c0.source_score = Some(2.5);
        let mut c1 = test_row("m", "A01", Dsl::TIRX, Condition::Conditioned, 1, 0.9);
        c1.source_score = Some(0.0);
        rows.push(c0);
        rows.push(c1);
        // Placebo run 1: its "source" is the matched solo attempt in cute, run 1 (0.0).
        rows.push(test_row("m", "A01", Dsl::TIRX, Condition::Placebo, 1, 2.0));
        let recs = pair_records(&rows, 0.03);
        let tirx: Vec<&PairRec> = recs
            .iter()
            .filter(|p| p.direction.target == Dsl::TIRX)
            .collect();
        assert_eq!(tirx.len(), 3);
        let c0 = tirx[0];
        assert_eq!(c0.naive, (Standing::Above, Outcome::Improved));
        assert_eq!(c0.held_out, Some((Standing::Above, Outcome::Regressed)));
        assert_eq!(c0.source_passed, Some(true));
        let c1 = tirx[1];
        // source 0 vs mean 2: below; 0.9 vs 2: regressed. Held out: 0 vs run 1's 3.0: below;
        // 0.9 vs run 0's 1.0: 0.1 > 0.03 * 1.0 -> regressed.
        assert_eq!(c1.naive, (Standing::Below, Outcome::Regressed));
        assert_eq!(c1.held_out, Some((Standing::Below, Outcome::Regressed)));
        let pl = tirx[2];
        assert_eq!(pl.arm, Condition::Placebo);
        assert_eq!(pl.naive, (Standing::Below, Outcome::Tied));
        let t = standing_table(&recs, Condition::Conditioned, Classifier::SoloMean);
        // cute target: solo [2.5, 0] vs conditioned rows? none for cute, so only tirx rows.
        assert_eq!(t.row("above").unwrap().improved, 1);
        assert_eq!(t.row("below").unwrap().regressed, 1);
        assert_eq!(t.row("source failed & below").unwrap().attempts, 1);
        assert_eq!(t.row("source passed & above").unwrap().attempts, 1);
        assert_eq!(t.row("both_failed").unwrap().attempts, 0);
    }

    #[test]
    fn both_failed_is_apart_from_level() {
        assert_eq!(
            Standing::classify(Some(0.0), 0.0, 0.03),
            Standing::BothFailed
        );
        assert_eq!(Standing::classify(Some(1.01), 1.0, 0.03), Standing::Level);
        assert_eq!(Standing::classify(None, 1.0, 0.03), Standing::Unknown);
        assert_eq!(Standing::classify(Some(0.0), 0.5, 0.03), Standing::Below);
    }

    #[test]
    fn ols_recovers_known_coefficients() {
        // y = 0.2 + 0.5 above + 0.1 passed exactly on four design points.
        let mut t = Lpm::default();
        for (a, p) in [(0.0, 0.0), (1.0, 1.0), (0.0, 1.0), (1.0, 1.0), (0.0, 0.0)] {
            let x = [1.0, a, p];
            let y = 0.2 + 0.5 * a + 0.1 * p;
            for i in 0..3 {
                for j in 0..3 {
                    t.xtx[i][j] += x[i] * x[j];
                }
                t.xty[0][i] += x[i] * y;
            }
        }
        let b = t.solve().unwrap();
        assert!((b[0][0] - 0.2).abs() < 1e-12);
        assert!((b[0][1] - 0.5).abs() < 1e-12);
        assert!((b[0][2] - 0.1).abs() < 1e-12);
        // Collinear: above == passed everywhere.
        let mut s = Lpm::default();
        for a in [0.0, 1.0, 1.0] {
            let x = [1.0, a, a];
            for i in 0..3 {
                for j in 0..3 {
                    s.xtx[i][j] += x[i] * x[j];
                }
            }
        }
        assert!(s.solve().is_none());
    }
}
