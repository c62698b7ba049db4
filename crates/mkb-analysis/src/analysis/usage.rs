//! Tokens, wall time, turns, end reasons and verdicts per model, direction and condition.

use super::group::Grouped;
use crate::row::AttemptRow;
use crate::stats;
use mkb_core::{Condition, Direction, Dsl};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Usage per model, target and condition present in the rows.
pub(super) fn usage_table(g: &Grouped<'_>, models: &[String], targets: &[Dsl]) -> Vec<UsageStats> {
    let mut usage = Vec::new();
    for model in models {
        for &target in targets {
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
                usage.push(usage_stats(model, g.direction(target), c, &rs));
            }
        }
    }
    usage
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
