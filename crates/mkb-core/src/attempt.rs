//! Attempts and their conditions: the experiment's unit of work (docs/design.md, "The
//! experiment protocol"). The agent runtime produces them, the store keeps them and the
//! analysis pairs them.

use crate::dsl::{Dsl, DEFAULT_DSLS};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Under which condition an attempt on a target variant ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The variant prompt only. Its distilled skill feeds the conditioned attempts of the
    /// directions out of its DSL.
    Solo,
    /// The variant prompt plus the skill distilled from the solo attempt in the direction's
    /// source DSL.
    Conditioned,
    /// The variant prompt plus the same model's skill for a different problem (same source DSL).
    Placebo,
    /// A second solo attempt: the run-to-run noise of the solo condition.
    RepeatSolo,
}

impl Condition {
    pub const ALL: [Condition; 4] = [
        Condition::Solo,
        Condition::Conditioned,
        Condition::Placebo,
        Condition::RepeatSolo,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Solo => "solo",
            Condition::Conditioned => "conditioned",
            Condition::Placebo => "placebo",
            Condition::RepeatSolo => "repeat_solo",
        }
    }
    /// Does this condition put a skill in the prompt?
    pub fn has_skill(self) -> bool {
        matches!(self, Condition::Conditioned | Condition::Placebo)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Condition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Condition::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("unknown condition {s:?}"))
    }
}

/// A transfer direction: the skill comes from `source`, the attempt is in `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Direction {
    pub source: Dsl,
    pub target: Dsl,
}

impl Direction {
    /// The direction into `target` of the default experiment (cute and tirx, both ways):
    /// what rows written before directions were recorded belong to. None for other DSLs.
    pub fn default_into(target: Dsl) -> Option<Direction> {
        if !DEFAULT_DSLS.contains(&target) {
            return None;
        }
        DEFAULT_DSLS
            .into_iter()
            .find(|d| *d != target)
            .map(|source| Direction { source, target })
    }
    /// Every ordered pair of distinct DSLs of `dsls`, in order (`a->b` before `b->a` for
    /// `[a, b]`).
    pub fn all_pairs(dsls: &[Dsl]) -> Vec<Direction> {
        let mut out = Vec::new();
        for &source in dsls {
            for &target in dsls {
                if source != target {
                    out.push(Direction { source, target });
                }
            }
        }
        out
    }
    pub fn label(self) -> String {
        format!("{}->{}", self.source, self.target)
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Solo attempt or the distillation turn that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    Attempt,
    Distill,
}

/// Why an attempt's conversation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// The model called `submit`.
    Submitted,
    /// The model stopped calling tools (a final answer without submit).
    Stopped,
    MaxTurns,
    MaxOutputTokens,
    /// The optional input-token cap (`Budget::max_input_tokens`) was reached.
    MaxInputTokens,
    MaxToolEvals,
    WallClock,
    /// The provider failed past its retries.
    ProviderError,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Submitted => "submitted",
            EndReason::Stopped => "stopped",
            EndReason::MaxTurns => "max_turns",
            EndReason::MaxOutputTokens => "max_output_tokens",
            EndReason::MaxInputTokens => "max_input_tokens",
            EndReason::MaxToolEvals => "max_tool_evals",
            EndReason::WallClock => "wall_clock",
            EndReason::ProviderError => "provider_error",
        }
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The per-attempt budget, identical for solo and conditioned attempts (docs/design.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Assistant turns (model calls) in one attempt.
    pub max_turns: u32,
    /// Output tokens summed over the attempt (the distillation turn is counted apart).
    pub max_output_tokens: u64,
    /// Tool calls that run the evaluator (compile, test, benchmark).
    pub max_tool_evals: u32,
    /// Wall-clock seconds of the agent's own time for the whole attempt: model calls and
    /// their retries, tools and evaluations included, time queued for the shared evaluator
    /// (before a judge takes the request up) excluded, as it differs between the solo and
    /// conditioned phases of a run. Both are recorded (`wall_s`, `eval_wait_s`).
    pub max_wall_s: u64,
    /// Prompt tokens summed over the attempt's model calls (the distillation turn counted
    /// apart); optional. Each call re-sends the conversation, so this grows about
    /// quadratically with turns. Left out of configs (and fingerprints) while unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_turns: 40,
            max_output_tokens: 200_000,
            max_tool_evals: 30,
            max_wall_s: 3600,
            max_input_tokens: None,
        }
    }
}

impl Budget {
    /// The budget as the agent reads it in its prompt.
    pub fn describe(&self) -> String {
        let text = format!(
            "You have at most {} turns, {} output tokens, {} evaluation tool calls (compile, test, benchmark) \
             and {} minutes of wall-clock time. When a limit is reached the attempt ends and your best \
             kernel measured correct by the harness is kept (else the last one you wrote).",
            self.max_turns,
            self.max_output_tokens,
            self.max_tool_evals,
            self.max_wall_s / 60
        );
        // Only when set, so that prompts of budgets without it stay as they were (recordings
        // match prompts by their digest).
        match self.max_input_tokens {
            Some(n) => format!(
                "{text} Input (prompt) tokens are capped too: at most {n}, summed over your turns."
            ),
            None => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_pair_dsls() {
        let d = Direction::default_into(Dsl::TIRX).unwrap();
        assert_eq!(d.label(), "cute->tirx");
        assert_eq!(
            Direction::default_into(Dsl::CUTE).unwrap().label(),
            "tirx->cute"
        );
        assert_eq!(Direction::default_into(Dsl::new("toy").unwrap()), None);
        let toy = Dsl::new("toy").unwrap();
        let labels: Vec<String> = Direction::all_pairs(&[Dsl::CUTE, toy])
            .into_iter()
            .map(Direction::label)
            .collect();
        assert_eq!(labels, vec!["cute->toy", "toy->cute"]);
        assert_eq!(Direction::all_pairs(&[Dsl::CUTE, Dsl::TIRX, toy]).len(), 6);
    }

    #[test]
    fn input_cap_is_optional_and_only_described_when_set() {
        let b: Budget = toml::from_str(
            "max_turns = 4\nmax_output_tokens = 10\nmax_tool_evals = 2\nmax_wall_s = 120",
        )
        .unwrap();
        assert_eq!(b.max_input_tokens, None);
        assert!(!b.describe().contains("Input"));
        assert!(!serde_json::to_string(&b)
            .unwrap()
            .contains("max_input_tokens"));
        let capped = Budget {
            max_input_tokens: Some(5000),
            ..b
        };
        assert!(capped.describe().starts_with(&b.describe()));
        assert!(capped.describe().contains("at most 5000"));
        assert_eq!(EndReason::MaxInputTokens.as_str(), "max_input_tokens");
    }
}
