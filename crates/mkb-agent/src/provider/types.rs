//! Provider-neutral conversation types: what the agent loop sends (`ChatRequest`), what it gets
//! back (`ChatResponse`), and the key that names one conversation. Trajectories are stored as
//! JSONL of these, so every type is Serialize + Deserialize with a stable, lower-case wire form.

use mkb_core::{Condition, Dsl};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    /// The result of one tool call; `Message::tool_call_id` says which.
    Tool,
}

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON. When a provider returned arguments that are not valid JSON the
    /// raw text is kept as `{"_raw": "..."}` (see [`ToolCall::raw_arguments`]) instead of failing.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// The key under which unparsable argument text is kept.
    pub const RAW_KEY: &'static str = "_raw";

    /// The unparsable argument text, if the provider's arguments were not valid JSON.
    pub fn raw_arguments(&self) -> Option<&str> {
        let obj = self.arguments.as_object()?;
        if obj.len() == 1 {
            obj.get(Self::RAW_KEY)?.as_str()
        } else {
            None
        }
    }

    /// Parses a provider's argument string: valid JSON is kept as is, an empty string is `{}`,
    /// anything else is kept verbatim under `_raw`.
    pub fn parse_arguments(text: &str) -> serde_json::Value {
        if text.trim().is_empty() {
            return serde_json::Value::Object(serde_json::Map::new());
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v) => v,
            Err(_) => {
                let mut m = serde_json::Map::new();
                m.insert(
                    Self::RAW_KEY.to_string(),
                    serde_json::Value::String(text.to_string()),
                );
                serde_json::Value::Object(m)
            }
        }
    }

    /// The argument text to send back to a provider (the raw text when it was unparsable).
    pub fn arguments_text(&self) -> String {
        match self.raw_arguments() {
            Some(raw) => raw.to_string(),
            None => self.arguments.to_string(),
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(default)]
    pub content: String,
    /// Tool calls of an assistant message (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the id of the call this message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    fn plain(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
    pub fn system(content: impl Into<String>) -> Message {
        Self::plain(Role::System, content)
    }
    pub fn user(content: impl Into<String>) -> Message {
        Self::plain(Role::User, content)
    }
    pub fn assistant(content: impl Into<String>) -> Message {
        Self::plain(Role::Assistant, content)
    }
    /// The result of the tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
        }
    }

    /// A stable digest of this message (sha256 of its JSON form), used by recordings to
    /// diagnose drift between a recorded and a replayed conversation.
    pub fn digest(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Sampling parameters. Unset fields are left to the provider's defaults. In a request,
/// set fields override the provider config's (see [`Sampling::merged_over`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Output tokens of one call (required by the Anthropic API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sent to OpenAI-compatible servers; the Anthropic API has no seed and ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Provider-specific fields copied into the request body as is (e.g. `top_k`,
    /// `reasoning_effort`, `chat_template_kwargs`); they override the fields above.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Sampling {
    /// `self`'s set fields over `base`'s; `extra` is merged key by key, `self` winning.
    pub fn merged_over(&self, base: &Sampling) -> Sampling {
        let mut extra = base.extra.clone();
        for (k, v) in &self.extra {
            extra.insert(k.clone(), v.clone());
        }
        Sampling {
            temperature: self.temperature.or(base.temperature),
            top_p: self.top_p.or(base.top_p),
            max_tokens: self.max_tokens.or(base.max_tokens),
            seed: self.seed.or(base.seed),
            extra,
        }
    }
}

/// One call to the model: the whole conversation so far, the tools, and sampling overrides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub sampling: Sampling,
}

/// Tokens of one call. `input_tokens` counts the whole prompt, cached tokens included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache, when it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// The provider reported no usage: the counts above are 0, not measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// The model's answer to one `ChatRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message (role `Assistant`), tool calls included.
    pub message: Message,
    #[serde(default)]
    pub usage: Usage,
    /// The provider's own stop reason (`stop`, `tool_calls`, `length`, `end_turn`,
    /// `tool_use`, `max_tokens`, ...). See [`ChatResponse::hit_max_tokens`].
    #[serde(default)]
    pub stop_reason: String,
    /// The model that answered, as the provider names it.
    #[serde(default)]
    pub model: String,
    /// Wall time of the whole `chat` call, retries and waits included.
    #[serde(default)]
    pub latency_ms: u64,
    /// Requests that failed and were retried before this answer.
    #[serde(default)]
    pub retries: u32,
    /// Text tool mode only: why the model's action blocks could not be parsed. When set,
    /// `message.tool_calls` is empty and the agent loop should send this text back to the
    /// model as a user message so that it can correct itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_error: Option<String>,
}

impl ChatResponse {
    /// Did the model stop because it ran out of output tokens?
    pub fn hit_max_tokens(&self) -> bool {
        matches!(self.stop_reason.as_str(), "length" | "max_tokens")
    }
}

/// Names one conversation (one attempt, its distillation turn included) so that it can be
/// recorded and replayed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConversationKey {
    pub model_label: String,
    /// Problem id, e.g. `A01`.
    pub problem: String,
    pub dsl: Dsl,
    pub condition: Condition,
    pub run: u32,
}

impl ConversationKey {
    /// The file stem of this conversation's recording, e.g. `A01_cute_solo_r0`.
    pub fn file_stem(&self) -> String {
        format!(
            "{}_{}_{}_r{}",
            sanitize_component(&self.problem),
            self.dsl.as_str(),
            self.condition.as_str(),
            self.run
        )
    }

    /// The folder name of the model label (characters outside `[A-Za-z0-9._-]` become `_`).
    pub fn model_dir(&self) -> String {
        sanitize_component(&self.model_label)
    }

    /// `<dir>/<model_label>/<file_stem>.jsonl`
    pub fn recording_path(&self, dir: &std::path::Path) -> std::path::PathBuf {
        dir.join(self.model_dir())
            .join(format!("{}.jsonl", self.file_stem()))
    }
}

/// Makes a string safe as one path component: `[A-Za-z0-9._-]` kept, the rest `_`;
/// an empty or all-dots result becomes `_`.
fn sanitize_component(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stem_and_paths_are_stable_and_safe() {
        let key = ConversationKey {
            model_label: "Qwen/Qwen3 32B".into(),
            problem: "A01".into(),
            dsl: Dsl::CUTE,
            condition: Condition::Solo,
            run: 0,
        };
        assert_eq!(key.file_stem(), "A01_cute_solo_r0");
        assert_eq!(key.model_dir(), "Qwen_Qwen3_32B");
        let p = key.recording_path(std::path::Path::new("/rec"));
        assert_eq!(
            p,
            std::path::Path::new("/rec/Qwen_Qwen3_32B/A01_cute_solo_r0.jsonl")
        );
        let dotted = ConversationKey {
            model_label: "..".into(),
            ..key
        };
        assert_eq!(dotted.model_dir(), "_");
    }

    #[test]
    fn tool_call_arguments_parse_or_keep_raw() {
        assert_eq!(ToolCall::parse_arguments(""), serde_json::json!({}));
        assert_eq!(
            ToolCall::parse_arguments(r#"{"a":1}"#),
            serde_json::json!({"a": 1})
        );
        let raw = ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: ToolCall::parse_arguments("{not json"),
        };
        assert_eq!(raw.raw_arguments(), Some("{not json"));
        assert_eq!(raw.arguments_text(), "{not json");
        let ok = ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: serde_json::json!({"_raw": 1}),
        };
        assert_eq!(ok.raw_arguments(), None);
    }

    #[test]
    fn sampling_merge_prefers_request() {
        let base: Sampling = serde_json::from_value(serde_json::json!({
            "temperature": 0.7, "max_tokens": 100, "extra": {"top_k": 20, "x": 1}
        }))
        .unwrap();
        let req: Sampling =
            serde_json::from_value(serde_json::json!({"max_tokens": 50, "extra": {"x": 2}}))
                .unwrap();
        let m = req.merged_over(&base);
        assert_eq!(m.temperature, Some(0.7));
        assert_eq!(m.max_tokens, Some(50));
        assert_eq!(m.extra["top_k"], 20);
        assert_eq!(m.extra["x"], 2);
        assert!(serde_json::from_value::<Sampling>(serde_json::json!({"temprature": 1})).is_err());
    }

    #[test]
    fn messages_roundtrip_through_json() {
        let m = Message {
            role: Role::Assistant,
            content: "hi".into(),
            tool_calls: vec![ToolCall {
                id: "1".into(),
                name: "compile".into(),
                arguments: serde_json::json!({"x": 1}),
            }],
            tool_call_id: None,
        };
        let s = serde_json::to_string(&m).unwrap();
        assert!(s.contains(r#""role":"assistant""#), "{s}");
        assert_eq!(serde_json::from_str::<Message>(&s).unwrap(), m);
        let t = Message::tool_result("1", "ok");
        let s = serde_json::to_string(&t).unwrap();
        assert!(!s.contains("tool_calls"), "{s}");
        assert_eq!(serde_json::from_str::<Message>(&s).unwrap(), t);
        assert_ne!(m.digest(), t.digest());
        assert_eq!(m.digest(), m.clone().digest());
    }
}
