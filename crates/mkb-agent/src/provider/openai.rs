//! OpenAI-compatible Chat Completions (OpenAI, vLLM, SGLang and most hosts): the request body
//! built from neutral types and the answer parsed back into them.
//! POST {base_url}/chat/completions, `Authorization: Bearer <key>`.

use super::config::{MaxTokensField, ProviderConfig};
use super::error::ProviderError;
use super::types::{Message, Role, Sampling, ToolCall, ToolSpec, Usage};
use super::Reply;
use serde_json::{json, Map, Value};

/// The endpoint for `cfg`.
pub(crate) fn url(cfg: &ProviderConfig) -> String {
    format!("{}/chat/completions", cfg.effective_base_url())
}

/// The request body.
pub(crate) fn build_body(
    cfg: &ProviderConfig,
    messages: &[Message],
    tools: &[ToolSpec],
    sampling: &Sampling,
) -> Result<Value, ProviderError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(cfg.model));
    let msgs = messages
        .iter()
        .map(message_json)
        .collect::<Result<Vec<_>, _>>()?;
    body.insert("messages".into(), Value::Array(msgs));
    if !tools.is_empty() {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = sampling.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = sampling.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if let Some(m) = sampling.max_tokens {
        let field = match cfg.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), json!(m));
    }
    if let Some(s) = sampling.seed {
        body.insert("seed".into(), json!(s));
    }
    for (k, v) in &sampling.extra {
        body.insert(k.clone(), v.clone());
    }
    Ok(Value::Object(body))
}

fn message_json(m: &Message) -> Result<Value, ProviderError> {
    Ok(match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant => {
            let mut o = Map::new();
            o.insert("role".into(), json!("assistant"));
            if m.tool_calls.is_empty() || !m.content.is_empty() {
                o.insert("content".into(), json!(m.content));
            } else {
                o.insert("content".into(), Value::Null);
            }
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                               "function": {"name": c.name, "arguments": c.arguments_text()}})
                    })
                    .collect();
                o.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(o)
        }
        Role::Tool => {
            let id = m.tool_call_id.as_deref().ok_or_else(|| {
                ProviderError::InvalidRequest("a tool message has no tool_call_id".into())
            })?;
            json!({"role": "tool", "tool_call_id": id, "content": m.content})
        }
    })
}

/// Parses a Chat Completions answer. `excerpt` turns a JSON value into a redacted excerpt.
pub(crate) fn parse_response(
    v: &Value,
    cfg: &ProviderConfig,
    excerpt: impl Fn(&str) -> String,
) -> Result<Reply, ProviderError> {
    let malformed = |what: &str| ProviderError::Malformed {
        what: what.to_string(),
        excerpt: excerpt(&v.to_string()),
    };
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| malformed("no choices"))?;
    let msg = choice
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("no message"))?;
    let content = match msg.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        // Some hosts answer with content parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(_) => return Err(malformed("message.content is neither text nor parts")),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = msg.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or_else(|| malformed("tool_calls is not a list"))?;
        for (i, c) in calls.iter().enumerate() {
            let f = c
                .get("function")
                .ok_or_else(|| malformed("a tool call has no function"))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a tool call has no function name"))?
                .to_string();
            let arguments = match f.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(Value::String(s)) => ToolCall::parse_arguments(s),
                Some(other) => other.clone(),
            };
            let id = match c.get("id").and_then(Value::as_str) {
                Some(id) if !id.is_empty() => id.to_string(),
                _ => format!("call_{i}"),
            };
            tool_calls.push(ToolCall {
                id,
                name,
                arguments,
            });
        }
    }
    let usage = match v.get("usage").filter(|u| u.is_object()) {
        Some(u) => {
            let n = |k: &str| u.get(k).and_then(Value::as_u64);
            let cached = u
                .get("prompt_tokens_details")
                .and_then(|d| d.get("cached_tokens"))
                .and_then(Value::as_u64);
            Usage {
                input_tokens: n("prompt_tokens").unwrap_or(0),
                output_tokens: n("completion_tokens").unwrap_or(0),
                cached_input_tokens: cached,
                missing: n("prompt_tokens").is_none() && n("completion_tokens").is_none(),
            }
        }
        None => Usage {
            missing: true,
            ..Usage::default()
        },
    };
    let stop_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let model = v
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(&cfg.model)
        .to_string();
    Ok(Reply {
        message: Message {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
        },
        usage,
        stop_reason,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::config::ProviderKind;

    fn cfg() -> ProviderConfig {
        ProviderConfig::new(ProviderKind::Openai, "m")
    }

    #[test]
    fn body_maps_messages_tools_and_sampling() {
        let msgs = vec![
            Message::system("sys"),
            Message::user("hi"),
            Message {
                role: Role::Assistant,
                content: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "c1".into(),
                        name: "compile".into(),
                        arguments: json!({"src": "x"}),
                    },
                    ToolCall {
                        id: "c2".into(),
                        name: "t".into(),
                        arguments: ToolCall::parse_arguments("{bad"),
                    },
                ],
                tool_call_id: None,
            },
            Message::tool_result("c1", "ok"),
        ];
        let tools = vec![ToolSpec {
            name: "compile".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }];
        let sampling = Sampling {
            temperature: Some(0.5),
            max_tokens: Some(64),
            seed: Some(7),
            extra: [("top_k".to_string(), json!(20))].into_iter().collect(),
            ..Sampling::default()
        };
        let b = build_body(&cfg(), &msgs, &tools, &sampling).unwrap();
        assert_eq!(b["model"], "m");
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"src":"x"}"#
        );
        assert_eq!(
            b["messages"][2]["tool_calls"][1]["function"]["arguments"],
            "{bad"
        );
        assert_eq!(
            b["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "ok"})
        );
        assert_eq!(b["tools"][0]["function"]["name"], "compile");
        assert_eq!(b["temperature"], 0.5);
        assert_eq!(b["max_tokens"], 64);
        assert_eq!(b["seed"], 7);
        assert_eq!(b["top_k"], 20);
        assert!(b.get("top_p").is_none());

        let mut c = cfg();
        c.max_tokens_field = MaxTokensField::MaxCompletionTokens;
        let b = build_body(&c, &msgs, &[], &sampling).unwrap();
        assert_eq!(b["max_completion_tokens"], 64);
        assert!(b.get("max_tokens").is_none() && b.get("tools").is_none());

        let bad = vec![Message {
            tool_call_id: None,
            ..Message::tool_result("x", "y")
        }];
        assert!(matches!(
            build_body(&cfg(), &bad, &[], &sampling),
            Err(ProviderError::InvalidRequest(_))
        ));
    }

    #[test]
    fn parses_text_tool_calls_and_missing_usage() {
        let v = json!({"model": "served", "choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "run", "arguments": "{\"n\":1}"}},
                           {"type": "function", "function": {"name": "x", "arguments": "oops"}}]},
            "finish_reason": "tool_calls"}]});
        let r = parse_response(&v, &cfg(), |s| s.to_string()).unwrap();
        assert_eq!(r.model, "served");
        assert_eq!(r.stop_reason, "tool_calls");
        assert_eq!(r.message.content, "");
        assert_eq!(r.message.tool_calls[0].arguments, json!({"n": 1}));
        assert_eq!(r.message.tool_calls[1].id, "call_1");
        assert_eq!(r.message.tool_calls[1].raw_arguments(), Some("oops"));
        assert!(r.usage.missing);
        assert_eq!(r.usage.input_tokens, 0);

        let v = json!({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}});
        let r = parse_response(&v, &cfg(), |s| s.to_string()).unwrap();
        assert_eq!(r.model, "m");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 3,
                cached_input_tokens: Some(4),
                missing: false
            }
        );

        let e = parse_response(&json!({"error": {"message": "nope"}}), &cfg(), |s| {
            s.to_string()
        })
        .unwrap_err();
        assert!(
            matches!(&e, ProviderError::Malformed { what, excerpt } if what == "no choices" && excerpt.contains("nope"))
        );
    }
}
