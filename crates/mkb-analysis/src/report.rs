//! `mkb report RUN -o report.html`: one self-contained HTML file (inline CSS, inline SVG
//! plots drawn here, a few lines of inline JavaScript; no network, works offline):
//! - a forest plot of lifts with CIs per model, direction and condition;
//! - per direction, a scatter of the source score against the target's solo score, one point
//!   per conditioned attempt, colored by its outcome;
//! - per direction, a family x model heatmap of the conditioned lift;
//! - the summary, source, per-family and usage tables, and a per-problem table linking every
//!   attempt's kernel, skill and trajectory.
//!
//! Every plot is an `<svg class="plot" data-marks="N">` whose N data marks carry the class
//! `mark`; an inline self-check compares the marks in the DOM with N for every expected plot,
//! records the result in `#mkb-selfcheck[data-status]` and logs a console error on failure
//! (the headless-browser test reads both).

use crate::analysis::{Analysis, CellStats, ProblemSummary, SourceRelation};
use crate::row::{compare, AttemptRow, Outcome};
use crate::table::{ci_pct, pct, pval};
use mkb_core::{Condition, Direction, Dsl, Family};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Options of the report.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Page title (default: "MetaKernelBench report: " followed by the run names).
    pub title: Option<String>,
    /// Prefix put before the rows' relative artifact paths in links (e.g. "../runs/r1/").
    pub link_prefix: String,
    /// The command that produced the report, shown in the header.
    pub command: Option<String>,
}

/// Render the report with default options (links relative to the report's folder).
pub fn render_report(a: &Analysis, rows: &[AttemptRow]) -> String {
    render_report_with(a, rows, &ReportOptions::default())
}

/// Escape text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

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

fn slug(d: Direction) -> String {
    format!("{}-{}", d.source, d.target)
}

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
struct Plot {
    id: String,
    svg: String,
}

fn forest_plot(a: &Analysis) -> Option<Plot> {
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

fn scatter_plot(rows: &[AttemptRow], a: &Analysis, direction: Direction) -> Option<Plot> {
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

fn heatmap_plot(a: &Analysis, direction: Direction) -> Option<Plot> {
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

const CSS: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:0 auto;max-width:1280px;padding:0 20px 60px;color:#222;line-height:1.4}
header{border-bottom:2px solid #1f6fb4;margin-bottom:10px}
h1{font-size:1.5em;margin:18px 0 4px}h2{font-size:1.2em;margin-top:34px;border-bottom:1px solid #ddd}
.meta{color:#555;font-size:.9em;margin:4px 0 10px}code{background:#f4f4f4;padding:1px 4px;border-radius:3px}
nav a{margin-right:14px;font-size:.92em}
table{border-collapse:collapse;font-size:.85em;margin:8px 0}th,td{border-bottom:1px solid #e6e6e6;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f6f8fa;cursor:pointer;position:sticky;top:0}td.l,th.l{text-align:left}
tr.sig td{font-weight:600}.improved{color:#1a9850}.regressed{color:#d73027}.tied{color:#777}.fail{color:#999}
.plots{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}figure{margin:0}figcaption{font-size:.85em;color:#555;max-width:440px}
#forest figcaption{max-width:900px}.scroll{overflow-x:auto;max-width:100%}
svg.plot{max-width:100%;height:auto;background:#fff}
svg .tick{font-size:11px;fill:#666}svg .axis-label{font-size:12px;fill:#333}svg .row-label,svg .col-label{font-size:12px;fill:#222}
svg .row-value{font-size:11px;fill:#333}svg .note{font-size:11px;fill:#999}svg .legend{font-size:11px;fill:#333}
svg .cell-text{font-size:13px;font-weight:600}svg .cell-sub{font-size:10px}
.links a{font-size:.8em;margin-left:2px}.methods li{margin:3px 0}.warn{color:#a15c00}
#problem-filter{margin:6px 0;padding:4px 8px;width:320px}
"#;

const SCRIPT: &str = r#"
(function () {
  // Self-check: every expected plot is present, visible and has its data marks.
  var problems = (window.__mkbErrors || []).slice();
  var expected = [];
  try { expected = JSON.parse(document.getElementById('mkb-expected').textContent); }
  catch (e) { problems.push('cannot read the expected plot list: ' + e); }
  expected.forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { problems.push('missing plot ' + id); return; }
    var want = parseInt(el.getAttribute('data-marks') || '0', 10);
    var got = el.querySelectorAll('.mark').length;
    if (got < 1 || got !== want) { problems.push('plot ' + id + ' has ' + got + ' marks, expected ' + want); }
    var box = el.getBoundingClientRect();
    if (box.width < 50 || box.height < 50) { problems.push('plot ' + id + ' is not visible'); }
  });
  var out = document.getElementById('mkb-selfcheck');
  out.setAttribute('data-status', problems.length ? 'fail' : 'ok');
  out.setAttribute('data-plots', String(expected.length));
  out.textContent = problems.join('; ');
  if (problems.length) { console.error('mkb report self-check failed: ' + problems.join('; ')); }

  // Sortable tables: click a header; cells may carry data-v with a numeric sort key.
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll('thead th'), function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-order') !== 'asc';
        th.setAttribute('data-order', asc ? 'asc' : 'desc');
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          var vx = x.getAttribute('data-v'), vy = y.getAttribute('data-v');
          var r;
          if (vx !== null && vy !== null) { r = parseFloat(vx) - parseFloat(vy); }
          else { r = x.textContent.localeCompare(y.textContent); }
          return asc ? r : -r;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  var filter = document.getElementById('problem-filter');
  if (filter) {
    filter.addEventListener('input', function () {
      var q = filter.value.toLowerCase();
      Array.prototype.forEach.call(document.querySelectorAll('#problem-table tbody tr'), function (tr) {
        tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
      });
    });
  }
})();
"#;

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

fn summary_table(a: &Analysis) -> String {
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

fn fast_p_table(a: &Analysis) -> String {
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
fn headline_section(a: &Analysis) -> String {
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

fn source_table(a: &Analysis) -> String {
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

fn family_table(a: &Analysis) -> String {
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

fn usage_table(a: &Analysis) -> String {
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

fn problem_table(a: &Analysis, rows: &[AttemptRow], opts: &ReportOptions) -> String {
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

/// Render the self-contained HTML report.
pub fn render_report_with(a: &Analysis, rows: &[AttemptRow], opts: &ReportOptions) -> String {
    let title = opts
        .title
        .clone()
        .unwrap_or_else(|| format!("MetaKernelBench report: {}", a.runs.join(", ")));
    let directions = a.directions();
    let mut expected: Vec<String> = Vec::new();
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{}</title>
<script>window.__mkbErrors=[];window.addEventListener('error',function(e){{window.__mkbErrors.push(String(e.message||e));}});</script>
<style>{CSS}</style></head><body>
<header><h1>{}</h1><p class="meta">runs: {} &middot; {} attempts &middot; models: {} &middot; {:.0}% CIs from {} bootstrap resamples ({}), seed {} &middot; mkb-analysis {}</p>"#,
        esc(&title),
        esc(&title),
        esc(&a.runs.join(", ")),
        a.rows,
        esc(&a.models.join(", ")),
        a.options.confidence * 100.0,
        a.options.resamples,
        esc(a
            .options
            .interval
            .map_or("BCa if R >= 2, expanded percentile if R = 1", |m| m
                .describe())),
        a.options.seed,
        env!("CARGO_PKG_VERSION")
    );
    if let Some(set) = &a.eval_set {
        let _ = write!(h, r#"<p class="meta">evaluation set: {}</p>"#, esc(set));
    }
    let from = match &a.provenance {
        Some(p) => crate::practice::provenance_line(p),
        None => "provenance not recorded (a run from before it was stored, or a simulation)".into(),
    };
    let _ = write!(h, r#"<p class="meta" id="provenance">{}</p>"#, esc(&from));
    if !a.tie_band.statement.is_empty() {
        let _ = write!(
            h,
            r#"<p class="meta" id="tie-band">{}</p>"#,
            esc(&a.tie_band.statement)
        );
    }
    if let Some(cmd) = &opts.command {
        let _ = write!(
            h,
            r#"<p class="meta">made by <code>{}</code></p>"#,
            esc(cmd)
        );
    }
    h.push_str(r##"<nav><a href="#headline">headline</a><a href="#summary">summary</a><a href="#forest">forest plot</a><a href="#scatter">source vs target</a><a href="#heatmap">family heatmap</a><a href="#source">source table</a><a href="#families">families</a><a href="#usage">usage</a><a href="#budgets">budgets</a><a href="#problems">problems</a><a href="#methods">methods</a></nav></header>"##);

    h.push_str(&headline_section(a));
    let _ = write!(
        h,
        r#"<section id="summary"><h2>Paired lift vs solo</h2><div class="scroll">{}</div><p class="meta">Bold rows: the CI excludes 0. Placebo (another problem's skill) and repeat solo (a second solo attempt) are the controls.</p><h3>fast_p</h3><div class="scroll">{}</div></section>"#,
        summary_table(a),
        fast_p_table(a)
    );

    h.push_str(r#"<section id="forest"><h2>Forest plot</h2>"#);
    match forest_plot(a) {
        Some(p) => {
            let _ = write!(h, r#"<figure>{}<figcaption>Paired lift of each condition over solo with its {:.0}% bootstrap CI; filled: the CI excludes 0. An arrow marks an unbounded end.</figcaption></figure>"#, p.svg, a.options.confidence * 100.0);
            expected.push(p.id);
        }
        None => h.push_str(r#"<p class="meta">No lift could be computed (no paired problems with a non-zero solo score).</p>"#),
    }
    h.push_str("</section>");

    h.push_str(
        r#"<section id="scatter"><h2>Source score vs target solo score</h2><div class="plots">"#,
    );
    let mut any = false;
    for d in &directions {
        if let Some(p) = scatter_plot(rows, a, *d) {
            let _ = write!(
                h,
                r#"<figure>{}<figcaption>{}: one point per conditioned attempt; color = its outcome against the target's solo score (tie band: the noise threshold).</figcaption></figure>"#,
                p.svg, d
            );
            expected.push(p.id);
            any = true;
        }
    }
    if !any {
        h.push_str(r#"<p class="meta">No conditioned attempts with source scores.</p>"#);
    }
    h.push_str("</div></section>");

    h.push_str(r#"<section id="heatmap"><h2>Family x model heatmap of the conditioned lift</h2><div class="plots">"#);
    let mut any = false;
    for d in &directions {
        if let Some(p) = heatmap_plot(a, *d) {
            let _ = write!(
                h,
                r#"<figure>{}<figcaption>{}: lift of conditioned over solo per family; n = paired problems.</figcaption></figure>"#,
                p.svg, d
            );
            expected.push(p.id);
            any = true;
        }
    }
    if !any {
        h.push_str(
            r#"<p class="meta">No per-family lifts (run the analysis with per_family).</p>"#,
        );
    }
    h.push_str("</div></section>");

    let _ = write!(
        h,
        r#"<section id="source"><h2>Source relative to target</h2><p class="meta">{}</p><div class="scroll">{}</div></section>"#,
        esc(&a.methods.source_table),
        source_table(a)
    );
    let _ = write!(
        h,
        r#"<section id="families"><h2>Per family</h2><div class="scroll">{}</div></section>"#,
        family_table(a)
    );
    let _ = write!(
        h,
        r#"<section id="usage"><h2>Tokens and wall time per attempt</h2><div class="scroll">{}</div></section>"#,
        usage_table(a)
    );
    h.push_str(&crate::practice::render_html(a));
    let _ = write!(
        h,
        r#"<section id="problems"><h2>Per problem</h2><p class="meta">Scores per run (failures show the verdict); links: k = kernel, s = skill, t = trajectory. Colors: outcome against the solo mean.</p><div class="scroll">{}</div></section>"#,
        problem_table(a, rows, opts)
    );
    let m = &a.methods;
    let _ = write!(
        h,
        r#"<section id="methods"><h2>Methods</h2><ul class="methods"><li>{}</li><li>{}</li><li>{}</li><li>{}</li><li>{}</li><li>{}</li><li>{}</li></ul>"#,
        esc(&m.score),
        esc(&m.lift),
        esc(&m.interval),
        esc(&m.wilcoxon),
        esc(&m.ties),
        esc(&m.geo_lift),
        esc(&m.source_table)
    );
    if !a.warnings.is_empty() {
        h.push_str(r#"<h3>Warnings</h3><ul class="warn">"#);
        for w in &a.warnings {
            let _ = write!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");
    let expected_json = serde_json::to_string(&expected).unwrap_or_else(|_| "[]".into());
    let _ = write!(
        h,
        r#"<div id="mkb-selfcheck" data-status="pending" hidden></div>
<script type="application/json" id="mkb-expected">{}</script>
<script>{SCRIPT}</script>
</body></html>
"#,
        expected_json.replace("</", "<\\/")
    );
    h
}

/// Seed of the example report committed under docs/.
pub const EXAMPLE_SEED: u64 = 20261129;

/// The example report: simulate [`crate::SimConfig::example`] with `seed`, analyse it with
/// the default options and render it, with `command` (how it was made) in the header.
/// Returns the rows, the analysis and the HTML.
pub fn example_report(seed: u64, command: &str) -> (Vec<AttemptRow>, Analysis, String) {
    let cfg = crate::SimConfig::example();
    let rows = crate::simulate(&cfg, seed);
    let a = crate::analyze(&rows, &crate::AnalysisOptions::default());
    let opts = ReportOptions {
        title: Some(format!(
            "MetaKernelBench example report (simulated run {}, seed {seed})",
            cfg.run_name
        )),
        link_prefix: String::new(),
        command: Some(command.to_string()),
    };
    let html = render_report_with(&a, &rows, &opts);
    (rows, a, html)
}

/// Write the example report to `path` (see [`example_report`]).
pub fn write_example_report(
    path: &std::path::Path,
    seed: u64,
    command: &str,
) -> anyhow::Result<Analysis> {
    let (_, a, html) = example_report(seed, command);
    std::fs::write(path, html).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(a)
}

/// Ids of the plots a report of this analysis and these rows contains (the self-check's
/// expected list).
pub fn expected_plot_ids(a: &Analysis, rows: &[AttemptRow]) -> Vec<String> {
    let mut ids = Vec::new();
    if let Some(p) = forest_plot(a) {
        ids.push(p.id);
    }
    for d in a.directions() {
        if let Some(p) = scatter_plot(rows, a, d) {
            ids.push(p.id);
        }
    }
    for d in a.directions() {
        if let Some(p) = heatmap_plot(a, d) {
            ids.push(p.id);
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, AnalysisOptions};
    use crate::simulate::{simulate, SimConfig};

    fn report() -> (Analysis, Vec<AttemptRow>, String) {
        let cfg = SimConfig {
            problems: 24,
            runs: 2,
            ..SimConfig::example()
        };
        let mut rows = simulate(&cfg, 11);
        rows[0].kernel_path = Some("attempts/x y/kernel.py".into());
        rows[0].skill_path = Some("skills/<evil>\".md".into());
        rows[0].model = "model-a".into();
        let a = analyze(
            &rows,
            &AnalysisOptions {
                resamples: 300,
                ..Default::default()
            },
        );
        let html = render_report(&a, &rows);
        (a, rows, html)
    }

    fn count(h: &str, needle: &str) -> usize {
        h.matches(needle).count()
    }

    #[test]
    fn report_has_every_plot_with_its_marks() {
        let (a, rows, h) = report();
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.trim_end().ends_with("</html>"));
        let ids = expected_plot_ids(&a, &rows);
        // forest + 2 scatters + 2 heatmaps
        assert_eq!(ids.len(), 5, "{ids:?}");
        for id in &ids {
            let start = h
                .find(&format!(r#"<svg id="{id}""#))
                .unwrap_or_else(|| panic!("no {id}"));
            let end = start + h[start..].find("</svg>").unwrap();
            let svg = &h[start..end];
            let want: usize = svg
                .split("data-marks=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert!(want > 0);
            assert_eq!(count(svg, r#"class="mark"#), want, "{id}");
        }
        // Forest: one mark per cell with a lift.
        let forest_marks = a.cells.iter().filter(|c| c.lift.is_some()).count();
        assert!(h.contains(&format!(r#"data-marks="{forest_marks}""#)));
        // The expected list is embedded for the self-check.
        assert!(h.contains(&serde_json::to_string(&ids).unwrap()));
    }

    #[test]
    fn report_is_self_contained_and_escaped() {
        let (_, _, h) = report();
        for bad in ["http://", "https://", "src=\"", "@import", "url("] {
            let ok = match bad {
                // The SVG namespace URI is an identifier, not a fetch.
                "http://" => {
                    h.matches("http://").count() == h.matches("http://www.w3.org/2000/svg").count()
                }
                _ => !h.contains(bad),
            };
            assert!(ok, "report references external content: {bad}");
        }
        assert!(h.contains(r#"href="attempts/x%20y/kernel.py""#));
        assert!(!h.contains("<evil>"));
        assert!(h.contains("skills/%3Cevil%3E%22.md"));
        // Balanced structure (rough): sections and tables open and close.
        for tag in ["section", "table", "svg", "figure", "script"] {
            assert_eq!(
                count(&h, &format!("<{tag}")),
                count(&h, &format!("</{tag}>")),
                "{tag}"
            );
        }
        assert!(h.contains(r#"id="mkb-selfcheck""#));
    }

    #[test]
    fn report_without_conditioned_data_still_renders() {
        let cfg = SimConfig {
            problems: 6,
            runs: 1,
            controls: false,
            ..SimConfig::default()
        };
        let rows: Vec<AttemptRow> = simulate(&cfg, 1)
            .into_iter()
            .filter(|r| r.condition == Condition::Solo)
            .collect();
        let a = analyze(
            &rows,
            &AnalysisOptions {
                resamples: 100,
                ..Default::default()
            },
        );
        let h = render_report(&a, &rows);
        assert!(expected_plot_ids(&a, &rows).is_empty());
        assert!(h.contains(r#"<script type="application/json" id="mkb-expected">[]</script>"#));
        assert!(h.contains("No lift could be computed"));
    }

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
