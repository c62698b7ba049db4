//! The human-readable statement of the methods that every analysis carries.

use super::AnalysisOptions;
use crate::bootstrap::Resampling;
use serde::{Deserialize, Serialize};

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

pub(super) fn methods(opts: &AnalysisOptions) -> Methods {
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
