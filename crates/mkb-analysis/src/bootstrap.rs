//! The paired bootstrap over problems, with runs nested inside problems.
//!
//! Data: for each problem, the run-level values of K metrics in two arms (solo and a
//! treatment: conditioned, placebo or repeat solo). Every statistic is a function of the two
//! grand means of per-problem means (runs are averaged within a problem first, so every
//! problem weighs the same). Three kinds of statistic:
//! - [`StatKind::Ratio`]: mean(treatment) / mean(solo) - 1 (the paired lift of the score);
//! - [`StatKind::Diff`]: mean(treatment) - mean(solo) (the pass-rate lift);
//! - [`StatKind::ExpDiff`]: exp(mean(treatment) - mean(solo)) - 1 (the geometric-mean lift
//!   when the metric is a log score).
//!
//! Resampling schemes ([`Resampling`]):
//! - `Problems`: draw n problems with replacement; each keeps its runs (cluster bootstrap).
//! - `TwoStage`: draw problems, then draw runs with replacement inside each drawn problem and
//!   arm. This counts run-to-run noise twice (it is already in the problem means) and gives
//!   conservative intervals; kept for comparison.
//! - `TwoStageAdjusted` (the default when every problem has >= 2 runs in both arms): the
//!   two-stage scheme of Davison and Hinkley (1997, section 3.8) with the variance
//!   components made unbiased: the problem-level means are shrunk towards the grand mean
//!   (a 2x2 linear map, so that their covariance equals the estimated between-problem
//!   covariance, S - diag(within/R), clamped to be positive semi-definite) and the
//!   within-problem residuals are inflated by sqrt(R/(R-1)); a resampled problem mean is its
//!   shrunk mean plus the mean of R residuals drawn with replacement from that problem.
//!
//! Intervals ([`IntervalMethod`]): percentile or BCa (bias-corrected and accelerated, the
//! acceleration from the leave-one-problem-out jackknife), optionally "expanded" for small
//! samples (Hesterberg 2015): the nominal tail alpha/2 is replaced by
//! Phi(-sqrt(n/(n-1)) * t_{1-alpha/2, n-1}) before the percentile or BCa adjustment.

use crate::rng::Rng;
use crate::stats::{norm_cdf, norm_ppf, quantile_sorted};
use serde::{Deserialize, Serialize};

/// How a statistic is computed from the two grand means (solo `a`, treatment `b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatKind {
    Ratio,
    Diff,
    ExpDiff,
}

impl StatKind {
    #[inline]
    pub fn eval(self, a: f64, b: f64) -> f64 {
        match self {
            StatKind::Ratio => {
                if a > 0.0 {
                    b / a - 1.0
                } else if b > 0.0 || a < 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            }
            StatKind::Diff => b - a,
            StatKind::ExpDiff => (b - a).exp() - 1.0,
        }
    }
}

/// Resampling scheme of the paired bootstrap (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resampling {
    Problems,
    TwoStage,
    TwoStageAdjusted,
}

impl Resampling {
    pub fn describe(self) -> &'static str {
        match self {
            Resampling::Problems => "problems resampled (runs kept with their problem)",
            Resampling::TwoStage => "problems, then runs within each problem, resampled (unadjusted)",
            Resampling::TwoStageAdjusted => {
                "problems, then runs within each problem, resampled (Davison-Hinkley variance-component adjustment)"
            }
        }
    }
}

/// Confidence-interval construction from the bootstrap replicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalMethod {
    Percentile,
    Bca,
    ExpandedPercentile,
    ExpandedBca,
}

impl IntervalMethod {
    pub fn describe(self) -> &'static str {
        match self {
            IntervalMethod::Percentile => "percentile",
            IntervalMethod::Bca => "BCa",
            IntervalMethod::ExpandedPercentile => "expanded percentile",
            IntervalMethod::ExpandedBca => "expanded BCa",
        }
    }
}

/// A confidence interval. `None` marks an unbounded end (e.g. resamples whose solo mean is 0
/// give an infinite lift).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ci {
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Ci {
    fn from_bounds(lo: f64, hi: f64) -> Ci {
        let f = |x: f64| if x.is_finite() { Some(x) } else { None };
        Ci {
            lo: f(lo),
            hi: f(hi),
        }
    }
    /// Does the interval contain `x`? An unbounded end contains everything on its side.
    pub fn contains(&self, x: f64) -> bool {
        self.lo.is_none_or(|lo| lo <= x) && self.hi.is_none_or(|hi| x <= hi)
    }
    /// True when the whole interval lies strictly on one side of `x` (e.g. 0: "significant").
    pub fn excludes(&self, x: f64) -> bool {
        !self.contains(x)
    }
}

/// Run-level values of one problem: `solo[r * k + m]` is metric m of solo run r.
#[derive(Debug, Clone)]
pub struct PairedProblem {
    pub solo: Vec<f64>,
    pub treat: Vec<f64>,
}

/// The paired data of one cell (a model, direction, treatment and maybe family).
#[derive(Debug, Clone)]
pub struct PairedData {
    /// Number of metrics per run.
    pub k: usize,
    pub problems: Vec<PairedProblem>,
}

/// Bootstrap replicates of every metric's statistic.
#[derive(Debug, Clone)]
pub struct Replicates {
    /// `values[m]`: the B replicates of metric m's statistic.
    pub values: Vec<Vec<f64>>,
    pub resampling: Resampling,
}

impl PairedData {
    pub fn n(&self) -> usize {
        self.problems.len()
    }
    fn runs_solo(&self, i: usize) -> usize {
        self.problems[i].solo.len() / self.k
    }
    fn runs_treat(&self, i: usize) -> usize {
        self.problems[i].treat.len() / self.k
    }

    /// Per-problem means of metric m in both arms.
    pub fn problem_means(&self, m: usize) -> (Vec<f64>, Vec<f64>) {
        let k = self.k;
        let mean_of = |v: &[f64]| {
            let r = v.len() / k;
            (0..r).map(|j| v[j * k + m]).sum::<f64>() / r as f64
        };
        self.problems
            .iter()
            .map(|p| (mean_of(&p.solo), mean_of(&p.treat)))
            .unzip()
    }

    /// The grand means (means of per-problem means) of metric m.
    pub fn grand_means(&self, m: usize) -> (f64, f64) {
        let (a, b) = self.problem_means(m);
        (crate::stats::mean(&a), crate::stats::mean(&b))
    }

    pub fn point(&self, m: usize, kind: StatKind) -> f64 {
        let (a, b) = self.grand_means(m);
        kind.eval(a, b)
    }

    /// Leave-one-problem-out estimates of metric m's statistic.
    pub fn jackknife(&self, m: usize, kind: StatKind) -> Vec<f64> {
        let (a, b) = self.problem_means(m);
        let n = a.len();
        let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
        (0..n)
            .map(|i| {
                let d = (n - 1) as f64;
                kind.eval((sa - a[i]) / d, (sb - b[i]) / d)
            })
            .collect()
    }

    /// Every problem has at least two runs in both arms (the adjusted two-stage scheme can
    /// separate run noise from problem variation).
    pub fn has_replicated_runs(&self) -> bool {
        (0..self.n()).all(|i| self.runs_solo(i) >= 2 && self.runs_treat(i) >= 2)
    }

    /// Draw `b` bootstrap replicates of every metric's statistic.
    pub fn bootstrap(
        &self,
        kinds: &[StatKind],
        b: usize,
        resampling: Resampling,
        rng: &mut Rng,
    ) -> Replicates {
        assert_eq!(kinds.len(), self.k);
        let n = self.n();
        let k = self.k;
        let mut values = vec![Vec::with_capacity(b); k];
        if n == 0 {
            return Replicates { values, resampling };
        }
        let resampling = match resampling {
            Resampling::TwoStage | Resampling::TwoStageAdjusted if !self.has_replicated_runs() => {
                Resampling::Problems
            }
            r => r,
        };
        // Per problem: the level added before runs (means or shrunk means) and, for the
        // two-stage schemes, the run-level values to draw from (raw or scaled residuals).
        let mut base_a = vec![0.0; n * k];
        let mut base_b = vec![0.0; n * k];
        for m in 0..k {
            let (ma, mb) = self.problem_means(m);
            match resampling {
                Resampling::Problems => {
                    for i in 0..n {
                        base_a[i * k + m] = ma[i];
                        base_b[i * k + m] = mb[i];
                    }
                }
                Resampling::TwoStage => {}
                Resampling::TwoStageAdjusted => {
                    let (sa, sb) = self.shrunk_means(m, &ma, &mb);
                    for i in 0..n {
                        base_a[i * k + m] = sa[i];
                        base_b[i * k + m] = sb[i];
                    }
                }
            }
        }
        let two_stage = resampling != Resampling::Problems;
        let mut draw_a: Vec<RunDraw> = Vec::new();
        let mut draw_b: Vec<RunDraw> = Vec::new();
        if two_stage {
            let adjusted = resampling == Resampling::TwoStageAdjusted;
            for p in &self.problems {
                for (src, dst) in [(&p.solo, &mut draw_a), (&p.treat, &mut draw_b)] {
                    let r = src.len() / k;
                    let mut v = src.clone();
                    if adjusted {
                        let scale = (r as f64 / (r as f64 - 1.0)).sqrt();
                        for m in 0..k {
                            let mu = (0..r).map(|j| src[j * k + m]).sum::<f64>() / r as f64;
                            for j in 0..r {
                                v[j * k + m] = (src[j * k + m] - mu) * scale;
                            }
                        }
                    }
                    dst.push(RunDraw::new(&v, r, k));
                }
            }
        }
        let mut sum_a = vec![0.0; k];
        let mut sum_b = vec![0.0; k];
        let inv_n = 1.0 / n as f64;
        for _ in 0..b {
            for m in 0..k {
                sum_a[m] = 0.0;
                sum_b[m] = 0.0;
            }
            for _ in 0..n {
                let i = rng.index(n);
                let off = i * k;
                for m in 0..k {
                    sum_a[m] += base_a[off + m];
                    sum_b[m] += base_b[off + m];
                }
                if two_stage {
                    draw_a[i].add_mean_of_draws(rng, &mut sum_a);
                    draw_b[i].add_mean_of_draws(rng, &mut sum_b);
                }
            }
            for m in 0..k {
                values[m].push(kinds[m].eval(sum_a[m] * inv_n, sum_b[m] * inv_n));
            }
        }
        Replicates { values, resampling }
    }

    /// Problem means shrunk so that their 2x2 covariance is the between-problem component.
    fn shrunk_means(&self, m: usize, ma: &[f64], mb: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let n = ma.len();
        let k = self.k;
        let ga = crate::stats::mean(ma);
        let gb = crate::stats::mean(mb);
        if n < 2 {
            return (ma.to_vec(), mb.to_vec());
        }
        let d = (n - 1) as f64;
        let saa = ma.iter().map(|x| (x - ga).powi(2)).sum::<f64>() / d;
        let sbb = mb.iter().map(|x| (x - gb).powi(2)).sum::<f64>() / d;
        let sab = ma
            .iter()
            .zip(mb)
            .map(|(x, y)| (x - ga) * (y - gb))
            .sum::<f64>()
            / d;
        // Pooled within-problem variance of each arm, and its share in a problem mean.
        let within = |arm: &dyn Fn(&PairedProblem) -> &Vec<f64>| {
            let (mut ss, mut df, mut inv_r) = (0.0, 0.0, 0.0);
            for p in &self.problems {
                let v = arm(p);
                let r = v.len() / k;
                let mu = (0..r).map(|j| v[j * k + m]).sum::<f64>() / r as f64;
                ss += (0..r).map(|j| (v[j * k + m] - mu).powi(2)).sum::<f64>();
                df += (r - 1) as f64;
                inv_r += 1.0 / r as f64;
            }
            if df > 0.0 {
                ss / df * inv_r / n as f64
            } else {
                0.0
            }
        };
        let wa = within(&|p| &p.solo);
        let wb = within(&|p| &p.treat);
        let s = [saa, sab, sbb];
        let between = sym2_apply([saa - wa, sab, sbb - wb], |l| l.max(0.0));
        let t = mul2(
            sym2_apply(between, |l| l.max(0.0).sqrt()),
            sym2_apply(s, |l| if l > 1e-300 { 1.0 / l.sqrt() } else { 0.0 }),
        );
        let mut sa = vec![0.0; n];
        let mut sb = vec![0.0; n];
        for i in 0..n {
            let (x, y) = (ma[i] - ga, mb[i] - gb);
            sa[i] = ga + t[0][0] * x + t[0][1] * y;
            sb[i] = gb + t[1][0] * x + t[1][1] * y;
        }
        (sa, sb)
    }
}

/// Draws "the mean of R runs resampled with replacement" for one problem and arm. For
/// R <= 7 the distribution is enumerated once (every multiset of run indices with its
/// multinomial probability, C(2R-1, R) entries: 10 for R = 3) and sampled with Walker's alias
/// method, so a draw costs one uniform number and no data-dependent branch instead of R
/// index draws; above that, runs are drawn one by one. Same distribution either way.
struct RunDraw {
    k: usize,
    /// Alias table over the multisets: acceptance probability and alias of each column.
    prob: Vec<f64>,
    alias: Vec<usize>,
    /// Mean values of each multiset, `k` per entry.
    means: Vec<f64>,
    /// Run values for direct draws (R > 7), `k` per run.
    direct: Vec<f64>,
    r: usize,
}

impl RunDraw {
    const MAX_ENUMERATED_RUNS: usize = 7;

    fn new(vals: &[f64], r: usize, k: usize) -> RunDraw {
        let mut d = RunDraw {
            k,
            prob: Vec::new(),
            alias: Vec::new(),
            means: Vec::new(),
            direct: Vec::new(),
            r,
        };
        if r > Self::MAX_ENUMERATED_RUNS {
            d.direct = vals.to_vec();
            return d;
        }
        let fact = |x: usize| (1..=x).map(|v| v as f64).product::<f64>();
        let total = (r as f64).powi(r as i32);
        // Enumerate count vectors (c_0..c_{r-1}) with sum r.
        fn rec(pos: usize, left: usize, counts: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if pos + 1 == counts.len() {
                counts[pos] = left;
                out.push(counts.clone());
                return;
            }
            for c in 0..=left {
                counts[pos] = c;
                rec(pos + 1, left - c, counts, out);
            }
        }
        let mut all = Vec::new();
        rec(0, r, &mut vec![0usize; r], &mut all);
        let mut probs = Vec::with_capacity(all.len());
        for c in &all {
            probs.push(fact(r) / c.iter().map(|&x| fact(x)).product::<f64>() / total);
            for m in 0..k {
                d.means
                    .push((0..r).map(|j| c[j] as f64 * vals[j * k + m]).sum::<f64>() / r as f64);
            }
        }
        let (prob, alias) = alias_table(&probs);
        d.prob = prob;
        d.alias = alias;
        d
    }

    #[inline]
    fn add_mean_of_draws(&self, rng: &mut Rng, sums: &mut [f64]) {
        let k = self.k;
        if self.direct.is_empty() {
            let e = self.prob.len();
            let u = rng.uniform() * e as f64;
            let col = (u as usize).min(e - 1);
            let pick = if u - (col as f64) < self.prob[col] {
                col
            } else {
                self.alias[col]
            };
            let off = pick * k;
            for (s, v) in sums.iter_mut().zip(&self.means[off..off + k]) {
                *s += v;
            }
        } else {
            let w = 1.0 / self.r as f64;
            for _ in 0..self.r {
                let j = rng.index(self.r);
                for (s, v) in sums.iter_mut().zip(&self.direct[j * k..(j + 1) * k]) {
                    *s += v * w;
                }
            }
        }
    }
}

/// Walker / Vose alias table of a discrete distribution: column j is kept with probability
/// prob[j], else replaced by alias[j].
fn alias_table(p: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let e = p.len();
    let total: f64 = p.iter().sum();
    let mut scaled: Vec<f64> = p.iter().map(|x| x / total * e as f64).collect();
    let mut prob = vec![1.0; e];
    let mut alias: Vec<usize> = (0..e).collect();
    let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..e).partition(|&j| scaled[j] < 1.0);
    while let (Some(s), Some(l)) = (small.pop(), large.pop()) {
        prob[s] = scaled[s];
        alias[s] = l;
        scaled[l] -= 1.0 - scaled[s];
        if scaled[l] < 1.0 {
            small.push(l);
        } else {
            large.push(l);
        }
    }
    // Leftovers (rounding) keep probability 1.
    (prob, alias)
}

/// f applied to a symmetric 2x2 matrix [[p, q], [q, r]] (given as [p, q, r]) through its
/// eigen-decomposition: V diag(f(l1), f(l2)) V^T, returned as [p', q', r'].
fn sym2_apply(m: [f64; 3], f: impl Fn(f64) -> f64) -> [f64; 3] {
    let [p, q, r] = m;
    let half_tr = (p + r) / 2.0;
    let disc = (((p - r) / 2.0).powi(2) + q * q).sqrt();
    let (l1, l2) = (half_tr + disc, half_tr - disc);
    // Unit eigenvector of l1.
    let (vx, vy) = if q.abs() > 1e-300 * (p.abs() + r.abs()).max(1e-300) {
        let (x, y) = (l1 - r, q);
        let nrm = (x * x + y * y).sqrt();
        (x / nrm, y / nrm)
    } else if p >= r {
        (1.0, 0.0)
    } else {
        (0.0, 1.0)
    };
    let (f1, f2) = (f(l1), f(l2));
    // V = [[vx, -vy], [vy, vx]]
    [
        f1 * vx * vx + f2 * vy * vy,
        (f1 - f2) * vx * vy,
        f1 * vy * vy + f2 * vx * vx,
    ]
}

fn mul2(a: [f64; 3], b: [f64; 3]) -> [[f64; 2]; 2] {
    let am = [[a[0], a[1]], [a[1], a[2]]];
    let bm = [[b[0], b[1]], [b[1], b[2]]];
    let mut out = [[0.0; 2]; 2];
    for i in 0..2 {
        for j in 0..2 {
            out[i][j] = am[i][0] * bm[0][j] + am[i][1] * bm[1][j];
        }
    }
    out
}

/// The interval for one statistic from its point estimate, replicates and jackknife values.
pub fn interval(
    point: f64,
    replicates: &[f64],
    jackknife: &[f64],
    confidence: f64,
    method: IntervalMethod,
) -> Option<Ci> {
    if !point.is_finite() || replicates.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = replicates.iter().copied().filter(|x| !x.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = jackknife.len();
    let alpha = 1.0 - confidence;
    let tail = match method {
        IntervalMethod::ExpandedPercentile | IntervalMethod::ExpandedBca if n >= 2 => {
            let t = crate::stats::t_ppf(1.0 - alpha / 2.0, (n - 1) as f64);
            norm_cdf(-(n as f64 / (n as f64 - 1.0)).sqrt() * t)
        }
        _ => alpha / 2.0,
    };
    let (q_lo, q_hi) = match method {
        IntervalMethod::Percentile | IntervalMethod::ExpandedPercentile => (tail, 1.0 - tail),
        IntervalMethod::Bca | IntervalMethod::ExpandedBca => {
            let b = sorted.len() as f64;
            let below = sorted.iter().filter(|&&x| x < point).count() as f64;
            let equal = sorted.iter().filter(|&&x| x == point).count() as f64;
            let prop = ((below + 0.5 * equal) / b).clamp(0.5 / b, 1.0 - 0.5 / b);
            let z0 = norm_ppf(prop);
            let a = acceleration(jackknife);
            let adj = |q: f64| {
                let z = norm_ppf(q);
                let denom = 1.0 - a * (z0 + z);
                if denom <= 0.0 {
                    if z > 0.0 {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    norm_cdf(z0 + (z0 + z) / denom)
                }
            };
            (adj(tail), adj(1.0 - tail))
        }
    };
    Some(Ci::from_bounds(
        quantile_sorted(&sorted, q_lo),
        quantile_sorted(&sorted, q_hi),
    ))
}

/// BCa acceleration from jackknife values; 0 when undefined.
pub fn acceleration(jk: &[f64]) -> f64 {
    if jk.len() < 3 || jk.iter().any(|x| !x.is_finite()) {
        return 0.0;
    }
    let m = crate::stats::mean(jk);
    let (mut s2, mut s3) = (0.0, 0.0);
    for x in jk {
        let d = m - x;
        s2 += d * d;
        s3 += d * d * d;
    }
    if s2 <= 0.0 {
        0.0
    } else {
        s3 / (6.0 * s2.powf(1.5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(solo: &[&[f64]], treat: &[&[f64]]) -> PairedData {
        PairedData {
            k: 1,
            problems: solo
                .iter()
                .zip(treat)
                .map(|(s, t)| PairedProblem {
                    solo: s.to_vec(),
                    treat: t.to_vec(),
                })
                .collect(),
        }
    }

    #[test]
    fn point_estimates_average_runs_within_problems() {
        // Problem 1: solo runs 1 and 3 (mean 2), treatment 3 (mean 3); problem 2: 2 vs 1.
        let d = data(&[&[1.0, 3.0], &[2.0]], &[&[3.0], &[1.0, 1.0]]);
        // mean solo = (2 + 2)/2 = 2, mean treatment = (3 + 1)/2 = 2 -> lift 0.
        assert_eq!(d.point(0, StatKind::Ratio), 0.0);
        let d = data(&[&[1.0], &[1.0]], &[&[2.0], &[1.0]]);
        assert!((d.point(0, StatKind::Ratio) - 0.5).abs() < 1e-15);
        assert!((d.point(0, StatKind::Diff) - 0.5).abs() < 1e-15);
        assert!((d.point(0, StatKind::ExpDiff) - (0.5f64.exp() - 1.0)).abs() < 1e-15);
        // Jackknife: leaving problem 0 out gives 1/1 - 1 = 0, leaving 1 out gives 2/1 - 1 = 1.
        assert_eq!(d.jackknife(0, StatKind::Ratio), vec![0.0, 1.0]);
    }

    #[test]
    fn enumerated_run_draws_match_direct_draws() {
        // R = 3 runs with values 0, 1, 5: the mean of 3 draws with replacement has mean 2 and
        // variance var(x)/3 with var(x) = (4 + 1 + 9)/3.
        for r_vals in [
            vec![0.0, 1.0, 5.0],
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        ] {
            let r = r_vals.len();
            let d = RunDraw::new(&r_vals, r, 1);
            assert_eq!(d.direct.is_empty(), r <= RunDraw::MAX_ENUMERATED_RUNS);
            if r == 3 {
                assert_eq!(d.prob.len(), 10);
            }
            let mut rng = Rng::new(9);
            let n = 200_000;
            let (mut s1, mut s2) = (0.0, 0.0);
            for _ in 0..n {
                let mut acc = [0.0];
                d.add_mean_of_draws(&mut rng, &mut acc);
                s1 += acc[0];
                s2 += acc[0] * acc[0];
            }
            let mu = r_vals.iter().sum::<f64>() / r as f64;
            let var = r_vals.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / r as f64 / r as f64;
            let m = s1 / n as f64;
            let v = s2 / n as f64 - m * m;
            assert!((m - mu).abs() < 0.02 * mu.max(1.0), "mean {m} vs {mu}");
            assert!((v / var - 1.0).abs() < 0.03, "var {v} vs {var}");
        }
    }

    #[test]
    fn alias_table_reproduces_probabilities() {
        let p = [0.5, 0.1, 0.25, 0.15];
        let (prob, alias) = alias_table(&p);
        // Probability of each outcome = (prob[j] + sum of (1 - prob[i]) over i aliased to j) / e.
        for (j, want) in p.iter().enumerate() {
            let mut got = prob[j];
            for i in 0..p.len() {
                if alias[i] == j && i != j {
                    got += 1.0 - prob[i];
                }
            }
            assert!((got / p.len() as f64 - want).abs() < 1e-12, "{j}: {got}");
        }
    }

    #[test]
    fn ratio_of_zero_solo_is_infinite() {
        assert_eq!(StatKind::Ratio.eval(0.0, 1.0), f64::INFINITY);
        assert_eq!(StatKind::Ratio.eval(0.0, 0.0), 0.0);
    }

    #[test]
    fn sym2_functions() {
        // sqrt of diag(4, 9) and of a rotated matrix squares back.
        let s = sym2_apply([4.0, 0.0, 9.0], f64::sqrt);
        assert!((s[0] - 2.0).abs() < 1e-12 && (s[2] - 3.0).abs() < 1e-12 && s[1].abs() < 1e-12);
        let m = [2.0, 0.7, 1.0];
        let r = sym2_apply(m, f64::sqrt);
        let sq = mul2(r, r);
        assert!(
            (sq[0][0] - 2.0).abs() < 1e-12
                && (sq[0][1] - 0.7).abs() < 1e-12
                && (sq[1][1] - 1.0).abs() < 1e-12
        );
        // Clamping a negative eigenvalue.
        let c = sym2_apply([1.0, 0.0, -1.0], |l| l.max(0.0));
        assert_eq!(c, [1.0, 0.0, 0.0]);
    }

    /// Bootstrap variances of a difference of means against the truth: problems and
    /// adjusted two-stage schemes match it, the naive two-stage scheme inflates it by the
    /// predicted amount.
    #[test]
    fn bootstrap_variances_by_scheme() {
        let mut rng = Rng::new(3);
        let (n, r, sw) = (400, 3, 2.0);
        let mut problems = Vec::new();
        for _ in 0..n {
            // Problem effect shared by both arms: it cancels in the difference.
            let mu = 5.0 + rng.normal();
            let solo: Vec<f64> = (0..r).map(|_| mu + sw * rng.normal()).collect();
            let treat: Vec<f64> = (0..r).map(|_| mu + sw * rng.normal()).collect();
            problems.push(PairedProblem { solo, treat });
        }
        let d = PairedData { k: 1, problems };
        // True variance of mean(b) - mean(a): 2 arms * sw^2 / R / n.
        let truth = 2.0 * sw * sw / r as f64 / n as f64;
        let var_of = |rep: &Replicates| {
            let v = &rep.values[0];
            let m = crate::stats::mean(v);
            v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64
        };
        let b = 4000;
        let p = var_of(&d.bootstrap(&[StatKind::Diff], b, Resampling::Problems, &mut Rng::new(1)));
        let t = var_of(&d.bootstrap(&[StatKind::Diff], b, Resampling::TwoStage, &mut Rng::new(1)));
        let a = var_of(&d.bootstrap(
            &[StatKind::Diff],
            b,
            Resampling::TwoStageAdjusted,
            &mut Rng::new(1),
        ));
        assert!(
            (p / truth - 1.0).abs() < 0.15,
            "problems {p} vs truth {truth}"
        );
        assert!(
            (a / truth - 1.0).abs() < 0.15,
            "adjusted {a} vs truth {truth}"
        );
        // Naive: + 2 arms * sw^2 (R-1)/R / R / n  ->  ratio 1 + (R-1)/R = 1.67.
        assert!(
            (t / truth - 5.0 / 3.0).abs() < 0.25,
            "two-stage {t} vs truth {truth}"
        );
    }

    #[test]
    fn intervals_of_a_known_distribution() {
        // Replicates uniform on 0..=1000 (step 1): the 95% percentile interval is [25, 975].
        let reps: Vec<f64> = (0..=1000).map(|x| x as f64).collect();
        let jk = vec![1.0, 2.0, 3.0];
        let ci = interval(500.0, &reps, &jk, 0.95, IntervalMethod::Percentile).unwrap();
        assert!((ci.lo.unwrap() - 25.0).abs() < 1e-9 && (ci.hi.unwrap() - 975.0).abs() < 1e-9);
        // With a symmetric jackknife (a = 0) and the point at the median (z0 = 0), BCa equals
        // the percentile interval.
        let ci2 = interval(500.0, &reps, &jk, 0.95, IntervalMethod::Bca).unwrap();
        assert!((ci2.lo.unwrap() - 25.0).abs() < 1e-6 && (ci2.hi.unwrap() - 975.0).abs() < 1e-6);
        // A point estimate below the median shifts BCa downwards.
        let ci3 = interval(400.0, &reps, &jk, 0.95, IntervalMethod::Bca).unwrap();
        assert!(ci3.lo.unwrap() < 25.0 && ci3.hi.unwrap() < 975.0);
        // Expanded intervals are wider.
        let ci4 = interval(
            500.0,
            &reps,
            &[1.0, 2.0, 3.0, 4.0, 5.0],
            0.95,
            IntervalMethod::ExpandedPercentile,
        )
        .unwrap();
        assert!(ci4.lo.unwrap() < 25.0 && ci4.hi.unwrap() > 975.0);
        // Infinite replicates give an unbounded upper end.
        let mut r2 = reps.clone();
        for x in r2.iter_mut().skip(970) {
            *x = f64::INFINITY;
        }
        let ci5 = interval(500.0, &r2, &jk, 0.95, IntervalMethod::Percentile).unwrap();
        assert_eq!(ci5.hi, None);
        assert!(ci5.contains(1e9) && !ci5.contains(0.0) && ci5.excludes(0.0));
    }

    #[test]
    fn acceleration_of_skewed_jackknife() {
        assert_eq!(acceleration(&[1.0, 1.0, 1.0]), 0.0);
        // d = mean - x = [1, 1, -2] -> s3 = 1 + 1 - 8 = -6, s2 = 6 -> a = -6 / (6 * 6^1.5).
        let a = acceleration(&[0.0, 0.0, 3.0]);
        assert!((a - (-6.0 / (6.0 * 6f64.powf(1.5)))).abs() < 1e-15);
    }
}
