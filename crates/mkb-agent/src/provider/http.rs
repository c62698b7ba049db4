//! The HTTP layer shared by the OpenAI-compatible and Anthropic providers: one JSON POST with
//! retries (exponential backoff with jitter; `Retry-After` honoured up to `retry_max_s`) on 429,
//! 408, 5xx, timeouts, transport errors and answers that are not what the API returns (bad or
//! empty JSON, an HTML page with status 200, no choices), never sleeping or waiting past the
//! caller's deadline. Bodies are read up to `max_response_bytes`. Error texts are trimmed and
//! scrubbed of every secret this process holds. Every request first passes the model's shared
//! rate limits (provider/limits.rs); a 429 pauses all sessions of the model.

use super::config::{ApiKey, ProviderConfig};
use super::error::ProviderError;
use super::limits::{estimate_tokens, used_tokens, Limiter, ThrottleStats, WouldPassDeadline};
use rand::Rng;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use std::time::Duration;
use tokio::time::Instant;

/// Longest body excerpt kept in an error.
const EXCERPT_CHARS: usize = 400;

/// How the API key travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthStyle {
    /// `Authorization: Bearer <key>` (OpenAI-compatible).
    Bearer,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
}

/// A JSON-over-HTTP client bound to one provider config.
#[derive(Debug)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    key: Option<ApiKey>,
    auth: AuthStyle,
    timeout: Duration,
    max_retries: u32,
    retry_base: Duration,
    retry_max: Duration,
    max_body: u64,
    /// Shared by every session of this model (sessions clone the client's Arc).
    limiter: Limiter,
}

/// A successful call: the parsed answer and how many retries it took.
#[derive(Debug)]
pub(crate) struct HttpOutcome<T> {
    pub value: T,
    pub retries: u32,
}

/// One failed request and the server's requested wait, if any.
struct Failure {
    error: ProviderError,
    retry_after: Option<Duration>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Failure {
        Failure {
            error,
            retry_after: None,
        }
    }
}

impl HttpClient {
    pub(crate) fn new(
        cfg: &ProviderConfig,
        key: Option<ApiKey>,
        auth: AuthStyle,
    ) -> Result<HttpClient, ProviderError> {
        let timeout = cfg.request_timeout();
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(30)))
            .build()
            .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpClient {
            client,
            key,
            auth,
            timeout,
            max_retries: cfg.max_retries,
            retry_base: Duration::from_secs_f64(cfg.retry_base_s),
            retry_max: Duration::from_secs_f64(cfg.retry_max_s),
            max_body: cfg.max_response(),
            limiter: Limiter::new(cfg.requests_per_minute, cfg.tokens_per_minute),
        })
    }

    pub(crate) fn throttle_stats(&self) -> ThrottleStats {
        self.limiter.stats()
    }

    /// Removes the API key (and every other secret of this process) from `text`.
    pub(crate) fn redact(&self, text: &str) -> String {
        let own = match &self.key {
            Some(k) => k.redact(text),
            None => text.to_string(),
        };
        mkb_core::secret::scrub(&own).into_owned()
    }

    /// A trimmed, redacted excerpt of a body for error messages.
    pub(crate) fn excerpt(&self, bytes: &[u8]) -> String {
        excerpt(&self.redact(&String::from_utf8_lossy(bytes)))
    }

    /// POSTs `body` to `url` with `headers` (plus the auth header) and returns the JSON answer
    /// as `parse` reads it, retrying what is retryable (an answer `parse` rejects included)
    /// while time is left before `deadline`.
    pub(crate) async fn post_json<T>(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: &serde_json::Value,
        deadline: std::time::Instant,
        parse: impl Fn(&serde_json::Value) -> Result<T, ProviderError>,
    ) -> Result<HttpOutcome<T>, ProviderError> {
        let deadline = Instant::from_std(deadline);
        let bytes = serde_json::to_vec(body).map_err(|e| {
            ProviderError::InvalidRequest(format!("cannot serialize the request: {e}"))
        })?;
        let header_map = self.headers(headers)?;
        let est = estimate_tokens(body, bytes.len());
        let mut attempts = 0u32;
        let mut retries = 0u32;
        let mut last: Option<String> = None;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(ProviderError::DeadlineExceeded { attempts, last });
            }
            // The model's shared limits (requests and tokens per minute, a 429's pause).
            if let Err(WouldPassDeadline(wait)) = self.limiter.acquire(est, deadline).await {
                tracing::warn!(
                    url,
                    wait_ms = wait.as_millis() as u64,
                    "provider rate limit: the next request could start only past the deadline"
                );
                return Err(ProviderError::DeadlineExceeded {
                    attempts,
                    last: Some(
                        last.unwrap_or_else(|| "waiting for the provider's rate limits".into()),
                    ),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ProviderError::DeadlineExceeded { attempts, last });
            }
            let remaining = deadline - now;
            let clamped = remaining < self.timeout;
            let timeout = if clamped { remaining } else { self.timeout };
            attempts += 1;
            let failure = match self
                .send_once(url, &header_map, bytes.clone(), timeout)
                .await
            {
                Ok(json) => {
                    self.limiter.settle(est, used_tokens(&json));
                    match parse(&json) {
                        Ok(value) => return Ok(HttpOutcome { value, retries }),
                        Err(e) => Failure::from(e),
                    }
                }
                Err(f) => {
                    // A refused request used no tokens.
                    self.limiter.settle(est, Some(0));
                    f
                }
            };
            let Failure { error, retry_after } = failure;
            if clamped && matches!(error, ProviderError::Timeout { .. }) {
                // The deadline, not the request timeout, cut this request short.
                return Err(ProviderError::DeadlineExceeded {
                    attempts,
                    last: Some(error.to_string()),
                });
            }
            if !error.is_retryable() || retries >= self.max_retries {
                return Err(error);
            }
            // A server's Retry-After is honoured up to retry_max (1e300 s is not a wait).
            let wait = retry_after
                .map(|w| w.min(self.retry_max))
                .unwrap_or_else(|| self.backoff(retries));
            if matches!(error, ProviderError::Http { status: 429, .. }) {
                // Every session of this model holds back, not only this one.
                self.limiter.pause(wait);
            }
            if Instant::now() + wait >= deadline {
                tracing::warn!(url, error = %error, wait_ms = wait.as_millis() as u64,
                    "provider request failed; the next try would start past the deadline");
                return Err(ProviderError::DeadlineExceeded {
                    attempts,
                    last: Some(error.to_string()),
                });
            }
            tracing::warn!(url, error = %error, retry = retries + 1, wait_ms = wait.as_millis() as u64,
                "provider request failed; retrying");
            last = Some(error.to_string());
            tokio::time::sleep(wait).await;
            retries += 1;
        }
    }

    fn headers(&self, extra: &[(&'static str, String)]) -> Result<HeaderMap, ProviderError> {
        let mut map = HeaderMap::new();
        map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in extra {
            let v = HeaderValue::from_str(value).map_err(|_| {
                ProviderError::Config(format!("header {name} has an invalid value"))
            })?;
            map.insert(HeaderName::from_static(name), v);
        }
        if let Some(key) = &self.key {
            let (name, text) = match self.auth {
                AuthStyle::Bearer => (
                    reqwest::header::AUTHORIZATION,
                    format!("Bearer {}", key.expose()),
                ),
                AuthStyle::XApiKey => (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_string(),
                ),
            };
            let mut v = HeaderValue::from_str(&text).map_err(|_| {
                ProviderError::Config(
                    "the API key holds characters not allowed in an HTTP header".into(),
                )
            })?;
            v.set_sensitive(true);
            map.insert(name, v);
        }
        Ok(map)
    }

    async fn send_once(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<serde_json::Value, Failure> {
        let resp = self
            .client
            .post(url)
            .headers(headers.clone())
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| self.map_reqwest(e, timeout))?;
        let status = resp.status();
        let retry_after = parse_retry_after(resp.headers());
        let too_big = |n: u64| {
            Failure::from(ProviderError::Malformed {
                what: format!(
                    "the response is larger than max_response_bytes = {} ({n} bytes or more)",
                    self.max_body
                ),
                excerpt: String::new(),
            })
        };
        if let Some(n) = resp.content_length().filter(|n| *n > self.max_body) {
            return Err(too_big(n));
        }
        let mut resp = resp;
        let mut bytes: Vec<u8> = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| self.map_reqwest(e, timeout))?
        {
            if (bytes.len() + chunk.len()) as u64 > self.max_body {
                return Err(too_big((bytes.len() + chunk.len()) as u64));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(Failure {
                error: ProviderError::Http {
                    status: status.as_u16(),
                    body: self.excerpt(&bytes),
                },
                retry_after,
            });
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(Failure::from(ProviderError::Malformed {
                what: format!("an empty body with HTTP {}", status.as_u16()),
                excerpt: String::new(),
            }));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            Failure::from(ProviderError::Malformed {
                what: format!("invalid JSON: {e}"),
                excerpt: self.excerpt(&bytes),
            })
        })
    }

    fn map_reqwest(&self, e: reqwest::Error, timeout: Duration) -> Failure {
        if e.is_timeout() {
            return ProviderError::Timeout {
                after_ms: timeout.as_millis() as u64,
            }
            .into();
        }
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        let text = self.redact(&text);
        if e.is_builder() {
            ProviderError::Config(text).into()
        } else {
            ProviderError::Transport(text).into()
        }
    }

    /// base * 2^retry, capped at retry_max, times a jitter factor in [0.5, 1].
    fn backoff(&self, retry: u32) -> Duration {
        let exp = self.retry_base.as_secs_f64() * 2f64.powi(retry.min(30) as i32);
        let capped = exp.min(self.retry_max.as_secs_f64());
        let jitter: f64 = rand::thread_rng().gen_range(0.5..=1.0);
        Duration::from_secs_f64(capped * jitter)
    }
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds; an HTTP date is not honoured
/// and falls back to the backoff). Values too large for a `Duration` saturate at one day (the
/// caller caps the wait at `retry_max_s` anyway).
fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    const DAY_S: f64 = 86_400.0;
    let num = |name: &str| -> Option<f64> {
        let v = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    if let Some(ms) = num("retry-after-ms") {
        return Some(Duration::from_secs_f64((ms / 1000.0).min(DAY_S)));
    }
    num("retry-after").map(|s| Duration::from_secs_f64(s.min(DAY_S)))
}

/// The first `EXCERPT_CHARS` characters of `text`, whitespace runs collapsed.
pub(crate) fn excerpt(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let total = collapsed.chars().count();
    if total <= EXCERPT_CHARS {
        collapsed
    } else {
        let head: String = collapsed.chars().take(EXCERPT_CHARS).collect();
        format!("{head}... ({total} chars)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        assert_eq!(parse_retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(150)));
        let mut d = HeaderMap::new();
        d.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&d), None);
        let mut huge = HeaderMap::new();
        huge.insert("retry-after", HeaderValue::from_static("1e300"));
        assert_eq!(parse_retry_after(&huge), Some(Duration::from_secs(86_400)));
        huge.insert("retry-after-ms", HeaderValue::from_static("1e308"));
        assert_eq!(parse_retry_after(&huge), Some(Duration::from_secs(86_400)));
        huge.insert("retry-after-ms", HeaderValue::from_static("inf"));
        assert_eq!(parse_retry_after(&huge), Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn excerpt_trims_and_collapses() {
        assert_eq!(excerpt("a \n\n b"), "a b");
        let long = "é".repeat(1000);
        let e = excerpt(&long);
        assert!(e.ends_with("... (1000 chars)"), "{e}");
        assert_eq!(e.chars().filter(|c| *c == 'é').count(), EXCERPT_CHARS);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let mut cfg = ProviderConfig::new(super::super::config::ProviderKind::Openai, "m");
        cfg.retry_base_s = 1.0;
        cfg.retry_max_s = 5.0;
        let c = HttpClient::new(&cfg, None, AuthStyle::Bearer).unwrap();
        for _ in 0..50 {
            let b0 = c.backoff(0).as_secs_f64();
            assert!((0.5..=1.0).contains(&b0), "{b0}");
            let b2 = c.backoff(2).as_secs_f64();
            assert!((2.0..=4.0).contains(&b2), "{b2}");
            let b10 = c.backoff(10).as_secs_f64();
            assert!((2.5..=5.0).contains(&b10), "{b10}");
        }
    }
}
