//! Provider errors. Every message here is built from redacted text: an API key never appears
//! in an error, its Display or its Debug form.

use std::path::PathBuf;

/// Why a provider call (or setting up a provider or session) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The provider config is invalid or its environment is incomplete (e.g. the API key's
    /// environment variable is unset).
    #[error("provider config: {0}")]
    Config(String),

    /// The request cannot be expressed in the provider's API (e.g. a tool message without
    /// `tool_call_id`). A bug of the caller, not of the provider.
    #[error("invalid request: {0}")]
    InvalidRequest(String),

    /// The attempt's deadline passed (or a needed wait would pass it) before an answer came.
    #[error("deadline exceeded after {attempts} request(s){}", last_suffix(.last))]
    DeadlineExceeded {
        /// Requests sent in this call.
        attempts: u32,
        /// The last failure seen, if any.
        last: Option<String>,
    },

    /// The server answered with a non-success status. `body` is a trimmed, redacted excerpt.
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: String },

    /// One request took longer than the request timeout.
    #[error("request timed out after {after_ms} ms")]
    Timeout { after_ms: u64 },

    /// Connecting, sending or reading failed.
    #[error("transport error: {0}")]
    Transport(String),

    /// The server's answer is not the JSON we expect. `excerpt` is trimmed and redacted.
    #[error("malformed response ({what}): {excerpt}")]
    Malformed { what: String, excerpt: String },

    /// Replay: no recording for this conversation.
    #[error("replay: no recording at {}", path.display())]
    ReplayMissing { path: PathBuf },

    /// Replay: the recording cannot be read.
    #[error("replay: {}:{line}: {message}", path.display())]
    ReplayFormat {
        path: PathBuf,
        line: usize,
        message: String,
    },

    /// Replay: asked for more turns than the recording holds.
    #[error("replay: {} has only {turns} turn(s), asked for one more", path.display())]
    ReplayExhausted { path: PathBuf, turns: usize },

    /// Replay (strict mode): the request differs from the one recorded.
    #[error("replay: {} turn {turn}: {message}", path.display())]
    ReplayMismatch {
        path: PathBuf,
        turn: usize,
        message: String,
    },

    /// Record mode: the recording could not be written.
    #[error("record: {}: {message}", path.display())]
    Record { path: PathBuf, message: String },
}

/// Does an error body say the model is unknown (OpenAI `model_not_found`, vLLM "The model
/// `x` does not exist", Anthropic "model: x" not found)?
fn names_unknown_model(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    b.contains("model_not_found")
        || (b.contains("model")
            && (b.contains("does not exist")
                || b.contains("not found")
                || b.contains("unknown model")
                || b.contains("invalid model")))
}

fn last_suffix(last: &Option<String>) -> String {
    match last {
        Some(l) => format!(" (last: {l})"),
        None => String::new(),
    }
}

impl ProviderError {
    /// Is it worth sending the same request again (429, 408, 5xx, timeouts, transport, and
    /// answers that are not the API's: bad or empty JSON, an HTML page, no choices)?
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Http { status, .. } => {
                *status == 429 || *status == 408 || (500..=599).contains(status)
            }
            ProviderError::Timeout { .. }
            | ProviderError::Transport(_)
            | ProviderError::Malformed { .. } => true,
            _ => false,
        }
    }

    /// Will every further request fail the same way, so that the run must stop before it
    /// stores anything? The key is refused (401, 403), the model or endpoint does not exist
    /// (404, or 400 naming an unknown model), the config or the replay recordings are wrong.
    pub fn is_fatal(&self) -> bool {
        match self {
            ProviderError::Http { status, body } => {
                matches!(status, 401 | 403 | 404) || (*status == 400 && names_unknown_model(body))
            }
            ProviderError::Config(_)
            | ProviderError::ReplayMissing { .. }
            | ProviderError::ReplayFormat { .. }
            | ProviderError::ReplayExhausted { .. }
            | ProviderError::ReplayMismatch { .. }
            | ProviderError::Record { .. } => true,
            _ => false,
        }
    }

    /// The HTTP status, for `Http` errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_classes() {
        let http = |status| ProviderError::Http {
            status,
            body: String::new(),
        };
        assert!(http(429).is_retryable());
        assert!(http(500).is_retryable());
        assert!(http(529).is_retryable());
        assert!(!http(400).is_retryable());
        assert!(!http(401).is_retryable());
        assert!(!http(404).is_retryable());
        assert!(ProviderError::Timeout { after_ms: 1 }.is_retryable());
        assert!(ProviderError::Transport("x".into()).is_retryable());
        assert!(ProviderError::Malformed {
            what: "x".into(),
            excerpt: "y".into()
        }
        .is_retryable());
        for s in [401, 403, 404] {
            assert!(http(s).is_fatal() && !http(s).is_retryable(), "{s}");
        }
        for s in [400, 408, 429, 500, 502, 503] {
            assert!(!http(s).is_fatal(), "{s}");
        }
        let unknown = ProviderError::Http {
            status: 400,
            body:
                r#"{"error":{"code":"model_not_found","message":"The model `x` does not exist"}}"#
                    .into(),
        };
        assert!(unknown.is_fatal());
        assert!(ProviderError::Config("k".into()).is_fatal());
        assert!(!ProviderError::Timeout { after_ms: 1 }.is_fatal());
        assert!(!ProviderError::DeadlineExceeded {
            attempts: 1,
            last: None
        }
        .is_retryable());
        let d = ProviderError::DeadlineExceeded {
            attempts: 3,
            last: Some("HTTP 500: boom".into()),
        };
        assert_eq!(
            d.to_string(),
            "deadline exceeded after 3 request(s) (last: HTTP 500: boom)"
        );
    }
}
