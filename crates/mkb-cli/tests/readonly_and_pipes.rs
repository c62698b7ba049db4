//! Read-only commands never write: `mkb status` and `mkb analyze` on an empty, zero-byte or
//! corrupt store fail with a clear error naming the file and leave it byte for byte as it was
//! (no schema created, no journal left). A closed stdout (`mkb ... | head`) is a quiet exit,
//! never a panic (exit 101).

mod common;

use common::mkb;
use std::process::Stdio;

#[test]
fn damaged_stores_are_named_and_left_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        ("zero", Vec::new(), "0 bytes"),
        (
            "corrupt",
            b"SQLite format 3\0 but then garbage garbage garbage".repeat(40),
            "not a readable run store",
        ),
        (
            "text",
            b"hello, I am not a database\n".to_vec(),
            "not a readable run store",
        ),
    ];
    for (name, bytes, expect) in cases {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("mkb.sqlite");
        std::fs::write(&db, &bytes).unwrap();
        for cmd in ["status", "analyze"] {
            let out = mkb().arg(cmd).arg(&dir).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {err}");
            assert!(
                err.contains(&db.display().to_string()),
                "{cmd} {name}: {err}"
            );
            assert!(err.contains(expect), "{cmd} {name}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert_eq!(
                std::fs::read(&db).unwrap(),
                bytes,
                "{cmd} {name}: the file changed"
            );
            let mut left: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                .collect();
            left.sort();
            assert_eq!(
                left,
                vec!["mkb.sqlite".to_string()],
                "{cmd} {name}: files appeared"
            );
        }
    }
    // A folder with no store at all: nothing is created.
    let empty = tmp.path().join("nothing");
    std::fs::create_dir_all(&empty).unwrap();
    let out = mkb().arg("status").arg(&empty).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run store"));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// Runs `cmd` with its stdout closed before it prints; returns (exit code, stderr).
fn with_closed_stdout(cmd: &mut std::process::Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // `| head -1` after it has read enough: the read end is gone
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_closed_stdout_is_a_quiet_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let sim = mkb()
        .args([
            "simulate",
            "--name",
            "pipe",
            "--problems",
            "6",
            "--runs",
            "2",
            "--runs-dir",
        ])
        .arg(&runs)
        .output()
        .unwrap();
    assert!(
        sim.status.success(),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let run_dir = runs.join("pipe");
    let mut cmds = vec![
        {
            let mut c = mkb();
            c.arg("analyze").arg(&run_dir).args(["--resamples", "2000"]);
            c
        },
        {
            let mut c = mkb();
            c.arg("analyze").arg(&run_dir).arg("--json");
            c
        },
        {
            let mut c = mkb();
            c.args(["problems", "list"]);
            c
        },
    ];
    for c in &mut cmds {
        let what = format!("{c:?}");
        let (code, err) = with_closed_stdout(c);
        assert_ne!(code, Some(101), "{what}: {err}");
        assert_eq!(code, Some(0), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
    }
}
