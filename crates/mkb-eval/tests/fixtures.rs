//! The JSON that mkb hands the Python tools, committed as fixtures for the Python tests
//! (python/tests/fixtures/rust/): `mkb problems spec` (the specs of the problems the tests use
//! and the report template) and `mkb redteam --list` (the red-team cases). This test regenerates both from the
//! repository and fails when a committed fixture differs; `MKB_BLESS=1 cargo test -p mkb-eval
//! --test fixtures` rewrites them.

use mkb_core::{DslRegistry, Registry};
use mkb_eval::redteam::Manifest;
use mkb_eval::SpecBundle;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn registry() -> Registry {
    let dsls = DslRegistry::load_root(&repo()).expect("dsls/");
    Registry::load(&repo().join("problems"), &dsls).expect("problems/")
}

/// Compare `fresh` with the committed `path`, or write it with MKB_BLESS=1.
fn check(path: &Path, fresh: String) {
    let fresh = fresh + "\n";
    if std::env::var_os("MKB_BLESS").is_some() {
        std::fs::write(path, &fresh).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is out of date with the repository: run `MKB_BLESS=1 cargo test -p mkb-eval --test fixtures`\n(first difference at line {})",
        path.display(),
        committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "end".to_string(), |i| (i + 1).to_string())
    );
}

/// The problems the Python tests use: the three they are written around and every problem a
/// red-team case names (a new problem elsewhere does not touch the fixture).
fn fixture_problems(reg: &Registry) -> Vec<&mkb_core::Problem> {
    let cases = Manifest::load(&repo().join("tests/adversarial/manifest.toml"), reg).unwrap();
    let mut ids: Vec<String> = ["A01", "C01", "D01"].map(String::from).to_vec();
    ids.extend(cases.cases.into_iter().map(|c| c.problem_id));
    reg.select(&ids).unwrap()
}

#[test]
fn the_spec_bundle_fixture_is_current() {
    let reg = registry();
    let bundle = SpecBundle::new(fixture_problems(&reg), Some(&repo())).unwrap();
    assert!(bundle.problems.len() >= 3);
    assert!(bundle.problems.iter().all(|p| p.dir.is_relative()));
    check(
        &repo().join("python/tests/fixtures/rust/spec-bundle.json"),
        serde_json::to_string_pretty(&bundle).unwrap(),
    );
}

#[test]
fn the_redteam_fixture_is_current() {
    let m = Manifest::load(&repo().join("tests/adversarial/manifest.toml"), &registry())
        .unwrap()
        .relative_to(&repo());
    assert_eq!(m.root, PathBuf::from("tests/adversarial"));
    check(
        &repo().join("python/tests/fixtures/rust/redteam-cases.json"),
        serde_json::to_string_pretty(&m).unwrap(),
    );
}
