//! The Anthropic Messages API: the request body built from neutral types and the answer parsed
//! back. POST {base_url}/v1/messages with `x-api-key` and `anthropic-version`. System messages
//! become the top-level `system`; assistant `tool_use` blocks are `ToolCall`s; tool results go
//! back as `tool_result` blocks of a user message.

use super::config::{ProviderConfig, DEFAULT_ANTHROPIC_VERSION};
use super::error::ProviderError;
use super::types::{Message, Role, Sampling, ToolCall, ToolSpec, Usage};
use super::Reply;
use serde_json::{json, Map, Value};

/// Stand-in for empty text, which the API rejects.
const EMPTY_TEXT: &str = "(empty)";

pub(crate) fn url(cfg: &ProviderConfig) -> String {
    format!("{}/v1/messages", cfg.effective_base_url())
}

/// The headers besides the key.
pub(crate) fn headers(cfg: &ProviderConfig) -> Vec<(&'static str, String)> {
    let version = cfg
        .anthropic_version
        .clone()
        .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.to_string());
    vec![("anthropic-version", version)]
}

pub(crate) fn build_body(
    cfg: &ProviderConfig,
    messages: &[Message],
    tools: &[ToolSpec],
    sampling: &Sampling,
) -> Result<Value, ProviderError> {
    let max_tokens = sampling.max_tokens.ok_or_else(|| {
        ProviderError::InvalidRequest("the Anthropic API needs sampling.max_tokens".into())
    })?;
    let mut body = Map::new();
    body.insert("model".into(), json!(cfg.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    let system: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    body.insert("messages".into(), Value::Array(conversation(messages)?));
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if sampling.seed.is_some() {
        tracing::debug!("the Anthropic API has no seed; sampling.seed is not sent");
    }
    for (k, v) in &sampling.extra {
        body.insert(k.clone(), v.clone());
    }
    Ok(Value::Object(body))
}

/// The non-system messages as alternating user/assistant turns of content blocks. Consecutive
/// messages of one API role are merged; in a user turn, tool results come first.
fn conversation(messages: &[Message]) -> Result<Vec<Value>, ProviderError> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", vec![text_block(&m.content)]),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.is_empty() || m.tool_calls.is_empty() {
                    blocks.push(text_block(&m.content));
                }
                for c in &m.tool_calls {
                    let input = if c.arguments.is_object() {
                        c.arguments.clone()
                    } else {
                        json!({ToolCall::RAW_KEY: c.arguments.to_string()})
                    };
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                ("assistant", blocks)
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().ok_or_else(|| {
                    ProviderError::InvalidRequest("a tool message has no tool_call_id".into())
                })?;
                let content = if m.content.is_empty() {
                    EMPTY_TEXT
                } else {
                    m.content.as_str()
                };
                (
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": content})],
                )
            }
        };
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    Ok(turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Stable: tool results first, the rest in order.
                blocks
                    .sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            json!({"role": role, "content": blocks})
        })
        .collect())
}

fn text_block(text: &str) -> Value {
    let text = if text.is_empty() { EMPTY_TEXT } else { text };
    json!({"type": "text", "text": text})
}

pub(crate) fn parse_response(
    v: &Value,
    cfg: &ProviderConfig,
    excerpt: impl Fn(&str) -> String,
) -> Result<Reply, ProviderError> {
    let malformed = |what: &str| ProviderError::Malformed {
        what: what.to_string(),
        excerpt: excerpt(&v.to_string()),
    };
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("no content blocks"))?;
    let mut texts: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(b.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => {
                let id = b
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("tool_use without id"))?;
                let name = b
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("tool_use without name"))?;
                let arguments = b.get("input").cloned().unwrap_or_else(|| json!({}));
                tool_calls.push(ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments,
                });
            }
            other => tracing::debug!(block_type = ?other, "ignoring an Anthropic content block"),
        }
    }
    let usage = match v.get("usage").filter(|u| u.is_object()) {
        Some(u) => {
            let n = |k: &str| u.get(k).and_then(Value::as_u64);
            let cache_read = n("cache_read_input_tokens");
            Usage {
                // input_tokens excludes cache reads and writes; count the whole prompt.
                input_tokens: n("input_tokens").unwrap_or(0)
                    + cache_read.unwrap_or(0)
                    + n("cache_creation_input_tokens").unwrap_or(0),
                output_tokens: n("output_tokens").unwrap_or(0),
                cached_input_tokens: cache_read,
                missing: n("input_tokens").is_none() && n("output_tokens").is_none(),
            }
        }
        None => Usage {
            missing: true,
            ..Usage::default()
        },
    };
    Ok(Reply {
        message: Message {
            role: Role::Assistant,
            content: texts.join("\n"),
            tool_calls,
            tool_call_id: None,
        },
        usage,
        stop_reason: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(&cfg.model)
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::config::ProviderKind;

    fn cfg() -> ProviderConfig {
        ProviderConfig::new(ProviderKind::Anthropic, "claude")
    }

    #[test]
    fn body_groups_turns_and_tool_results() {
        let msgs = vec![
            Message::system("sys"),
            Message::user("task"),
            Message {
                role: Role::Assistant,
                content: "thinking aloud".into(),
                tool_calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "compile".into(),
                        arguments: json!({"a": 1}),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "test".into(),
                        arguments: json!({}),
                    },
                ],
                tool_call_id: None,
            },
            Message::tool_result("t1", "compiled"),
            Message::tool_result("t2", ""),
            Message::user("keep going"),
        ];
        let s = Sampling {
            max_tokens: Some(99),
            seed: Some(1),
            temperature: Some(0.2),
            ..Sampling::default()
        };
        let b = build_body(&cfg(), &msgs, &[], &s).unwrap();
        assert_eq!(b["system"], "sys");
        assert_eq!(b["max_tokens"], 99);
        assert_eq!(b["temperature"], 0.2);
        assert!(b.get("seed").is_none() && b.get("tools").is_none());
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3, "{b}");
        assert_eq!(
            m[0],
            json!({"role": "user", "content": [{"type": "text", "text": "task"}]})
        );
        assert_eq!(
            m[1]["content"][0],
            json!({"type": "text", "text": "thinking aloud"})
        );
        assert_eq!(
            m[1]["content"][2],
            json!({"type": "tool_use", "id": "t2", "name": "test", "input": {}})
        );
        assert_eq!(m[2]["role"], "user");
        assert_eq!(
            m[2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "compiled"})
        );
        assert_eq!(m[2]["content"][1]["content"], EMPTY_TEXT);
        assert_eq!(
            m[2]["content"][2],
            json!({"type": "text", "text": "keep going"})
        );

        let no_max = Sampling::default();
        assert!(matches!(
            build_body(&cfg(), &msgs, &[], &no_max),
            Err(ProviderError::InvalidRequest(_))
        ));
    }

    #[test]
    fn parses_blocks_and_usage() {
        let v = json!({"model": "claude-x", "stop_reason": "tool_use",
            "content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "I will compile."},
                        {"type": "tool_use", "id": "tu1", "name": "compile", "input": {"src": "k"}}],
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 2, "output_tokens": 7}});
        let r = parse_response(&v, &cfg(), |s| s.to_string()).unwrap();
        assert_eq!(r.message.content, "I will compile.");
        assert_eq!(
            r.message.tool_calls,
            vec![ToolCall {
                id: "tu1".into(),
                name: "compile".into(),
                arguments: json!({"src": "k"})
            }]
        );
        assert_eq!(r.stop_reason, "tool_use");
        assert_eq!(r.model, "claude-x");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 107,
                output_tokens: 7,
                cached_input_tokens: Some(100),
                missing: false
            }
        );
        assert!(parse_response(&json!({"type": "error"}), &cfg(), |s| s.to_string()).is_err());
    }
}
