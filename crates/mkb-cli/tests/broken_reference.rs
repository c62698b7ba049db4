//! A problem whose reference.py does not parse is refused in compile mode too, before any
//! evaluation, with an error naming the file and the line (issue: the registry checks every
//! reference.py in every mode).

mod common;

use std::path::Path;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

#[test]
fn a_reference_with_a_syntax_error_stops_compile_mode_with_file_and_line() {
    let repo = common::repo();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let prob = root.join("problems/A/A01_bias_gelu");
    copy_dir(&repo.join("problems/A/A01_bias_gelu"), &prob);
    for link in ["python", "docs", "tests", "dsls"] {
        std::os::unix::fs::symlink(repo.join(link), root.join(link)).unwrap();
    }
    let eval = |root: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mkb"))
            .arg("--root")
            .arg(root)
            .arg("--python")
            .arg(common::python())
            .args([
                "eval", "A01", "--dsl", "cute", "--mode", "compile", "--gpus", "none",
            ])
            .arg("--file")
            .arg(prob.join("cute/solution.py"))
            .output()
            .unwrap()
    };
    // Control: the intact copy gets past the reference check (it compiles or at least is evaluated).
    let ok = eval(root);
    let ok_err = String::from_utf8_lossy(&ok.stderr);
    assert!(
        !ok_err.contains("reference.py"),
        "the intact reference was refused: {ok_err}"
    );

    let reference = prob.join("reference.py");
    let mut text = std::fs::read_to_string(&reference).unwrap();
    text.push_str("\n\ndef broken(:\n    pass\n");
    let bad_line = 1 + text
        .lines()
        .position(|l| l.starts_with("def broken("))
        .unwrap();
    std::fs::write(&reference, text).unwrap();
    let out = eval(root);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a broken reference.py was accepted");
    assert_ne!(out.status.code(), Some(101), "panicked: {err}");
    assert!(err.contains("reference.py"), "{err}");
    assert!(
        err.contains(&bad_line.to_string()),
        "no line {bad_line} in: {err}"
    );
}
