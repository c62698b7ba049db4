//! The provider layer's part of "an API key planted in the environment appears nowhere": a
//! key with a random suffix is put in a real environment variable (in its own test binary,
//! before any thread starts), then it must reach the stub server's auth headers and appear in
//! none of: Debug forms, error texts, logs captured at TRACE level, recorded files.

#[path = "../src/provider/stub.rs"]
mod stub;

use mkb_agent::provider::{
    ChatRequest, ConversationKey, Message, Provider, ProviderConfig, ProviderKind, ToolSpec,
};
use mkb_core::{Condition, Dsl};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use stub::{StubReply, StubServer};

#[derive(Clone)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn files_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.push_str(&files_text(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}

#[test]
fn planted_key_reaches_the_server_and_nowhere_else() {
    let secret = format!("sk-planted-{:032x}", rand_suffix());
    let var = "MKB_PROVIDER_SECRETS_TEST_KEY";
    std::env::set_var(var, &secret);

    let logs = SharedBuf(Arc::new(Mutex::new(Vec::new())));
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut texts: Vec<String> = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let tool_call = serde_json::json!({"model": "m", "choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "compile", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
        let stub = StubServer::start(vec![
            StubReply::json(200, tool_call),
            StubReply::raw(503, "overloaded").echo_auth(),
            StubReply::raw(401, "denied").echo_auth(),
        ])
        .await;
        let mut cfg = ProviderConfig::new(ProviderKind::Openai, "m");
        cfg.base_url = Some(format!("{}/v1", stub.base));
        cfg.api_key_env = Some(var.into());
        cfg.retry_base_s = 0.01;
        cfg.record_dir = Some(dir.path().to_path_buf());
        let p = Provider::from_config(&cfg).unwrap();
        let key = ConversationKey {
            model_label: "m".into(),
            problem: "A01".into(),
            dsl: Dsl::TIRX,
            condition: Condition::Conditioned,
            run: 0,
        };
        let mut s = p.session(&key).unwrap();
        let mut req = ChatRequest {
            messages: vec![Message::system("sys"), Message::user("go")],
            tools: vec![ToolSpec {
                name: "compile".into(),
                description: "c".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            ..ChatRequest::default()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let r = s.chat(&req, deadline).await.unwrap();
        req.messages.push(r.message.clone());
        req.messages.push(Message::tool_result("c1", "ok"));
        // 503 (retried, logged) then 401 (final error); both bodies echo the key.
        let e = s.chat(&req, deadline).await.unwrap_err();
        let reqs = stub.requests();
        assert_eq!(reqs.len(), 3);
        assert_eq!(reqs[2].header("authorization"), Some(format!("Bearer {secret}").as_str()));
        assert_eq!(e.status(), Some(401));
        texts.extend([format!("{p:?}"), format!("{s:?}"), format!("{cfg:?}"), format!("{e:?}"), e.to_string()]);
        texts.push(serde_json::to_string(&r).unwrap());

        let stub = StubServer::start(vec![StubReply::raw(400, "bad").echo_auth()]).await;
        let mut acfg = ProviderConfig::new(ProviderKind::Anthropic, "claude");
        acfg.base_url = Some(stub.base.clone());
        acfg.api_key_env = Some(var.into());
        acfg.sampling.max_tokens = Some(10);
        let ap = Provider::from_config(&acfg).unwrap();
        let e = ap.session(&key).unwrap().chat(&req, deadline).await.unwrap_err();
        assert_eq!(stub.requests()[0].header("x-api-key"), Some(secret.as_str()));
        texts.extend([format!("{ap:?}"), format!("{e:?}"), e.to_string()]);
    });
    drop(rt);

    let log_text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        log_text.contains("model call"),
        "the log capture works: {log_text}"
    );
    assert!(
        log_text.contains("retrying"),
        "the retry was logged: {log_text}"
    );
    assert!(
        log_text.contains("[REDACTED]"),
        "the echoed key was redacted in the log: {log_text}"
    );
    texts.push(log_text);
    let recorded = files_text(dir.path());
    assert!(
        recorded.contains("\"compile\""),
        "the recording was written: {recorded}"
    );
    texts.push(recorded);
    let tail = &secret[secret.len() - 16..];
    for t in &texts {
        assert!(!t.contains(&secret), "the key leaked into: {t}");
        assert!(!t.contains(tail), "part of the key leaked into: {t}");
    }
}

/// A random number without a dependency: the std hasher is seeded randomly per process.
fn rand_suffix() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut a = s.build_hasher();
    a.write_u8(1);
    let mut b = s.build_hasher();
    b.write_u8(2);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}
