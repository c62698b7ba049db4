//! Recorded conversations: the replay provider that plays one, and the recorder (record mode)
//! that writes one while a real provider runs.
//!
//! Format: one JSONL file per conversation, `<dir>/<model_label>/<file_stem>.jsonl`. Line 1 is
//! a [`RecordingHeader`]; each further line is a [`RecordedTurn`] (the `ChatResponse` the agent
//! loop received, plus a digest of the request's last message for drift diagnostics).
//! Replay plays the turns in order whatever the tool results it is sent (the evaluator is real
//! and its outputs may differ from the recording's).

use super::config::ToolMode;
use super::error::ProviderError;
use super::types::{ChatRequest, ChatResponse, ConversationKey};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// `format` of a recording header.
pub const RECORDING_FORMAT: &str = "mkb-replay";
/// `version` of the recording format this code reads and writes.
pub const RECORDING_VERSION: u32 = 1;
/// `producer` of a recording written by hand.
pub const HANDWRITTEN: &str = "handwritten";

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingHeader {
    pub format: String,
    pub version: u32,
    pub key: ConversationKey,
    /// RFC 3339 UTC time of creation.
    #[serde(default)]
    pub created: String,
    /// `<kind>:<model>` of the provider that produced it, or `handwritten`.
    pub producer: String,
    /// The tool mode the conversation ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_mode: Option<ToolMode>,
}

/// One assistant turn of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedTurn {
    pub turn: usize,
    /// Messages in the request that produced this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_messages: Option<usize>,
    /// `Message::digest` of the request's last message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_digest: Option<String>,
    pub response: ChatResponse,
}

impl RecordedTurn {
    fn of(turn: usize, req: &ChatRequest, response: &ChatResponse) -> RecordedTurn {
        RecordedTurn {
            turn,
            request_messages: Some(req.messages.len()),
            last_message_digest: req.messages.last().map(|m| m.digest()),
            response: response.clone(),
        }
    }
}

/// Reads a whole recording.
pub fn read_recording(path: &Path) -> Result<(RecordingHeader, Vec<RecordedTurn>), ProviderError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProviderError::ReplayMissing {
                path: path.to_path_buf(),
            })
        }
        Err(e) => {
            return Err(ProviderError::ReplayFormat {
                path: path.to_path_buf(),
                line: 0,
                message: e.to_string(),
            })
        }
    };
    let fmt_err = |line: usize, message: String| ProviderError::ReplayFormat {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, first) = lines
        .next()
        .ok_or_else(|| fmt_err(1, "empty file (no header line)".into()))?;
    let header: RecordingHeader =
        serde_json::from_str(first).map_err(|e| fmt_err(1, format!("bad header: {e}")))?;
    if header.format != RECORDING_FORMAT || header.version != RECORDING_VERSION {
        return Err(fmt_err(
            1,
            format!(
                "format {:?} version {} (this build reads {RECORDING_FORMAT:?} version {RECORDING_VERSION})",
                header.format, header.version
            ),
        ));
    }
    let mut turns = Vec::new();
    for (i, line) in lines {
        let t: RecordedTurn =
            serde_json::from_str(line).map_err(|e| fmt_err(i + 1, format!("bad turn: {e}")))?;
        if t.turn != turns.len() {
            return Err(fmt_err(
                i + 1,
                format!("turn {} where turn {} was expected", t.turn, turns.len()),
            ));
        }
        turns.push(t);
    }
    Ok((header, turns))
}

/// Plays one recorded conversation.
#[derive(Debug)]
pub(crate) struct ReplaySession {
    path: PathBuf,
    turns: Vec<RecordedTurn>,
    next: usize,
    strict: bool,
    drift: usize,
}

impl ReplaySession {
    pub(crate) fn open(
        dir: &Path,
        key: &ConversationKey,
        strict: bool,
    ) -> Result<ReplaySession, ProviderError> {
        let path = key.recording_path(dir);
        let (header, turns) = read_recording(&path)?;
        if header.key != *key {
            let message = format!(
                "the header's key {:?} differs from the requested {:?}",
                header.key, key
            );
            if strict {
                return Err(ProviderError::ReplayMismatch {
                    path,
                    turn: 0,
                    message,
                });
            }
            tracing::warn!(path = %path.display(), "{message}");
        }
        Ok(ReplaySession {
            path,
            turns,
            next: 0,
            strict,
            drift: 0,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Turns whose request differed from the recorded one so far.
    pub(crate) fn drift(&self) -> usize {
        self.drift
    }

    pub(crate) fn next_turn(&mut self, req: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let turn = self
            .turns
            .get(self.next)
            .ok_or_else(|| ProviderError::ReplayExhausted {
                path: self.path.clone(),
                turns: self.turns.len(),
            })?;
        let mut differences = Vec::new();
        if let Some(n) = turn.request_messages {
            if n != req.messages.len() {
                differences.push(format!(
                    "{} request messages, {n} recorded",
                    req.messages.len()
                ));
            }
        }
        if let Some(d) = &turn.last_message_digest {
            if req.messages.last().map(|m| m.digest()).as_ref() != Some(d) {
                differences
                    .push("the last request message differs from the recorded one".to_string());
            }
        }
        if !differences.is_empty() {
            let message = differences.join("; ");
            if self.strict {
                return Err(ProviderError::ReplayMismatch {
                    path: self.path.clone(),
                    turn: self.next,
                    message,
                });
            }
            self.drift += 1;
            tracing::debug!(path = %self.path.display(), turn = self.next, "replay drift: {message}");
        }
        self.next += 1;
        Ok(turn.response.clone())
    }
}

/// Writes one conversation as it happens (record mode). Every turn is written and synced
/// before `chat` returns, so a crash loses nothing already answered.
#[derive(Debug)]
pub(crate) struct Recorder {
    path: PathBuf,
    file: std::fs::File,
    turns: usize,
}

impl Recorder {
    /// Creates (or truncates: a re-run of the same conversation replaces it) the recording
    /// of `key` under `dir` and writes its header.
    pub(crate) fn create(
        dir: &Path,
        key: &ConversationKey,
        producer: &str,
        tool_mode: ToolMode,
    ) -> Result<Recorder, ProviderError> {
        let path = key.recording_path(dir);
        let err = |e: std::io::Error| ProviderError::Record {
            path: path.clone(),
            message: e.to_string(),
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        let file = std::fs::File::create(&path).map_err(err)?;
        let mut rec = Recorder {
            path: path.clone(),
            file,
            turns: 0,
        };
        let header = RecordingHeader {
            format: RECORDING_FORMAT.to_string(),
            version: RECORDING_VERSION,
            key: key.clone(),
            created: rfc3339_now(),
            producer: producer.to_string(),
            tool_mode: Some(tool_mode),
        };
        rec.write_line(&header)?;
        Ok(rec)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn write_turn(
        &mut self,
        req: &ChatRequest,
        resp: &ChatResponse,
    ) -> Result<(), ProviderError> {
        let turn = RecordedTurn::of(self.turns, req, resp);
        self.write_line(&turn)?;
        self.turns += 1;
        Ok(())
    }

    fn write_line<T: Serialize>(&mut self, value: &T) -> Result<(), ProviderError> {
        let err = |message: String| ProviderError::Record {
            path: self.path.clone(),
            message,
        };
        let text = serde_json::to_string(value).map_err(|e| err(e.to_string()))?;
        // No secret of this process is ever written to a recording.
        let mut line = mkb_core::secret::scrub(&text).into_owned().into_bytes();
        line.push(b'\n');
        self.file.write_all(&line).map_err(|e| err(e.to_string()))?;
        self.file.sync_data().map_err(|e| err(e.to_string()))
    }
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let rem = unix_s % 86_400;
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::types::{Message, Usage};
    use mkb_core::{Condition, Dsl};

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    fn key() -> ConversationKey {
        ConversationKey {
            model_label: "m".into(),
            problem: "A01".into(),
            dsl: Dsl::TIRX,
            condition: Condition::Placebo,
            run: 2,
        }
    }

    fn resp(text: &str) -> ChatResponse {
        ChatResponse {
            message: Message::assistant(text),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 1,
                cached_input_tokens: None,
                missing: false,
            },
            stop_reason: "stop".into(),
            model: "m".into(),
            latency_ms: 5,
            retries: 0,
            format_error: None,
        }
    }

    #[test]
    fn record_then_read_and_strict_drift() {
        let dir = tempfile::tempdir().unwrap();
        let req = ChatRequest {
            messages: vec![Message::user("hi")],
            ..ChatRequest::default()
        };
        let mut rec = Recorder::create(dir.path(), &key(), "openai:m", ToolMode::Native).unwrap();
        rec.write_turn(&req, &resp("one")).unwrap();
        assert_eq!(rec.path(), dir.path().join("m/A01_tirx_placebo_r2.jsonl"));
        let (h, turns) = read_recording(rec.path()).unwrap();
        assert_eq!(h.key, key());
        assert_eq!(h.producer, "openai:m");
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].response, resp("one"));

        let mut strict = ReplaySession::open(dir.path(), &key(), true).unwrap();
        let other = ChatRequest {
            messages: vec![Message::user("different")],
            ..ChatRequest::default()
        };
        let e = strict.next_turn(&other).unwrap_err();
        assert!(
            matches!(e, ProviderError::ReplayMismatch { turn: 0, .. }),
            "{e}"
        );
        let mut lenient = ReplaySession::open(dir.path(), &key(), false).unwrap();
        assert_eq!(lenient.next_turn(&other).unwrap(), resp("one"));
        assert_eq!(lenient.drift(), 1);
        let mut strict = ReplaySession::open(dir.path(), &key(), true).unwrap();
        assert_eq!(strict.next_turn(&req).unwrap(), resp("one"));
    }

    #[test]
    fn bad_recordings_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = key().recording_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let header = serde_json::json!({"format": "mkb-replay", "version": 1, "key": key(), "producer": "handwritten"});
        std::fs::write(&path, format!("{header}\n{{\"turn\": 0}}\n")).unwrap();
        let e = read_recording(&path).unwrap_err();
        assert!(
            matches!(&e, ProviderError::ReplayFormat { line: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("A01_tirx_placebo_r2.jsonl"), "{e}");
        std::fs::write(&path, "{\"format\": \"other\", \"version\": 1}\n").unwrap();
        assert!(matches!(
            read_recording(&path),
            Err(ProviderError::ReplayFormat { line: 1, .. })
        ));
        let turn = serde_json::json!({"turn": 1, "response": resp("x")});
        std::fs::write(&path, format!("{header}\n{turn}\n")).unwrap();
        let e = read_recording(&path).unwrap_err();
        assert!(
            e.to_string().contains("turn 1 where turn 0 was expected"),
            "{e}"
        );
    }
}
