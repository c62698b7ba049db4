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
//!
//! Layout: this module assembles the page; `svg` draws the plots, `tables` the HTML
//! tables, `example` makes the simulated example report; the stylesheet and the scripts are
//! the files under `assets/`, included at build time.

mod example;
mod svg;
mod tables;

pub use example::{example_report, write_example_report, EXAMPLE_SEED};

use crate::analysis::Analysis;
use crate::row::AttemptRow;
use mkb_core::Direction;
use std::fmt::Write as _;
use svg::{forest_plot, heatmap_plot, scatter_plot};
use tables::{
    family_table, fast_p_table, headline_section, problem_table, source_table, summary_table,
    usage_table,
};

/// The report's stylesheet (inlined into the page).
const CSS: &str = include_str!("assets/report.css");
/// The report's script: the plot self-check, sortable tables, the problem filter.
const SCRIPT: &str = include_str!("assets/report.js");
/// The first script of the page: collects errors for the self-check.
const ERROR_HOOK: &str = include_str!("assets/error-hook.js").trim_ascii_end();

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

fn slug(d: Direction) -> String {
    format!("{}-{}", d.source, d.target)
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
<script>{ERROR_HOOK}</script>
<style>
{CSS}</style></head><body>
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
<script>
{SCRIPT}</script>
</body></html>
"#,
        expected_json.replace("</", "<\\/")
    );
    h
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
    use mkb_core::Condition;

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
}
