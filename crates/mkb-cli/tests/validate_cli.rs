//! `mkb problems validate` end to end on the planted fixture (python/tests/fixtures/validate:
//! an input that does not matter, a slip the tolerance cannot see): the run fails, naming each
//! check with its number, in the table and in the JSON; the static part alone passes; a problem
//! the registry refuses is reported as its load errors while the others are still validated.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A repository holding only the fixture problem (and what mkb and the evaluator read).
fn repo_with_fixture(tmp: &Path) -> PathBuf {
    let repo = common::repo();
    let root = tmp.join("repo");
    for rel in ["dsls", "docs/dsl", "python/mkb_eval"] {
        copy_dir(&repo.join(rel), &root.join(rel));
    }
    copy_dir(
        &repo.join("python/tests/fixtures/validate/A/A90_planted"),
        &root.join("problems/A/A90_planted"),
    );
    root
}

fn validate(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mkb"))
        .arg("--root")
        .arg(root)
        .arg("--python")
        .arg(common::python())
        .args(["problems", "validate"])
        .args(args)
        .output()
        .unwrap()
}

fn table_row<'a>(stdout: &'a str, check: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(check))
        .unwrap_or_else(|| panic!("no row {check} in:\n{stdout}"));
    line.split_whitespace().collect()
}

#[test]
fn the_planted_faults_fail_the_run_with_their_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_with_fixture(tmp.path());
    let json = tmp.path().join("out/validate.json");
    let md = tmp.path().join("out/validate.md");
    let out = validate(
        &root,
        &[
            "A90",
            "--json",
            json.to_str().unwrap(),
            "--markdown",
            md.to_str().unwrap(),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let text = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    // problem, check, measured, limit..., status
    let z = table_row(&stdout, "influence:z");
    assert_eq!((z[0], z[2]), ("A90", "0"), "{z:?}");
    assert!(z.contains(&"FAIL"), "{z:?}");
    let tiny = table_row(&stdout, "wrong:wrong_tiny_scale");
    let ratio: f64 = tiny[2].parse().unwrap();
    assert!(
        ratio > 0.0 && ratio <= 1.0 && tiny.contains(&"FAIL"),
        "{tiny:?}"
    );
    for ok in [
        "correct:alt_fp64",
        "correct:alt_distributed",
        "wrong:wrong_no_bias",
        "influence:x",
        "deterministic",
        "ideal_time",
        "prompt_parity",
    ] {
        assert!(table_row(&stdout, ok).contains(&"pass"), "{ok}: {text}");
    }
    assert!(
        stdout.contains("2 failed") && stdout.contains("failing problems: A90"),
        "{text}"
    );

    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["summary"]["failed"], 2, "{doc}");
    let rows = doc["problems"][0]["rows"].as_array().unwrap();
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r["status"] == "fail")
        .map(|r| r["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["influence:z", "wrong:wrong_tiny_scale"], "{doc}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.contains("| A90 | influence:z | 0 |"), "{md}");
}

#[test]
fn waivers_static_only_and_refused_problems() {
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_with_fixture(tmp.path());
    let toml = root.join("problems/A/A90_planted/problem.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    // The static part passes on its own.
    let out = validate(&root, &["--static-only"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Waiving both planted faults makes the whole run pass.
    std::fs::write(
        &toml,
        format!("{text}waive = {{ \"influence:z\" = \"planted\", wrong = \"planted\" }}\n"),
    )
    .unwrap();
    let out = validate(&root, &["--failures-only"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{stdout}");
    assert!(
        table_row(&stdout, "influence:z").contains(&"waived"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("correct:alt_fp64"),
        "only rows not passed: {stdout}"
    );
    // A second problem the registry refuses (benchmark shape under the size rule) is reported
    // as its load errors; the first one is still validated.
    let small = root.join("problems/A/A91_small");
    copy_dir(&root.join("problems/A/A90_planted"), &small);
    std::fs::write(
        small.join("problem.toml"),
        text.replace("id = \"A90\"", "id = \"A91\"")
            .replace("slug = \"planted\"", "slug = \"small\"")
            .replace("T = 16384, H = 4096", "T = 64, H = 256"),
    )
    .unwrap();
    let out = validate(&root, &["--static-only"]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let load = table_row(&stdout, "load");
    assert_eq!(load[0], "A91", "{load:?}");
    assert!(
        stdout.contains("size rule") && stdout.contains("ideal_time"),
        "{stdout}"
    );
    assert!(table_row(&stdout, "prompt_parity")[0] == "A90", "{stdout}");
}
