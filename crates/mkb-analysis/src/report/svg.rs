//! The report's SVG plots, drawn here without a plotting crate: the forest plot of lifts, the
//! per-direction scatter of source against target solo score and the family x model heatmap.
//! Every plot is an `<svg class="plot" data-marks="N">` whose N data marks carry the class
//! `mark` (the page's self-check counts them).

use super::{esc, slug};
use crate::analysis::{Analysis, CellStats};
use crate::row::{compare, AttemptRow, Outcome};
use crate::table::{ci_pct, pct, pval};
use mkb_core::{Condition, Direction, Family};
use std::collections::BTreeMap;
use std::fmt::Write as _;

fn cond_color(c: Condition) -> &'static str {
    match c {
        Condition::Conditioned => "#1f6fb4",
        Condition::Placebo => "#e08a00",
        Condition::RepeatSolo => "#7a7a7a",
        Condition::Solo => "#333333",
    }
}

fn outcome_color(o: Outcome) -> &'static str {
    match o {
        Outcome::Improved => "#1a9850",
        Outcome::Regressed => "#d73027",
        Outcome::Tied => "#8c8c8c",
    }
}

/// About `n` round tick values covering [lo, hi].
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !lo.is_finite() || !hi.is_finite() || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).ceil() as i64;
    let end = (hi / step).floor() as i64;
    (start..=end).map(|k| k as f64 * step).collect()
}

fn fmt_tick(x: f64, percent: bool) -> String {
    let v = if percent { x * 100.0 } else { x };
    let s = if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    };
    if percent {
        format!("{s}%")
    } else {
        s
    }
}

/// A rendered plot: its element id and SVG text.
pub(super) struct Plot {
    pub(super) id: String,
    pub(super) svg: String,
}

pub(super) fn forest_plot(a: &Analysis) -> Option<Plot> {
    let cells: Vec<&CellStats> = a.cells.iter().collect();
    if cells.iter().all(|c| c.lift.is_none()) {
        return None;
    }
    let mut lo: f64 = 0.0;
    let mut hi: f64 = 0.0;
    for c in &cells {
        if let Some(l) = c.lift {
            lo = lo.min(l);
            hi = hi.max(l);
        }
        if let Some(ci) = c.lift_ci {
            if let Some(x) = ci.lo {
                lo = lo.min(x);
            }
            if let Some(x) = ci.hi {
                hi = hi.max(x);
            }
        }
    }
    let pad = ((hi - lo) * 0.08).max(0.02);
    let (lo, hi) = (lo - pad, hi + pad);
    let row_h = 22.0;
    let label_w = 290.0;
    let plot_w = 520.0;
    let right_w = 200.0;
    let top = 30.0;
    let height = top + row_h * cells.len() as f64 + 40.0;
    let width = label_w + plot_w + right_w;
    let x = |v: f64| label_w + (v - lo) / (hi - lo) * plot_w;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg id="plot-forest" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="Forest plot of paired lifts with {conf:.0}% CIs""#,
        conf = a.options.confidence * 100.0
    );
    let mut marks = 0;
    let mut body = String::new();
    for t in ticks(lo, hi, 6) {
        let _ = write!(
            body,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="#e4e4e4"/><text x="{0:.1}" y="{3}" class="tick" text-anchor="middle">{4}</text>"##,
            x(t),
            top - 6.0,
            height - 34.0,
            height - 20.0,
            fmt_tick(t, true)
        );
    }
    let _ = write!(
        body,
        r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="#333" stroke-dasharray="4 3"/>"##,
        x(0.0),
        top - 10.0,
        height - 34.0
    );
    let _ = write!(
        body,
        r#"<text x="{}" y="{}" class="axis-label" text-anchor="middle">lift = mean s(treated) / mean s(solo) - 1</text>"#,
        label_w + plot_w / 2.0,
        height - 4.0
    );
    let _ = write!(
        body,
        r#"<text x="8" y="16" class="axis-label">model / direction / condition</text><text x="{}" y="16" class="axis-label">lift [CI], n</text>"#,
        label_w + plot_w + 10.0
    );
    let mut last_group = String::new();
    for (i, c) in cells.iter().enumerate() {
        let y = top + row_h * i as f64 + row_h / 2.0;
        let group = format!("{} {}", c.model, c.direction);
        if group != last_group && i > 0 {
            let _ = write!(
                body,
                r##"<line x1="4" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#cfcfcf"/>"##,
                width - 4.0,
                y - row_h / 2.0,
                y - row_h / 2.0
            );
        }
        let label = if group != last_group {
            format!("{} · {} · {}", c.model, c.direction, c.condition)
        } else {
            format!("{}", c.condition)
        };
        last_group = group;
        let _ = write!(
            body,
            r#"<text x="{}" y="{:.1}" class="row-label" text-anchor="end">{}</text>"#,
            label_w - 10.0,
            y + 4.0,
            esc(&label)
        );
        let color = cond_color(c.condition);
        if let Some(l) = c.lift {
            if let Some(ci) = c.lift_ci {
                let x1 = x(ci.lo.unwrap_or(lo).max(lo));
                let x2 = x(ci.hi.unwrap_or(hi).min(hi));
                let _ = write!(
                    body,
                    r#"<line class="ci" x1="{x1:.1}" x2="{x2:.1}" y1="{y:.1}" y2="{y:.1}" stroke="{color}" stroke-width="2"/>"#
                );
                if ci.hi.is_none() {
                    let _ = write!(
                        body,
                        r#"<path d="M{0:.1},{1:.1} l-6,-4 v8 z" fill="{color}"/>"#,
                        x2, y
                    );
                }
            }
            let title = format!(
                "{} {} {}: lift {} CI {} (n = {}, Wilcoxon p = {})",
                c.model,
                c.direction,
                c.condition,
                pct(c.lift),
                ci_pct(c.lift_ci),
                c.problems,
                c.wilcoxon
                    .as_ref()
                    .map(|w| pval(w.p_value))
                    .unwrap_or_else(|| "n/a".into())
            );
            let shape = if c.significant { "filled" } else { "open" };
            let fill = if c.significant { color } else { "#fff" };
            let _ = write!(
                body,
                r#"<circle class="mark {shape}" data-condition="{}" cx="{:.1}" cy="{y:.1}" r="5" fill="{fill}" stroke="{color}" stroke-width="2"><title>{}</title></circle>"#,
                c.condition,
                x(l.clamp(lo, hi)),
                esc(&title)
            );
            marks += 1;
        }
        let _ = write!(
            body,
            r#"<text x="{}" y="{:.1}" class="row-value">{} {} n={}</text>"#,
            label_w + plot_w + 10.0,
            y + 4.0,
            esc(&pct(c.lift)),
            esc(&ci_pct(c.lift_ci)),
            c.problems
        );
    }
    let _ = write!(s, r#" data-marks="{marks}">"#);
    s.push_str(&body);
    s.push_str("</svg>");
    Some(Plot {
        id: "plot-forest".into(),
        svg: s,
    })
}

/// One point of the source/target scatter.
struct ScatterPoint {
    source: f64,
    solo: f64,
    outcome: Outcome,
    title: String,
}

fn scatter_points(rows: &[AttemptRow], a: &Analysis, direction: Direction) -> Vec<ScatterPoint> {
    let eps_default = a.options.default_noise_eps;
    // Mean solo score and eps per (model, problem) on the target.
    let mut solo: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    let mut eps: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.target == direction.target) {
        let e = eps
            .entry((r.model.as_str(), r.problem.as_str()))
            .or_insert(0.0);
        *e = e.max(r.eps_or(eps_default));
        if r.condition == Condition::Solo {
            solo.entry((r.model.as_str(), r.problem.as_str()))
                .or_default()
                .push(r.effective_score());
        }
    }
    let mut pts = Vec::new();
    for r in rows
        .iter()
        .filter(|r| r.target == direction.target && r.condition == Condition::Conditioned)
    {
        let (Some(src), Some(sv)) = (
            r.source_score.filter(|x| x.is_finite()),
            solo.get(&(r.model.as_str(), r.problem.as_str())),
        ) else {
            continue;
        };
        let sm = crate::stats::mean(sv);
        let e = eps
            .get(&(r.model.as_str(), r.problem.as_str()))
            .copied()
            .unwrap_or(eps_default);
        let outcome = compare(r.effective_score(), sm, e);
        let title = format!(
            "{} {} run {}: source {:.3}, target solo {:.3}, conditioned {:.3} ({})",
            r.model,
            r.problem,
            r.run_index,
            src,
            sm,
            r.effective_score(),
            outcome.as_str()
        );
        pts.push(ScatterPoint {
            source: src.max(0.0),
            solo: sm,
            outcome,
            title,
        });
    }
    pts
}

pub(super) fn scatter_plot(
    rows: &[AttemptRow],
    a: &Analysis,
    direction: Direction,
) -> Option<Plot> {
    let pts = scatter_points(rows, a, direction);
    if pts.is_empty() {
        return None;
    }
    // Axis to the 99th percentile (points beyond are drawn on the edge), at least 1.2.
    let mut all: Vec<f64> = pts.iter().flat_map(|p| [p.source, p.solo]).collect();
    all.sort_by(f64::total_cmp);
    let maxv = crate::stats::quantile_sorted(&all, 0.99).max(1.2) * 1.05;
    let (w, h, m) = (440.0, 440.0, 50.0);
    let id = format!("plot-scatter-{}", slug(direction));
    let sx = |v: f64| m + v.min(maxv) / maxv * (w - m - 15.0);
    let sy = |v: f64| h - m - v.min(maxv) / maxv * (h - m - 15.0);
    let mut body = String::new();
    for t in ticks(0.0, maxv, 5) {
        let _ = write!(
            body,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="15" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" class="tick" text-anchor="middle">{3}</text><line x1="{4}" x2="{5}" y1="{6:.1}" y2="{6:.1}" stroke="#eee"/><text x="{7}" y="{8:.1}" class="tick" text-anchor="end">{3}</text>"##,
            sx(t),
            h - m,
            h - m + 16.0,
            fmt_tick(t, false),
            m,
            w - 15.0,
            sy(t),
            m - 6.0,
            sy(t) + 4.0
        );
    }
    let _ = write!(
        body,
        r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#555" stroke-dasharray="5 4"/>"##,
        sx(0.0),
        sy(0.0),
        sx(maxv),
        sy(maxv)
    );
    let _ = write!(
        body,
        r#"<text x="{}" y="{}" class="note" text-anchor="end">source above</text>"#,
        w - 20.0,
        h - m - 10.0
    );
    let _ = write!(
        body,
        r#"<text x="{}" y="30" class="note">source below</text>"#,
        m + 8.0
    );
    let _ = write!(
        body,
        r#"<text x="{}" y="{}" class="axis-label" text-anchor="middle">source score ({}, the skill's attempt)</text>"#,
        (w + m) / 2.0,
        h - 12.0,
        direction.source.display_name()
    );
    let _ = write!(
        body,
        r#"<text transform="translate(14,{}) rotate(-90)" class="axis-label" text-anchor="middle">target solo score ({}, mean over runs)</text>"#,
        (h - m) / 2.0,
        direction.target.display_name()
    );
    let mut rng = crate::rng::Rng::derived(1, &id);
    for p in &pts {
        // A little jitter separates the many points at (0, 0).
        let jx = if p.source == 0.0 {
            rng.uniform() * 6.0
        } else {
            0.0
        };
        let jy = if p.solo == 0.0 {
            -rng.uniform() * 6.0
        } else {
            0.0
        };
        let _ = write!(
            body,
            r#"<circle class="mark {}" cx="{:.1}" cy="{:.1}" r="3.5" fill="{}" fill-opacity="0.75"><title>{}</title></circle>"#,
            p.outcome.as_str(),
            sx(p.source) + jx,
            sy(p.solo) + jy,
            outcome_color(p.outcome),
            esc(&p.title)
        );
    }
    let mut legend = String::new();
    for (i, o) in [Outcome::Improved, Outcome::Regressed, Outcome::Tied]
        .iter()
        .enumerate()
    {
        let n = pts.iter().filter(|p| p.outcome == *o).count();
        let y = 20.0 + 16.0 * i as f64;
        let _ = write!(
            legend,
            r#"<circle cx="{}" cy="{y}" r="4" fill="{}"/><text x="{}" y="{}" class="legend">{} ({n})</text>"#,
            w - 120.0,
            outcome_color(*o),
            w - 112.0,
            y + 4.0,
            o.as_str()
        );
    }
    let svg = format!(
        r#"<svg id="{id}" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" data-marks="{}" role="img" aria-label="Source score against target solo score, {}">{body}{legend}</svg>"#,
        pts.len(),
        direction
    );
    Some(Plot { id, svg })
}

fn heat_color(lift: f64) -> String {
    // Diverging: red (-50% or less) - white (0) - blue (+50% or more).
    let t = (lift / 0.5).clamp(-1.0, 1.0);
    let (r, g, b) = if t >= 0.0 {
        (
            255.0 - t * (255.0 - 33.0),
            255.0 - t * (255.0 - 102.0),
            255.0 - t * (255.0 - 172.0),
        )
    } else {
        let u = -t;
        (
            255.0 - u * (255.0 - 178.0),
            255.0 - u * (255.0 - 24.0),
            255.0 - u * (255.0 - 43.0),
        )
    };
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

pub(super) fn heatmap_plot(a: &Analysis, direction: Direction) -> Option<Plot> {
    let cells: Vec<&CellStats> = a
        .family_cells
        .iter()
        .filter(|c| c.direction == direction && c.condition == Condition::Conditioned)
        .collect();
    if cells.is_empty() {
        return None;
    }
    let models = &a.models;
    let families: Vec<Family> = {
        let mut f: Vec<Family> = cells.iter().filter_map(|c| c.family).collect();
        f.sort();
        f.dedup();
        f
    };
    let (cw, ch, left, top) = (110.0, 44.0, 330.0, 60.0);
    let w = (left + cw * models.len() as f64 + 20.0).max(left + 430.0);
    let h = top + ch * families.len() as f64 + 50.0;
    let id = format!("plot-heatmap-{}", slug(direction));
    let mut body = String::new();
    for (j, m) in models.iter().enumerate() {
        let _ = write!(
            body,
            r#"<text x="{:.1}" y="{}" class="col-label" text-anchor="middle">{}</text>"#,
            left + cw * (j as f64 + 0.5),
            top - 10.0,
            esc(m)
        );
    }
    let mut marks = 0;
    for (i, f) in families.iter().enumerate() {
        let y = top + ch * i as f64;
        let _ = write!(
            body,
            r#"<text x="{}" y="{:.1}" class="row-label" text-anchor="end">{} · {}</text>"#,
            left - 8.0,
            y + ch / 2.0 + 4.0,
            f,
            esc(f.title())
        );
        for (j, m) in models.iter().enumerate() {
            let x = left + cw * j as f64;
            let c = cells.iter().find(|c| c.family == Some(*f) && &c.model == m);
            match c.and_then(|c| c.lift.map(|l| (c, l))) {
                Some((c, l)) => {
                    // White text on the dark end of the scale.
                    let ink = if l.abs() > 0.3 { "#fff" } else { "#111" };
                    let title = format!(
                        "{} {} family {}: lift {} CI {} (n = {})",
                        m,
                        direction,
                        f,
                        pct(Some(l)),
                        ci_pct(c.lift_ci),
                        c.problems
                    );
                    let _ = write!(
                        body,
                        r##"<rect class="mark" x="{x:.1}" y="{y:.1}" width="{}" height="{}" fill="{}" stroke="#fff"><title>{}</title></rect><text x="{:.1}" y="{:.1}" class="cell-text" text-anchor="middle" fill="{ink}">{}{}</text><text x="{:.1}" y="{:.1}" class="cell-sub" text-anchor="middle" fill="{ink}">n={}</text>"##,
                        cw - 2.0,
                        ch - 2.0,
                        heat_color(l),
                        esc(&title),
                        x + cw / 2.0,
                        y + ch / 2.0,
                        esc(&pct(Some(l))),
                        if c.significant { "*" } else { "" },
                        x + cw / 2.0,
                        y + ch / 2.0 + 14.0,
                        c.problems
                    );
                    marks += 1;
                }
                None => {
                    let _ = write!(
                        body,
                        r##"<rect class="cell-empty" x="{x:.1}" y="{y:.1}" width="{}" height="{}" fill="#f0f0f0" stroke="#fff"/><text x="{:.1}" y="{:.1}" class="cell-sub" text-anchor="middle">no data</text>"##,
                        cw - 2.0,
                        ch - 2.0,
                        x + cw / 2.0,
                        y + ch / 2.0 + 4.0
                    );
                }
            }
        }
    }
    // Legend.
    let ly = h - 30.0;
    for k in 0..=10 {
        let l = -0.5 + 0.1 * k as f64;
        let _ = write!(
            body,
            r#"<rect x="{:.1}" y="{ly}" width="20" height="10" fill="{}"/>"#,
            left + 20.0 * k as f64,
            heat_color(l)
        );
    }
    let _ = write!(
        body,
        r#"<text x="{}" y="{}" class="tick">-50%</text><text x="{}" y="{}" class="tick">+50% lift (* = CI excludes 0)</text>"#,
        left - 30.0,
        ly + 9.0,
        left + 225.0,
        ly + 9.0
    );
    if marks == 0 {
        return None;
    }
    let svg = format!(
        r#"<svg id="{id}" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" data-marks="{marks}" role="img" aria-label="Family by model heatmap of the conditioned lift, {direction}">{body}</svg>"#
    );
    Some(Plot { id, svg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            ticks(0.0, 1.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        let t = ticks(-0.13, 0.42, 6);
        assert!(t.contains(&0.0) && t.len() >= 4);
        assert_eq!(fmt_tick(0.25, true), "25%");
        assert_eq!(heat_color(0.0), "rgb(255,255,255)");
    }
}
