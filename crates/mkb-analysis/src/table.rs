//! Text outputs of an [`Analysis`]: the terminal tables of `mkb analyze` and the CSV of
//! `mkb analyze --csv` (one row per cell), plus CSVs of the source and usage tables.

use crate::analysis::{Analysis, CellStats, SourceRelation};
use crate::bootstrap::Ci;
use crate::stats::WilcoxonMethod;
use std::fmt::Write as _;

/// Signed percentage with one decimal ("+12.3%"); "n/a" for missing or non-finite values.
pub fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:+.1}%", v * 100.0),
        _ => "n/a".into(),
    }
}

/// Unsigned percentage with no decimals ("41%").
fn share(x: f64) -> String {
    if x.is_finite() {
        format!("{:.0}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

/// A CI in percent: "[+1.2, +30.4]%", with "inf" for an unbounded end.
pub fn ci_pct(ci: Option<Ci>) -> String {
    match ci {
        None => "n/a".into(),
        Some(c) => {
            let f = |x: Option<f64>, neg: bool| match x {
                Some(v) => format!("{:+.1}", v * 100.0),
                None => if neg { "-inf" } else { "+inf" }.into(),
            };
            format!("[{}, {}]%", f(c.lo, true), f(c.hi, false))
        }
    }
}

/// A p-value: 4 decimals, or "<1e-4".
pub fn pval(p: f64) -> String {
    if p < 1e-4 {
        "<1e-4".into()
    } else {
        format!("{p:.4}")
    }
}

fn num(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "n/a".into()
    }
}

/// Format rows as an aligned text table; `right[i]` right-aligns column i.
/// Hand-written on purpose: comfy-table and tabled draw the header rule through the cell
/// padding and take one-character gutters, so neither reproduces this documented layout.
pub fn text_table(headers: &[&str], rows: &[Vec<String>], right: &[bool]) -> String {
    let ncol = headers.len();
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(ncol) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate().take(ncol) {
            let pad = width[i] - c.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(
        &headers.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
        &mut out,
    );
    line(
        &width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
        &mut out,
    );
    for r in rows {
        line(r, &mut out);
    }
    out
}

fn wilcoxon_cell(c: &CellStats) -> String {
    match &c.wilcoxon {
        None => "n/a".into(),
        Some(w) => format!(
            "{}{}",
            pval(w.p_value),
            if w.method == WilcoxonMethod::Normal {
                " (normal)"
            } else {
                ""
            }
        ),
    }
}

fn runs_cell(c: &CellStats) -> String {
    if c.solo.runs_min == c.solo.runs_max
        && c.treated.runs_min == c.treated.runs_max
        && c.solo.runs_min == c.treated.runs_min
    {
        c.solo.runs_min.to_string()
    } else {
        format!(
            "{}-{}",
            c.solo.runs_min.min(c.treated.runs_min),
            c.solo.runs_max.max(c.treated.runs_max)
        )
    }
}

/// The terminal tables of `mkb analyze`.
pub fn render_tables(a: &Analysis) -> String {
    let mut out = String::new();
    let conf = a.options.confidence * 100.0;
    let _ = writeln!(
        out,
        "MetaKernelBench analysis: run(s) {}; {} attempts; models {}",
        a.runs.join(", "),
        a.rows,
        a.models.join(", ")
    );
    let _ = writeln!(out, "score: {}", a.methods.score);
    let _ = writeln!(out, "lift:  {}", a.methods.lift);
    let _ = writeln!(out, "CI:    {}", a.methods.interval);
    let _ = writeln!(out, "test:  {}", a.methods.wilcoxon);
    let _ = writeln!(out, "ties:  {}", a.methods.ties);
    let _ = writeln!(out, "geo:   {}", a.methods.geo_lift);
    let _ = writeln!(
        out,
        "seed:  {} ({} resamples)",
        a.options.seed, a.options.resamples
    );
    if !a.tie_band.statement.is_empty() {
        let _ = writeln!(out, "band:  {}", a.tie_band.statement);
    }
    if let Some(set) = &a.eval_set {
        let _ = writeln!(out, "evals: evaluation set {set}");
    }
    match &a.provenance {
        Some(p) => {
            let _ = writeln!(out, "from:  {}", crate::practice::provenance_line(p));
        }
        None if a.eval_set.is_some() => {
            let _ = writeln!(
                out,
                "from:  not recorded (a run from before provenance was stored)"
            );
        }
        None => {}
    }
    out.push('\n');
    if !a.headline.summary.is_empty() {
        let _ = writeln!(out, "== Headline ==");
        for s in &a.headline.summary {
            let _ = writeln!(out, "- {s}");
        }
        out.push('\n');
    }

    let _ = writeln!(
        out,
        "== Paired lift vs solo, per model and direction (controls beside the main condition) =="
    );
    let headers = [
        "model",
        "direction",
        "condition",
        "n",
        "R",
        "pass solo",
        "pass",
        "d pass",
        "s solo",
        "s",
        "lift",
        &format!("{conf:.0}% CI"),
        "sig",
        "Wilcoxon p",
        "impr/regr/tied",
        "eps",
        "geo lift",
    ];
    let rows: Vec<Vec<String>> = a
        .cells
        .iter()
        .map(|c| {
            vec![
                c.model.clone(),
                c.direction.label(),
                c.condition.to_string(),
                c.problems.to_string(),
                runs_cell(c),
                share(c.solo.pass_rate),
                share(c.treated.pass_rate),
                format!("{:+.1}pp", c.pass_rate_lift * 100.0),
                num(c.solo.mean_score, 3),
                num(c.treated.mean_score, 3),
                pct(c.lift),
                ci_pct(c.lift_ci),
                if c.significant {
                    "*".into()
                } else {
                    String::new()
                },
                wilcoxon_cell(c),
                format!(
                    "{}/{}/{}",
                    share(c.improved_share),
                    share(c.regressed_share),
                    share(c.tied_share)
                ),
                format!("{:.0}%", c.noise_eps * 100.0),
                pct(Some(c.geo_lift)),
            ]
        })
        .collect();
    let right = [
        false, false, false, true, true, true, true, true, true, true, true, true, false, true,
        true, true, true,
    ];
    out.push_str(&text_table(&headers, &rows, &right));
    let _ = writeln!(out, "(* = the {conf:.0}% CI excludes 0; d pass = pass-rate lift; tied = within the noise threshold eps (median over problems), both failing included)");
    out.push('\n');

    let _ = writeln!(
        out,
        "== fast_p: share of problems correct with speedup > p (solo -> treated) =="
    );
    let ps: Vec<f64> = a.options.fast_p.clone();
    let mut headers: Vec<String> = vec!["model".into(), "direction".into(), "condition".into()];
    headers.extend(ps.iter().map(|p| format!("fast_{p}")));
    headers.push("vs compile (solo -> treated)".into());
    let rows: Vec<Vec<String>> = a
        .cells
        .iter()
        .map(|c| {
            let mut r = vec![
                c.model.clone(),
                c.direction.label(),
                c.condition.to_string(),
            ];
            r.extend(
                c.fast_p
                    .iter()
                    .map(|f| format!("{} -> {}", share(f.solo), share(f.treated))),
            );
            r.push(format!(
                "{} -> {}",
                num(c.solo.mean_speedup_compile, 3),
                num(c.treated.mean_speedup_compile, 3)
            ));
            r
        })
        .collect();
    let h: Vec<&str> = headers.iter().map(|s| s.as_str()).collect();
    let right: Vec<bool> = (0..h.len()).map(|i| i >= 3).collect();
    out.push_str(&text_table(&h, &rows, &right));
    out.push('\n');

    let _ = writeln!(out, "== Source relative to target (conditioned attempts; source score vs the target's solo score) ==");
    let rows: Vec<Vec<String>> = a
        .source_tables
        .iter()
        .filter(|t| t.family.is_none())
        .flat_map(|t| {
            t.groups.iter().map(move |g| {
                vec![
                    t.model.clone(),
                    t.direction.label(),
                    g.relation.as_str().to_string(),
                    g.attempts.to_string(),
                    g.problems.to_string(),
                    share(g.improved_share),
                    share(g.regressed_share),
                ]
            })
        })
        .collect();
    out.push_str(&text_table(
        &[
            "model",
            "direction",
            "group",
            "attempts",
            "problems",
            "improved",
            "regressed",
        ],
        &rows,
        &[false, false, false, true, true, true, true],
    ));
    out.push('\n');
    out.push_str(&crate::headline::render_headline_tables(&a.headline));

    if !a.family_cells.is_empty() {
        let _ = writeln!(out, "== Per family ==");
        let rows: Vec<Vec<String>> = a
            .family_cells
            .iter()
            .map(|c| {
                vec![
                    c.model.clone(),
                    c.direction.label(),
                    c.family.map(|f| f.to_string()).unwrap_or_default(),
                    c.condition.to_string(),
                    c.problems.to_string(),
                    share(c.solo.pass_rate),
                    share(c.treated.pass_rate),
                    pct(c.lift),
                    ci_pct(c.lift_ci),
                    if c.significant {
                        "*".into()
                    } else {
                        String::new()
                    },
                    wilcoxon_cell(c),
                    format!(
                        "{}/{}/{}",
                        share(c.improved_share),
                        share(c.regressed_share),
                        share(c.tied_share)
                    ),
                    pct(Some(c.geo_lift)),
                ]
            })
            .collect();
        out.push_str(&text_table(
            &[
                "model",
                "direction",
                "family",
                "condition",
                "n",
                "pass solo",
                "pass",
                "lift",
                &format!("{conf:.0}% CI"),
                "sig",
                "Wilcoxon p",
                "impr/regr/tied",
                "geo lift",
            ],
            &rows,
            &[
                false, false, false, false, true, true, true, true, true, false, true, true, true,
            ],
        ));
        out.push('\n');
    }

    let _ = writeln!(out, "== Tokens and wall time per attempt ==");
    let rows: Vec<Vec<String>> = a
        .usage
        .iter()
        .map(|u| {
            let mut reasons: Vec<(&String, &usize)> = u.end_reasons.iter().collect();
            reasons.sort_by(|x, y| y.1.cmp(x.1).then(x.0.cmp(y.0)));
            vec![
                u.model.clone(),
                u.direction.label(),
                u.condition.to_string(),
                u.attempts.to_string(),
                u.correct.to_string(),
                num(u.mean_input_tokens, 0),
                num(u.mean_output_tokens, 0),
                u.mean_skill_tokens
                    .map(|x| num(x, 0))
                    .unwrap_or_else(|| "-".into()),
                num(u.mean_wall_s, 0),
                num(u.median_wall_s, 0),
                num(u.mean_turns, 1),
                reasons
                    .iter()
                    .take(3)
                    .map(|(k, v)| format!("{k}:{v}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ]
        })
        .collect();
    out.push_str(&text_table(
        &[
            "model",
            "direction",
            "condition",
            "attempts",
            "correct",
            "in tok",
            "out tok",
            "skill tok",
            "wall s",
            "median wall s",
            "turns",
            "end reasons",
        ],
        &rows,
        &[
            false, false, false, true, true, true, true, true, true, true, true, false,
        ],
    ));
    out.push('\n');
    out.push_str(&crate::practice::render_text(&a.budgets, &a.costs));

    if !a.warnings.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Warnings:");
        for w in &a.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}

fn opt(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

/// One CSV record, newline-terminated; the `csv` crate quotes what needs it (RFC 4180).
fn csv_join(fields: &[String]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    // Writing to memory cannot fail; a failure would show as a missing line.
    let _ = w.write_record(fields);
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

/// Column names of [`to_csv`], in order (fast_p columns follow the options' thresholds).
pub fn csv_columns(fast_p: &[f64]) -> Vec<String> {
    let mut cols: Vec<String> = [
        "model",
        "direction",
        "source_dsl",
        "target_dsl",
        "family",
        "condition",
        "problems",
        "unpaired_problems",
        "runs_min",
        "runs_max",
        "pass_rate_solo",
        "pass_rate_treated",
        "pass_rate_lift",
        "pass_rate_lift_lo",
        "pass_rate_lift_hi",
        "mean_score_solo",
        "mean_score_treated",
        "lift",
        "lift_lo",
        "lift_hi",
        "significant",
        "geo_lift",
        "geo_lift_lo",
        "geo_lift_hi",
        "wilcoxon_p",
        "wilcoxon_method",
        "wilcoxon_n",
        "wilcoxon_zeros",
        "wilcoxon_w_plus",
        "improved",
        "regressed",
        "tied",
        "both_failed",
        "improved_share",
        "regressed_share",
        "tied_share",
        "noise_eps",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for p in fast_p {
        cols.push(format!("fast_{p}_solo"));
        cols.push(format!("fast_{p}_treated"));
    }
    cols.extend(
        [
            "speedup_compile_solo",
            "speedup_compile_treated",
            "resampling",
            "interval",
            "resamples",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    cols
}

/// One CSV row per cell (all families first, then per family; `family` empty = all).
/// Empty fields are missing values; an empty CI end is unbounded.
pub fn to_csv(a: &Analysis) -> String {
    let mut out = csv_join(&csv_columns(&a.options.fast_p));
    for c in a.cells.iter().chain(&a.family_cells) {
        let (wp, wm, wn, wz, ww) = match &c.wilcoxon {
            Some(w) => (
                format!("{}", w.p_value),
                format!("{:?}", w.method).to_lowercase(),
                w.n.to_string(),
                w.zeros.to_string(),
                format!("{}", w.w_plus),
            ),
            None => Default::default(),
        };
        let mut f = vec![
            c.model.clone(),
            c.direction.label(),
            c.direction.source.to_string(),
            c.direction.target.to_string(),
            c.family.map(|f| f.to_string()).unwrap_or_default(),
            c.condition.to_string(),
            c.problems.to_string(),
            c.unpaired_problems.to_string(),
            c.solo.runs_min.min(c.treated.runs_min).to_string(),
            c.solo.runs_max.max(c.treated.runs_max).to_string(),
            opt(Some(c.solo.pass_rate)),
            opt(Some(c.treated.pass_rate)),
            opt(Some(c.pass_rate_lift)),
            opt(c.pass_rate_lift_ci.and_then(|x| x.lo)),
            opt(c.pass_rate_lift_ci.and_then(|x| x.hi)),
            opt(Some(c.solo.mean_score)),
            opt(Some(c.treated.mean_score)),
            opt(c.lift),
            opt(c.lift_ci.and_then(|x| x.lo)),
            opt(c.lift_ci.and_then(|x| x.hi)),
            c.significant.to_string(),
            opt(Some(c.geo_lift)),
            opt(c.geo_lift_ci.and_then(|x| x.lo)),
            opt(c.geo_lift_ci.and_then(|x| x.hi)),
            wp,
            wm,
            wn,
            wz,
            ww,
            c.improved.to_string(),
            c.regressed.to_string(),
            c.tied.to_string(),
            c.both_failed.to_string(),
            opt(Some(c.improved_share)),
            opt(Some(c.regressed_share)),
            opt(Some(c.tied_share)),
            opt(Some(c.noise_eps)),
        ];
        for fp in &c.fast_p {
            f.push(opt(Some(fp.solo)));
            f.push(opt(Some(fp.treated)));
        }
        f.push(opt(Some(c.solo.mean_speedup_compile)));
        f.push(opt(Some(c.treated.mean_speedup_compile)));
        f.push(
            serde_json::to_value(c.resampling)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        );
        f.push(
            serde_json::to_value(c.interval)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
        );
        f.push(c.resamples.to_string());
        out.push_str(&csv_join(&f));
    }
    out
}

/// The source-relative-to-target tables as CSV (one row per group; `family` empty = all).
pub fn source_tables_csv(a: &Analysis) -> String {
    let mut out = csv_join(
        &[
            "model",
            "direction",
            "family",
            "group",
            "attempts",
            "problems",
            "improved",
            "regressed",
            "tied",
            "improved_share",
            "regressed_share",
        ]
        .map(String::from),
    );
    for t in &a.source_tables {
        for g in &t.groups {
            out.push_str(&csv_join(&[
                t.model.clone(),
                t.direction.label(),
                t.family.map(|f| f.to_string()).unwrap_or_default(),
                g.relation.as_str().into(),
                g.attempts.to_string(),
                g.problems.to_string(),
                g.improved.to_string(),
                g.regressed.to_string(),
                g.tied.to_string(),
                opt(Some(g.improved_share)),
                opt(Some(g.regressed_share)),
            ]));
        }
    }
    let _ = SourceRelation::ALL;
    out
}

/// Token and wall-time usage per model, direction and condition as CSV.
pub fn usage_csv(a: &Analysis) -> String {
    let mut out = csv_join(
        &[
            "model",
            "direction",
            "condition",
            "attempts",
            "correct",
            "mean_input_tokens",
            "median_input_tokens",
            "mean_output_tokens",
            "median_output_tokens",
            "mean_skill_tokens",
            "mean_wall_s",
            "median_wall_s",
            "mean_turns",
            "mean_tool_evals",
            "flagged_skills",
        ]
        .map(String::from),
    );
    for u in &a.usage {
        out.push_str(&csv_join(&[
            u.model.clone(),
            u.direction.label(),
            u.condition.to_string(),
            u.attempts.to_string(),
            u.correct.to_string(),
            opt(Some(u.mean_input_tokens)),
            opt(Some(u.median_input_tokens)),
            opt(Some(u.mean_output_tokens)),
            opt(Some(u.median_output_tokens)),
            opt(u.mean_skill_tokens),
            opt(Some(u.mean_wall_s)),
            opt(Some(u.median_wall_s)),
            opt(Some(u.mean_turns)),
            opt(Some(u.mean_tool_evals)),
            u.flagged_skills.to_string(),
        ]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, AnalysisOptions};
    use crate::simulate::{simulate, SimConfig};

    #[test]
    fn formats() {
        assert_eq!(pct(Some(0.1234)), "+12.3%");
        assert_eq!(pct(None), "n/a");
        assert_eq!(
            ci_pct(Some(Ci {
                lo: Some(-0.05),
                hi: None
            })),
            "[-5.0, +inf]%"
        );
        assert_eq!(pval(0.00001), "<1e-4");
        assert_eq!(
            csv_join(&["a,b".into(), "say \"x\"".into(), "plain".into()]),
            "\"a,b\",\"say \"\"x\"\"\",plain\n"
        );
        let t = text_table(
            &["a", "bb"],
            &[vec!["xyz".into(), "1".into()]],
            &[false, true],
        );
        assert_eq!(t, "a    bb\n---  --\nxyz   1\n");
    }

    #[test]
    fn tables_and_csv_cover_every_cell() {
        let cfg = SimConfig {
            problems: 12,
            runs: 1,
            ..SimConfig::example()
        };
        let rows = simulate(&cfg, 3);
        let a = analyze(
            &rows,
            &AnalysisOptions {
                resamples: 300,
                ..Default::default()
            },
        );
        let t = render_tables(&a);
        for section in [
            "Paired lift",
            "fast_p",
            "Source relative to target",
            "Per family",
            "Tokens and wall time",
        ] {
            assert!(t.contains(section), "missing section {section}");
        }
        for m in &a.models {
            assert!(t.contains(m.as_str()));
        }
        assert!(
            t.contains("placebo")
                && t.contains("repeat_solo")
                && t.contains("source_above")
                && t.contains("source_below")
        );
        let csv = to_csv(&a);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + a.cells.len() + a.family_cells.len());
        let ncol = csv_columns(&a.options.fast_p).len();
        for l in &lines {
            // No field here contains a comma, so splitting is exact.
            assert_eq!(l.split(',').count(), ncol, "{l}");
        }
        assert!(lines[0].starts_with("model,direction,source_dsl"));
        assert_eq!(
            source_tables_csv(&a).lines().count(),
            1 + a
                .source_tables
                .iter()
                .map(|t| t.groups.len())
                .sum::<usize>()
        );
        assert_eq!(usage_csv(&a).lines().count(), 1 + a.usage.len());
    }
}
