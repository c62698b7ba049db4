//! The command line of evaluation: options with a fixed set of values are checked by clap, which
//! refuses a bad one listing the choices (exit status 2, before anything starts); `mkb problems
//! spec` and `mkb redteam --list` print what the Python tools build their requests from, the same
//! objects the library produces.

mod common;

use common::{mkb, repo};
use mkb_core::{DslRegistry, Registry};
use mkb_eval::redteam::Manifest;
use mkb_eval::SpecBundle;

fn run(args: &[&str]) -> std::process::Output {
    mkb().args(args).output().unwrap()
}

/// A bad value is refused by clap: exit status 2, the option and every choice named.
fn refused(args: &[&str], option: &str, choices: &str) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains("invalid value"), "{args:?}: {err}");
    assert!(err.contains(option), "{args:?}: {option} not in {err}");
    assert!(
        err.contains(&format!("[possible values: {choices}]")),
        "{args:?}: the choices are not listed: {err}"
    );
}

#[test]
fn bad_values_are_refused_with_the_choices() {
    let k = repo().join("problems/A/A01_bias_gelu/cute/solution.py");
    let k = k.to_str().unwrap();
    let modes = "auto, compile, test, bench, full";
    refused(
        &[
            "eval", "A01", "--dsl", "cute", "--file", k, "--mode", "fast",
        ],
        "--mode",
        modes,
    );
    refused(&["solutions", "--mode", "quick"], "--mode", modes);
    refused(&["redteam", "--mode", "Full"], "--mode", modes);
    refused(
        &["redteam", "--layer", "luck", "--list"],
        "--layer",
        "static, sandbox, deadline, dynamic, correctness, timing, crash",
    );
    refused(
        &["rescore", "runs/none", "--mode", "bench"],
        "--mode",
        "auto, full, compile",
    );
    refused(
        &["export", "runs/none", "--format", "xlsx", "-o", "x"],
        "--format",
        "parquet, csv, jsonl",
    );
}

fn registry() -> Registry {
    let dsls = DslRegistry::load_root(&repo()).unwrap();
    Registry::load(&repo().join("problems"), &dsls).unwrap()
}

#[test]
fn problems_spec_prints_the_library_bundle() {
    let out = run(&["problems", "spec"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: SpecBundle = serde_json::from_slice(&out.stdout).unwrap();
    let reg = registry();
    assert_eq!(printed, SpecBundle::of_registry(&reg, None).unwrap());
    assert!(printed.problems.iter().all(|p| p.dir.is_absolute()));
    let one = run(&["problems", "spec", "C01"]);
    let one: SpecBundle = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(
        one.problems
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>(),
        ["C01"]
    );
    let bad = run(&["problems", "spec", "Z99"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Z99"));
}

#[test]
fn redteam_list_prints_the_checked_cases() {
    let out = run(&["redteam", "--list"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Manifest = serde_json::from_slice(&out.stdout).unwrap();
    let path = repo().join("tests/adversarial/manifest.toml");
    let lib = Manifest::load(&path, &registry()).unwrap();
    assert_eq!(printed.cases, lib.cases);
    assert!(printed.root.is_absolute() && printed.root.join(&lib.cases[0].file).is_file());
    let out = run(&["redteam", "--list", "--layer", "static", "--dsl", "tirx"]);
    let some: Manifest = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!some.cases.is_empty() && some.cases.len() < lib.cases.len());
    assert!(some
        .cases
        .iter()
        .all(|c| c.layer.as_str() == "static" && c.dsl.as_str() == "tirx"));
    let cpu = run(&["redteam", "--list", "--cpu-only"]);
    let cpu: Manifest = serde_json::from_slice(&cpu.stdout).unwrap();
    assert!(cpu.cases.iter().all(|c| !c.needs_gpu) && cpu.cases.len() < lib.cases.len());
}
