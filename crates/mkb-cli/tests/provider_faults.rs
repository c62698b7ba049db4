//! Provider faults end to end (`mkb run` against a fake provider on 127.0.0.1, real evaluator
//! in compile mode): a refused key stops the run before anything is stored; answers that are
//! not the API's (HTML 502 pages with status 200, empty choices, bad JSON) are retried and,
//! while they persist, leave the attempts pending for the next run, which completes them; a
//! provider that never answers does not hold an attempt past its wall budget; a key echoed by
//! the provider is in no artifact; a second `mkb run` on a busy run folder is refused.

mod common;

use common::{agent_answer, count, files_under, mkb, start_provider, stub_config, ProviderResp};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "sk-mkb-echoed-7c41d09e2b5a";
const KEY_VAR: &str = "MKB_TEST_FAULT_KEY";

fn run(cfg: &std::path::Path, runs: &std::path::Path) -> std::process::Output {
    mkb()
        .arg("run")
        .arg(cfg)
        .arg("--runs-dir")
        .arg(runs)
        .arg("--no-progress")
        .env(KEY_VAR, KEY)
        .output()
        .unwrap()
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_refused_key_stops_the_run_before_anything_is_stored() {
    let port = start_provider(|_| ProviderResp {
        status: 401,
        content_type: "application/json",
        body: r#"{"error": {"message": "Incorrect API key provided"}}"#.into(),
        delay: Duration::ZERO,
    });
    let tmp = tempfile::tempdir().unwrap();
    let cfg = stub_config(
        tmp.path(),
        "fatal",
        port,
        &format!("api_key_env = \"{KEY_VAR}\""),
        600,
    );
    let runs = tmp.path().join("runs");
    let out = run(&cfg, &runs);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    assert!(
        t.contains("HTTP 401") && t.contains("no attempt was stored"),
        "{t}"
    );
    assert!(!t.contains(KEY), "{t}");
    let run_dir = runs.join("fatal");
    assert_eq!(count(&run_dir, "attempts"), 0);
    assert_eq!(count(&run_dir, "final_evals"), 0);
}

#[test]
fn transient_faults_leave_attempts_pending_and_a_rerun_completes_them() {
    let healthy = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (h, c) = (healthy.clone(), calls.clone());
    let port = start_provider(move |req| {
        let n = c.fetch_add(1, Ordering::SeqCst);
        if h.load(Ordering::SeqCst) {
            return ProviderResp::json(agent_answer(&req.body, ""));
        }
        match n % 3 {
            0 => ProviderResp {
                content_type: "text/html",
                ..ProviderResp::json("<html><h1>502 Bad Gateway</h1></html>".into())
            },
            1 => ProviderResp::json(r#"{"id": "x", "choices": []}"#.into()),
            _ => ProviderResp::json("{\"choices\": [ oops".into()),
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let cfg = stub_config(tmp.path(), "flaky", port, "max_retries = 2", 600);
    let runs = tmp.path().join("runs");
    let out = run(&cfg, &runs);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "incomplete, not complete: {t}");
    assert!(t.contains("malformed response"), "{t}");
    assert!(calls.load(Ordering::SeqCst) >= 6, "every fault was retried");
    let run_dir = runs.join("flaky");
    assert_eq!(
        count(&run_dir, "attempts"),
        0,
        "a provider fault is not an attempt"
    );
    // The analysis has nothing to count.
    let a = mkb().arg("analyze").arg(&run_dir).output().unwrap();
    assert!(!a.status.success());
    assert!(text(&a).contains("no finished attempt"), "{}", text(&a));

    // The provider recovers: the same command does everything that was left.
    healthy.store(true, Ordering::SeqCst);
    let out = run(&cfg, &runs);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("complete"), "{t}");
    assert_eq!(count(&run_dir, "attempts"), 3);
    assert_eq!(count(&run_dir, "final_evals"), 3);
}

#[test]
fn a_provider_that_never_answers_does_not_hold_an_attempt_past_its_budget() {
    let port = start_provider(|req| ProviderResp {
        delay: Duration::from_secs(3600),
        ..ProviderResp::json(agent_answer(&req.body, ""))
    });
    let tmp = tempfile::tempdir().unwrap();
    // A 6 s budget (the conversation gets 5.4 s, the distillation the rest).
    let cfg = stub_config(tmp.path(), "mute", port, "", 6);
    let runs = tmp.path().join("runs");
    let t0 = Instant::now();
    let out = run(&cfg, &runs);
    let took = t0.elapsed();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(4), "{t}");
    assert!(t.contains("deadline exceeded"), "{t}");
    let run_dir = runs.join("mute");
    assert_eq!(
        count(&run_dir, "attempts"),
        0,
        "no answer is not an attempt"
    );
    // Each solo attempt ended at its budget: its trajectory's last event is at most 6 s in.
    let trajs: Vec<_> = files_under(&run_dir)
        .into_iter()
        .filter(|f| f.ends_with("trajectory.jsonl"))
        .collect();
    assert_eq!(trajs.len(), 2, "{trajs:?}");
    for tr in trajs {
        let body = std::fs::read_to_string(&tr).unwrap();
        let last: serde_json::Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "provider_error", "{body}");
        let at = last["t"].as_f64().unwrap();
        assert!((5.0..6.5).contains(&at), "ended at {at} s: {body}");
    }
    assert!(took < Duration::from_secs(120), "{took:?}");
}

#[test]
fn an_echoed_key_reaches_no_artifact() {
    let port = start_provider(|req| {
        let echo = format!(
            "Your request headers: authorization: {}",
            req.auth.clone().unwrap_or_default()
        );
        ProviderResp::json(agent_answer(&req.body, &echo))
    });
    let tmp = tempfile::tempdir().unwrap();
    let rec = tmp.path().join("recordings");
    let cfg = stub_config(
        tmp.path(),
        "echo",
        port,
        &format!(
            "api_key_env = \"{KEY_VAR}\"\nrecord_dir = \"{}\"",
            rec.display()
        ),
        600,
    );
    let runs = tmp.path().join("runs");
    let out = mkb()
        .arg("-vv")
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .env(KEY_VAR, KEY)
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(!t.contains(KEY), "the key leaked into mkb's output");
    let mut files = files_under(&runs);
    files.extend(files_under(&rec));
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    for want in [
        "mkb.sqlite",
        "trajectory.jsonl",
        "/logs/",
        "recordings/stub/",
        "SKILL.md",
    ] {
        assert!(
            names.iter().any(|n| n.contains(want)),
            "no {want} in {names:?}"
        );
    }
    let mut redacted = 0;
    for f in files {
        let hay = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).to_string();
        assert!(!hay.contains(KEY), "the key leaked into {}", f.display());
        assert!(
            !hay.contains(&KEY[8..]),
            "part of the key leaked into {}",
            f.display()
        );
        redacted += hay.matches("Bearer [REDACTED]").count();
    }
    assert!(redacted > 0, "the echo was there, scrubbed");
}

#[test]
#[allow(clippy::zombie_processes)] // the first run is killed and reaped below
fn a_second_run_on_a_busy_folder_is_refused_naming_the_holder() {
    // A slow provider keeps the first run busy.
    let port = start_provider(|req| ProviderResp {
        delay: Duration::from_millis(1500),
        ..ProviderResp::json(agent_answer(&req.body, ""))
    });
    let tmp = tempfile::tempdir().unwrap();
    let cfg = stub_config(tmp.path(), "busy", port, "", 600);
    let runs = tmp.path().join("runs");
    let mut first = mkb()
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = runs.join("busy/mkb.lock");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.starts_with("pid ")) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the first run never took the lock"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = run(&cfg, &runs);
    let t = text(&second);
    let _ = first.kill();
    let _ = first.wait();
    assert_eq!(second.status.code(), Some(2), "{t}");
    assert!(t.contains("in use by another `mkb run`"), "{t}");
    assert!(t.contains(&format!("pid {} on host", first.id())), "{t}");
    assert!(t.contains(" since 20"), "{t}");
}
