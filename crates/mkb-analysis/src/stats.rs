//! Elementary statistics used by the analysis: means, quantiles, the normal and t distributions
//! (special functions from `libm` and `statrs`), and the Wilcoxon signed-rank test (exact
//! permutation distribution, normal fallback).

use serde::{Deserialize, Serialize};

/// Arithmetic mean; NaN for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Median; NaN for an empty slice.
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    quantile_sorted(&v, 0.5)
}

/// Quantile of sorted data with linear interpolation between order statistics (Hyndman and
/// Fan type 7, numpy's default). NaN for empty data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    if lo == hi || sorted[lo] == sorted[hi] {
        return sorted[lo];
    }
    // An infinite end point stays infinite (no inf - inf).
    if !sorted[hi].is_finite() || !sorted[lo].is_finite() {
        return if h - lo as f64 >= 0.5 {
            sorted[hi]
        } else {
            sorted[lo]
        };
    }
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// Complementary error function, from `libm` (the musl implementation, < 1 ulp; statrs's
/// `erfc` is only ~1e-10 accurate in the tails, which the p-values of the tests need).
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// Standard normal CDF.
pub fn norm_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Standard normal quantile (inverse CDF): -sqrt(2) erfc^-1(2p), with statrs's inverse
/// complementary error function; NaN outside [0, 1].
pub fn norm_ppf(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    -std::f64::consts::SQRT_2 * statrs::function::erf::erfc_inv(2.0 * p)
}

/// Student t quantile with `df` degrees of freedom (statrs); NaN for p outside [0, 1] or a
/// df that is not a positive number.
pub fn t_ppf(p: f64, df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// How a Wilcoxon p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WilcoxonMethod {
    /// Exact permutation distribution over all 2^m sign assignments of the m non-zero
    /// differences' ranks (with their tie-averaged values).
    Exact,
    /// Normal approximation with the permutation mean and variance (tie- and zero-aware),
    /// no continuity correction; used above `AnalysisOptions::wilcoxon_exact_max_n`.
    Normal,
}

/// Result of the two-sided Wilcoxon signed-rank test on paired differences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wilcoxon {
    /// Number of differences (problems), zeros included.
    pub n: usize,
    /// Differences that are exactly zero (e.g. both conditions failed).
    pub zeros: usize,
    /// W+ : sum of the ranks of positive differences plus half the ranks of zero differences
    /// (the "zsplit" convention). Ranks are of |d| among all n, ties get average ranks.
    pub w_plus: f64,
    /// Two-sided p-value: 2 * min(P(W+ <= w), P(W+ >= w)), capped at 1.
    pub p_value: f64,
    pub method: WilcoxonMethod,
}

/// Average ranks (1-based) of `xs`, ties sharing the mean of their positions. Values within
/// a relative 1e-12 of each other count as tied, so that differences computed two ways agree.
pub fn average_ranks(xs: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut ranks = vec![0.0; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && nearly_equal(xs[order[j + 1]], xs[order[i]]) {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = avg;
        }
        i = j + 1;
    }
    ranks
}

fn nearly_equal(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Two-sided Wilcoxon signed-rank test of "the differences are symmetric about 0".
///
/// Zeros: ranked with the others and their ranks split half to W+ and half to W-
/// ("zsplit"); under the permutation distribution their contribution is a constant, so the
/// p-value equals that of Pratt's method. A difference counts as zero when
/// |d| <= 1e-12 * scale (`scale` = the largest |d|, or 1).
/// Exact for n <= `exact_max_n` (dynamic programming over the doubled ranks, which are
/// integers), normal approximation above.
pub fn wilcoxon_signed_rank(diffs: &[f64], exact_max_n: usize) -> Option<Wilcoxon> {
    if diffs.is_empty() || diffs.iter().any(|d| !d.is_finite()) {
        return None;
    }
    let n = diffs.len();
    let scale = diffs.iter().fold(0.0f64, |m, d| m.max(d.abs())).max(1.0);
    let is_zero = |d: f64| d.abs() <= 1e-12 * scale;
    let abs: Vec<f64> = diffs
        .iter()
        .map(|d| if is_zero(*d) { 0.0 } else { d.abs() })
        .collect();
    let ranks = average_ranks(&abs);
    let zeros = diffs.iter().filter(|d| is_zero(**d)).count();
    let mut w_plus = 0.0;
    for (d, r) in diffs.iter().zip(&ranks) {
        if is_zero(*d) {
            w_plus += r / 2.0;
        } else if *d > 0.0 {
            w_plus += r;
        }
    }
    let nonzero: Vec<f64> = diffs
        .iter()
        .zip(&ranks)
        .filter(|(d, _)| !is_zero(**d))
        .map(|(_, r)| *r)
        .collect();
    if nonzero.is_empty() {
        return Some(Wilcoxon {
            n,
            zeros,
            w_plus,
            p_value: 1.0,
            method: WilcoxonMethod::Exact,
        });
    }
    let zero_part: f64 = diffs
        .iter()
        .zip(&ranks)
        .filter(|(d, _)| is_zero(**d))
        .map(|(_, r)| r / 2.0)
        .sum();
    if n <= exact_max_n {
        // Doubled ranks are integers (average ranks are multiples of 1/2).
        let r2: Vec<usize> = nonzero.iter().map(|r| (2.0 * r).round() as usize).collect();
        let total: usize = r2.iter().sum();
        let mut dist = vec![0.0f64; total + 1];
        dist[0] = 1.0;
        let mut reach = 0;
        for &r in &r2 {
            reach += r;
            for k in (0..=reach).rev() {
                let from = if k >= r { dist[k - r] } else { 0.0 };
                dist[k] = 0.5 * dist[k] + 0.5 * from;
            }
        }
        // Observed statistic on the doubled scale, nonzero part only.
        let t = (2.0 * (w_plus - zero_part)).round() as usize;
        let lower: f64 = dist[..=t.min(total)].iter().sum();
        let upper: f64 = dist[t.min(total)..].iter().sum();
        let p = (2.0 * lower.min(upper)).min(1.0);
        Some(Wilcoxon {
            n,
            zeros,
            w_plus,
            p_value: p,
            method: WilcoxonMethod::Exact,
        })
    } else {
        let mean_w: f64 = ranks.iter().sum::<f64>() / 2.0;
        let var_w: f64 = nonzero.iter().map(|r| r * r).sum::<f64>() / 4.0;
        let z = (w_plus - mean_w) / var_w.sqrt();
        let p = erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0);
        Some(Wilcoxon {
            n,
            zeros,
            w_plus,
            p_value: p,
            method: WilcoxonMethod::Normal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn normal_distribution_values() {
        assert!(close(norm_cdf(0.0), 0.5, 1e-15));
        assert!(close(norm_cdf(1.959963984540054), 0.975, 1e-13));
        assert!(close(norm_cdf(-1.0), 0.15865525393145707, 1e-13));
        assert!(close(norm_cdf(3.0), 0.9986501019683699, 1e-13));
        assert!(close(erfc(3.0), 2.209049699858544e-05, 1e-17));
        assert!(close(erfc(5.0), 1.5374597944280351e-12, 1e-24));
        assert!(close(norm_ppf(0.975), 1.959963984540054, 1e-12));
        assert!(close(norm_ppf(0.5), 0.0, 1e-12));
        assert!(close(norm_ppf(0.001), -3.090232306167813, 1e-10));
        for p in [1e-6, 0.01, 0.2, 0.7, 0.99] {
            assert!(close(norm_cdf(norm_ppf(p)), p, 1e-12 * p.max(1e-3)));
        }
    }

    #[test]
    fn student_t_quantiles() {
        // Values from standard t tables (6 decimals).
        assert!(close(t_ppf(0.975, 11.0), 2.200985, 1e-6));
        assert!(close(t_ppf(0.975, 29.0), 2.045230, 1e-6));
        assert!(close(t_ppf(0.975, 73.0), 1.992997, 1e-6));
        assert!(close(t_ppf(0.975, 5.0), 2.570582, 1e-6));
        assert!(close(t_ppf(0.995, 2.0), 9.924843, 1e-6));
        assert!(close(t_ppf(0.5, 7.0), 0.0, 1e-12));
        assert!(t_ppf(0.975, 0.0).is_nan() && t_ppf(1.5, 5.0).is_nan());
    }

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_sorted(&v, 0.5), 2.5);
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 4.0);
        assert!(close(quantile_sorted(&v, 0.1), 1.3, 1e-12));
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(quantile_sorted(&[1.0, f64::INFINITY], 0.9), f64::INFINITY);
    }

    #[test]
    fn ranks_average_ties() {
        assert_eq!(
            average_ranks(&[3.0, 1.0, 3.0, 2.0]),
            vec![3.5, 1.0, 3.5, 2.0]
        );
    }

    /// Brute force over all 2^m sign assignments: an independent check of the DP.
    fn brute_force_p(diffs: &[f64]) -> f64 {
        let abs: Vec<f64> = diffs.iter().map(|d| d.abs()).collect();
        let ranks = average_ranks(&abs);
        let nz: Vec<usize> = (0..diffs.len()).filter(|&i| diffs[i] != 0.0).collect();
        let zero_part: f64 = (0..diffs.len())
            .filter(|&i| diffs[i] == 0.0)
            .map(|i| ranks[i] / 2.0)
            .sum();
        let obs: f64 = zero_part
            + nz.iter()
                .filter(|&&i| diffs[i] > 0.0)
                .map(|&i| ranks[i])
                .sum::<f64>();
        let m = nz.len();
        let (mut le, mut ge) = (0u64, 0u64);
        for mask in 0u64..(1 << m) {
            let w: f64 = zero_part
                + (0..m)
                    .filter(|b| mask >> b & 1 == 1)
                    .map(|b| ranks[nz[b]])
                    .sum::<f64>();
            if w <= obs + 1e-9 {
                le += 1;
            }
            if w >= obs - 1e-9 {
                ge += 1;
            }
        }
        let total = (1u64 << m) as f64;
        (2.0 * (le.min(ge) as f64) / total).min(1.0)
    }

    #[test]
    fn wilcoxon_exact_small_tables() {
        // All five positive: W+ = 15, only 1 of 32 assignments is as extreme on each side.
        let w = wilcoxon_signed_rank(&[1.0, 2.0, 3.0, 4.0, 5.0], 50).unwrap();
        assert_eq!(w.method, WilcoxonMethod::Exact);
        assert_eq!(w.w_plus, 15.0);
        assert!(close(w.p_value, 2.0 / 32.0, 1e-15));
        // n = 6 all positive: 2/64.
        let w = wilcoxon_signed_rank(&[0.5, 1.5, 2.5, 3.5, 4.5, 5.5], 50).unwrap();
        assert!(close(w.p_value, 2.0 / 64.0, 1e-15));
        // n = 8, W+ = 3 (ranks 1 and 2 negative... i.e. W- = 33): the classic table says
        // P(W <= 3) = 5/256, so the two-sided p is 10/256 = 0.0390625 (critical value 3 at
        // alpha = 0.05 two-sided). Here ranks 1 and 2 are positive: W+ = 3.
        let d = [0.1, 0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8];
        let w = wilcoxon_signed_rank(&d, 50).unwrap();
        assert_eq!(w.w_plus, 3.0);
        assert!(close(w.p_value, 10.0 / 256.0, 1e-15), "p {}", w.p_value);
        // W+ = 4 for n = 8: P(W <= 4) = 7/256 -> p = 14/256 (not significant at 0.05).
        let d = [0.1, -0.2, 0.3, -0.4, -0.5, -0.6, -0.7, -0.8];
        let w = wilcoxon_signed_rank(&d, 50).unwrap();
        assert_eq!(w.w_plus, 4.0);
        assert!(close(w.p_value, 14.0 / 256.0, 1e-15), "p {}", w.p_value);
        // n = 10, W+ = 8: P(W <= 8) = 25/1024 (table), p = 50/1024.
        let d = [0.1, -0.2, 0.3, 0.4, -0.5, -0.6, -0.7, -0.8, -0.9, -1.0];
        let w = wilcoxon_signed_rank(&d, 50).unwrap();
        assert_eq!(w.w_plus, 8.0);
        assert!(close(w.p_value, 50.0 / 1024.0, 1e-15), "p {}", w.p_value);
    }

    #[test]
    fn wilcoxon_ties_and_zeros_match_brute_force() {
        let cases: Vec<Vec<f64>> = vec![
            vec![0.0, 0.0, 1.0, -1.0, 2.0, 2.0, 2.0, 3.0, -4.0, 5.0],
            vec![0.0, 0.3, 0.3, -0.3, 0.7, 1.1, 1.1, 0.0, 2.0],
            vec![1.0, 1.0, 1.0, 1.0, -1.0, 2.0],
            vec![
                -0.5, 0.0, 0.25, 0.25, 0.75, -0.75, 1.5, 1.5, 1.5, -3.0, 4.0, 0.0, 6.0,
            ],
        ];
        for d in cases {
            let w = wilcoxon_signed_rank(&d, 50).unwrap();
            let bf = brute_force_p(&d);
            assert!(
                close(w.p_value, bf, 1e-12),
                "{d:?}: dp {} brute {bf}",
                w.p_value
            );
        }
        // zsplit bookkeeping: zeros take ranks 1 and 2 -> 1.5 goes to W+.
        let w = wilcoxon_signed_rank(&[0.0, 0.0, 1.0, 2.0], 50).unwrap();
        assert_eq!(w.zeros, 2);
        assert_eq!(w.w_plus, 1.5 + 3.0 + 4.0);
        // All zero: no evidence at all.
        assert_eq!(wilcoxon_signed_rank(&[0.0, 0.0], 50).unwrap().p_value, 1.0);
    }

    #[test]
    fn wilcoxon_normal_fallback_agrees_with_exact() {
        // 40 differences: exact vs normal approximation should agree to ~0.01.
        let d: Vec<f64> = (1..=40)
            .map(|i| {
                if i % 3 == 0 {
                    -(i as f64)
                } else {
                    i as f64 * 0.9
                }
            })
            .collect();
        let e = wilcoxon_signed_rank(&d, 100).unwrap();
        let a = wilcoxon_signed_rank(&d, 10).unwrap();
        assert_eq!(e.method, WilcoxonMethod::Exact);
        assert_eq!(a.method, WilcoxonMethod::Normal);
        assert!(e.p_value < 0.5 && e.p_value > 1e-4, "{}", e.p_value);
        assert!(
            (e.p_value - a.p_value).abs() < 0.01,
            "exact {} normal {}",
            e.p_value,
            a.p_value
        );
    }

    #[test]
    fn wilcoxon_is_symmetric_in_sign() {
        let d = [0.3, -1.2, 2.2, 0.0, 4.1, 5.0, -0.1];
        let neg: Vec<f64> = d.iter().map(|x| -x).collect();
        let a = wilcoxon_signed_rank(&d, 50).unwrap();
        let b = wilcoxon_signed_rank(&neg, 50).unwrap();
        assert!(close(a.p_value, b.p_value, 1e-15));
        assert!(wilcoxon_signed_rank(&[], 50).is_none());
        assert!(wilcoxon_signed_rank(&[f64::NAN], 50).is_none());
    }
}
