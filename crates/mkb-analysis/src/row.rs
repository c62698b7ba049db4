//! The input of the analysis: one row per finished attempt, as the run store produces it
//! (and as `simulate` produces it). Everything the statistics, tables, exports and the report
//! need is in this row; nothing else is read.

use mkb_core::{Condition, Direction, Dsl, EndReason, Family, Verdict};
use serde::{Deserialize, Serialize};

/// Default measured timing noise: two scores within 3% of each other count as a tie.
pub const DEFAULT_NOISE_EPS: f64 = 0.03;

/// The measured tie band (docs/analysis.md, "Tie band"): `EPS_MULTIPLE` times the median,
/// over the solo attempts of a problem variant, of the relative range (max - min) / median of
/// each kernel's repeated session medians, and never below `EPS_FLOOR`.
pub const EPS_MULTIPLE: f64 = 2.0;
/// The smallest measured tie band: 1%.
pub const EPS_FLOOR: f64 = 0.01;

/// The tie band of one problem variant from its solo kernels' session medians (one list per
/// kernel, microseconds): `Some((eps, sessions))` when at least one kernel was timed in two
/// or more sessions (`sessions`: the fewest sessions among those used), else `None` (the fixed
/// `DEFAULT_NOISE_EPS` applies).
pub fn measured_eps(kernels: &[Vec<f64>]) -> Option<(f64, u32)> {
    let mut spreads = Vec::new();
    let mut sessions = u32::MAX;
    for k in kernels {
        let v: Vec<f64> = k
            .iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect();
        if v.len() < 2 {
            continue;
        }
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        spreads.push((sorted[n - 1] - sorted[0]) / median);
        sessions = sessions.min(n as u32);
    }
    if spreads.is_empty() {
        return None;
    }
    spreads.sort_by(f64::total_cmp);
    let m = spreads.len();
    let med = if m % 2 == 1 {
        spreads[m / 2]
    } else {
        (spreads[m / 2 - 1] + spreads[m / 2]) / 2.0
    };
    Some(((EPS_MULTIPLE * med).max(EPS_FLOOR), sessions))
}

fn default_noise_eps() -> f64 {
    DEFAULT_NOISE_EPS
}

/// One attempt (solo, conditioned, placebo or repeat solo) with its final evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRow {
    /// Name of the run the attempt belongs to (`runs/<name>`). Rows of several runs may be
    /// analysed together; their runs then pool as more runs per problem.
    pub run_name: String,
    /// The store's id of the attempt (used for labels and links); optional.
    #[serde(default)]
    pub attempt_id: Option<String>,
    /// Model name as configured (e.g. "claude-x", "gpt-y").
    pub model: String,
    /// Problem id (e.g. "A01"), identical for both DSL variants of the problem.
    pub problem: String,
    pub family: Family,
    /// The DSL the attempt was written in. A solo attempt in `target` is the baseline of the
    /// direction into `target` (and the source of the directions out of it).
    pub target: Dsl,
    /// The source DSL of the direction this row belongs to: the DSL of the skill in the
    /// prompt (conditioned, placebo), or of the skills the run gave attempts in `target`
    /// (solo, repeat solo). `None` when unknown: rows written before it was recorded belong
    /// to the default pairing, cute <-> tirx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Dsl>,
    pub condition: Condition,
    /// Run index r = 0..R-1 of the (model, problem, target, condition) cell.
    pub run_index: u32,
    /// Verdict of the final clean-process evaluation; `None` when there was no kernel to
    /// evaluate (the attempt ended without writing one) or it was never evaluated.
    pub verdict: Option<Verdict>,
    /// Final evaluation passed (compiles in the target DSL, static + dynamic DSL-use checks,
    /// correct on every check shape and trial).
    pub correct: bool,
    /// Median end-to-end runtime t of the final kernel on the benchmark shape, microseconds.
    pub runtime_us: Option<f64>,
    /// t_ref: the fastest eager PyTorch formulation, same shape, same session, microseconds.
    pub t_ref_us: Option<f64>,
    /// torch.compile baseline runtime, same shape, same session, microseconds.
    pub t_compile_us: Option<f64>,
    /// Score s = correct ? t_ref / t : 0 (docs/design.md, "Scoring"). The analysis uses
    /// 0 whenever `correct` is false, whatever this field says (and warns).
    pub score: f64,
    /// For conditioned and placebo attempts: the score, in its own (source) DSL, of the solo
    /// attempt that produced the skill in the prompt. `None` for solo and repeat-solo rows
    /// (and when unknown).
    #[serde(default)]
    pub source_score: Option<f64>,
    /// The store's id of that source attempt, when known.
    #[serde(default)]
    pub source_attempt_id: Option<String>,
    /// Measured relative timing noise of this evaluation (default 0.03): two scores within
    /// `noise_eps * max(both)` of each other count as a tie.
    #[serde(default = "default_noise_eps")]
    pub noise_eps: f64,
    /// Repeated timing sessions `noise_eps` was measured from (docs/analysis.md, "Tie band");
    /// 0 when it is the fixed default (one session: old runs, compile mode, simulations).
    #[serde(default)]
    pub noise_sessions: u32,
    /// Prompt tokens summed over the attempt's model calls (the distillation turn excluded).
    pub input_tokens: u64,
    /// Completion tokens summed over the attempt's model calls (distillation excluded).
    pub output_tokens: u64,
    /// Tokens (input + output) of the distillation turn that wrote a skill from this attempt
    /// (solo and repeat-solo rows whose attempt was distilled); counted apart from the budget.
    /// `None` for rows without a distillation (conditioned, placebo).
    #[serde(default)]
    pub skill_tokens: Option<u64>,
    /// Wall-clock seconds of the attempt (evaluations and retries included, distillation not).
    pub wall_s: f64,
    /// Seconds of `wall_s` the attempt's tool evaluations spent queued for the shared
    /// evaluator, not charged to its wall budget; `None` when not recorded (older runs).
    #[serde(default)]
    pub eval_wait_s: Option<f64>,
    /// What the attempt's tokens cost in US dollars at the configured model price (the
    /// distillation turn excluded); `None` without a price.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Why the attempt's conversation ended.
    pub end_reason: Option<EndReason>,
    /// Assistant turns the attempt used (0 when unknown).
    #[serde(default)]
    pub turns: u32,
    /// Evaluation tool calls the attempt used (0 when unknown).
    #[serde(default)]
    pub tool_evals: u32,
    /// Leak-audit and format flags of the skill involved (the skill in the prompt for
    /// conditioned/placebo rows, the distilled skill for solo rows), e.g. "target_dsl_code".
    #[serde(default)]
    pub skill_flags: Vec<String>,
    /// Final kernel file, relative to the run directory (report links).
    #[serde(default)]
    pub kernel_path: Option<String>,
    /// Skill file: the distilled skill (solo rows) or the skill in the prompt
    /// (conditioned/placebo rows), relative to the run directory.
    #[serde(default)]
    pub skill_path: Option<String>,
    /// Trajectory (JSONL), relative to the run directory.
    #[serde(default)]
    pub trajectory_path: Option<String>,
    /// Mode of the final evaluation: "full" (correctness and timing) or "compile" (compiled
    /// only: nothing was checked for correctness, so the attempt is never `correct`); `None`
    /// when there was no final evaluation.
    #[serde(default)]
    pub eval_mode: Option<String>,
}

impl AttemptRow {
    /// The transfer direction this row belongs to: `source -> target` (the default pairing's
    /// direction into `target` when the source is not recorded).
    pub fn direction(&self) -> Direction {
        match self.source {
            Some(source) => Direction {
                source,
                target: self.target,
            },
            None => Direction::default_into(self.target).unwrap_or(Direction {
                source: self.target,
                target: self.target,
            }),
        }
    }

    /// The score the analysis uses: `score` when correct and a positive finite number, else 0.
    pub fn effective_score(&self) -> f64 {
        if self.correct && self.score.is_finite() && self.score > 0.0 {
            self.score
        } else {
            0.0
        }
    }

    /// The noise threshold the analysis uses for this row (`DEFAULT_NOISE_EPS` if invalid).
    pub fn eps_or(&self, default: f64) -> f64 {
        if self.noise_eps.is_finite() && self.noise_eps >= 0.0 {
            self.noise_eps
        } else {
            default
        }
    }

    /// The agent's own wall seconds: `wall_s` less the time queued for the evaluator (all of
    /// `wall_s` when that was not recorded).
    pub fn agent_wall_s(&self) -> f64 {
        (self.wall_s - self.eval_wait_s.unwrap_or(0.0)).max(0.0)
    }

    /// Speedup over torch.compile (t_compile / t) when correct with both timings, else 0.
    pub fn speedup_compile(&self) -> f64 {
        match (self.correct, self.runtime_us, self.t_compile_us) {
            (true, Some(t), Some(tc)) if t > 0.0 && tc > 0.0 => tc / t,
            _ => 0.0,
        }
    }

    /// s = correct ? t_ref / t : 0, the definition of docs/design.md.
    pub fn score_from(correct: bool, runtime_us: Option<f64>, t_ref_us: Option<f64>) -> f64 {
        match (correct, runtime_us, t_ref_us) {
            (true, Some(t), Some(tr)) if t > 0.0 && tr > 0.0 => tr / t,
            _ => 0.0,
        }
    }

    /// The verdict as exports and tables show it: a kernel that only compiled (compile-mode
    /// final evaluation) reads "compiled_only", never "correct".
    pub fn verdict_label(&self) -> Option<&'static str> {
        self.verdict.map(|v| {
            if v == Verdict::Correct && self.eval_mode.as_deref() == Some("compile") {
                "compiled_only"
            } else {
                v.as_str()
            }
        })
    }

    /// A short label: "model/problem/target/condition/r".
    pub fn label(&self) -> String {
        format!(
            "{}/{}/{}/{}/{}",
            self.model, self.problem, self.target, self.condition, self.run_index
        )
    }
}

/// Outcome of a treated attempt (or problem) against the solo baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Improved,
    Regressed,
    Tied,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Improved => "improved",
            Outcome::Regressed => "regressed",
            Outcome::Tied => "tied",
        }
    }
}

/// Compare a treated score with a solo score: a tie when
/// |treated - solo| <= eps * max(treated, solo) (both failing, 0 vs 0, is a tie).
pub fn compare(treated: f64, solo: f64, eps: f64) -> Outcome {
    if (treated - solo).abs() <= eps * treated.max(solo) {
        Outcome::Tied
    } else if treated > solo {
        Outcome::Improved
    } else {
        Outcome::Regressed
    }
}

#[cfg(test)]
pub(crate) fn test_row(
    model: &str,
    problem: &str,
    target: Dsl,
    condition: Condition,
    run: u32,
    score: f64,
) -> AttemptRow {
    AttemptRow {
        run_name: "t".into(),
        attempt_id: None,
        model: model.into(),
        problem: problem.into(),
        family: Family::from_letter(problem.chars().next().unwrap_or('A')).unwrap_or(Family::A),
        target,
        source: None,
        condition,
        run_index: run,
        verdict: Some(if score > 0.0 {
            Verdict::Correct
        } else {
            Verdict::Incorrect
        }),
        correct: score > 0.0,
        runtime_us: if score > 0.0 {
            Some(100.0 / score)
        } else {
            None
        },
        t_ref_us: Some(100.0),
        t_compile_us: Some(80.0),
        score,
        source_score: None,
        source_attempt_id: None,
        noise_eps: DEFAULT_NOISE_EPS,
        noise_sessions: 0,
        input_tokens: 1000,
        output_tokens: 100,
        skill_tokens: None,
        wall_s: 10.0,
        eval_wait_s: None,
        cost_usd: None,
        end_reason: Some(EndReason::Submitted),
        turns: 3,
        tool_evals: 2,
        skill_flags: vec![],
        kernel_path: None,
        skill_path: None,
        trajectory_path: None,
        eval_mode: Some("full".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_eps_is_a_multiple_of_the_session_spread_with_a_floor() {
        // Ranges 10% and 4% and 2%: median 4%, times 2.
        let k = vec![
            vec![100.0, 110.0, 105.0],
            vec![50.0, 52.0, 51.0],
            vec![200.0, 202.0, 204.0],
        ];
        let (eps, n) = measured_eps(&k).unwrap();
        assert!((eps - 2.0 * (2.0 / 51.0)).abs() < 1e-12, "{eps}");
        assert_eq!(n, 3);
        // Quiet kernels: the floor.
        let (eps, _) = measured_eps(&[vec![100.0, 100.1]]).unwrap();
        assert_eq!(eps, EPS_FLOOR);
        // One session each (old runs, compile mode): nothing measured.
        assert_eq!(measured_eps(&[vec![100.0], vec![]]), None);
        assert_eq!(measured_eps(&[]), None);
    }

    #[test]
    fn a_row_belongs_to_its_recorded_direction() {
        let toy = Dsl::new("toy").unwrap();
        // Without a recorded source: the default pairing (older rows).
        let old = test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 1.0);
        assert_eq!(old.direction().label(), "cute->tirx");
        // With one: any DSLs.
        let mut rows = Vec::new();
        for (c, s) in [(Condition::Solo, 1.0), (Condition::Conditioned, 2.0)] {
            let mut r = test_row("m", "A01", toy, c, 0, s);
            r.source = Some(Dsl::CUTE);
            assert_eq!(r.direction().label(), "cute->toy");
            rows.push(r);
        }
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert_eq!(json["source"], "cute");
        assert!(serde_json::to_value(&old).unwrap().get("source").is_none());
        // The analysis names the cell by that direction.
        let a = crate::analyze(&rows, &crate::AnalysisOptions::default());
        let dirs: Vec<String> = a.cells.iter().map(|c| c.direction.label()).collect();
        assert_eq!(dirs, vec!["cute->toy"], "{:?}", a.warnings);
    }

    #[test]
    fn tie_rule() {
        assert_eq!(compare(0.0, 0.0, 0.03), Outcome::Tied);
        assert_eq!(compare(1.02, 1.0, 0.03), Outcome::Tied);
        assert_eq!(compare(1.0, 1.03, 0.03), Outcome::Tied); // 0.03 <= 0.03 * 1.03
        assert_eq!(compare(1.05, 1.0, 0.03), Outcome::Improved);
        assert_eq!(compare(0.5, 0.0, 0.03), Outcome::Improved);
        assert_eq!(compare(0.0, 0.5, 0.03), Outcome::Regressed);
    }

    #[test]
    fn scores() {
        assert_eq!(AttemptRow::score_from(true, Some(50.0), Some(100.0)), 2.0);
        assert_eq!(AttemptRow::score_from(false, Some(50.0), Some(100.0)), 0.0);
        assert_eq!(AttemptRow::score_from(true, None, Some(100.0)), 0.0);
        let mut r = test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 2.0);
        assert_eq!(r.direction().label(), "cute->tirx");
        assert_eq!(r.speedup_compile(), 80.0 / 50.0);
        r.correct = false;
        assert_eq!(r.effective_score(), 0.0);
    }

    #[test]
    fn serde_defaults() {
        let r = test_row("m", "B02", Dsl::CUTE, Condition::Conditioned, 1, 1.5);
        let mut v = serde_json::to_value(&r).unwrap();
        let obj = v.as_object_mut().unwrap();
        for k in [
            "noise_eps",
            "skill_flags",
            "turns",
            "kernel_path",
            "attempt_id",
            "source_score",
        ] {
            obj.remove(k);
        }
        let back: AttemptRow = serde_json::from_value(v).unwrap();
        assert_eq!(back.noise_eps, DEFAULT_NOISE_EPS);
        assert_eq!(back.family, Family::B);
        assert_eq!(back.condition, Condition::Conditioned);
    }
}
