//! Machine faults are not verdicts, end to end: `mkb run` with a fake judge (a small Python
//! script speaking the judge protocol) whose final evaluations fail for infrastructure
//! reasons. A `judge_error` on every try leaves the final evaluations pending (not stored,
//! shown by `mkb status`, excluded by `mkb analyze`, retried by the next run); a
//! `runner_killed` on every try is the candidate's own crash (`crashed` / `process_died`).

mod common;

use common::{agent_answer, count, start_provider, stub_config, ProviderResp};
use std::path::{Path, PathBuf};

const FAKE_JUDGE: &str = r#"
import json, os, sys
log = os.environ["MKB_EVAL_FAKE_LOG"]
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    req = json.loads(line)
    rid, op = req.get("id"), req.get("op")
    if op == "hello":
        send({"v": 2, "id": rid, "ok": True, "pid": os.getpid(), "python": "fake", "gpu": None,
              "can_run": False, "sandbox": {"unsafe": False},
              "dsls": {"cute": {"available": True}, "tirx": {"available": True}}})
    elif op == "evaluate":
        reports = []
        for c in req["candidates"]:
            src = open(c["path"]).read()
            if "FAKE_RUNNER_KILLED" in src:
                verdict, reason = "crashed", "runner_killed"
            elif "FAKE_JUDGE_ERROR" in src:
                verdict, reason = "crashed", "judge_error"
            else:
                verdict, reason = "correct", None
            with open(log, "a") as f:
                f.write(c["key"] + " " + str(reason) + "\n")
            # Protocol 2: the report is the template mkb sent, filled in.
            reports.append({"key": c["key"], "report": {**req["report"], "verdict": verdict,
                            "mode": req["mode"], "reason": reason, "message": "fake"}})
        send({"v": 2, "id": rid, "ok": True, "reports": reports, "session": {}})
    elif op == "shutdown":
        send({"v": 2, "id": rid, "ok": True})
        break
"#;

/// A `python` that runs the fake judge for `-m mkb_eval.judge` and the real interpreter
/// otherwise (the reference.py check).
fn fake_python(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let judge = dir.join("fake_judge.py");
    std::fs::write(&judge, FAKE_JUDGE).unwrap();
    let py = dir.join("python");
    std::fs::write(
        &py,
        format!(
            "#!/bin/sh\nif [ \"$1\" = \"-m\" ]; then exec {real} {judge}; fi\nexec {real} \"$@\"\n",
            real = common::python().display(),
            judge = judge.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&py, std::fs::Permissions::from_mode(0o755)).unwrap();
    py
}

fn mkb(py: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mkb"));
    c.arg("--root").arg(common::repo()).arg("--python").arg(py);
    c
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scenario(
    note: &'static str,
    name: &str,
) -> (
    tempfile::TempDir,
    PathBuf,
    std::process::Output,
    Vec<String>,
    PathBuf,
) {
    let port = start_provider(move |req| ProviderResp::json(agent_answer(&req.body, note)));
    let tmp = tempfile::tempdir().unwrap();
    let py = fake_python(tmp.path());
    let log = tmp.path().join("evals.log");
    let cfg = stub_config(tmp.path(), name, port, "", 600);
    let runs = tmp.path().join("runs");
    let out = mkb(&py)
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .env("MKB_EVAL_FAKE_LOG", &log)
        .output()
        .unwrap();
    let evals: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect();
    let run_dir = runs.join(name);
    (tmp, py, out, evals, run_dir)
}

#[test]
fn a_persistent_infrastructure_failure_is_not_evaluated_never_a_score() {
    let (_tmp, py, out, evals, run_dir) = scenario("FAKE_JUDGE_ERROR", "infra");
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "incomplete: {t}");
    assert!(t.contains("not evaluated (judge_error)"), "{t}");
    assert_eq!(count(&run_dir, "attempts"), 3);
    assert_eq!(
        count(&run_dir, "final_evals"),
        0,
        "nothing stored as a verdict"
    );
    // Three candidates, each tried three times.
    assert_eq!(evals.len(), 9, "{evals:?}");
    assert!(evals.iter().all(|e| e.ends_with(" judge_error")));

    let status = mkb(&py).arg("status").arg(&run_dir).output().unwrap();
    let st = text(&status);
    assert!(status.status.success(), "{st}");
    assert!(st.contains("3 final evaluation(s) pending"), "{st}");
    // The stub provider's model: its shared rate-limit counters reach `mkb status`.
    let line = st
        .lines()
        .find(|l| l.starts_with("provider limits, "))
        .unwrap_or_else(|| panic!("no provider-limits line: {st}"));
    assert!(!line.contains(": 0 requests"), "{line}");
    // The evaluator queue's record reaches it too: the GPU-less queue took the nine tries.
    let q = st
        .lines()
        .find(|l| l.starts_with("evaluator queue, cpu: "))
        .unwrap_or_else(|| panic!("no evaluator-queue line: {st}"));
    assert!(!q.contains(": 0 requests"), "{q}");
    let analyze = mkb(&py).arg("analyze").arg(&run_dir).output().unwrap();
    assert!(!analyze.status.success(), "no attempt has a result yet");
    assert!(
        text(&analyze).contains("no finished attempt"),
        "{}",
        text(&analyze)
    );
}

#[test]
fn a_runner_killed_on_every_try_is_the_candidates_crash() {
    let (_tmp, _py, out, evals, run_dir) = scenario("FAKE_RUNNER_KILLED", "killed");
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert_eq!(evals.len(), 9, "{evals:?}");
    let conn = rusqlite::Connection::open(run_dir.join("mkb.sqlite")).unwrap();
    let rows: Vec<(String, String)> = conn
        .prepare("SELECT verdict, reason FROM final_evals")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 3);
    assert!(
        rows.iter()
            .all(|(v, r)| v == "crashed" && r == "process_died"),
        "{rows:?}"
    );
}
