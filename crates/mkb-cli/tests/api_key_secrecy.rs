//! A planted API key must reach the provider (the stub server sees it) and nothing else: not
//! the store, the artifacts, the judge logs, or mkb's own output at debug level.
//! The provider is a real OpenAI-compatible client talking to a stub server on 127.0.0.1.

mod common;

use common::{files_under, mkb};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const KEY: &str = "sk-mkb-planted-3f9a1c7e5b2d8046";

/// Answer one chat-completions request: write the starter as the kernel, then submit, then
/// (when asked to distill) a skill.
fn respond(body: &str) -> String {
    let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let last = msgs.last().cloned().unwrap_or_default();
    let last_text = last["content"].as_str().unwrap_or("");
    let wrote = msgs.iter().any(|m| m["role"] == "tool");
    let message = if last_text.contains("Distill what you learned") {
        serde_json::json!({"role": "assistant", "content": "---\nname: stub-skill\ndescription: A stub.\n---\nKeep loads wide."})
    } else if !wrote {
        let src = "import cutlass\nimport cutlass.cute as cute\n\n\ndef build(spec):\n    raise NotImplementedError\n";
        serde_json::json!({"role": "assistant", "content": "Writing a first kernel.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "write_kernel", "arguments": serde_json::json!({"source": src}).to_string()}}]})
    } else {
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]})
    };
    serde_json::json!({"id": "x", "object": "chat.completion", "model": "stub-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
    .to_string()
}

fn serve(listener: TcpListener, auth_seen: Arc<Mutex<Vec<String>>>) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let auth_seen = auth_seen.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let mut len = 0usize;
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    let h = h.trim_end().to_string();
                    if h.is_empty() {
                        break;
                    }
                    let lower = h.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("authorization:") {
                        auth_seen.lock().unwrap().push(h[14..].trim().to_string());
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                let resp = respond(&String::from_utf8_lossy(&body));
                let out = format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{resp}", resp.len());
                if stream.write_all(out.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}

#[test]
fn planted_key_is_used_and_never_stored() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let auth_seen = Arc::new(Mutex::new(Vec::new()));
    let seen = auth_seen.clone();
    std::thread::spawn(move || serve(listener, seen));

    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("keytest.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
name = "keytest"
problems = ["A01"]
directions = ["cute->tirx"]
[controls]
placebo = false
repeat_solo = false
[eval]
gpus = "none"
cpu_workers = 1
[[models]]
label = "stub"
[models.provider]
kind = "openai"
model = "stub-model"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = "MKB_TEST_PLANTED_KEY"
max_retries = 0
"#
        ),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let out = mkb()
        .arg("-vv")
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .env("MKB_TEST_PLANTED_KEY", KEY)
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "mkb run failed:\n{stdout}\n{stderr}");
    // The key was really used.
    let auths = auth_seen.lock().unwrap().clone();
    assert!(
        !auths.is_empty() && auths.iter().all(|a| a == &format!("Bearer {KEY}")),
        "{auths:?}"
    );
    // ... and appears nowhere else.
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key leaked into mkb's output"
    );
    let files = files_under(&runs);
    assert!(
        files.iter().any(|f| f.ends_with("mkb.sqlite")),
        "the run wrote a store"
    );
    assert!(
        files.iter().any(|f| f.to_string_lossy().contains("/logs/")),
        "the judges wrote logs"
    );
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let hay = String::from_utf8_lossy(&bytes);
        assert!(!hay.contains(KEY), "the key leaked into {}", f.display());
        assert!(
            !hay.contains("3f9a1c7e5b2d8046"),
            "part of the key leaked into {}",
            f.display()
        );
    }
}
