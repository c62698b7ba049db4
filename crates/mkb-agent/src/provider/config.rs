//! Provider configuration (a table of the experiment TOML) and the API-key wrapper that keeps
//! the key out of every Debug form, error, log line and recording.

use super::error::ProviderError;
use super::types::Sampling;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, vLLM, SGLang and most hosts).
    Openai,
    /// The Anthropic Messages API.
    Anthropic,
    /// Plays recorded conversations from `dir`.
    Replay,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Replay => "replay",
        }
    }
}

/// How tools reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// The API's own tool calling.
    #[default]
    Native,
    /// For models without tool calling: tools are described in the system prompt and the
    /// model writes fenced ```action blocks (see `provider::text_mode`).
    Text,
}

/// Which body field carries the output-token limit on OpenAI-compatible servers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: vLLM, SGLang, most hosts, older OpenAI models.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: required by OpenAI's reasoning models.
    MaxCompletionTokens,
}

pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_ANTHROPIC_VERSION: &str = "2023-06-01";

fn default_timeout_s() -> f64 {
    600.0
}
fn default_max_retries() -> u32 {
    6
}
fn default_retry_base_s() -> f64 {
    1.0
}
fn default_retry_max_s() -> f64 {
    60.0
}
/// Default of `max_response_bytes`.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 32 << 20;

/// One provider, as written in the experiment config. The API key itself is never here:
/// `api_key_env` names the environment variable that holds it.
///
/// ```toml
/// kind = "openai"
/// model = "gpt-4.1"
/// api_key_env = "OPENAI_API_KEY"
/// [sampling]
/// temperature = 0.7
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// Model name sent to the API (unused by replay).
    #[serde(default)]
    pub model: String,
    /// Defaults: `https://api.openai.com/v1`, `https://api.anthropic.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Environment variable holding the API key. Required for anthropic; optional for
    /// openai (a local vLLM/SGLang server needs none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Limit of one HTTP request, body included (the attempt's deadline may cut it shorter).
    #[serde(default = "default_timeout_s")]
    pub request_timeout_s: f64,
    /// Retries of one call after 429, 408, 5xx, timeouts and transport errors.
    #[serde(default = "default_max_retries")]
    pub max_retries: u32,
    /// First backoff wait; it doubles per retry up to `retry_max_s`, with jitter.
    #[serde(default = "default_retry_base_s")]
    pub retry_base_s: f64,
    /// Longest wait between retries; a server's `Retry-After` is honoured up to this too.
    #[serde(default = "default_retry_max_s")]
    pub retry_max_s: f64,
    /// Largest response body read (default 32 MiB); a larger one is a (retried) fault.
    /// Optional so that configs written before it keep their fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_bytes: Option<u64>,
    #[serde(default)]
    pub tool_mode: ToolMode,
    /// Default sampling; a request's own sampling overrides it field by field.
    #[serde(default)]
    pub sampling: Sampling,
    /// openai: the field that carries `sampling.max_tokens`.
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// anthropic: the `anthropic-version` header (default `2023-06-01`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anthropic_version: Option<String>,
    /// replay: the folder of recordings (`<dir>/<model_label>/<stem>.jsonl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// replay: fail with `ReplayMismatch` when a request's last message differs from the
    /// recorded one (off by default: tool results of a real evaluator vary).
    #[serde(default)]
    pub replay_strict: bool,
    /// Record mode: write every conversation of this (real) provider to
    /// `<record_dir>/<model_label>/<stem>.jsonl`, replayable with kind = "replay".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_dir: Option<PathBuf>,
    /// The provider's requests-per-minute limit for this model, honoured by every session of
    /// a run together (provider/limits.rs). Off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<f64>,
    /// The provider's tokens-per-minute limit (input + output), shared the same way; each
    /// request is charged an estimate up front and settled with the reported usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<f64>,
}

impl ProviderConfig {
    /// A config of `kind` for `model` with every other field at its default.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> ProviderConfig {
        ProviderConfig {
            kind,
            model: model.into(),
            base_url: None,
            api_key_env: None,
            request_timeout_s: default_timeout_s(),
            max_retries: default_max_retries(),
            retry_base_s: default_retry_base_s(),
            retry_max_s: default_retry_max_s(),
            max_response_bytes: None,
            tool_mode: ToolMode::Native,
            sampling: Sampling::default(),
            max_tokens_field: MaxTokensField::MaxTokens,
            anthropic_version: None,
            dir: None,
            replay_strict: false,
            record_dir: None,
            requests_per_minute: None,
            tokens_per_minute: None,
        }
    }

    /// A replay config reading recordings from `dir`.
    pub fn replay(dir: impl Into<PathBuf>) -> ProviderConfig {
        ProviderConfig {
            dir: Some(dir.into()),
            ..ProviderConfig::new(ProviderKind::Replay, "")
        }
    }

    /// The base URL in use, without a trailing slash.
    pub fn effective_base_url(&self) -> String {
        let url = match (&self.base_url, self.kind) {
            (Some(u), _) => u.as_str(),
            (None, ProviderKind::Anthropic) => DEFAULT_ANTHROPIC_BASE_URL,
            (None, _) => DEFAULT_OPENAI_BASE_URL,
        };
        url.trim_end_matches('/').to_string()
    }

    /// The response size limit in force.
    pub fn max_response(&self) -> u64 {
        self.max_response_bytes
            .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.request_timeout_s)
    }

    /// Checks what serde cannot: values in range, required fields of the kind present,
    /// fields of other kinds absent.
    pub fn validate(&self) -> Result<(), ProviderError> {
        let err = |m: String| Err(ProviderError::Config(m));
        let kind = self.kind.as_str();
        for (name, v) in [
            ("request_timeout_s", self.request_timeout_s),
            ("retry_base_s", self.retry_base_s),
            ("retry_max_s", self.retry_max_s),
        ] {
            if !(v.is_finite() && v > 0.0 && v < 1.0e6) {
                return err(format!(
                    "{name} must be a positive number of seconds, got {v}"
                ));
            }
        }
        for (name, v) in [
            ("requests_per_minute", self.requests_per_minute),
            ("tokens_per_minute", self.tokens_per_minute),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0 && v < 1.0e12) {
                    return err(format!("{name} must be a positive number, got {v}"));
                }
            }
        }
        if let Some(n) = self.max_response_bytes {
            if !(1024..=(1u64 << 32)).contains(&n) {
                return err(format!(
                    "max_response_bytes must be between 1024 and 4294967296, got {n}"
                ));
            }
        }
        if let Some(env) = &self.api_key_env {
            if env.is_empty() || !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return err(format!(
                    "api_key_env must name an environment variable ([A-Za-z0-9_]+), got {:?} \
                     (put the variable's name here, never the key)",
                    redact_if_keylike(env)
                ));
            }
        }
        if let Some(url) = &self.base_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return err(format!(
                    "base_url must start with http:// or https://, got {url:?}"
                ));
            }
        }
        match self.kind {
            ProviderKind::Openai | ProviderKind::Anthropic => {
                if self.model.trim().is_empty() {
                    return err(format!("kind = \"{kind}\" needs `model`"));
                }
                if self.dir.is_some() || self.replay_strict {
                    return err(format!(
                        "`dir` and `replay_strict` are for kind = \"replay\", not \"{kind}\""
                    ));
                }
            }
            ProviderKind::Replay => {
                if self.dir.is_none() {
                    return err("kind = \"replay\" needs `dir`".to_string());
                }
                if self.record_dir.is_some() {
                    return err(
                        "`record_dir` records a real provider; kind = \"replay\" cannot record"
                            .into(),
                    );
                }
                if self.base_url.is_some() || self.api_key_env.is_some() {
                    return err(
                        "`base_url` and `api_key_env` are not used by kind = \"replay\"".into(),
                    );
                }
            }
        }
        if self.kind == ProviderKind::Anthropic {
            if self.api_key_env.is_none() {
                return err("kind = \"anthropic\" needs `api_key_env`".into());
            }
            if self.sampling.max_tokens.is_none() {
                return err(
                    "kind = \"anthropic\" needs `sampling.max_tokens` (the API requires it)".into(),
                );
            }
        } else if self.anthropic_version.is_some() {
            return err(format!(
                "`anthropic_version` is for kind = \"anthropic\", not \"{kind}\""
            ));
        }
        if self.kind != ProviderKind::Openai && self.max_tokens_field != MaxTokensField::MaxTokens {
            return err(format!(
                "`max_tokens_field` is for kind = \"openai\", not \"{kind}\""
            ));
        }
        Ok(())
    }
}

/// If someone pasted a key where a variable name belongs, do not echo it back.
fn redact_if_keylike(s: &str) -> String {
    if s.len() > 16 {
        format!(
            "{}... ({} chars)",
            &s.chars().take(3).collect::<String>(),
            s.chars().count()
        )
    } else {
        s.to_string()
    }
}

/// An API key read from the environment. It has no Display, no Serialize, and its Debug form
/// is `ApiKey(<redacted>)`; only the HTTP layer reads it, to set a header.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Reads the key from `var` via `lookup` (normally `std::env::var`).
    pub fn from_env_with(
        var: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ApiKey, ProviderError> {
        match lookup(var) {
            Some(v) if !v.trim().is_empty() => {
                // From now on every artifact this process writes is scrubbed of it.
                mkb_core::secret::register(v.trim());
                Ok(ApiKey(v.trim().to_string()))
            }
            Some(_) => Err(ProviderError::Config(format!(
                "environment variable {var} (the API key) is empty"
            ))),
            None => Err(ProviderError::Config(format!(
                "environment variable {var} (the API key) is not set"
            ))),
        }
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the key in `text` by `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() >= 4 && text.contains(&self.0) {
            text.replace(&self.0, "[REDACTED]")
        } else {
            text.to_string()
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ProviderConfig, String> {
        let v: serde_json::Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_validation() {
        let c = parse(r#"{"kind":"openai","model":"m"}"#).unwrap();
        assert_eq!(c.effective_base_url(), DEFAULT_OPENAI_BASE_URL);
        assert_eq!(c.max_retries, 6);
        assert_eq!(c.tool_mode, ToolMode::Native);
        c.validate().unwrap();

        let a = parse(r#"{"kind":"anthropic","model":"m","api_key_env":"K"}"#).unwrap();
        assert_eq!(a.effective_base_url(), DEFAULT_ANTHROPIC_BASE_URL);
        let e = a.validate().unwrap_err().to_string();
        assert!(e.contains("max_tokens"), "{e}");
        let a = parse(
            r#"{"kind":"anthropic","model":"m","api_key_env":"K","sampling":{"max_tokens":10}}"#,
        )
        .unwrap();
        a.validate().unwrap();

        assert!(
            parse(r#"{"kind":"openai","model":"m","api_key":"sk-x"}"#).is_err(),
            "unknown field"
        );
        assert!(parse(r#"{"kind":"openai","model":""}"#)
            .unwrap()
            .validate()
            .is_err());
        assert!(parse(r#"{"kind":"replay"}"#).unwrap().validate().is_err());
        parse(r#"{"kind":"replay","dir":"/x"}"#)
            .unwrap()
            .validate()
            .unwrap();
        assert!(parse(r#"{"kind":"replay","dir":"/x","record_dir":"/y"}"#)
            .unwrap()
            .validate()
            .is_err());
        assert!(parse(r#"{"kind":"openai","model":"m","dir":"/x"}"#)
            .unwrap()
            .validate()
            .is_err());
        assert!(
            parse(r#"{"kind":"openai","model":"m","request_timeout_s":0}"#)
                .unwrap()
                .validate()
                .is_err()
        );
        assert!(
            parse(r#"{"kind":"openai","model":"m","base_url":"localhost:8000"}"#)
                .unwrap()
                .validate()
                .is_err()
        );
        let trailing =
            parse(r#"{"kind":"openai","model":"m","base_url":"http://h:1/v1/"}"#).unwrap();
        assert_eq!(trailing.effective_base_url(), "http://h:1/v1");
    }

    #[test]
    fn parses_from_toml() {
        let c: ProviderConfig = toml::from_str(
            r#"
            kind = "openai"
            model = "Qwen/Qwen3-32B"
            base_url = "http://127.0.0.1:8000/v1"
            tool_mode = "text"
            max_tokens_field = "max_completion_tokens"
            record_dir = "runs/x/recordings"
            [sampling]
            temperature = 0.6
            max_tokens = 8192
            [sampling.extra]
            top_k = 20
            chat_template_kwargs = { enable_thinking = false }
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.tool_mode, ToolMode::Text);
        assert_eq!(c.max_tokens_field, MaxTokensField::MaxCompletionTokens);
        assert_eq!(c.sampling.temperature, Some(0.6));
        assert_eq!(
            c.sampling.extra["chat_template_kwargs"]["enable_thinking"],
            false
        );
        assert_eq!(
            c.record_dir.as_deref(),
            Some(std::path::Path::new("runs/x/recordings"))
        );
        let back: ProviderConfig = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(toml::from_str::<ProviderConfig>("kind = \"vertex\"\nmodel = \"m\"").is_err());
    }

    #[test]
    fn pasted_key_is_not_echoed() {
        let key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
        let c = parse(&format!(
            r#"{{"kind":"openai","model":"m","api_key_env":"{key}"}}"#
        ))
        .unwrap();
        let e = c.validate().unwrap_err();
        assert!(!e.to_string().contains(key), "{e}");
        assert!(!format!("{e:?}").contains(key));
    }

    #[test]
    fn api_key_is_redacted() {
        let k = ApiKey::from_env_with("V", |_| Some("  secret-value-123 ".into())).unwrap();
        assert_eq!(k.expose(), "secret-value-123");
        assert_eq!(format!("{k:?}"), "ApiKey(<redacted>)");
        assert_eq!(k.redact("a secret-value-123 b"), "a [REDACTED] b");
        let e = ApiKey::from_env_with("V", |_| None).unwrap_err();
        assert!(e.to_string().contains("V") && e.to_string().contains("not set"));
        assert!(ApiKey::from_env_with("V", |_| Some(" ".into())).is_err());
    }
}
