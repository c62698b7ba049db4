//! Provenance, re-scoring, budgets and cost end to end (real evaluator, compile mode):
//! - a run records mkb's version and commit and the evaluator's versions, each final
//!   evaluation the kernel's sha256 and the problem's hash, and each attempt its time queued
//!   for the evaluator;
//! - `mkb rescore` re-evaluates every final kernel into a new named set that reproduces the
//!   run's verdicts, keeps the original, refuses a changed kernel, and `analyze --eval-set`
//!   reads either;
//! - an input-token cap ends attempts, and prices give costs per attempt and condition.

mod common;

use common::{mkb, start_provider, stub_config, ProviderResp};
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::Path;

/// (attempt, kernel sha256, problem hash, final kernel, wall s, time queued s).
type FinalRow = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    f64,
    Option<f64>,
);

fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn verdicts(db: &Path, sql: &str) -> BTreeMap<String, (String, String, Option<String>)> {
    let conn = Connection::open(db).unwrap();
    let mut st = conn.prepare(sql).unwrap();
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (r.get(1)?, r.get(2)?, r.get::<_, Option<String>>(3)?),
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows
}

#[test]
fn rescore_reproduces_the_replay_run_and_records_provenance() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = format!(
        r#"
name = "rescored"
problems = ["A01"]
concurrency = 2

[controls]
placebo = false
repeat_solo = false

[eval]
gpus = "none"
cpu_workers = 1

[[models]]
label = "replay-demo"
[models.provider]
kind = "replay"
dir = "{}"
"#,
        common::repo().join("examples/replay").display()
    );
    let cfg_path = tmp.path().join("rescored.toml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let runs = tmp.path().join("runs");
    let out = mkb()
        .arg("run")
        .arg(&cfg_path)
        .arg("--runs-dir")
        .arg(&runs)
        .args(["--gpus", "none", "--no-progress"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run_dir = runs.join("rescored");
    let db = run_dir.join("mkb.sqlite");

    // Provenance of the run.
    let conn = Connection::open(&db).unwrap();
    let prov: String = conn
        .query_row("SELECT value FROM meta WHERE key = 'provenance'", [], |r| {
            r.get(0)
        })
        .unwrap();
    let prov: serde_json::Value = serde_json::from_str(&prov).unwrap();
    assert_eq!(prov["mkb_version"], env!("CARGO_PKG_VERSION"));
    let commit = prov["git_commit"].as_str().unwrap();
    assert!(commit == "unknown" || commit.len() == 40, "{commit}");
    assert!(!prov["judge"]["python"].as_str().unwrap_or("").is_empty());
    assert!(
        prov["judge"]["dsls"]["cute"]["version"].is_string(),
        "{prov}"
    );
    // Hashes of every evaluated kernel and its problem; time queued of every attempt.
    let mut st = conn
        .prepare("SELECT f.attempt_id, f.kernel_sha256, f.problem_hash, a.final_kernel, a.wall_s, a.eval_wait_s FROM final_evals f JOIN attempts a ON a.id = f.attempt_id")
        .unwrap();
    let rows: Vec<FinalRow> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 4, "solo and conditioned, both DSLs");
    for (id, ksha, phash, kernel, wall, wait) in &rows {
        let kernel = kernel
            .as_ref()
            .expect("every replay attempt writes a kernel");
        use sha2::Digest;
        let bytes = std::fs::read(run_dir.join(kernel)).unwrap();
        assert_eq!(
            ksha.as_deref(),
            Some(hex::encode(sha2::Sha256::digest(&bytes)).as_str()),
            "{id}"
        );
        assert_eq!(phash.as_ref().map(String::len), Some(64), "{id}");
        let wait = wait.expect("queueing recorded");
        assert!(wait >= 0.0 && wait <= *wall, "{id}: {wait} of {wall}");
    }
    drop(st);
    drop(conn);

    // Rescore: a new set with the same verdicts; the original kept.
    let before = verdicts(
        &db,
        "SELECT attempt_id, mode, verdict, kernel_sha256 FROM final_evals",
    );
    let out = mkb()
        .arg("rescore")
        .arg(&run_dir)
        .args(["--gpus", "none", "--name", "again"])
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("4 of 4") && t.contains("complete"), "{t}");
    let again = verdicts(
        &db,
        "SELECT attempt_id, mode, verdict, kernel_sha256 FROM set_evals WHERE eval_set = 'again'",
    );
    assert_eq!(again, before, "the rescore reproduces the run's verdicts");
    assert_eq!(
        verdicts(
            &db,
            "SELECT attempt_id, mode, verdict, kernel_sha256 FROM final_evals"
        ),
        before,
        "the original is kept"
    );
    // Again with the same name: nothing left to do.
    let out = mkb()
        .arg("rescore")
        .arg(&run_dir)
        .args(["--gpus", "none", "--name", "again"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("0 kernel evaluation(s) new, 4 already there"));

    // The analysis reads either set, and names it; an unknown set is an error.
    for set in ["original", "again"] {
        let out = mkb()
            .arg("analyze")
            .arg(&run_dir)
            .args(["--json", "--resamples", "0", "--eval-set", set])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(a["eval_set"], set);
        assert_eq!(a["rows"], 4);
        let p = &a["provenance"];
        if set == "original" {
            assert_eq!(p["mkb_version"], env!("CARGO_PKG_VERSION"));
        } else {
            assert_eq!(p["eval_set"]["name"], "again");
            assert_eq!(p["run"]["mkb_version"], env!("CARGO_PKG_VERSION"));
        }
        // Compile mode: one timing session, so the fixed tie band, and the report says so.
        assert_eq!(a["tie_band"]["measured"], 0);
        assert!(a["tie_band"]["statement"]
            .as_str()
            .unwrap()
            .contains("fixed 3%"));
    }
    let out = mkb()
        .arg("analyze")
        .arg(&run_dir)
        .args(["--eval-set", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("no evaluation set \"nope\"") && text(&out).contains("again"),
        "{}",
        text(&out)
    );
    let html = tmp.path().join("r.html");
    let out = mkb()
        .arg("report")
        .arg(&run_dir)
        .args(["--resamples", "0", "--eval-set", "again", "-o"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("evaluation set: again") && page.contains("id=\"budgets\""));

    // A kernel changed after the run: the rescore refuses rather than score another kernel.
    let (_, _, _, kernel, _, _) = &rows[0];
    let k = run_dir.join(kernel.as_ref().unwrap());
    let mut src = std::fs::read_to_string(&k).unwrap();
    src.push_str("\n# edited\n");
    std::fs::write(&k, src).unwrap();
    let out = mkb()
        .arg("rescore")
        .arg(&run_dir)
        .args(["--gpus", "none", "--name", "third"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("changed since the run evaluated them"));
}

#[test]
fn an_input_token_cap_ends_attempts_and_prices_give_costs() {
    // Every model call costs 1,000 prompt tokens and asks for the brief (no evaluation); the
    // distillation answers with a skill.
    let port = start_provider(|req| {
        let body: serde_json::Value = serde_json::from_str(&req.body).unwrap_or_default();
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last().cloned())
            .unwrap_or_default();
        let message = if last["content"]
            .as_str()
            .unwrap_or("")
            .contains("Distill what you learned")
        {
            serde_json::json!({"role": "assistant", "content": "---\nname: s\ndescription: d\n---\nKeep loads wide."})
        } else {
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read_brief", "arguments": "{}"}}]})
        };
        ProviderResp::json(
            serde_json::json!({"id": "x", "object": "chat.completion", "model": "stub-model",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 20}})
            .to_string(),
        )
    });
    let tmp = tempfile::tempdir().unwrap();
    let cfg = stub_config(
        tmp.path(),
        "capped",
        port,
        "[models.price]\ninput_per_mtok = 2.0\noutput_per_mtok = 10.0",
        600,
    );
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replace(
        "max_wall_s = 600",
        "max_wall_s = 600\nmax_input_tokens = 2500",
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    let runs = tmp.path().join("runs");
    let out = mkb()
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let run_dir = runs.join("capped");
    let conn = Connection::open(run_dir.join("mkb.sqlite")).unwrap();
    let mut st = conn
        .prepare("SELECT end_reason, turns, input_tokens FROM attempts")
        .unwrap();
    let rows: Vec<(String, u32, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        // 1,000 + 1,000 + 1,000 >= 2,500: no fourth call.
        assert_eq!(r, &("max_input_tokens".to_string(), 3, 3000));
    }
    let out = mkb()
        .arg("analyze")
        .arg(&run_dir)
        .args(["--json", "--resamples", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // 3,000 input tokens at $2/M and 60 output tokens at $10/M per attempt.
    let per = 3000.0 * 2.0 / 1e6 + 60.0 * 10.0 / 1e6;
    let total = a["costs"]["total_usd"].as_f64().unwrap();
    assert!((total - 3.0 * per).abs() < 1e-12, "{total}");
    let solo = a["costs"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["condition"] == "solo")
        .unwrap()
        .clone();
    assert_eq!(solo["attempts"], 2);
    assert!((solo["mean_usd"].as_f64().unwrap() - per).abs() < 1e-12);
    // The budget check knows the caps; every attempt ended on a limit, alike in every
    // condition, so budgets were matched.
    assert_eq!(a["budgets"]["caps"]["max_input_tokens"], 2500);
    for c in a["budgets"]["conditions"].as_array().unwrap() {
        assert_eq!(c["limit_share"], 1.0, "{c}");
        assert_eq!(c["matched"], true, "{c}");
        assert_eq!(c["max_input_tokens"], 3000);
    }
    let out = mkb()
        .arg("analyze")
        .arg(&run_dir)
        .args(["--resamples", "0"])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("Budgets matched in practice") && t.contains("== Cost"),
        "{t}"
    );
}
