//! Opens the HTML report in headless Chromium and fails on console messages (errors, uncaught
//! exceptions) or missing plots. Runs only when MKB_CHROMIUM is set (the path of the
//! chromium binary, or "1" for `chromium` on PATH): scripts/browser-test.sh sets it. A broken
//! report (a plot removed, a script error) must be caught too, so the check can fail.

use mkb_analysis::report::{expected_plot_ids, render_report_with, ReportOptions};
use mkb_analysis::{analyze, simulate, AnalysisOptions, SimConfig};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<String> {
    let v = std::env::var("MKB_CHROMIUM").ok()?;
    Some(if v.is_empty() || v == "1" {
        "chromium".to_string()
    } else {
        v
    })
}

/// Load `html` in headless Chromium; Ok(dom) when the page logged nothing to the console and
/// its self-check passed with `want_plots` plots, Err(reason) otherwise.
fn check_in_chromium(bin: &str, html: &str, want_plots: &[String]) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let page = dir.path().join("report.html");
    std::fs::write(&page, html).map_err(|e| e.to_string())?;
    let profile = dir.path().join("profile");
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {bin}: {e}"))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err("chromium timed out".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let dom = t_out.join().unwrap();
    let log = t_err.join().unwrap();
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    if !console.is_empty() {
        return Err(format!("console messages:\n{}", console.join("\n")));
    }
    let Some(pos) = dom.find(r#"id="mkb-selfcheck""#) else {
        return Err(format!(
            "no self-check element in the DOM ({} bytes; stderr tail: {})",
            dom.len(),
            &log[log.len().saturating_sub(800)..]
        ));
    };
    let tag = &dom[pos..pos + dom[pos..].find('>').unwrap_or(0)];
    if !tag.contains(r#"data-status="ok""#) {
        return Err(format!("self-check did not pass: {tag}"));
    }
    if !tag.contains(&format!(r#"data-plots="{}""#, want_plots.len())) {
        return Err(format!(
            "self-check saw a different number of plots than expected ({}): {tag}",
            want_plots.len()
        ));
    }
    for id in want_plots {
        if !dom.contains(&format!(r#"<svg id="{id}""#)) {
            return Err(format!("plot {id} missing from the rendered DOM"));
        }
    }
    Ok(dom)
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        // CI sets MKB_REQUIRE_ALL: there a missing browser is a failure, not a skip.
        assert!(
            std::env::var_os("MKB_REQUIRE_ALL").is_none(),
            "MKB_REQUIRE_ALL is set but MKB_CHROMIUM is not"
        );
        eprintln!("skipped: set MKB_CHROMIUM (scripts/browser-test.sh) to run the headless-Chromium report test");
        return;
    };
    let cfg = SimConfig {
        problems: 24,
        runs: 2,
        ..SimConfig::example()
    };
    let mut rows = simulate(&cfg, 5);
    rows[0].kernel_path = Some("attempts/0/kernel.py".into());
    rows[0].trajectory_path = Some("attempts/0/trajectory.jsonl".into());
    let a = analyze(
        &rows,
        &AnalysisOptions {
            resamples: 1000,
            ..Default::default()
        },
    );
    let html = render_report_with(
        &a,
        &rows,
        &ReportOptions {
            command: Some("browser test".into()),
            ..Default::default()
        },
    );
    let ids = expected_plot_ids(&a, &rows);
    // A forest plot, and a scatter and a heatmap for each of the two directions.
    assert_eq!(ids.len(), 5, "{ids:?}");
    assert!(
        ids.iter().any(|i| i == "plot-forest")
            && ids.iter().any(|i| i.starts_with("plot-scatter"))
            && ids.iter().any(|i| i.starts_with("plot-heatmap"))
    );

    let dom = check_in_chromium(&bin, &html, &ids)
        .unwrap_or_else(|e| panic!("report failed in chromium: {e}"));
    assert!(dom.contains("problem-table"));

    // Negative controls: the same check must reject a report with a plot missing, with a
    // plot that lost marks, and with a script error.
    let forest_start = html.find(r#"<svg id="plot-forest""#).unwrap();
    let forest_end = forest_start + html[forest_start..].find("</svg>").unwrap() + "</svg>".len();
    let no_plot = format!("{}{}", &html[..forest_start], &html[forest_end..]);
    let e = check_in_chromium(&bin, &no_plot, &ids).expect_err("a missing plot must fail");
    assert!(e.contains("self-check") || e.contains("console"), "{e}");

    let fewer_marks = html.replacen(r#"<circle class="mark"#, r#"<circle class="nomark"#, 1);
    check_in_chromium(&bin, &fewer_marks, &ids).expect_err("a plot with a lost mark must fail");

    let js_error = html.replacen(
        "</body>",
        "<script>notDefinedAnywhere();</script></body>",
        1,
    );
    let e = check_in_chromium(&bin, &js_error, &ids).expect_err("a script error must fail");
    assert!(e.contains("notDefinedAnywhere"), "{e}");
}
