//! Helpers of the end-to-end tests: the repository root, the evaluator's Python, and a check
//! that the Python side is installed (these tests need it and fail loudly without it).

#![allow(dead_code)]

use std::path::PathBuf;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The evaluator's interpreter: $MKB_PYTHON, else the repository's .venv.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MKB_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "these end-to-end tests need the evaluator's Python: run scripts/setup-python.sh (or set MKB_PYTHON)"
    );
    venv
}

pub fn mkb() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mkb"));
    c.arg("--root").arg(repo()).arg("--python").arg(python());
    c
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
    }
    out
}
