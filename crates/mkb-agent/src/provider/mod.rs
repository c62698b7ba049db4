//! LLM providers: OpenAI-compatible Chat Completions (OpenAI, vLLM, SGLang), the Anthropic
//! Messages API, and replay of recorded conversations; record mode and text tool mode wrap
//! them. Dispatch is by enum: `Provider` (one per model config) opens a `Session` (one per
//! conversation), whose `chat` sends one `ChatRequest` and returns one `ChatResponse`.
//!
//! ```ignore
//! let provider = Provider::from_config(&cfg)?;            // reads the API key's env var
//! let mut session = provider.session(&key)?;              // replay: opens the recording
//! let resp = session.chat(&request, deadline).await?;     // retries inside the deadline
//! ```

mod anthropic;
pub mod config;
pub mod error;
mod http;
pub mod limits;
mod openai;
pub mod replay;
pub mod text_mode;
pub mod types;

#[cfg(test)]
mod stub;
#[cfg(test)]
mod tests;

pub use config::{ApiKey, MaxTokensField, ProviderConfig, ProviderKind, ToolMode};
pub use error::ProviderError;
pub use limits::ThrottleStats;
pub use replay::{read_recording, RecordedTurn, RecordingHeader};
pub use types::{
    ChatRequest, ChatResponse, ConversationKey, Message, Role, Sampling, ToolCall, ToolSpec, Usage,
};

use http::{AuthStyle, HttpClient};
use replay::{Recorder, ReplaySession};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What an API answered, before the session adds timing and retries.
#[derive(Debug)]
pub(crate) struct Reply {
    pub message: Message,
    pub usage: Usage,
    pub stop_reason: String,
    pub model: String,
}

/// Which wire format an HTTP backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Openai,
    Anthropic,
}

#[derive(Debug, Clone)]
enum Backend {
    Http { api: Api, client: Arc<HttpClient> },
    Replay { dir: PathBuf },
}

/// One configured model. Cheap to clone; sessions share its HTTP connection pool.
#[derive(Debug, Clone)]
pub struct Provider {
    cfg: Arc<ProviderConfig>,
    backend: Backend,
}

impl Provider {
    /// Validates `cfg` and reads the API key from the environment variable it names.
    pub fn from_config(cfg: &ProviderConfig) -> Result<Provider, ProviderError> {
        Self::from_config_with_env(cfg, |var| std::env::var(var).ok())
    }

    /// As [`Provider::from_config`], reading environment variables through `lookup`.
    pub fn from_config_with_env(
        cfg: &ProviderConfig,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Provider, ProviderError> {
        cfg.validate()?;
        let key = match &cfg.api_key_env {
            Some(var) => Some(ApiKey::from_env_with(var, &lookup)?),
            None => None,
        };
        let backend = match cfg.kind {
            ProviderKind::Openai => Backend::Http {
                api: Api::Openai,
                client: Arc::new(HttpClient::new(cfg, key, AuthStyle::Bearer)?),
            },
            ProviderKind::Anthropic => Backend::Http {
                api: Api::Anthropic,
                client: Arc::new(HttpClient::new(cfg, key, AuthStyle::XApiKey)?),
            },
            ProviderKind::Replay => Backend::Replay {
                dir: cfg
                    .dir
                    .clone()
                    .ok_or_else(|| ProviderError::Config("replay needs `dir`".into()))?,
            },
        };
        Ok(Provider {
            cfg: Arc::new(cfg.clone()),
            backend,
        })
    }

    pub fn config(&self) -> &ProviderConfig {
        &self.cfg
    }

    /// What rate limiting cost this model so far, over all its sessions (None for replay).
    pub fn throttle_stats(&self) -> Option<ThrottleStats> {
        match &self.backend {
            Backend::Http { client, .. } => Some(client.throttle_stats()),
            Backend::Replay { .. } => None,
        }
    }

    /// `<kind>:<model>`, as recordings name their producer.
    pub fn producer(&self) -> String {
        format!("{}:{}", self.cfg.kind.as_str(), self.cfg.model)
    }

    /// Opens the conversation `key`: for replay, loads its recording (an error names the
    /// missing file); in record mode, creates its recording.
    pub fn session(&self, key: &ConversationKey) -> Result<Session, ProviderError> {
        let backend = match &self.backend {
            Backend::Http { api, client } => SessionBackend::Http {
                api: *api,
                client: client.clone(),
            },
            Backend::Replay { dir } => {
                SessionBackend::Replay(ReplaySession::open(dir, key, self.cfg.replay_strict)?)
            }
        };
        let recorder = match (&self.cfg.record_dir, &self.backend) {
            (Some(dir), Backend::Http { .. }) => Some(Recorder::create(
                dir,
                key,
                &self.producer(),
                self.cfg.tool_mode,
            )?),
            _ => None,
        };
        Ok(Session {
            key: key.clone(),
            cfg: self.cfg.clone(),
            backend,
            recorder,
            turns: 0,
        })
    }
}

#[derive(Debug)]
enum SessionBackend {
    Http { api: Api, client: Arc<HttpClient> },
    Replay(ReplaySession),
}

/// One conversation with a provider.
#[derive(Debug)]
pub struct Session {
    key: ConversationKey,
    cfg: Arc<ProviderConfig>,
    backend: SessionBackend,
    recorder: Option<Recorder>,
    turns: u32,
}

impl Session {
    /// Sends the conversation so far and returns the assistant's answer. Retries (429, 408,
    /// 5xx, timeouts, transport errors) happen inside, with backoff, never past `deadline`.
    /// Replay returns the next recorded turn; record mode writes the turn before returning;
    /// text tool mode rewrites the request and parses action blocks from the answer.
    pub async fn chat(
        &mut self,
        req: &ChatRequest,
        deadline: Instant,
    ) -> Result<ChatResponse, ProviderError> {
        let mut resp = match &mut self.backend {
            SessionBackend::Replay(r) => r.next_turn(req)?,
            SessionBackend::Http { api, client } => {
                http_chat(&self.cfg, client, *api, req, deadline, self.turns).await?
            }
        };
        // A provider may echo what it was sent (request headers included): no secret of this
        // process goes further than here (recordings, trajectories, the next request).
        if mkb_core::secret::count() > 0 {
            if let Some(clean) = mkb_core::secret::scrub_value(&resp) {
                resp = clean;
            }
        }
        if let Some(rec) = &mut self.recorder {
            rec.write_turn(req, &resp)?;
        }
        tracing::info!(
            conversation = %self.key.file_stem(),
            turn = self.turns,
            model = %resp.model,
            input_tokens = resp.usage.input_tokens,
            output_tokens = resp.usage.output_tokens,
            usage_missing = resp.usage.missing,
            tool_calls = resp.message.tool_calls.len(),
            retries = resp.retries,
            latency_ms = resp.latency_ms,
            "model call"
        );
        self.turns += 1;
        Ok(resp)
    }

    pub fn key(&self) -> &ConversationKey {
        &self.key
    }

    /// Successful `chat` calls so far.
    pub fn turns(&self) -> u32 {
        self.turns
    }

    /// The recording this session plays (replay) or writes (record mode).
    pub fn recording_path(&self) -> Option<&Path> {
        match (&self.backend, &self.recorder) {
            (SessionBackend::Replay(r), _) => Some(r.path()),
            (_, Some(rec)) => Some(rec.path()),
            _ => None,
        }
    }

    /// Replay only: turns whose request differed from the recorded one.
    pub fn replay_drift(&self) -> Option<usize> {
        match &self.backend {
            SessionBackend::Replay(r) => Some(r.drift()),
            _ => None,
        }
    }
}

async fn http_chat(
    cfg: &ProviderConfig,
    client: &HttpClient,
    api: Api,
    req: &ChatRequest,
    deadline: Instant,
    turn: u32,
) -> Result<ChatResponse, ProviderError> {
    let start = Instant::now();
    let text = cfg.tool_mode == ToolMode::Text;
    let rewritten;
    let wire = if text {
        rewritten = text_mode::to_text_request(req);
        &rewritten
    } else {
        req
    };
    let sampling = wire.sampling.merged_over(&cfg.sampling);
    let (url, headers, body) = match api {
        Api::Openai => (
            openai::url(cfg),
            Vec::new(),
            openai::build_body(cfg, &wire.messages, &wire.tools, &sampling)?,
        ),
        Api::Anthropic => (
            anthropic::url(cfg),
            anthropic::headers(cfg),
            anthropic::build_body(cfg, &wire.messages, &wire.tools, &sampling)?,
        ),
    };
    let excerpt = |s: &str| client.excerpt(s.as_bytes());
    // Parsed inside the retry loop: an answer without choices or content is retried.
    let out = client
        .post_json(&url, &headers, &body, deadline, |v| match api {
            Api::Openai => openai::parse_response(v, cfg, excerpt),
            Api::Anthropic => anthropic::parse_response(v, cfg, excerpt),
        })
        .await?;
    let reply = out.value;
    let mut resp = ChatResponse {
        message: reply.message,
        usage: reply.usage,
        stop_reason: reply.stop_reason,
        model: reply.model,
        latency_ms: start.elapsed().as_millis() as u64,
        retries: out.retries,
        format_error: None,
    };
    if text {
        text_mode::apply_to_response(&mut resp, &format!("act{turn}_"));
    }
    Ok(resp)
}
