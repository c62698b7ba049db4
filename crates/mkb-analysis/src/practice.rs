//! How a run went in practice, beside its results: the tie band each problem variant was
//! judged with (measured from repeated timing sessions, or the fixed default), whether the
//! budgets were matched across conditions (tokens, turns, evaluations, the agent's own wall
//! time and the time queued for the evaluator, against the caps), and what the attempts cost
//! at the configured model prices (per attempt, per condition and per lift point).
//! docs/analysis.md, "Tie band", "Budgets" and "Cost".

use crate::analysis::CellStats;
use crate::row::{AttemptRow, DEFAULT_NOISE_EPS, EPS_FLOOR, EPS_MULTIPLE};
use mkb_core::{Budget, Condition, Direction, Dsl, EndReason};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The tie band of one problem variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TieBandVariant {
    pub problem: String,
    pub target: Dsl,
    pub eps: f64,
    /// Timing sessions it was measured from (0: the fixed default).
    pub sessions: u32,
}

/// The tie bands the analysis used, and how they were obtained.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TieBand {
    /// Variants whose band was measured / fell back to the fixed default.
    pub measured: usize,
    pub fixed: usize,
    /// One sentence for the report.
    pub statement: String,
    pub variants: Vec<TieBandVariant>,
}

/// The tie bands of the rows' problem variants (`noise_eps`, `noise_sessions` of their rows).
pub fn tie_band(rows: &[AttemptRow]) -> TieBand {
    let mut by: BTreeMap<(String, Dsl), (f64, u32)> = BTreeMap::new();
    for r in rows {
        let e = by.entry((r.problem.clone(), r.target)).or_insert((0.0, 0));
        e.0 = e.0.max(r.eps_or(DEFAULT_NOISE_EPS));
        e.1 = e.1.max(r.noise_sessions);
    }
    let variants: Vec<TieBandVariant> = by
        .into_iter()
        .map(|((problem, target), (eps, sessions))| TieBandVariant {
            problem,
            target,
            eps,
            sessions,
        })
        .collect();
    let measured: Vec<&TieBandVariant> = variants.iter().filter(|v| v.sessions >= 2).collect();
    let fixed = variants.len() - measured.len();
    let rule = format!(
        "eps = max({:.0}%, {EPS_MULTIPLE} x the median over the variant's solo kernels of the relative range of their repeated timing-session medians)",
        EPS_FLOOR * 100.0
    );
    let statement = if variants.is_empty() {
        String::new()
    } else if fixed == 0 {
        let (lo, hi) = min_max(measured.iter().map(|v| v.eps));
        format!(
            "Tie band measured for all {} problem variants ({rule}): {:.1}% to {:.1}%.",
            variants.len(),
            lo * 100.0,
            hi * 100.0
        )
    } else if measured.is_empty() {
        format!(
            "Tie band: the fixed {:.0}% for all {} problem variants: no kernel was timed in more than one session (a run from before repeated sessions, compile-mode evaluations, or a simulation), so no noise was measured.",
            DEFAULT_NOISE_EPS * 100.0,
            variants.len()
        )
    } else {
        let (lo, hi) = min_max(measured.iter().map(|v| v.eps));
        format!(
            "Tie band measured for {} of {} problem variants ({rule}): {:.1}% to {:.1}%; the other {fixed} (no solo kernel timed in two sessions) use the fixed {:.0}%.",
            measured.len(),
            variants.len(),
            lo * 100.0,
            hi * 100.0,
            DEFAULT_NOISE_EPS * 100.0
        )
    };
    TieBand {
        measured: measured.len(),
        fixed,
        statement,
        variants,
    }
}

fn min_max(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    })
}

/// How one condition used the budget, over all models and directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetUse {
    pub condition: Condition,
    pub attempts: usize,
    pub mean_input_tokens: f64,
    pub max_input_tokens: u64,
    pub mean_output_tokens: f64,
    pub max_output_tokens: u64,
    pub mean_turns: f64,
    pub max_turns: u32,
    pub mean_tool_evals: f64,
    pub max_tool_evals: u32,
    /// The agent's own wall time (wall_s less the time queued for the evaluator).
    pub mean_agent_wall_s: f64,
    pub max_agent_wall_s: f64,
    /// Time queued for the evaluator, over the attempts that recorded it (`None`: none did).
    pub mean_eval_wait_s: Option<f64>,
    /// Share of attempts that ended on a budget limit (turns, tokens, evaluations, wall).
    pub limit_share: f64,
    /// `limit_share` minus the solo condition's.
    pub limit_share_vs_solo: Option<f64>,
    /// Attempts over a cap, by cap (only when the caps are known).
    pub over_cap: BTreeMap<String, usize>,
    /// Within the caps and, for a treated condition, ending on a limit about as often as solo
    /// (|limit_share_vs_solo| <= `LIMIT_SHARE_TOLERANCE`); `None` without known caps.
    pub matched: Option<bool>,
}

/// Budgets across conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetCheck {
    /// The caps the run used (from its config; `None` for simulations).
    pub caps: Option<Budget>,
    pub conditions: Vec<BudgetUse>,
    /// One sentence for the report.
    pub statement: String,
}

/// How far a treated condition's share of attempts ending on a budget limit may be from solo's
/// for its budget to count as matched in practice: 10 percentage points.
pub const LIMIT_SHARE_TOLERANCE: f64 = 0.10;

/// Slack on the wall-clock cap for the check (the budget is enforced at call boundaries).
const WALL_SLACK: f64 = 1.05;

fn ends_on_limit(e: Option<EndReason>) -> bool {
    matches!(
        e,
        Some(
            EndReason::MaxTurns
                | EndReason::MaxOutputTokens
                | EndReason::MaxInputTokens
                | EndReason::MaxToolEvals
                | EndReason::WallClock
        )
    )
}

type RowTest<'a> = dyn Fn(&AttemptRow) -> bool + 'a;

/// Budget use per condition, checked against `caps` when known.
pub fn budget_check(rows: &[AttemptRow], caps: Option<Budget>) -> BudgetCheck {
    let mut by: BTreeMap<Condition, Vec<&AttemptRow>> = BTreeMap::new();
    for r in rows {
        by.entry(r.condition).or_default().push(r);
    }
    let mean = |xs: &[f64]| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let mut conditions: Vec<BudgetUse> = Vec::new();
    for (condition, rs) in &by {
        let col = |f: &dyn Fn(&AttemptRow) -> f64| rs.iter().map(|r| f(r)).collect::<Vec<f64>>();
        let waits: Vec<f64> = rs.iter().filter_map(|r| r.eval_wait_s).collect();
        let mut over_cap = BTreeMap::new();
        if let Some(c) = caps {
            let checks: [(&str, &RowTest<'_>); 4] = [
                ("turns", &|r| r.turns > c.max_turns),
                ("output_tokens", &|r| r.output_tokens > c.max_output_tokens),
                ("tool_evals", &|r| r.tool_evals > c.max_tool_evals),
                ("agent_wall_s", &|r| {
                    r.agent_wall_s() > c.max_wall_s as f64 * WALL_SLACK
                }),
            ];
            for (name, over) in checks {
                let n = rs.iter().filter(|r| over(r)).count();
                if n > 0 {
                    over_cap.insert(name.to_string(), n);
                }
            }
        }
        conditions.push(BudgetUse {
            condition: *condition,
            attempts: rs.len(),
            mean_input_tokens: mean(&col(&|r| r.input_tokens as f64)),
            max_input_tokens: rs.iter().map(|r| r.input_tokens).max().unwrap_or(0),
            mean_output_tokens: mean(&col(&|r| r.output_tokens as f64)),
            max_output_tokens: rs.iter().map(|r| r.output_tokens).max().unwrap_or(0),
            mean_turns: mean(&col(&|r| r.turns as f64)),
            max_turns: rs.iter().map(|r| r.turns).max().unwrap_or(0),
            mean_tool_evals: mean(&col(&|r| r.tool_evals as f64)),
            max_tool_evals: rs.iter().map(|r| r.tool_evals).max().unwrap_or(0),
            mean_agent_wall_s: mean(&col(&|r| r.agent_wall_s())),
            max_agent_wall_s: rs.iter().map(|r| r.agent_wall_s()).fold(0.0, f64::max),
            mean_eval_wait_s: (!waits.is_empty()).then(|| mean(&waits)),
            limit_share: rs.iter().filter(|r| ends_on_limit(r.end_reason)).count() as f64
                / rs.len().max(1) as f64,
            limit_share_vs_solo: None,
            over_cap,
            matched: None,
        });
    }
    let solo_share = conditions
        .iter()
        .find(|c| c.condition == Condition::Solo)
        .map(|c| c.limit_share);
    for c in &mut conditions {
        c.limit_share_vs_solo = solo_share
            .filter(|_| c.condition != Condition::Solo)
            .map(|s| c.limit_share - s);
        c.matched = caps.map(|_| {
            c.over_cap.is_empty()
                && c.limit_share_vs_solo
                    .is_none_or(|d| d.abs() <= LIMIT_SHARE_TOLERANCE + 1e-12)
        });
    }
    let statement = match caps {
        None => "Budgets: the caps are unknown (no run config, e.g. a simulation); usage per condition is shown without a check.".to_string(),
        Some(_) => {
            let bad: Vec<String> = conditions
                .iter()
                .filter(|c| c.matched == Some(false))
                .map(|c| c.condition.as_str().to_string())
                .collect();
            if bad.is_empty() {
                format!(
                    "Budgets matched in practice: every condition stayed within the caps and ended on a budget limit within {:.0} points of solo's rate.",
                    LIMIT_SHARE_TOLERANCE * 100.0
                )
            } else {
                format!(
                    "Budgets NOT matched in practice for {}: an attempt went over a cap, or the condition ended on a budget limit more than {:.0} points more or less often than solo.",
                    bad.join(", "),
                    LIMIT_SHARE_TOLERANCE * 100.0
                )
            }
        }
    };
    BudgetCheck {
        caps,
        conditions,
        statement,
    }
}

/// Cost of one model's attempts under one condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionCost {
    pub model: String,
    pub condition: Condition,
    pub attempts: usize,
    pub total_usd: f64,
    pub mean_usd: f64,
}

/// Cost of one lift cell: the mean cost of a treated attempt, and that per percentage point of
/// lift when the lift is positive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellCost {
    pub model: String,
    pub direction: Direction,
    pub condition: Condition,
    pub lift: Option<f64>,
    pub mean_treated_usd: f64,
    pub mean_solo_usd: f64,
    /// `mean_treated_usd / (100 * lift)`; `None` unless the lift is positive.
    pub usd_per_lift_point: Option<f64>,
}

/// Costs at the configured model prices (empty when no row has a cost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    pub total_usd: f64,
    pub conditions: Vec<ConditionCost>,
    pub cells: Vec<CellCost>,
    /// Rows without a price (their model has none), left out of the sums.
    pub unpriced_attempts: usize,
}

/// Costs per model and condition, and per lift cell (over all families).
pub fn cost_report(rows: &[AttemptRow], cells: &[CellStats]) -> CostReport {
    let priced: Vec<&AttemptRow> = rows.iter().filter(|r| r.cost_usd.is_some()).collect();
    if priced.is_empty() {
        return CostReport::default();
    }
    let mut by: BTreeMap<(String, Condition), Vec<f64>> = BTreeMap::new();
    for r in &priced {
        by.entry((r.model.clone(), r.condition))
            .or_default()
            .push(r.cost_usd.unwrap_or(0.0));
    }
    let conditions = by
        .iter()
        .map(|((model, condition), xs)| ConditionCost {
            model: model.clone(),
            condition: *condition,
            attempts: xs.len(),
            total_usd: xs.iter().sum(),
            mean_usd: xs.iter().sum::<f64>() / xs.len() as f64,
        })
        .collect();
    let mean_cost = |model: &str, dir: Direction, cond: Condition| {
        let xs: Vec<f64> = priced
            .iter()
            .filter(|r| r.model == model && r.direction() == dir && r.condition == cond)
            .filter_map(|r| r.cost_usd)
            .collect();
        (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
    };
    let cells = cells
        .iter()
        .filter(|c| c.family.is_none())
        .filter_map(|c| {
            let treated = mean_cost(&c.model, c.direction, c.condition)?;
            let solo = mean_cost(&c.model, c.direction, Condition::Solo).unwrap_or(0.0);
            Some(CellCost {
                model: c.model.clone(),
                direction: c.direction,
                condition: c.condition,
                lift: c.lift,
                mean_treated_usd: treated,
                mean_solo_usd: solo,
                usd_per_lift_point: c
                    .lift
                    .filter(|l| l.is_finite() && *l > 0.0)
                    .map(|l| treated / (100.0 * l)),
            })
        })
        .collect();
    CostReport {
        total_usd: priced.iter().filter_map(|r| r.cost_usd).sum(),
        conditions,
        cells,
        unpriced_attempts: rows.len() - priced.len(),
    }
}

/// One line saying where the run came from, from a provenance JSON (`mkb run`'s meta
/// `provenance`, or {run, eval_set} for a rescored set).
pub fn provenance_line(p: &serde_json::Value) -> String {
    let one = |p: &serde_json::Value| -> String {
        let g = |k: &str| {
            p.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .to_string()
        };
        let j = p.get("judge").cloned().unwrap_or_default();
        let jg = |k: &str| {
            j.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .to_string()
        };
        let dsls: Vec<String> = j
            .get("dsls")
            .and_then(|d| d.as_object())
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        format!(
                            "{k} {}",
                            v.get("version").and_then(|x| x.as_str()).unwrap_or("n/a")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!(
            "mkb {} (commit {}); python {}, torch {}, CUDA {}, {}; GPU {}, driver {}",
            g("mkb_version"),
            g("git_commit"),
            jg("python"),
            jg("torch"),
            jg("cuda"),
            if dsls.is_empty() {
                "DSLs unknown".to_string()
            } else {
                dsls.join(", ")
            },
            g("gpu").replace("unknown", "none"),
            g("driver").replace("unknown", "none"),
        )
    };
    match (p.get("run"), p.get("eval_set")) {
        (_, Some(e)) => {
            let run = p
                .get("run")
                .filter(|r| !r.is_null())
                .map_or("not recorded (an older run)".to_string(), one);
            let set = e
                .get("provenance")
                .filter(|x| !x.is_null())
                .map_or("unknown".to_string(), one);
            format!(
                "attempts: {run}; evaluation set {} ({} mode, {}): {set}",
                e.get("name").and_then(|v| v.as_str()).unwrap_or("?"),
                e.get("mode").and_then(|v| v.as_str()).unwrap_or("?"),
                e.get("created_at").and_then(|v| v.as_str()).unwrap_or("?"),
            )
        }
        _ => one(p),
    }
}

/// The budget and cost tables as text (`mkb analyze`).
pub fn render_text(b: &BudgetCheck, c: &CostReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if !b.conditions.is_empty() {
        let _ = writeln!(out, "== Budgets in practice (all models and directions) ==");
        let _ = writeln!(out, "{}", b.statement);
        if let Some(caps) = b.caps {
            let _ = writeln!(
                out,
                "caps: {} turns, {} output tokens, {} input tokens, {} tool evaluations, {} s of the agent's own wall time",
                caps.max_turns,
                caps.max_output_tokens,
                caps.max_input_tokens
                    .map_or("no cap on".to_string(), |n| n.to_string()),
                caps.max_tool_evals,
                caps.max_wall_s
            );
        }
        let _ = writeln!(
            out,
            "{:<12} {:>5} {:>10} {:>10} {:>9} {:>9} {:>7} {:>6} {:>9} {:>9} {:>9} {:>7} {:>8} {:>7}",
            "condition", "n", "in mean", "in max", "out mean", "out max", "turns", "evals", "agent s", "agent max", "queued s", "limit", "vs solo", "matched"
        );
        for u in &b.conditions {
            let _ = writeln!(
                out,
                "{:<12} {:>5} {:>10.0} {:>10} {:>9.0} {:>9} {:>7.1} {:>6.1} {:>9.0} {:>9.0} {:>9} {:>6.0}% {:>8} {:>7}",
                u.condition.as_str(),
                u.attempts,
                u.mean_input_tokens,
                u.max_input_tokens,
                u.mean_output_tokens,
                u.max_output_tokens,
                u.mean_turns,
                u.mean_tool_evals,
                u.mean_agent_wall_s,
                u.max_agent_wall_s,
                u.mean_eval_wait_s
                    .map_or("-".to_string(), |x| format!("{x:.0}")),
                u.limit_share * 100.0,
                u.limit_share_vs_solo
                    .map_or("-".to_string(), |d| format!("{:+.0}pt", d * 100.0)),
                match u.matched {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "?",
                }
            );
            for (cap, n) in &u.over_cap {
                let _ = writeln!(out, "  {n} attempt(s) over the {cap} cap");
            }
        }
        out.push('\n');
    }
    if !c.conditions.is_empty() {
        let _ = writeln!(
            out,
            "== Cost at the configured prices (US$; distillation turns excluded) =="
        );
        let _ = writeln!(out, "total: ${:.2}", c.total_usd);
        if c.unpriced_attempts > 0 {
            let _ = writeln!(
                out,
                "{} attempt(s) of models without a price are left out",
                c.unpriced_attempts
            );
        }
        let _ = writeln!(
            out,
            "{:<24} {:<12} {:>5} {:>10} {:>10}",
            "model", "condition", "n", "total $", "mean $"
        );
        for x in &c.conditions {
            let _ = writeln!(
                out,
                "{:<24} {:<12} {:>5} {:>10.2} {:>10.4}",
                x.model,
                x.condition.as_str(),
                x.attempts,
                x.total_usd,
                x.mean_usd
            );
        }
        let _ = writeln!(
            out,
            "{:<24} {:<11} {:<12} {:>8} {:>10} {:>10} {:>12}",
            "model", "direction", "condition", "lift", "mean $", "solo $", "$/lift pt"
        );
        for x in &c.cells {
            let _ = writeln!(
                out,
                "{:<24} {:<11} {:<12} {:>8} {:>10.4} {:>10.4} {:>12}",
                x.model,
                x.direction.label(),
                x.condition.as_str(),
                x.lift
                    .map_or("-".to_string(), |l| format!("{:+.1}%", l * 100.0)),
                x.mean_treated_usd,
                x.mean_solo_usd,
                x.usd_per_lift_point
                    .map_or("-".to_string(), |v| format!("{v:.4}"))
            );
        }
        out.push('\n');
    }
    out
}

/// The budget, cost and provenance sections of the HTML report.
pub fn render_html(a: &crate::Analysis) -> String {
    use crate::report::esc;
    use std::fmt::Write as _;
    let mut h = String::new();
    let b = &a.budgets;
    if !b.conditions.is_empty() {
        let _ = write!(
            h,
            r#"<section id="budgets"><h2>Budgets in practice</h2><p>{}</p><div class="scroll"><table class="sortable"><thead><tr><th class="l">condition</th><th>attempts</th><th>input tokens (mean)</th><th>input tokens (max)</th><th>output tokens (mean)</th><th>output tokens (max)</th><th>turns (mean)</th><th>tool evals (mean)</th><th>agent wall s (mean)</th><th>agent wall s (max)</th><th>queued for evaluator s (mean)</th><th>ended on a limit</th><th>vs solo</th><th class="l">matched</th></tr></thead><tbody>"#,
            esc(&b.statement)
        );
        for u in &b.conditions {
            let over: Vec<String> = u
                .over_cap
                .iter()
                .map(|(k, n)| format!("{n} over {k}"))
                .collect();
            let _ = write!(
                h,
                r#"<tr><td class="l">{}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.0}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{:.0}%</td><td>{}</td><td class="l">{}</td></tr>"#,
                u.condition,
                u.attempts,
                u.mean_input_tokens,
                u.max_input_tokens,
                u.mean_output_tokens,
                u.max_output_tokens,
                u.mean_turns,
                u.mean_tool_evals,
                u.mean_agent_wall_s,
                u.max_agent_wall_s,
                u.mean_eval_wait_s
                    .map_or("-".to_string(), |x| format!("{x:.0}")),
                u.limit_share * 100.0,
                u.limit_share_vs_solo
                    .map_or("-".to_string(), |d| format!("{:+.0} pt", d * 100.0)),
                esc(&format!(
                    "{}{}",
                    match u.matched {
                        Some(true) => "yes",
                        Some(false) => "no",
                        None => "caps unknown",
                    },
                    if over.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", over.join(", "))
                    }
                ))
            );
        }
        h.push_str("</tbody></table></div></section>");
    }
    let c = &a.costs;
    if !c.conditions.is_empty() {
        let _ = write!(
            h,
            r#"<section id="cost"><h2>Cost</h2><p class="meta">At the prices in the run's config, US$, distillation turns excluded; total ${:.2}{}. $/lift point: the mean cost of a treated attempt divided by its cell's lift in percentage points (positive lifts only).</p><div class="scroll"><table class="sortable"><thead><tr><th class="l">model</th><th class="l">condition</th><th>attempts</th><th>total $</th><th>mean $</th></tr></thead><tbody>"#,
            c.total_usd,
            if c.unpriced_attempts > 0 {
                format!(
                    "; {} attempt(s) without a price left out",
                    c.unpriced_attempts
                )
            } else {
                String::new()
            }
        );
        for x in &c.conditions {
            let _ = write!(
                h,
                r#"<tr><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{:.2}</td><td>{:.4}</td></tr>"#,
                esc(&x.model),
                x.condition,
                x.attempts,
                x.total_usd,
                x.mean_usd
            );
        }
        h.push_str(r#"</tbody></table><table class="sortable"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">condition</th><th>lift</th><th>mean $ (treated)</th><th>mean $ (solo)</th><th>$ per lift point</th></tr></thead><tbody>"#);
        for x in &c.cells {
            let _ = write!(
                h,
                r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>"#,
                esc(&x.model),
                x.direction,
                x.condition,
                x.lift
                    .map_or("-".to_string(), |l| format!("{:+.1}%", l * 100.0)),
                x.mean_treated_usd,
                x.mean_solo_usd,
                x.usd_per_lift_point
                    .map_or("-".to_string(), |v| format!("{v:.4}"))
            );
        }
        h.push_str("</tbody></table></div></section>");
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::test_row;

    #[test]
    fn provenance_is_one_line() {
        let p = serde_json::json!({"mkb_version": "0.1.0", "git_commit": "abc", "gpu": "NVIDIA H200", "driver": "570.1",
            "judge": {"python": "3.12", "torch": "2.11", "cuda": "13.0", "dsls": {"cute": {"version": "4.8.1"}, "tirx": {"version": null}}}});
        let l = provenance_line(&p);
        for want in [
            "mkb 0.1.0",
            "commit abc",
            "torch 2.11",
            "CUDA 13.0",
            "cute 4.8.1",
            "tirx n/a",
            "GPU NVIDIA H200",
            "driver 570.1",
        ] {
            assert!(l.contains(want), "{want}: {l}");
        }
        let set = serde_json::json!({"run": null, "eval_set": {"name": "again", "mode": "compile", "created_at": "t", "provenance": p}});
        let l = provenance_line(&set);
        assert!(
            l.contains("not recorded") && l.contains("evaluation set again (compile mode"),
            "{l}"
        );
    }

    #[test]
    fn tie_band_states_measured_and_fixed() {
        let mut a = test_row("m", "A01", Dsl::TIRX, Condition::Solo, 0, 1.0);
        a.noise_eps = 0.02;
        a.noise_sessions = 3;
        let b = test_row("m", "C01", Dsl::TIRX, Condition::Solo, 0, 1.0);
        let t = tie_band(&[a.clone(), b.clone()]);
        assert_eq!((t.measured, t.fixed), (1, 1));
        assert!(t.statement.contains("1 of 2"), "{}", t.statement);
        assert!(t.statement.contains("2.0%"), "{}", t.statement);
        let t = tie_band(&[b]);
        assert_eq!((t.measured, t.fixed), (0, 1));
        assert!(t.statement.contains("fixed 3%"), "{}", t.statement);
        let t = tie_band(&[a]);
        assert!(t.statement.starts_with("Tie band measured for all 1"));
    }

    #[test]
    fn budget_check_flags_caps_and_limit_rates() {
        let caps = Budget {
            max_turns: 10,
            max_output_tokens: 1000,
            max_tool_evals: 5,
            max_wall_s: 100,
            max_input_tokens: None,
        };
        let mut rows = Vec::new();
        for i in 0..10 {
            let mut s = test_row("m", "A01", Dsl::TIRX, Condition::Solo, i, 1.0);
            s.output_tokens = 100;
            s.wall_s = 150.0;
            s.eval_wait_s = Some(60.0); // 90 s of the agent's own: within 100 s
            rows.push(s);
            let mut c = test_row("m", "A01", Dsl::TIRX, Condition::Conditioned, i, 1.0);
            c.output_tokens = 100;
            c.wall_s = 50.0;
            // Three of ten conditioned attempts end on the turn limit, no solo one.
            if i < 3 {
                c.end_reason = Some(EndReason::MaxTurns);
            }
            rows.push(c);
        }
        let b = budget_check(&rows, Some(caps));
        let solo = &b.conditions[0];
        assert_eq!(solo.condition, Condition::Solo);
        assert!((solo.mean_agent_wall_s - 90.0).abs() < 1e-9);
        assert_eq!(solo.mean_eval_wait_s, Some(60.0));
        assert_eq!(solo.matched, Some(true));
        let cond = &b.conditions[1];
        assert!((cond.limit_share_vs_solo.unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(cond.matched, Some(false));
        assert!(b.statement.contains("NOT matched") && b.statement.contains("conditioned"));
        // Within 10 points: matched. Over a cap: not.
        for r in rows
            .iter_mut()
            .filter(|r| r.condition == Condition::Conditioned)
        {
            r.end_reason = Some(EndReason::Submitted);
        }
        rows[0].wall_s = 200.0; // solo: 140 s of its own
        let b = budget_check(&rows, Some(caps));
        assert_eq!(b.conditions[1].matched, Some(true));
        assert_eq!(b.conditions[0].over_cap.get("agent_wall_s"), Some(&1));
        assert_eq!(b.conditions[0].matched, Some(false));
        assert_eq!(budget_check(&rows, None).conditions[0].matched, None);
    }

    #[test]
    fn costs_per_condition_and_lift_point() {
        let mut rows = Vec::new();
        for p in ["A01", "A02"] {
            let mut s = test_row("m", p, Dsl::TIRX, Condition::Solo, 0, 1.0);
            s.cost_usd = Some(1.0);
            rows.push(s);
            let mut c = test_row("m", p, Dsl::TIRX, Condition::Conditioned, 0, 1.5);
            c.cost_usd = Some(3.0);
            c.source_score = Some(1.0);
            rows.push(c);
        }
        let a = crate::analyze(
            &rows,
            &crate::AnalysisOptions {
                resamples: 0,
                ..Default::default()
            },
        );
        let c = &a.costs;
        assert!((c.total_usd - 8.0).abs() < 1e-12);
        let solo = c
            .conditions
            .iter()
            .find(|x| x.condition == Condition::Solo)
            .unwrap();
        assert_eq!(
            (solo.attempts, solo.total_usd, solo.mean_usd),
            (2, 2.0, 1.0)
        );
        let cell = c
            .cells
            .iter()
            .find(|x| x.condition == Condition::Conditioned)
            .unwrap();
        // Lift +50%: $3 per attempt / 50 points.
        assert!((cell.lift.unwrap() - 0.5).abs() < 1e-12);
        assert!((cell.usd_per_lift_point.unwrap() - 0.06).abs() < 1e-12);
        // Without prices: no cost section.
        for r in &mut rows {
            r.cost_usd = None;
        }
        assert_eq!(cost_report(&rows, &a.cells), CostReport::default());
    }
}
