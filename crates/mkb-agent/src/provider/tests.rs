//! Provider tests that drive the real HTTP clients against the scripted stub server on
//! 127.0.0.1 (success, tool calls both ways, 429/500/timeouts with retries, deadlines,
//! malformed JSON, 400), replay and record mode, text tool mode end to end, and key secrecy.

use super::stub::{StubReply, StubServer};
use super::*;
use mkb_core::{Condition, Dsl};
use serde_json::json;
use std::time::Duration;

const KEY_VAR: &str = "MKB_TEST_PROVIDER_KEY";
const SECRET: &str = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0";

fn key() -> ConversationKey {
    ConversationKey {
        model_label: "stub-model".into(),
        problem: "A01".into(),
        dsl: Dsl::CUTE,
        condition: Condition::Solo,
        run: 0,
    }
}

fn in_secs(s: f64) -> Instant {
    Instant::now() + Duration::from_secs_f64(s)
}

fn openai_cfg(stub: &StubServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(ProviderKind::Openai, "test-model");
    c.base_url = Some(format!("{}/v1", stub.base));
    c.retry_base_s = 0.05;
    c.retry_max_s = 0.2;
    c.request_timeout_s = 5.0;
    c.sampling.temperature = Some(0.3);
    c
}

fn anthropic_cfg(stub: &StubServer) -> ProviderConfig {
    let mut c = ProviderConfig::new(ProviderKind::Anthropic, "claude-test");
    c.base_url = Some(stub.base.clone());
    c.api_key_env = Some(KEY_VAR.into());
    c.retry_base_s = 0.05;
    c.retry_max_s = 0.2;
    c.request_timeout_s = 5.0;
    c.sampling.max_tokens = Some(256);
    c
}

/// Environment lookup that knows only the test key.
fn env(var: &str) -> Option<String> {
    (var == KEY_VAR).then(|| SECRET.to_string())
}

fn provider(cfg: &ProviderConfig) -> Provider {
    Provider::from_config_with_env(cfg, env).unwrap()
}

fn oa_text(text: &str) -> serde_json::Value {
    json!({"id": "x", "model": "served-model", "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
        "finish_reason": "stop"}], "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}})
}

fn oa_tool_call() -> serde_json::Value {
    json!({"model": "served-model", "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_abc", "type": "function",
                        "function": {"name": "compile", "arguments": "{\"source\": \"k = 1\"}"}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 20, "completion_tokens": 9}})
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "compile".into(),
        description: "Compile a kernel.".into(),
        parameters: json!({"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]}),
    }]
}

fn first_request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You optimize kernels."),
            Message::user("Write the kernel."),
        ],
        tools: tools(),
        sampling: Sampling::default(),
    }
}

#[tokio::test]
async fn openai_text_success() {
    let stub = StubServer::start(vec![StubReply::json(200, oa_text("hello"))]).await;
    let p = provider(&openai_cfg(&stub));
    let mut s = p.session(&key()).unwrap();
    let req = ChatRequest {
        sampling: Sampling {
            max_tokens: Some(100),
            ..Sampling::default()
        },
        ..first_request()
    };
    let r = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(r.message, Message::assistant("hello"));
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 4,
            cached_input_tokens: None,
            missing: false
        }
    );
    assert_eq!(r.stop_reason, "stop");
    assert_eq!(r.model, "served-model");
    assert_eq!(r.retries, 0);
    assert!(r.format_error.is_none());
    assert_eq!(s.turns(), 1);

    let reqs = stub.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        None,
        "no api_key_env, no auth header"
    );
    let b = reqs[0].json();
    assert_eq!(b["model"], "test-model");
    assert_eq!(b["temperature"], 0.3, "sampling from the config");
    assert_eq!(b["max_tokens"], 100, "sampling from the request");
    assert_eq!(
        b["messages"][0],
        json!({"role": "system", "content": "You optimize kernels."})
    );
    assert_eq!(b["tools"][0]["function"]["name"], "compile");
}

#[tokio::test]
async fn openai_tool_calls_round_trip() {
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_tool_call()),
        StubReply::json(200, oa_text("done")),
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    cfg.api_key_env = Some(KEY_VAR.into());
    let p = provider(&cfg);
    let mut s = p.session(&key()).unwrap();
    let mut req = first_request();
    let r = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(r.stop_reason, "tool_calls");
    assert_eq!(
        r.message.tool_calls,
        vec![ToolCall {
            id: "call_abc".into(),
            name: "compile".into(),
            arguments: json!({"source": "k = 1"})
        }]
    );
    req.messages.push(r.message.clone());
    req.messages
        .push(Message::tool_result("call_abc", "compiled OK"));
    let r2 = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(r2.message.content, "done");

    let reqs = stub.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    let b = reqs[1].json();
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "call_abc");
    assert_eq!(msgs[2]["tool_calls"][0]["type"], "function");
    let args: serde_json::Value = serde_json::from_str(
        msgs[2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"source": "k = 1"}));
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "tool_call_id": "call_abc", "content": "compiled OK"})
    );
}

#[tokio::test]
async fn anthropic_tool_use_round_trip() {
    let tool_use = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-2",
        "content": [{"type": "text", "text": "Compiling."},
                    {"type": "tool_use", "id": "toolu_1", "name": "compile", "input": {"source": "k"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 30, "output_tokens": 8}});
    let text = json!({"type": "message", "role": "assistant", "model": "claude-test-2",
        "content": [{"type": "text", "text": "All good."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 50, "output_tokens": 3, "cache_read_input_tokens": 20}});
    let stub = StubServer::start(vec![
        StubReply::json(200, tool_use),
        StubReply::json(200, text),
    ])
    .await;
    let p = provider(&anthropic_cfg(&stub));
    let mut s = p.session(&key()).unwrap();
    let mut req = first_request();
    let r = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(r.message.content, "Compiling.");
    assert_eq!(
        r.message.tool_calls,
        vec![ToolCall {
            id: "toolu_1".into(),
            name: "compile".into(),
            arguments: json!({"source": "k"})
        }]
    );
    assert_eq!(r.stop_reason, "tool_use");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (30, 8));
    req.messages.push(r.message.clone());
    req.messages
        .push(Message::tool_result("toolu_1", "compiled OK"));
    let r2 = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(r2.message.content, "All good.");
    assert_eq!(r2.stop_reason, "end_turn");
    assert_eq!(r2.usage.input_tokens, 70);
    assert_eq!(r2.usage.cached_input_tokens, Some(20));

    let reqs = stub.requests();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some(SECRET));
    assert_eq!(reqs[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(reqs[0].header("authorization"), None);
    let b0 = reqs[0].json();
    assert_eq!(b0["system"], "You optimize kernels.");
    assert_eq!(b0["max_tokens"], 256);
    assert_eq!(b0["tools"][0]["input_schema"]["required"][0], "source");
    let b = reqs[1].json();
    let msgs = b["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{b}");
    assert_eq!(
        msgs[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "compile", "input": {"source": "k"}})
    );
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "compiled OK"})
    );
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let stub = StubServer::start(vec![
        StubReply::json(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "1"),
        StubReply::json(200, oa_text("ok")),
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    // The backoff alone would wait 5-10 s; only Retry-After gives ~1 s.
    cfg.retry_base_s = 10.0;
    cfg.retry_max_s = 10.0;
    let p = provider(&cfg);
    let t0 = Instant::now();
    let r = p
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(30.0))
        .await
        .unwrap();
    assert_eq!(r.retries, 1);
    assert_eq!(r.message.content, "ok");
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(950),
        "waited {gap:?}, Retry-After said 1 s"
    );
    assert!(gap < Duration::from_millis(2500), "waited {gap:?}");
    assert!(
        r.latency_ms >= 950 && t0.elapsed() < Duration::from_secs(4),
        "{}",
        r.latency_ms
    );
}

#[tokio::test]
async fn server_error_then_success() {
    let stub = StubServer::start(vec![
        StubReply::raw(500, "internal error"),
        StubReply::json(200, oa_text("ok")),
    ])
    .await;
    let r = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap();
    assert_eq!(r.retries, 1);
    assert_eq!(r.message.content, "ok");
    assert_eq!(stub.requests().len(), 2);
}

#[tokio::test]
async fn persistent_500_stops_at_the_deadline_without_sleeping_past_it() {
    let stub = StubServer::start(vec![StubReply::raw(500, "still broken")]).await;
    let mut cfg = openai_cfg(&stub);
    cfg.max_retries = 1000;
    cfg.retry_base_s = 0.1;
    cfg.retry_max_s = 0.4;
    let p = provider(&cfg);
    let deadline = in_secs(1.2);
    let e = p
        .session(&key())
        .unwrap()
        .chat(&first_request(), deadline)
        .await
        .unwrap_err();
    let now = Instant::now();
    assert!(
        now <= deadline + Duration::from_millis(150),
        "returned {:?} past the deadline",
        now - deadline
    );
    let n = stub.requests().len();
    match &e {
        ProviderError::DeadlineExceeded { attempts, last } => {
            assert_eq!(*attempts as usize, n);
            assert!(last.as_deref().unwrap().contains("HTTP 500"), "{e}");
        }
        other => panic!("expected DeadlineExceeded, got {other:?}"),
    }
    assert!(
        n >= 3,
        "only {n} requests in 1.2 s with waits of at most 0.4 s"
    );
}

#[tokio::test]
async fn a_wait_that_would_cross_the_deadline_is_not_slept() {
    // Waits of exactly 0.4 s (Retry-After): requests at 0, 0.4, 0.8 s; the next wait would end
    // at 1.2 s, past the 1.0 s deadline, so the call returns at ~0.8 s instead of sleeping.
    let stub = StubServer::start(vec![
        StubReply::raw(503, "busy").header("Retry-After", "0.4")
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    cfg.max_retries = 1000;
    cfg.retry_max_s = 0.5; // Retry-After is honoured up to retry_max_s
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(1);
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), deadline)
        .await
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        matches!(e, ProviderError::DeadlineExceeded { attempts: 3, .. }),
        "{e:?}"
    );
    assert_eq!(stub.requests().len(), 3);
    assert!(
        took >= Duration::from_millis(780) && took < Duration::from_millis(1000),
        "took {took:?}"
    );
}

#[tokio::test]
async fn retries_are_capped_by_max_retries() {
    let stub = StubServer::start(vec![StubReply::raw(503, "overloaded")]).await;
    let mut cfg = openai_cfg(&stub);
    cfg.max_retries = 2;
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        ProviderError::Http {
            status: 503,
            body: "overloaded".into()
        }
    );
    assert_eq!(stub.requests().len(), 3);
}

#[tokio::test]
async fn malformed_json_is_an_error_with_an_excerpt() {
    let stub = StubServer::start(vec![StubReply::raw(
        200,
        "{\"choices\": [ {\"message\": oops",
    )])
    .await;
    let e = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    match &e {
        ProviderError::Malformed { what, excerpt } => {
            assert!(what.starts_with("invalid JSON"), "{what}");
            assert!(excerpt.contains("\"message\": oops"), "{excerpt}");
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
    assert_eq!(
        stub.requests().len(),
        7,
        "malformed JSON is retried (max_retries = 6) before it is reported"
    );

    // Valid JSON of the wrong shape is malformed too.
    let stub = StubServer::start(vec![StubReply::json(200, json!({"object": "list"}))]).await;
    let e = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, ProviderError::Malformed { what, .. } if what == "no choices"),
        "{e}"
    );
}

#[tokio::test]
async fn slow_response_times_out_then_retries() {
    for slow in [
        StubReply::json(200, oa_text("late")).delayed(Duration::from_secs(3)),
        StubReply::json(200, oa_text("late")).body_delayed(Duration::from_secs(3)),
    ] {
        let stub = StubServer::start(vec![slow, StubReply::json(200, oa_text("fast"))]).await;
        let mut cfg = openai_cfg(&stub);
        cfg.request_timeout_s = 0.3;
        let t0 = Instant::now();
        let r = provider(&cfg)
            .session(&key())
            .unwrap()
            .chat(&first_request(), in_secs(10.0))
            .await
            .unwrap();
        let took = t0.elapsed();
        assert_eq!(r.message.content, "fast");
        assert_eq!(r.retries, 1);
        assert_eq!(stub.requests().len(), 2);
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(1500),
            "took {took:?}"
        );
    }
}

#[tokio::test]
async fn deadline_cuts_a_slow_request_short() {
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_text("late")).delayed(Duration::from_secs(5))
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    cfg.request_timeout_s = 60.0;
    let deadline = in_secs(0.5);
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), deadline)
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProviderError::DeadlineExceeded { attempts: 1, .. }),
        "{e:?}"
    );
    assert!(Instant::now() <= deadline + Duration::from_millis(150));
}

#[tokio::test]
async fn client_error_is_not_retried() {
    let stub = StubServer::start(vec![
        StubReply::json(
            400,
            json!({"error": {"message": "context length exceeded"}}),
        ),
        StubReply::json(200, oa_text("never")),
    ])
    .await;
    let e = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("context length exceeded"), "{e}");
    assert_eq!(stub.requests().len(), 1);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = ProviderConfig::new(ProviderKind::Openai, "m");
    cfg.base_url = Some(format!("http://127.0.0.1:{port}/v1"));
    cfg.max_retries = 2;
    cfg.retry_base_s = 0.01;
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Transport(_)), "{e:?}");
}

#[tokio::test]
async fn api_key_reaches_the_server_but_nothing_else() {
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_tool_call()),
        StubReply::raw(401, "{\"error\": \"bad key\"}").echo_auth(),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = openai_cfg(&stub);
    cfg.api_key_env = Some(KEY_VAR.into());
    cfg.record_dir = Some(dir.path().to_path_buf());
    let p = provider(&cfg);
    let mut s = p.session(&key()).unwrap();
    let mut req = first_request();
    let r = s.chat(&req, in_secs(10.0)).await.unwrap();
    req.messages.push(r.message);
    req.messages.push(Message::tool_result("call_abc", "ok"));
    let e = s.chat(&req, in_secs(10.0)).await.unwrap_err();

    let reqs = stub.requests();
    assert_eq!(
        reqs[1].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str()),
        "the key is sent"
    );
    assert_eq!(e.status(), Some(401));
    let texts = [
        format!("{p:?}"),
        format!("{cfg:?}"),
        format!("{s:?}"),
        format!("{e:?}"),
        e.to_string(),
        serde_json::to_string(&cfg).unwrap(),
        std::fs::read_to_string(s.recording_path().unwrap()).unwrap(),
    ];
    assert!(
        e.to_string().contains("[REDACTED]"),
        "the stub echoed the key and it was redacted: {e}"
    );
    for t in &texts {
        assert!(!t.contains(SECRET), "the key leaked into: {t}");
        assert!(
            !t.contains(&SECRET[8..]),
            "part of the key leaked into: {t}"
        );
    }
    // The same for the Anthropic header.
    let stub = StubServer::start(vec![StubReply::raw(500, "boom").echo_auth()]).await;
    let mut cfg = anthropic_cfg(&stub);
    cfg.max_retries = 0;
    let p = provider(&cfg);
    let e = p
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(10.0))
        .await
        .unwrap_err();
    assert_eq!(stub.requests()[0].header("x-api-key"), Some(SECRET));
    for t in [format!("{p:?}"), format!("{e:?}"), e.to_string()] {
        assert!(!t.contains(SECRET), "the key leaked into: {t}");
    }
    // A missing variable names the variable.
    let e = Provider::from_config_with_env(&cfg, |_| None).unwrap_err();
    assert!(e.to_string().contains(KEY_VAR), "{e}");
}

fn write_handwritten(dir: &std::path::Path, turns: &[ChatResponse]) -> std::path::PathBuf {
    let path = key().recording_path(dir);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = json!({"format": "mkb-replay", "version": 1, "key": key(), "created": "2026-11-29T00:00:00Z",
        "producer": "handwritten"})
    .to_string();
    text.push('\n');
    for (i, t) in turns.iter().enumerate() {
        text.push_str(&json!({"turn": i, "response": t}).to_string());
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

fn resp_with_call() -> ChatResponse {
    ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: "Let me compile.".into(),
            tool_calls: vec![ToolCall {
                id: "c0".into(),
                name: "compile".into(),
                arguments: json!({"source": "x"}),
            }],
            tool_call_id: None,
        },
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: None,
            missing: false,
        },
        stop_reason: "tool_calls".into(),
        model: "handwritten".into(),
        latency_ms: 0,
        retries: 0,
        format_error: None,
    }
}

#[tokio::test]
async fn replay_plays_then_exhausts_and_names_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let second = ChatResponse {
        message: Message::assistant("Done."),
        stop_reason: "stop".into(),
        ..resp_with_call()
    };
    let path = write_handwritten(dir.path(), &[resp_with_call(), second.clone()]);
    let p = Provider::from_config(&ProviderConfig::replay(dir.path())).unwrap();
    let mut s = p.session(&key()).unwrap();
    assert_eq!(s.recording_path(), Some(path.as_path()));
    let mut req = first_request();
    assert_eq!(s.chat(&req, in_secs(1.0)).await.unwrap(), resp_with_call());
    // The tool result differs from anything recorded: replay goes on regardless.
    req.messages.push(resp_with_call().message);
    req.messages.push(Message::tool_result(
        "c0",
        "a result the recording never saw",
    ));
    assert_eq!(s.chat(&req, in_secs(1.0)).await.unwrap(), second);
    let e = s.chat(&req, in_secs(1.0)).await.unwrap_err();
    assert_eq!(
        e,
        ProviderError::ReplayExhausted {
            path: path.clone(),
            turns: 2
        }
    );

    let other = ConversationKey { run: 7, ..key() };
    let e = p.session(&other).unwrap_err();
    let missing = dir.path().join("stub-model").join("A01_cute_solo_r7.jsonl");
    assert_eq!(
        e,
        ProviderError::ReplayMissing {
            path: missing.clone()
        }
    );
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
}

#[tokio::test]
async fn record_then_replay_gives_identical_responses() {
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_tool_call()),
        StubReply::json(200, oa_text("done")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = openai_cfg(&stub);
    cfg.record_dir = Some(dir.path().to_path_buf());
    let p = provider(&cfg);
    let mut s = p.session(&key()).unwrap();
    let mut req = first_request();
    let mut live = Vec::new();
    let mut requests = Vec::new();
    for _ in 0..2 {
        let r = s.chat(&req, in_secs(10.0)).await.unwrap();
        requests.push(req.clone());
        req.messages.push(r.message.clone());
        for c in &r.message.tool_calls {
            req.messages
                .push(Message::tool_result(c.id.clone(), "compiled"));
        }
        live.push(r);
    }
    let path = s.recording_path().unwrap().to_path_buf();
    assert_eq!(path, key().recording_path(dir.path()));
    let (header, turns) = read_recording(&path).unwrap();
    assert_eq!(header.producer, "openai:test-model");
    assert_eq!(header.key, key());
    assert_eq!(turns.len(), 2);

    let mut replay_cfg = ProviderConfig::replay(dir.path());
    replay_cfg.replay_strict = true;
    let rp = Provider::from_config(&replay_cfg).unwrap();
    let mut rs = rp.session(&key()).unwrap();
    let mut replayed = Vec::new();
    for r in &requests {
        replayed.push(rs.chat(r, in_secs(1.0)).await.unwrap());
    }
    assert_eq!(replayed, live);
    assert_eq!(rs.replay_drift(), Some(0));
    assert_eq!(
        stub.requests().len(),
        2,
        "replay sent nothing to the server"
    );
}

#[tokio::test]
async fn text_mode_over_http() {
    let action = "I will compile.\n```action\n{\"tool\": \"compile\", \"arguments\": {\"source\": \"k = 1\"}}\n```";
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_text(action)),
        StubReply::json(
            200,
            oa_text("```action\n{\"tool\": \"compile\", \"arguments\": {broken}\n```"),
        ),
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    cfg.tool_mode = ToolMode::Text;
    let p = provider(&cfg);
    let mut s = p.session(&key()).unwrap();
    let mut req = first_request();
    let r = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert_eq!(
        r.message.tool_calls,
        vec![ToolCall {
            id: "act0_0".into(),
            name: "compile".into(),
            arguments: json!({"source": "k = 1"})
        }]
    );
    assert_eq!(r.message.content, action);
    req.messages.push(r.message.clone());
    req.messages
        .push(Message::tool_result("act0_0", "compiled OK"));
    let r2 = s.chat(&req, in_secs(10.0)).await.unwrap();
    assert!(r2.message.tool_calls.is_empty());
    assert!(
        r2.format_error.as_deref().unwrap().contains("invalid JSON"),
        "{:?}",
        r2.format_error
    );

    let reqs = stub.requests();
    let b0 = reqs[0].json();
    assert!(b0.get("tools").is_none(), "no native tools in text mode");
    let sys = b0["messages"][0]["content"].as_str().unwrap();
    assert!(
        sys.starts_with("You optimize kernels.") && sys.contains("## compile"),
        "{sys}"
    );
    let b1 = reqs[1].json();
    let msgs = b1["messages"].as_array().unwrap();
    assert_eq!(msgs[2], json!({"role": "assistant", "content": action}));
    assert_eq!(
        msgs[3],
        json!({"role": "user", "content": "Result of action `compile` (id act0_0):\ncompiled OK"})
    );
}

#[test]
fn chat_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let p = Provider::from_config(&ProviderConfig::new(ProviderKind::Openai, "m")).unwrap();
    let mut s = p.session(&key()).unwrap();
    let req = first_request();
    let fut = s.chat(&req, Instant::now());
    assert_send(&fut);
}

// ---- Provider faults (issue 9): transient ones are retried, fatal ones are not, waits and
// ---- bodies are bounded, echoed keys are scrubbed.

#[tokio::test]
async fn html_empty_and_choiceless_answers_are_retried_then_succeed() {
    let stub = StubServer::start(vec![
        StubReply::html(200, "<html><body><h1>502 Bad Gateway</h1></body></html>"),
        StubReply::json(200, json!({"id": "x", "choices": []})),
        StubReply::raw(200, ""),
        StubReply::raw(200, "{\"choices\": [ {\"message\": oops"),
        StubReply::html(502, "<html>upstream down</html>"),
        StubReply::json(200, oa_text("finally")),
    ])
    .await;
    let r = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(20.0))
        .await
        .unwrap();
    assert_eq!(r.message.content, "finally");
    assert_eq!(r.retries, 5);
    assert_eq!(stub.requests().len(), 6);
}

#[tokio::test]
async fn refused_key_and_unknown_model_are_fatal_and_not_retried() {
    let cases = [
        StubReply::json(
            401,
            json!({"error": {"message": "Incorrect API key provided"}}),
        ),
        StubReply::json(403, json!({"error": {"message": "forbidden"}})),
        StubReply::json(
            404,
            json!({"error": {"message": "The model `nope` does not exist", "code": "model_not_found"}}),
        ),
        StubReply::json(
            400,
            json!({"error": {"message": "invalid model ID", "code": "model_not_found"}}),
        ),
    ];
    for reply in cases {
        let status = reply.status;
        let stub = StubServer::start(vec![reply, StubReply::json(200, oa_text("never"))]).await;
        let e = provider(&openai_cfg(&stub))
            .session(&key())
            .unwrap()
            .chat(&first_request(), in_secs(10.0))
            .await
            .unwrap_err();
        assert_eq!(e.status(), Some(status));
        assert!(e.is_fatal(), "{status}: {e}");
        assert_eq!(stub.requests().len(), 1, "{status} is not retried");
    }
}

#[tokio::test]
async fn huge_retry_after_is_capped_and_does_not_panic() {
    let stub = StubServer::start(vec![
        StubReply::raw(503, "busy").header("Retry-After", "1e300"),
        StubReply::raw(429, "slow down").header("retry-after-ms", "1e308"),
        StubReply::json(200, oa_text("ok")),
    ])
    .await;
    let t0 = std::time::Instant::now();
    let r = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(20.0))
        .await
        .unwrap();
    assert_eq!(r.message.content, "ok");
    assert_eq!(r.retries, 2);
    // retry_max_s = 0.2: two capped waits, not 1e300 s.
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn a_100_mb_response_is_refused_without_reading_it_all() {
    let stub = StubServer::start(vec![StubReply::json(200, oa_text("x")).padded(100 << 20)]).await;
    let mut cfg = openai_cfg(&stub);
    cfg.max_retries = 1;
    let t0 = std::time::Instant::now();
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(20.0))
        .await
        .unwrap_err();
    match &e {
        ProviderError::Malformed { what, .. } => {
            assert!(what.contains("max_response_bytes"), "{what}")
        }
        other => panic!("expected a size fault, got {other:?}"),
    }
    assert_eq!(
        stub.requests().len(),
        2,
        "a size fault is retried like any bad answer"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));

    // Without a Content-Length the body is cut while it streams: a 2 KiB limit, 1 MiB sent.
    let stub = StubServer::start(vec![StubReply::json(200, oa_text("y")).padded(1 << 20)]).await;
    let mut cfg = openai_cfg(&stub);
    cfg.max_retries = 0;
    cfg.max_response_bytes = Some(2048);
    let e = provider(&cfg)
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(20.0))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("max_response_bytes = 2048"), "{e}");
}

#[tokio::test]
async fn a_provider_that_never_answers_is_cut_at_the_deadline() {
    let stub = StubServer::start(vec![
        StubReply::json(200, oa_text("too late")).delayed(Duration::from_secs(3600))
    ])
    .await;
    let t0 = std::time::Instant::now();
    let e = provider(&openai_cfg(&stub))
        .session(&key())
        .unwrap()
        .chat(&first_request(), in_secs(1.0))
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::DeadlineExceeded { .. }), "{e:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(1800),
        "{:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn a_key_echoed_inside_the_answer_is_scrubbed_before_anything_keeps_it() {
    let body = json!({"model": "served", "choices": [{"index": 0, "message": {"role": "assistant",
        "content": format!("Your headers: authorization: {}", super::stub::AUTH_PLACEHOLDER),
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "write_kernel",
            "arguments": json!({"source": format!("KEY = '{}'", super::stub::AUTH_PLACEHOLDER)}).to_string()}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let stub = StubServer::start(vec![StubReply::json(200, body)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = openai_cfg(&stub);
    cfg.api_key_env = Some(KEY_VAR.into());
    cfg.record_dir = Some(dir.path().to_path_buf());
    let p = provider(&cfg);
    let mut s = p.session(&key()).unwrap();
    let r = s.chat(&first_request(), in_secs(10.0)).await.unwrap();
    assert_eq!(
        stub.requests()[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str()),
        "the server saw the key, so its echo held it"
    );
    let text = serde_json::to_string(&r).unwrap();
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        r.message.content.contains("Bearer [REDACTED]"),
        "{}",
        r.message.content
    );
    assert_eq!(
        r.message.tool_calls[0].arguments["source"],
        "KEY = 'Bearer [REDACTED]'"
    );
    let rec = std::fs::read_to_string(s.recording_path().unwrap()).unwrap();
    assert!(rec.contains("[REDACTED]") && !rec.contains(SECRET), "{rec}");
}

#[tokio::test]
async fn a_429_pauses_every_session_of_the_model() {
    let stub = StubServer::start(vec![
        StubReply::json(429, json!({"error": {"message": "slow down"}})).header("Retry-After", "1"),
        StubReply::json(200, oa_text("ok")),
    ])
    .await;
    let mut cfg = openai_cfg(&stub);
    cfg.retry_max_s = 10.0; // Retry-After is honoured up to retry_max_s
    let p = provider(&cfg);
    let first = {
        let p = p.clone();
        tokio::spawn(async move {
            p.session(&key())
                .unwrap()
                .chat(&first_request(), in_secs(30.0))
                .await
        })
    };
    // The second session starts while the first waits out its Retry-After.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut k2 = key();
    k2.run = 1;
    let second = p
        .session(&k2)
        .unwrap()
        .chat(&first_request(), in_secs(30.0))
        .await
        .unwrap();
    assert_eq!(second.message.content, "ok");
    assert_eq!(first.await.unwrap().unwrap().retries, 1);
    let reqs = stub.requests();
    assert_eq!(reqs.len(), 3, "the 429, then one request per session");
    for r in &reqs[1..] {
        let gap = r.at - reqs[0].at;
        assert!(
            gap >= Duration::from_millis(950),
            "a request {gap:?} after the 429 (Retry-After: 1 s)"
        );
    }
    let st = p.throttle_stats().unwrap();
    assert_eq!(st.rate_limited, 1, "{st:?}");
    assert!(st.waits >= 1, "the second session waited: {st:?}");
    assert_eq!(st.tokens, 32, "two answers of 16 tokens: {st:?}");
}

#[tokio::test]
async fn requests_per_minute_are_shared_by_the_sessions_of_a_model() {
    let stub = StubServer::start(vec![StubReply::json(200, oa_text("ok"))]).await;
    let mut cfg = openai_cfg(&stub);
    cfg.requests_per_minute = Some(120.0); // a burst of 120, then one per 0.5 s
    let t0 = Instant::now();
    let p = provider(&cfg);
    let mut tasks = Vec::new();
    for run in 0..122u32 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut k = key();
            k.run = run;
            p.session(&k)
                .unwrap()
                .chat(&first_request(), in_secs(30.0))
                .await
                .map(|_| ())
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut at: Vec<_> = stub.requests().iter().map(|r| r.at).collect();
    at.sort();
    assert_eq!(at.len(), 122);
    // The bucket refills from the provider's creation: the 122nd request starts 1 s after it.
    let last = at[121] - t0;
    assert!(
        last >= Duration::from_millis(950),
        "the last of 122 requests at 120 per minute started {last:?} after the start: \
         the two over the burst did not wait"
    );
    let st = p.throttle_stats().unwrap();
    assert_eq!((st.requests, st.waits), (122, 2), "{st:?}");
}

#[test]
fn rate_limits_must_be_positive() {
    let mut c = ProviderConfig::new(ProviderKind::Openai, "m");
    c.tokens_per_minute = Some(0.0);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("tokens_per_minute"), "{e}");
    c.tokens_per_minute = None;
    c.requests_per_minute = Some(f64::NAN);
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("requests_per_minute"));
}
