//! The report's HTML tables: the paired-lift summary and fast_p, the headline section, the
//! source, per-family and usage tables, and the per-problem table that links every attempt's
//! kernel, skill and trajectory. Tables with the class `sortable` sort on a header click (the
//! page script); a cell's `data-v` is its numeric sort key.

use super::{esc, ReportOptions};
use crate::analysis::{Analysis, ProblemSummary, SourceRelation};
use crate::row::{compare, AttemptRow};
use crate::table::{ci_pct, pct, pval};
use mkb_core::{Condition, Dsl};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Percent-encode the characters of a relative path that would break a URL.
fn url_path(p: &str) -> String {
    let mut o = String::new();
    for b in p.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'~'
            | b'/'
            | b':'
            | b'+'
            | b'='
            | b'@'
            | b',' => o.push(b as char),
            _ => o.push_str(&format!("%{b:02X}")),
        }
    }
    o
}

fn num(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "n/a".into()
    }
}

fn dv(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!(r#" data-v="{v}""#),
        _ => r#" data-v="-1e300""#.into(),
    }
}

pub(super) fn summary_table(a: &Analysis) -> String {
    let conf = a.options.confidence * 100.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<table class="sortable" id="summary-table"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">condition</th><th>n</th><th>pass solo</th><th>pass</th><th>mean s solo</th><th>mean s</th><th>lift</th><th>{conf:.0}% CI</th><th>Wilcoxon p</th><th>improved</th><th>regressed</th><th>tied</th><th>eps</th><th>geo lift</th><th>pass-rate lift</th></tr></thead><tbody>"#
    );
    for c in &a.cells {
        let _ = write!(
            s,
            r#"<tr class="{}"><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{}</td><td>{}</td><td{}>{}</td><td>{}</td><td{}>{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}%</td><td{}>{}</td><td>{:+.1}pp</td></tr>"#,
            if c.significant { "sig" } else { "" },
            esc(&c.model),
            c.direction,
            c.condition,
            c.problems,
            c.solo.pass_rate * 100.0,
            c.treated.pass_rate * 100.0,
            num(c.solo.mean_score, 3),
            num(c.treated.mean_score, 3),
            dv(c.lift),
            esc(&pct(c.lift)),
            esc(&ci_pct(c.lift_ci)),
            dv(c.wilcoxon.as_ref().map(|w| w.p_value)),
            c.wilcoxon
                .as_ref()
                .map(|w| format!(
                    "{}{}",
                    pval(w.p_value),
                    if w.method == crate::stats::WilcoxonMethod::Normal {
                        " (normal)"
                    } else {
                        ""
                    }
                ))
                .unwrap_or_else(|| "n/a".into()),
            c.improved_share * 100.0,
            c.regressed_share * 100.0,
            c.tied_share * 100.0,
            c.noise_eps * 100.0,
            dv(Some(c.geo_lift)),
            esc(&pct(Some(c.geo_lift))),
            c.pass_rate_lift * 100.0
        );
    }
    s.push_str("</tbody></table>");
    s
}

pub(super) fn fast_p_table(a: &Analysis) -> String {
    let mut s = String::from(
        r#"<table class="sortable"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">condition</th>"#,
    );
    for p in &a.options.fast_p {
        let _ = write!(s, "<th>fast_{p} solo</th><th>fast_{p}</th>");
    }
    s.push_str("<th>vs torch.compile solo</th><th>vs torch.compile</th></tr></thead><tbody>");
    for c in &a.cells {
        let _ = write!(
            s,
            r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td>"#,
            esc(&c.model),
            c.direction,
            c.condition
        );
        for f in &c.fast_p {
            let _ = write!(
                s,
                "<td>{:.0}%</td><td>{:.0}%</td>",
                f.solo * 100.0,
                f.treated * 100.0
            );
        }
        let _ = write!(
            s,
            "<td>{}</td><td>{}</td></tr>",
            num(c.solo.mean_speedup_compile, 3),
            num(c.treated.mean_speedup_compile, 3)
        );
    }
    s.push_str("</tbody></table>");
    s
}

/// A plain sortable table: first column left-aligned.
fn html_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::from(r#"<table class="sortable"><thead><tr>"#);
    for (i, h) in headers.iter().enumerate() {
        let _ = write!(
            s,
            r#"<th{}>{}</th>"#,
            if i < 2 { r#" class="l""# } else { "" },
            esc(h)
        );
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let _ = write!(
                s,
                r#"<td{}>{}</td>"#,
                if i < 2 { r#" class="l""# } else { "" },
                esc(c)
            );
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// The headline section: the claims in words, each cell's lift with its CI, the pooled
/// standing tables with their controls, the association test.
pub(super) fn headline_section(a: &Analysis) -> String {
    use crate::headline::{Classifier, Headline};
    let h: &Headline = &a.headline;
    let mut s = String::from(r#"<section id="headline"><h2>Headline</h2>"#);
    if h.summary.is_empty() {
        s.push_str(r#"<p class="meta">No headline (no conditioned attempts).</p></section>"#);
        return s;
    }
    s.push_str(r#"<ul class="headline">"#);
    for line in &h.summary {
        let _ = write!(s, "<li>{}</li>", esc(line));
    }
    s.push_str("</ul>");
    let conf = a.options.confidence * 100.0;
    let rows: Vec<Vec<String>> = h
        .cells
        .iter()
        .map(|c| {
            vec![
                c.model.clone(),
                c.direction.label(),
                c.problems.to_string(),
                pct(c.lift),
                ci_pct(c.lift_ci),
                if c.significant {
                    "*".into()
                } else {
                    String::new()
                },
                format!("{:.0}%", c.regressed_share * 100.0),
            ]
        })
        .collect();
    let ci_h = format!("{conf:.0}% CI");
    s.push_str(r#"<h3>Conditioned lift per model and direction</h3><div class="scroll">"#);
    s.push_str(&html_table(
        &["model", "direction", "n", "lift", &ci_h, "sig", "regressed"],
        &rows,
    ));
    s.push_str("</div>");
    s.push_str(r#"<h3>Source standing, pooled over models and directions</h3><p class="meta">Each treated attempt's outcome against the target's solo baseline, grouped by where its source attempt stands relative to the target's solo score. <b>solo_mean</b>: classified against the same solo mean the outcome is measured against (the published table; regression to the mean alone makes sources "above" look helpful). <b>held_out</b>: classified against an independent solo measurement (another solo run, or the repeat-solo arm). Placebo and repeat solo never saw the source: they are the null reference.</p><div class="plots">"#);
    for t in &h.standing {
        let rows: Vec<Vec<String>> = t
            .rows
            .iter()
            .filter(|r| r.attempts > 0)
            .map(|r| {
                vec![
                    r.group.clone(),
                    r.attempts.to_string(),
                    format!("{:.0}%", r.improved_share * 100.0),
                    format!("{:.0}%", r.regressed_share * 100.0),
                ]
            })
            .collect();
        let _ = write!(
            s,
            r#"<figure class="tbl"><figcaption>{} &middot; {}</figcaption>{}</figure>"#,
            t.arm,
            t.classifier.as_str(),
            html_table(&["group", "attempts", "improved", "regressed"], &rows)
        );
    }
    s.push_str("</div>");
    if let Some(r) = &h.rtm {
        let rows: Vec<Vec<String>> = r
            .patterns
            .iter()
            .map(|p| {
                vec![
                    p.arm.to_string(),
                    p.classifier.as_str().to_string(),
                    format!("{:.0}%", p.improved_if_above * 100.0),
                    format!("{:.0}%", p.regressed_if_below * 100.0),
                    format!("{:+.1} pp", p.gap * 100.0),
                ]
            })
            .chain(r.diffs.iter().map(|d| {
                vec![
                    "conditioned - placebo".into(),
                    format!("{} ({})", Classifier::HeldOut.as_str(), d.statistic),
                    String::new(),
                    String::new(),
                    format!(
                        "{:+.1} pp {}{}",
                        d.diff * 100.0,
                        ci_pct(d.ci),
                        if d.significant { " *" } else { "" }
                    ),
                ]
            }))
            .collect();
        s.push_str(r#"<h3>Regression-to-the-mean control</h3><div class="scroll">"#);
        s.push_str(&html_table(
            &[
                "arm",
                "classifier",
                "improved if above",
                "regressed if below",
                "gap (above - below improved)",
            ],
            &rows,
        ));
        let _ = write!(
            s,
            r#"</div><p class="meta">{} problem clusters resampled {} times; * = the CI excludes 0 with at least 8 clusters and 1,000 resamples.</p>"#,
            r.clusters, r.resamples
        );
    }
    if let Some(x) = &h.association {
        let mut rows = Vec::new();
        for (outcome, coefs) in [("improved", &x.improved), ("regressed", &x.regressed)] {
            for c in coefs {
                rows.push(vec![
                    outcome.to_string(),
                    c.name.clone(),
                    format!("{:+.1} pp", c.estimate * 100.0),
                    ci_pct(c.ci),
                    c.p_value.map_or("n/a".into(), |p| format!("{p:.3}")),
                    if c.significant {
                        "*".into()
                    } else {
                        String::new()
                    },
                ]);
            }
        }
        let _ = write!(
            s,
            r#"<h3>Association: standing vs source success</h3><p class="meta">Linear probability models of improved and of regressed on source above (vs below, held-out classifier) and source passed, {} conditioned attempts in {} problem clusters ({} level / both-failed / unknown left out); problem-clustered bootstrap CIs. {}</p><div class="scroll">{}</div>"#,
            x.attempts,
            x.clusters,
            x.excluded,
            esc(x.note.as_deref().unwrap_or("")),
            html_table(
                &["outcome", "term", "effect", "CI", "p (bootstrap SE)", "sig"],
                &rows
            )
        );
    }
    s.push_str("</section>");
    s
}

pub(super) fn source_table(a: &Analysis) -> String {
    let mut s = String::from(
        r#"<table class="sortable"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">group</th><th>attempts</th><th>problems</th><th>improved</th><th>regressed</th></tr></thead><tbody>"#,
    );
    for t in a.source_tables.iter().filter(|t| t.family.is_none()) {
        for g in &t.groups {
            if g.relation == SourceRelation::Unknown && g.attempts == 0 {
                continue;
            }
            let _ = write!(
                s,
                r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td class="improved">{:.0}%</td><td class="regressed">{:.0}%</td></tr>"#,
                esc(&t.model),
                t.direction,
                g.relation.as_str(),
                g.attempts,
                g.problems,
                g.improved_share * 100.0,
                g.regressed_share * 100.0
            );
        }
    }
    s.push_str("</tbody></table>");
    s
}

pub(super) fn family_table(a: &Analysis) -> String {
    let conf = a.options.confidence * 100.0;
    let mut s = format!(
        r#"<table class="sortable"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">family</th><th class="l">condition</th><th>n</th><th>lift</th><th>{conf:.0}% CI</th><th>Wilcoxon p</th><th>improved</th><th>regressed</th><th>geo lift</th></tr></thead><tbody>"#
    );
    for c in &a.family_cells {
        let _ = write!(
            s,
            r#"<tr class="{}"><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td{}>{}</td><td>{}</td><td>{}</td><td>{:.0}%</td><td>{:.0}%</td><td>{}</td></tr>"#,
            if c.significant { "sig" } else { "" },
            esc(&c.model),
            c.direction,
            c.family.map(|f| f.to_string()).unwrap_or_default(),
            c.condition,
            c.problems,
            dv(c.lift),
            esc(&pct(c.lift)),
            esc(&ci_pct(c.lift_ci)),
            c.wilcoxon
                .as_ref()
                .map(|w| pval(w.p_value))
                .unwrap_or_else(|| "n/a".into()),
            c.improved_share * 100.0,
            c.regressed_share * 100.0,
            esc(&pct(Some(c.geo_lift)))
        );
    }
    s.push_str("</tbody></table>");
    s
}

pub(super) fn usage_table(a: &Analysis) -> String {
    let mut s = String::from(
        r#"<table class="sortable"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">condition</th><th>attempts</th><th>correct</th><th>input tokens</th><th>output tokens</th><th>skill tokens</th><th>wall s (mean)</th><th>wall s (median)</th><th>turns</th><th>tool evals</th><th class="l">end reasons</th><th>flagged skills</th></tr></thead><tbody>"#,
    );
    for u in &a.usage {
        let reasons: Vec<String> = u
            .end_reasons
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = write!(
            s,
            r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{:.1}</td><td>{:.1}</td><td class="l">{}</td><td>{}</td></tr>"#,
            esc(&u.model),
            u.direction,
            u.condition,
            u.attempts,
            u.correct,
            u.mean_input_tokens,
            u.mean_output_tokens,
            u.mean_skill_tokens
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "-".into()),
            u.mean_wall_s,
            u.median_wall_s,
            u.mean_turns,
            u.mean_tool_evals,
            esc(&reasons.join(", ")),
            u.flagged_skills
        );
    }
    s.push_str("</tbody></table>");
    s
}

fn attempt_cell(
    rows: &[&AttemptRow],
    outcome_vs: Option<(f64, f64)>,
    opts: &ReportOptions,
) -> String {
    let mut s = String::new();
    for r in rows {
        let score = if r.correct {
            format!("{:.3}", r.effective_score())
        } else {
            r.verdict_label()
                .map(|v| v.to_string())
                .unwrap_or_else(|| "no kernel".into())
        };
        let cls = match outcome_vs {
            Some((solo, eps)) => compare(r.effective_score(), solo, eps).as_str(),
            None if !r.correct => "fail",
            None => "",
        };
        let _ = write!(
            s,
            r#"<span class="{cls}" title="{}">{}</span>"#,
            esc(&r.label()),
            esc(&score)
        );
        let mut links = String::new();
        for (label, path, what) in [
            ("k", &r.kernel_path, "kernel"),
            ("s", &r.skill_path, "skill"),
            ("t", &r.trajectory_path, "trajectory"),
        ] {
            if let Some(p) = path {
                let _ = write!(
                    links,
                    r#"<a href="{}" title="{what}">{label}</a>"#,
                    esc(&format!("{}{}", opts.link_prefix, url_path(p)))
                );
            }
        }
        if !r.skill_flags.is_empty() {
            let _ = write!(
                links,
                r#" <span class="warn" title="skill flags">&#9873;{}</span>"#,
                esc(&r.skill_flags.join(","))
            );
        }
        if !links.is_empty() {
            let _ = write!(s, r#"<span class="links">{links}</span>"#);
        }
        s.push(' ');
    }
    s
}

pub(super) fn problem_table(a: &Analysis, rows: &[AttemptRow], opts: &ReportOptions) -> String {
    let mut by_key: BTreeMap<(&str, Dsl, &str, Condition), Vec<&AttemptRow>> = BTreeMap::new();
    for r in rows {
        by_key
            .entry((r.model.as_str(), r.target, r.problem.as_str(), r.condition))
            .or_default()
            .push(r);
    }
    for v in by_key.values_mut() {
        v.sort_by_key(|r| (r.run_index, r.run_name.clone()));
    }
    let mut s = String::from(
        r#"<input id="problem-filter" type="search" placeholder="filter rows (model, problem, family, outcome...)"><table class="sortable" id="problem-table"><thead><tr><th class="l">model</th><th class="l">direction</th><th class="l">problem</th><th class="l">family</th><th>solo mean</th><th>conditioned mean</th><th class="l">outcome</th><th>source mean</th><th class="l">solo runs</th><th class="l">conditioned runs</th><th class="l">placebo runs</th><th class="l">repeat-solo runs</th></tr></thead><tbody>"#,
    );
    let get = |p: &ProblemSummary, c: Condition| {
        by_key
            .get(&(p.model.as_str(), p.direction.target, p.problem.as_str(), c))
            .cloned()
            .unwrap_or_default()
    };
    for p in &a.problems {
        let solo = p.arm(Condition::Solo);
        let cond = p.arm(Condition::Conditioned);
        let solo_mean = solo.map(|x| x.mean_score);
        let outcome = cond.and_then(|c| c.outcome);
        let vs = solo_mean.map(|m| (m, p.eps));
        let _ = write!(
            s,
            r#"<tr><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td{}>{}</td><td{}>{}</td><td class="l {}">{}</td><td{}>{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td><td class="l">{}</td></tr>"#,
            esc(&p.model),
            p.direction,
            esc(&p.problem),
            p.family,
            dv(solo_mean),
            solo_mean.map(|x| num(x, 3)).unwrap_or_else(|| "-".into()),
            dv(cond.map(|c| c.mean_score)),
            cond.map(|c| num(c.mean_score, 3))
                .unwrap_or_else(|| "-".into()),
            outcome.map(|o| o.as_str()).unwrap_or(""),
            outcome.map(|o| o.as_str()).unwrap_or("-"),
            dv(cond.and_then(|c| c.mean_source_score)),
            cond.and_then(|c| c.mean_source_score)
                .map(|x| num(x, 3))
                .unwrap_or_else(|| "-".into()),
            attempt_cell(&get(p, Condition::Solo), None, opts),
            attempt_cell(&get(p, Condition::Conditioned), vs, opts),
            attempt_cell(&get(p, Condition::Placebo), vs, opts),
            attempt_cell(&get(p, Condition::RepeatSolo), vs, opts),
        );
    }
    s.push_str("</tbody></table>");
    s
}
