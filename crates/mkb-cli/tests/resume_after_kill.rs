//! Kill `mkb run` at random points (SIGKILL) and re-run the same command: the store must end
//! complete, with every planned attempt recorded exactly once, every recorded attempt's
//! artifacts present, and no finished attempt ever redone (its trajectory never rewritten).
//! Uses the repository's replay recordings for A01 and the real evaluator (compile-only).

mod common;

use common::{files_under, mkb};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

fn config(dir: &Path) -> std::path::PathBuf {
    let cfg = format!(
        r#"
name = "killtest"
problems = ["A01"]
concurrency = 2

[controls]
placebo = false
repeat_solo = true

[eval]
gpus = "none"
cpu_workers = 2

[[models]]
label = "replay-demo"
[models.provider]
kind = "replay"
dir = "{}"
"#,
        common::repo().join("examples/replay").display()
    );
    let p = dir.join("killtest.toml");
    std::fs::write(&p, cfg).unwrap();
    p
}

/// (attempt id -> sha256 of its trajectory) for the recorded attempts, after integrity checks.
fn check_store(run_dir: &Path) -> BTreeMap<String, String> {
    use sha2::{Digest, Sha256};
    let db = run_dir.join("mkb.sqlite");
    if !db.exists() {
        return BTreeMap::new();
    }
    let conn = Connection::open(&db).unwrap();
    let total: i64 = conn
        .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))
        .unwrap();
    let distinct: i64 = conn
        .query_row("SELECT COUNT(*) FROM (SELECT DISTINCT model, problem, dsl, condition, run FROM attempts)", [], |r| r.get(0))
        .unwrap();
    assert_eq!(total, distinct, "an attempt is recorded twice");
    let mut out = BTreeMap::new();
    let mut stmt = conn
        .prepare("SELECT id, trajectory, final_kernel, condition FROM attempts")
        .unwrap();
    let rows: Vec<(String, String, Option<String>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (id, traj, kernel, cond) in rows {
        let t = run_dir.join(&traj);
        let bytes = std::fs::read(&t)
            .unwrap_or_else(|_| panic!("{id}: its trajectory {traj} is missing (lost)"));
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("\"type\":\"end\""),
            "{id}: the trajectory has no end event"
        );
        if let Some(k) = kernel {
            assert!(
                run_dir.join(&k).is_file(),
                "{id}: its final kernel {k} is missing (lost)"
            );
        }
        let skills: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM skills WHERE source_attempt = ?1",
                [&id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            skills,
            i64::from(cond == "solo"),
            "{id}: a solo attempt has exactly one skill, others none"
        );
        out.insert(id, hex::encode(Sha256::digest(&bytes)));
    }
    // Every skill's file exists.
    let mut stmt = conn.prepare("SELECT path FROM skills").unwrap();
    for p in stmt.query_map([], |r| r.get::<_, String>(0)).unwrap() {
        let p = p.unwrap();
        assert!(run_dir.join(&p).is_file(), "skill file {p} is missing");
    }
    out
}

#[test]
// Every child is reaped: by try_wait when it exits, by wait after the kill.
#[allow(clippy::zombie_processes)]
fn killed_runs_resume_without_loss_or_duplicates() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = config(tmp.path());
    let runs = tmp.path().join("runs");
    let run_dir = runs.join("killtest");
    // Deterministic "random" kill points (seconds after start), spread over the run.
    let seed = std::env::var("MKB_KILL_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(20261129);
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut kills = 0;
    for round in 0..4 {
        let delay = Duration::from_millis(3000 + next() % 20000);
        let mut child = mkb()
            .args(["run"])
            .arg(&cfg)
            .arg("--runs-dir")
            .arg(&runs)
            .arg("--no-progress")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let mut finished = false;
        while start.elapsed() < delay {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "round {round}: mkb run failed before the kill: {status}"
                );
                finished = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !finished {
            child.kill().unwrap(); // SIGKILL: no cleanup at all
            child.wait().unwrap();
            kills += 1;
        }
        let now = check_store(&run_dir);
        for (id, h) in &seen {
            assert_eq!(
                now.get(id),
                Some(h),
                "round {round}: finished attempt {id} was lost or redone"
            );
        }
        seen = now;
        if finished {
            break;
        }
    }
    // Finish the run without interruption.
    let out = mkb()
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "final run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("complete"), "{stdout}");
    let now = check_store(&run_dir);
    for (id, h) in &seen {
        assert_eq!(
            now.get(id),
            Some(h),
            "finished attempt {id} was lost or redone by the final run"
        );
    }
    // The plan: solo x2, conditioned x2, repeat_solo x2 for one problem and one model.
    assert_eq!(
        now.len(),
        6,
        "attempts: {:?}",
        now.keys().collect::<Vec<_>>()
    );
    let conn = Connection::open(run_dir.join("mkb.sqlite")).unwrap();
    let finals: i64 = conn
        .query_row("SELECT COUNT(*) FROM final_evals", [], |r| r.get(0))
        .unwrap();
    assert_eq!(finals, 6);
    let evals: i64 = conn
        .query_row("SELECT COUNT(*) FROM tool_evals", [], |r| r.get(0))
        .unwrap();
    assert!(evals > 0, "the recorded conversations call the evaluator");
    // No stray temp files from interrupted writes remain beside recorded artifacts.
    assert!(files_under(&run_dir)
        .iter()
        .all(|p| !p.to_string_lossy().ends_with(".tmp")));
    eprintln!("kills: {kills}");
}
