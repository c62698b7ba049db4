//! Every bad input of the analysis commands (issue: "errors, not panics") ends in a clear
//! message naming the input and exit code 2, never a panic (exit 101); and the cases that
//! used to panic on good input (a pilot run with a 98% pass rate, a pass rate of 1) work.

use std::path::{Path, PathBuf};
use std::process::Output;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn mkb(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mkb"))
        .arg("--root")
        .arg(repo())
        .args(args)
        .output()
        .expect("run mkb")
}

/// Exit 2 with an `error:` line that contains every one of `needles`.
fn assert_error(args: &[&str], needles: &[&str]) {
    let out = mkb(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains("error:"), "{args:?}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {n:?} not in:\n{stderr}");
    }
}

fn assert_ok(args: &[&str]) -> String {
    let out = mkb(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn bad_simulate_and_power_inputs_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let rd = s(tmp.path());
    fn with<'a>(rd: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["simulate", "--runs-dir", rd, "--problems", "6"];
        v.extend_from_slice(extra);
        v
    }
    let sim = |extra: &[&'static str]| with(rd, extra);
    assert_error(
        &sim(&["--pass-rate", "0.8"]),
        &["--source-dependence", "0.8"],
    );
    assert_error(&sim(&["--pass-rate", "0"]), &["--pass-rate"]);
    assert_error(&sim(&["--pass-rate", "1.5"]), &["--pass-rate"]);
    assert_error(
        &sim(&["--lift-cute-to-tirx=-1"]),
        &["cute->tirx lift", "> -1"],
    );
    assert_error(&sim(&["--lift-tirx-to-cute", "NaN"]), &["tirx->cute lift"]);
    assert_error(&sim(&["--run-sd", "nan"]), &["--run-sd"]);
    assert_error(&sim(&["--model", "a:0.1"]), &["--model", "NAME:"]);
    assert_error(&sim(&["--model", "a:x:0.1"]), &["--model", "\"x\""]);
    assert_error(
        &sim(&["--model", "a:0.1:0.1", "--model", "a:0.2:0.2"]),
        &["--model", "distinct"],
    );
    assert_error(&sim(&["--standing-effect", "5"]), &["--standing-effect"]);
    assert_error(
        &["simulate", "--runs-dir", rd, "--problems", "0"],
        &["--problems"],
    );
    assert_error(&["simulate", "--runs-dir", rd, "--runs", "0"], &["--runs"]);
    // Nothing was written by the failed calls.
    assert!(!tmp.path().join("sim").exists());
    // A pass rate of 1 is valid (every solo attempt passes).
    assert_ok(&sim(&["--pass-rate", "1", "--name", "p1"]));

    assert_error(&["power", "--runs", "0"], &["--runs"]);
    assert_error(&["power", "--problems", "0"], &["--problems"]);
    assert_error(&["power", "--problems", "12,x"], &["--problems", "\"x\""]);
    assert_error(&["power", "--lift=-1"], &["--lift"]);
    assert_error(&["power", "--simulations", "0"], &["--simulations"]);
    assert_error(&["power", "--target-power", "1.5"], &["--target-power"]);
    assert_error(
        &["power", "--pilot", &format!("{rd}/missing")],
        &["no run store"],
    );
}

#[test]
fn the_committed_h200_run_is_a_valid_pilot() {
    // Its solo pass rate is 98%: the fitted source dependence used to break the simulator.
    // A copy: opening the committed store would leave SQLite's -shm / -wal files beside it.
    let tmp = tempfile::tempdir().unwrap();
    let pilot = tmp.path().join("replay-demo");
    std::fs::create_dir_all(&pilot).unwrap();
    std::fs::copy(
        repo().join("bench/h200/replay-demo/mkb.sqlite"),
        pilot.join("mkb.sqlite"),
    )
    .unwrap();
    let out = assert_ok(&[
        "power",
        "--pilot",
        s(&pilot),
        "--problems",
        "6",
        "--runs",
        "1",
        "--simulations",
        "2",
    ]);
    assert!(out.contains("power (CI)"), "{out}");
}

#[test]
fn bad_stores_and_analysis_options_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let rd = s(tmp.path());
    // A zero-byte store is refused and left untouched (no schema written into it).
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("mkb.sqlite"), b"").unwrap();
    for cmd in ["analyze", "report", "export"] {
        let mut args = vec![cmd, s(&empty)];
        if cmd != "analyze" {
            args.extend(["-o", rd]);
        }
        assert_error(&args, &["mkb.sqlite", "empty"]);
    }
    assert_eq!(
        std::fs::metadata(empty.join("mkb.sqlite")).unwrap().len(),
        0
    );
    assert_error(&["analyze", &format!("{rd}/nothing")], &["no run store"]);

    // A small simulated run: --resamples 1 is refused; 3 problems never star a CI.
    assert_ok(&[
        "simulate",
        "--runs-dir",
        rd,
        "--problems",
        "3",
        "--runs",
        "1",
        "--name",
        "three",
        "--lift-cute-to-tirx",
        "3",
        "--lift-tirx-to-cute",
        "3",
    ]);
    let run = format!("{rd}/three");
    assert_error(&["analyze", &run, "--resamples", "1"], &["--resamples 1"]);
    assert_error(
        &[
            "report",
            &run,
            "-o",
            &format!("{rd}/r.html"),
            "--resamples",
            "5",
        ],
        &["--resamples 5"],
    );
    assert_error(
        &["export", &run, "--format", "xlsx", "-o", &format!("{rd}/x")],
        &["--format"],
    );
    assert_error(
        &["export", &run, "-o", &format!("{rd}/no/such/dir/x.parquet")],
        &["no/such/dir"],
    );
    let json = assert_ok(&["analyze", &run, "--json", "--resamples", "2000"]);
    let a: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cells = a["cells"].as_array().unwrap();
    assert!(!cells.is_empty());
    for c in cells {
        assert_eq!(c["problems"], 3);
        assert_eq!(c["significant"], false, "{c}");
    }
    // The report prints its seed, and the same default seed as analyze.
    let out = mkb(&[
        "report",
        &run,
        "-o",
        &format!("{rd}/r.html"),
        "--resamples",
        "1000",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("seed {}", mkb_analysis::DEFAULT_SEED)),
        "{err}"
    );
    let html = std::fs::read_to_string(format!("{rd}/r.html")).unwrap();
    assert!(html.contains(&format!("seed {}", mkb_analysis::DEFAULT_SEED)));
    assert!(html.contains(r#"id="headline""#));
}
