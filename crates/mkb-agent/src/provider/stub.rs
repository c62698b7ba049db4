//! A hand-written, scripted HTTP/1.1 stub server on 127.0.0.1 for the provider tests: each
//! request gets the next scripted reply (the last one repeats), and every request is kept
//! (method, path, headers, body, arrival time) for the test to inspect. Faults on demand: any
//! status and body (HTML pages with 200 included), delays before the head or the body (a
//! provider that never answers), huge streamed bodies, `Retry-After` headers, and echoes of
//! the request's auth headers (appended, or in place of `{{AUTH}}` inside a valid JSON body).
//! Test-only; also included by `tests/provider_secrets.rs`.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct StubReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait before sending anything.
    pub delay: Duration,
    /// Send the status line and headers, then wait this long before the body.
    pub body_delay: Duration,
    /// Append the request's auth headers to the body (to test redaction of echoed keys).
    pub echo_auth: bool,
    /// Stream this many bytes of padding after `body` (a response too large to accept).
    pub pad_bytes: usize,
    pub content_type: String,
}

/// In a body, replaced by the request's `authorization` (or `x-api-key`) header value.
pub const AUTH_PLACEHOLDER: &str = "{{AUTH}}";

impl StubReply {
    pub fn json(status: u16, body: serde_json::Value) -> StubReply {
        StubReply::raw(status, &body.to_string())
    }
    pub fn raw(status: u16, body: &str) -> StubReply {
        StubReply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
            delay: Duration::ZERO,
            body_delay: Duration::ZERO,
            echo_auth: false,
            pad_bytes: 0,
            content_type: "application/json".to_string(),
        }
    }
    /// An HTML page, as a proxy or load balancer sends one.
    pub fn html(status: u16, body: &str) -> StubReply {
        StubReply {
            content_type: "text/html".to_string(),
            ..StubReply::raw(status, body)
        }
    }
    pub fn padded(mut self, bytes: usize) -> StubReply {
        self.pad_bytes = bytes;
        self
    }
    pub fn header(mut self, name: &str, value: &str) -> StubReply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub fn delayed(mut self, d: Duration) -> StubReply {
        self.delay = d;
        self
    }
    pub fn body_delayed(mut self, d: Duration) -> StubReply {
        self.body_delay = d;
        self
    }
    pub fn echo_auth(mut self) -> StubReply {
        self.echo_auth = true;
        self
    }
}

/// One request as the stub received it.
#[derive(Debug, Clone)]
pub struct StubRequest {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
}

impl StubRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

struct State {
    script: Vec<StubReply>,
    requests: Vec<StubRequest>,
}

/// A running stub; stops when dropped.
pub struct StubServer {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl StubServer {
    /// Starts a stub answering with `script` in order; after the script, its last reply repeats.
    pub async fn start(script: Vec<StubReply>) -> StubServer {
        assert!(!script.is_empty(), "a stub needs at least one reply");
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let state = Arc::new(Mutex::new(State {
            script,
            requests: Vec::new(),
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, st).await;
                });
            }
        });
        StubServer { base, state, task }
    }

    pub fn requests(&self) -> Vec<StubRequest> {
        self.state.lock().unwrap().requests.clone()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let req = StubRequest {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    };
    let reply = {
        let mut st = state.lock().unwrap();
        let i = st.requests.len().min(st.script.len() - 1);
        st.requests.push(req.clone());
        st.script[i].clone()
    };
    tokio::time::sleep(reply.delay).await;
    let mut body = reply.body.clone();
    if body.contains(AUTH_PLACEHOLDER) {
        let auth = req
            .header("authorization")
            .or(req.header("x-api-key"))
            .unwrap_or("")
            .to_string();
        body = body.replace(AUTH_PLACEHOLDER, &auth);
    }
    if reply.echo_auth {
        for name in ["authorization", "x-api-key"] {
            if let Some(v) = req.header(name) {
                body.push_str(&format!(" [{name}: {v}]"));
            }
        }
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        body.len() + reply.pad_bytes
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    sock.flush().await?;
    tokio::time::sleep(reply.body_delay).await;
    sock.write_all(body.as_bytes()).await?;
    let pad = vec![b' '; 64 * 1024];
    let mut left = reply.pad_bytes;
    while left > 0 {
        let n = left.min(pad.len());
        // The client may hang up once it has read enough.
        if sock.write_all(&pad[..n]).await.is_err() {
            return Ok(());
        }
        left -= n;
    }
    sock.flush().await?;
    sock.shutdown().await
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        502 => "Bad Gateway",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
