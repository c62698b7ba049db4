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

/// One request a fake provider received.
pub struct ProviderReq {
    pub body: String,
    /// The `authorization` header's value.
    pub auth: Option<String>,
}

/// What a fake provider answers.
pub struct ProviderResp {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// Wait this long before answering (a provider that never answers: hours).
    pub delay: std::time::Duration,
}

impl ProviderResp {
    pub fn json(body: String) -> ProviderResp {
        ProviderResp {
            status: 200,
            content_type: "application/json",
            body,
            delay: std::time::Duration::ZERO,
        }
    }
}

/// A fake OpenAI-compatible provider on 127.0.0.1 answering every request with `handler`;
/// returns its port. It runs until the test process ends.
pub fn start_provider(
    handler: impl Fn(&ProviderReq) -> ProviderResp + Send + Sync + 'static,
) -> u16 {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handler = std::sync::Arc::new(handler);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let handler = handler.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let (mut len, mut auth) = (0usize, None);
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim_end().to_string();
                        if h.is_empty() {
                            break;
                        }
                        let lower = h.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                        if lower.starts_with("authorization:") {
                            auth = Some(h[14..].trim().to_string());
                        }
                    }
                    let mut body = vec![0u8; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let req = ProviderReq {
                        body: String::from_utf8_lossy(&body).to_string(),
                        auth,
                    };
                    let resp = handler(&req);
                    std::thread::sleep(resp.delay);
                    let out = format!(
                        "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n{}",
                        resp.status,
                        resp.content_type,
                        resp.body.len(),
                        resp.body
                    );
                    if stream.write_all(out.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A scripted agent's answer to one chat-completions request: write the starter as the
/// kernel (with `note` as a comment), then submit, then (when asked to distill) a skill.
/// `note` is also put in the message text.
pub fn agent_answer(body: &str, note: &str) -> String {
    let req: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let last = msgs.last().cloned().unwrap_or_default();
    let last_text = last["content"].as_str().unwrap_or("");
    let wrote = msgs.iter().any(|m| m["role"] == "tool");
    let message = if last_text.contains("Distill what you learned") {
        serde_json::json!({"role": "assistant", "content": format!("---\nname: stub-skill\ndescription: A stub. {note}\n---\nKeep loads wide.")})
    } else if !wrote {
        let src = format!("import cutlass\nimport cutlass.cute as cute\n\n# {note}\n\ndef build(spec):\n    raise NotImplementedError\n");
        serde_json::json!({"role": "assistant", "content": format!("Writing a first kernel. {note}"), "tool_calls": [
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

/// An experiment config for A01 (cute -> tirx, no controls, compile-only) driven by the fake
/// provider on `port`; `extra` is appended to the provider's table.
pub fn stub_config(
    dir: &std::path::Path,
    name: &str,
    port: u16,
    extra: &str,
    max_wall_s: u64,
) -> PathBuf {
    let cfg = format!(
        r#"
name = "{name}"
problems = ["A01"]
directions = ["cute->tirx"]
concurrency = 2
[budget]
max_turns = 10
max_output_tokens = 100000
max_tool_evals = 5
max_wall_s = {max_wall_s}
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
retry_base_s = 0.05
retry_max_s = 0.2
{extra}
"#
    );
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, cfg).unwrap();
    p
}

/// `SELECT COUNT(*) FROM <table>` of a run's store.
pub fn count(run_dir: &std::path::Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(run_dir.join("mkb.sqlite")).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}
