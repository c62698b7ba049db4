//! One Python judge process (`python -m mkb_eval.judge`): spawned with a scrubbed environment,
//! spoken to over JSON lines on stdin/stdout, supervised with deadlines. A judge that dies or
//! stops answering is killed and reported; it never takes `mkb` down with it. Candidate files
//! over [`MAX_CANDIDATE_BYTES`] are refused here, before any process reads them, and a judge
//! started without the OS sandbox (the `--unsafe-no-sandbox` opt-out) is logged loudly.

use crate::protocol::{parse_line, trim, EvalRequest, EvalResponse, Hello, Incoming, KeyedReport};
use crate::spec::ProblemSpec;
use mkb_core::PROTOCOL_VERSION;
use mkb_core::{EvalMode, EvalReport, Verdict};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How to start a judge.
#[derive(Debug, Clone)]
pub struct JudgeSpec {
    /// The Python interpreter (with torch; the DSLs may come from PYTHONPATH).
    pub python: PathBuf,
    /// The repository root: `<root>/python` goes on PYTHONPATH.
    pub root: PathBuf,
    /// `Some(i)`: the judge sees GPU i only. `None`: the judge sees no GPU (compile-only).
    pub gpu: Option<u32>,
    /// Where the judge's stderr is appended (None: kept in memory only).
    pub log_file: Option<PathBuf>,
    /// Where the judge's work runs: this machine, or a Ray cluster through a bridge.
    pub backend: Backend,
}

/// Where a pool's judges run (docs/cluster.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Backend {
    /// Judge processes on this machine (`python -m mkb_eval.judge`).
    #[default]
    Local,
    /// Each judge is a bridge (`python -m mkb_eval.ray_bridge`) that speaks the same protocol
    /// and runs the work on one judge actor of the Ray cluster at `address`: a GPU judge's
    /// actor holds a whole GPU, a GPU-less one none. One request at a time per bridge, as for a
    /// judge.
    Ray { address: String },
}

impl Backend {
    /// `backend` ("local" or "ray", default local) and the Ray cluster's `address` (required
    /// for ray, refused for local), as an experiment's `[eval]` or `mkb eval` options give them.
    pub fn parse(backend: Option<&str>, address: Option<&str>) -> Result<Backend, String> {
        match (backend.unwrap_or("local"), address.map(str::trim)) {
            ("local", None) => Ok(Backend::Local),
            ("local", Some(_)) => {
                Err("an address is for backend \"ray\" (the Ray cluster's head)".into())
            }
            ("ray", Some(a)) if !a.is_empty() => Ok(Backend::Ray {
                address: a.to_string(),
            }),
            ("ray", _) => Err(
                "backend \"ray\" needs the address of the Ray cluster (HOST:PORT of its head, or \"auto\")"
                    .into(),
            ),
            (other, _) => Err(format!("{other:?}: expected \"local\" or \"ray\"")),
        }
    }

    /// Judges per GPU: as configured locally; one on Ray, where a GPU judge's actor holds its
    /// GPU alone.
    pub fn judges_per_gpu(&self, configured: usize) -> usize {
        match self {
            Backend::Local => configured.max(1),
            Backend::Ray { .. } => 1,
        }
    }
}

#[derive(Debug, Error)]
pub enum JudgeError {
    #[error("could not start the judge ({python}): {source}")]
    Spawn {
        python: String,
        source: std::io::Error,
    },
    #[error("the judge died: {stderr_tail}")]
    Died { stderr_tail: String },
    #[error("the judge did not answer within {0:?}")]
    Timeout(Duration),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the judge rejected the request: {0}")]
    Rejected(String),
    /// The judge answered, but its answer breaks the protocol's schema (an unknown or missing
    /// report field: mkb and mkb_eval disagree; trying again cannot help).
    #[error("the judge's answer breaks the protocol: {0}")]
    Contract(String),
}

/// Environment variables a judge may inherit (besides the DSLs' own prefixes, from their
/// descriptors). Anything that looks like a credential is dropped even when listed (API keys
/// must never reach candidate processes).
const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_PATH",
    "CUDA_HOME",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "XDG_CACHE_HOME",
    "VIRTUAL_ENV",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    // Where bubblewrap is (docs/threat-model.md); MKB_EVAL_* (e.g. MKB_EVAL_UNSAFE_NO_SANDBOX)
    // pass by prefix.
    "MKB_BWRAP",
];

/// Largest candidate file evaluated (python/mkb_eval/sandbox.py has the same limit): a kernel
/// is a few KiB; a bigger file is refused before it is read or parsed.
pub const MAX_CANDIDATE_BYTES: u64 = 128 * 1024;

/// Set by `mkb --unsafe-no-sandbox`; the judge then runs candidate code without the OS sandbox.
pub const UNSAFE_ENV: &str = "MKB_EVAL_UNSAFE_NO_SANDBOX";

/// Why a candidate file cannot be evaluated at all, from its metadata alone (never its text).
pub fn check_candidate_file(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Some(format!("{}: not a regular file", path.display())),
        Ok(m) if m.len() > MAX_CANDIDATE_BYTES => Some(format!(
            "{}: the candidate file is {} bytes, over the limit of {MAX_CANDIDATE_BYTES} bytes; it was not read",
            path.display(),
            m.len()
        )),
        Ok(_) => None,
        // A missing file is the judge's to report (load_error), as before.
        Err(_) => None,
    }
}

pub fn looks_secret(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|p| n.contains(p))
}

/// The environment a judge gets: allow-listed variables, the registered DSLs' prefixes
/// (`environment.inherit_prefixes` of `dsls/*/dsl.toml`), `MKB_EVAL_*` tuning knobs, and a
/// PYTHONPATH with the evaluator package first.
pub fn judge_env(spec: &JudgeSpec) -> Vec<(String, String)> {
    // The callers loaded and checked the descriptors already; here a broken one only loses
    // its environment (and says so).
    let dsls = match mkb_core::DslRegistry::load_root(&spec.root) {
        Ok(d) => Some(d),
        Err(errs) => {
            tracing::warn!(
                "DSL descriptors: {}",
                errs.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            None
        }
    };
    let prefixes = dsls
        .as_ref()
        .map(|d| d.inherit_prefixes())
        .unwrap_or_default();
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| {
            (ENV_ALLOW.contains(&k.as_str())
                || k.starts_with("MKB_EVAL_")
                || prefixes.iter().any(|p| k.starts_with(p.as_str())))
                && !looks_secret(k)
        })
        .collect();
    let mut pp = vec![spec.root.join("python").to_string_lossy().to_string()];
    if let Ok(existing) = std::env::var("PYTHONPATH") {
        pp.extend(
            existing
                .split(':')
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
    }
    env.push(("PYTHONPATH".into(), pp.join(":")));
    // The evaluator reads the same DSL descriptors as mkb, wherever its package lives.
    env.retain(|(k, _)| k != "MKB_EVAL_DSLS_DIR");
    env.push((
        "MKB_EVAL_DSLS_DIR".into(),
        spec.root
            .join(mkb_core::dsl::DSLS_DIR)
            .to_string_lossy()
            .to_string(),
    ));
    env.push(("PYTHONUNBUFFERED".into(), "1".into()));
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    match spec.gpu {
        Some(i) => {
            // Index into the parent's own visible list when it has one.
            let dev = std::env::var("CUDA_VISIBLE_DEVICES")
                .ok()
                .and_then(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .nth(i as usize)
                        .map(String::from)
                })
                .unwrap_or_else(|| i.to_string());
            env.push(("CUDA_VISIBLE_DEVICES".into(), dev))
        }
        None => {
            env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
            for (k, v) in dsls.iter().flat_map(|d| d.compile_only_env()) {
                if !env.iter().any(|(e, _)| *e == k) {
                    env.push((k, v));
                }
            }
        }
    }
    env
}

/// A running judge.
pub struct Judge {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    next_id: u64,
    pub hello: Hello,
    pub spec: JudgeSpec,
}

const STDERR_TAIL_LINES: usize = 60;

impl Judge {
    /// Start a judge and say hello (which waits for torch and the DSLs to import).
    pub async fn start(spec: &JudgeSpec, hello_timeout: Duration) -> Result<Judge, JudgeError> {
        let mut cmd = Command::new(&spec.python);
        match &spec.backend {
            Backend::Local => {
                cmd.args(["-m", "mkb_eval.judge"]);
            }
            Backend::Ray { address } => {
                let role = if spec.gpu.is_some() { "gpu" } else { "cpu" };
                cmd.args([
                    "-m",
                    "mkb_eval.ray_bridge",
                    "--address",
                    address,
                    "--role",
                    role,
                ]);
            }
        }
        cmd.current_dir(&spec.root)
            .env_clear()
            .envs(judge_env(spec));
        if let Backend::Ray { .. } = spec.backend {
            // Ray's own settings (e.g. RAY_AUTH_TOKEN) reach the bridge, never an actor's
            // runners (their environment is allow-listed, python/mkb_eval/sandbox.py).
            cmd.envs(std::env::vars().filter(|(k, _)| k.starts_with("RAY_")));
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Its own process group, so a kill reaches the runners it spawned.
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| JudgeError::Spawn {
            python: spec.python.display().to_string(),
            source: e,
        })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        spawn_stderr_drain(stderr, tail.clone(), spec.log_file.clone());
        let mut judge = Judge {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr_tail: tail,
            next_id: 0,
            hello: Hello {
                pid: 0,
                python: String::new(),
                torch: None,
                cuda: None,
                gpu: None,
                can_run: false,
                dsls: Default::default(),
                sandbox: serde_json::Value::Null,
                ray: None,
            },
            spec: spec.clone(),
        };
        let body = judge
            .request(
                serde_json::json!({"op": "hello"}),
                hello_timeout,
                &mut |_| {},
            )
            .await?;
        judge.hello = serde_json::from_value(body)
            .map_err(|e| JudgeError::Protocol(format!("bad hello: {e}")))?;
        tracing::debug!(pid = judge.hello.pid, gpu = ?judge.hello.gpu, sandbox = %judge.hello.sandbox, "judge ready");
        if judge.hello.sandbox_unsafe() {
            tracing::warn!(
                pid = judge.hello.pid,
                "UNSAFE: this judge runs candidate code WITHOUT the OS sandbox (--unsafe-no-sandbox): \
                 a candidate can read this machine's files and processes; every report records it"
            );
        }
        Ok(judge)
    }

    fn stderr_tail(&self) -> String {
        let t = self
            .stderr_tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        trim(&t, 4000)
    }

    /// Send one request and wait for its response, passing progress events to `on_event`.
    pub async fn request(
        &mut self,
        mut body: serde_json::Value,
        timeout: Duration,
        on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    ) -> Result<serde_json::Value, JudgeError> {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        body["v"] = PROTOCOL_VERSION.into();
        body["id"] = id.clone().into();
        self.send_and_wait(body, &id, timeout, on_event).await
    }

    async fn send_and_wait(
        &mut self,
        body: serde_json::Value,
        id: &str,
        timeout: Duration,
        on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    ) -> Result<serde_json::Value, JudgeError> {
        let mut line =
            serde_json::to_string(&body).map_err(|e| JudgeError::Protocol(e.to_string()))?;
        line.push('\n');
        if let Err(e) = self.stdin.write_all(line.as_bytes()).await {
            return Err(self.died(format!("write failed: {e}")).await);
        }
        let _ = self.stdin.flush().await;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let next = tokio::time::timeout_at(deadline, self.lines.next_line()).await;
            match next {
                Err(_) => {
                    self.kill().await;
                    return Err(JudgeError::Timeout(timeout));
                }
                Ok(Err(e)) => return Err(self.died(format!("read failed: {e}")).await),
                Ok(Ok(None)) => return Err(self.died("the judge closed its output".into()).await),
                Ok(Ok(Some(text))) => match parse_line(&text) {
                    Ok(Incoming::Event { id: eid, body }) if eid == id => on_event(&body),
                    Ok(Incoming::Event { .. }) => {}
                    Ok(Incoming::Response { id: rid, ok, body }) if rid == id => {
                        if ok {
                            return Ok(body);
                        }
                        let err = body
                            .get("error")
                            .and_then(|e| e.as_str())
                            .unwrap_or("no error message")
                            .to_string();
                        return Err(JudgeError::Rejected(err));
                    }
                    Ok(Incoming::Response { id: rid, .. }) => {
                        tracing::warn!(
                            expected = id,
                            got = rid,
                            "judge answered another request id; ignored"
                        );
                    }
                    Err(e) => {
                        self.kill().await;
                        return Err(JudgeError::Protocol(e));
                    }
                },
            }
        }
    }

    async fn died(&mut self, what: String) -> JudgeError {
        // Give stderr a moment to drain so the tail holds the traceback.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        JudgeError::Died {
            stderr_tail: format!("{what}\n{}", self.stderr_tail()),
        }
    }

    /// Evaluate a group of candidates.
    pub async fn evaluate(
        &mut self,
        req: &EvalRequest,
        seed: u64,
        on_event: &mut (dyn FnMut(&serde_json::Value) + Send),
    ) -> Result<EvalResponse, JudgeError> {
        // Candidates over the size limit get their verdict here; the rest go to the judge.
        let mut refused: Vec<(usize, KeyedReport)> = Vec::new();
        let mut sent = req.clone();
        sent.candidates.clear();
        for (i, c) in req.candidates.iter().enumerate() {
            match check_candidate_file(&c.path) {
                Some(why) => refused.push((i, too_large_report(req.mode, &c.key, why))),
                None => sent.candidates.push(c.clone()),
            }
        }
        if sent.candidates.is_empty() {
            return Ok(EvalResponse {
                reports: refused.into_iter().map(|(_, r)| r).collect(),
                session: serde_json::Value::Null,
            });
        }
        let req = &sent;
        // problem.toml is parsed and validated here, by the registry, and the judge gets the result.
        let dsls = mkb_core::DslRegistry::load_root(&self.spec.root).map_err(|errs| {
            JudgeError::Rejected(format!(
                "the DSL descriptors: {}",
                errs.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        })?;
        let problem = ProblemSpec::load(&req.problem_dir, &dsls)
            .map_err(|e| JudgeError::Rejected(format!("bad problem: {e}")))?;
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let wire = req.to_wire(&id, seed, &problem);
        // Each candidate may take its total budget; baselines (torch.compile) and the floor add some.
        let secs = req.limits.total_s * req.candidates.len().max(1) as f64 + 900.0;
        let body = self
            .send_and_wait(wire, &id, Duration::from_secs_f64(secs), on_event)
            .await?;
        let mut resp = EvalResponse::from_wire(&body)
            .map_err(|e| JudgeError::Contract(format!("evaluate response: {e}")))?;
        for (i, r) in refused {
            resp.reports.insert(i.min(resp.reports.len()), r);
        }
        Ok(resp)
    }

    /// Ask the judge to exit; kill it if it does not within a few seconds.
    pub async fn shutdown(mut self) {
        let _ = self
            .request(
                serde_json::json!({"op": "shutdown"}),
                Duration::from_secs(5),
                &mut |_| {},
            )
            .await;
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }

    async fn kill(&mut self) {
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // Kill the whole process group (the judge and its runners): the judge leads it
            // (`process_group(0)` at spawn), so its pid is the group id.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.child.kill().await;
    }
}

/// The report of a candidate refused for its size (verdict `compile_error`, reason
/// `file_too_large`, as the judge would give it).
fn too_large_report(mode: EvalMode, key: &str, why: String) -> KeyedReport {
    let mut report = EvalReport::infrastructure(mode, Verdict::CompileError, "file_too_large", why);
    report.env =
        serde_json::json!({"refused_by": "mkb", "max_candidate_bytes": MAX_CANDIDATE_BYTES});
    KeyedReport {
        key: key.to_string(),
        report,
    }
}

fn spawn_stderr_drain(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    log: Option<PathBuf>,
) {
    tokio::spawn(async move {
        let mut file = match &log {
            Some(p) => open_append(p).await,
            None => None,
        };
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(raw)) = lines.next_line().await {
            // Whatever a judge prints (and a runner's log it forwards) is scrubbed of the
            // secrets mkb holds before it reaches a log file, the tail or tracing.
            let line = mkb_core::secret::scrub(&raw).into_owned();
            if let Some(f) = file.as_mut() {
                let _ = f.write_all(format!("{line}\n").as_bytes()).await;
            }
            tracing::trace!(target: "judge", "{line}");
            if let Ok(mut t) = tail.lock() {
                if t.len() >= STDERR_TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    });
}

async fn open_append(p: &Path) -> Option<tokio::fs::File> {
    if let Some(d) = p.parent() {
        let _ = tokio::fs::create_dir_all(d).await;
    }
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .await
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Judge` around any child process (no judge behind it: the tests drive the pipes).
    fn fake_judge(mut child: tokio::process::Child, root: PathBuf) -> Judge {
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        Judge {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            stderr_tail: Default::default(),
            next_id: 0,
            hello: serde_json::from_value(serde_json::json!({})).unwrap(),
            spec: JudgeSpec {
                python: "python3".into(),
                root,
                gpu: None,
                log_file: None,
                backend: Backend::Local,
            },
        }
    }

    #[test]
    fn backends_parse_with_clear_errors() {
        assert_eq!(Backend::parse(None, None), Ok(Backend::Local));
        assert_eq!(Backend::parse(Some("local"), None), Ok(Backend::Local));
        assert_eq!(
            Backend::parse(Some("ray"), Some(" 127.0.0.1:6379 ")),
            Ok(Backend::Ray {
                address: "127.0.0.1:6379".into()
            })
        );
        assert!(Backend::parse(Some("ray"), None)
            .unwrap_err()
            .contains("needs the address"));
        assert!(Backend::parse(Some("ray"), Some("")).is_err());
        assert!(Backend::parse(None, Some("h:1"))
            .unwrap_err()
            .contains("for backend \"ray\""));
        assert!(Backend::parse(Some("slurm"), None)
            .unwrap_err()
            .contains("\"slurm\""));
        assert_eq!(Backend::Local.judges_per_gpu(2), 2);
        assert_eq!(Backend::Local.judges_per_gpu(0), 1);
        let ray = Backend::Ray {
            address: "auto".into(),
        };
        assert_eq!(ray.judges_per_gpu(2), 1);
    }

    /// A Ray spec starts the bridge with the address and the judge's role, and hands it Ray's
    /// variables; a local spec starts the judge (argv recorded by a stand-in interpreter).
    #[tokio::test]
    async fn the_backend_picks_the_command() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("argv.txt");
        let fake = tmp.path().join("python");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho \"$@ RAY_X=$RAY_X\" >> {}\nexit 3\n",
                out.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::env::set_var("RAY_X", "planted-ray-setting");
        let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        for (gpu, backend) in [
            (
                Some(0),
                Backend::Ray {
                    address: "127.0.0.1:6379".into(),
                },
            ),
            (
                None,
                Backend::Ray {
                    address: "auto".into(),
                },
            ),
            (None, Backend::Local),
        ] {
            let spec = JudgeSpec {
                python: fake.clone(),
                root: repo.clone(),
                gpu,
                log_file: None,
                backend,
            };
            assert!(Judge::start(&spec, Duration::from_secs(20)).await.is_err());
        }
        let lines = std::fs::read_to_string(&out).unwrap();
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(
            lines,
            [
                "-m mkb_eval.ray_bridge --address 127.0.0.1:6379 --role gpu RAY_X=planted-ray-setting",
                "-m mkb_eval.ray_bridge --address auto --role cpu RAY_X=planted-ray-setting",
                "-m mkb_eval.judge RAY_X=",
            ]
        );
    }

    #[test]
    fn secrets_never_pass_the_allowlist() {
        assert!(looks_secret("OPENAI_API_KEY"));
        assert!(looks_secret("HF_TOKEN"));
        assert!(looks_secret("ANTHROPIC_AUTH"));
        assert!(!looks_secret("PATH"));
        assert!(!looks_secret("CUDA_VISIBLE_DEVICES"));
    }

    #[test]
    fn oversized_candidates_are_refused_from_metadata() {
        let dir = std::env::temp_dir().join(format!("mkb-judge-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let small = dir.join("small.py");
        std::fs::write(&small, "def build(spec):\n    pass\n").unwrap();
        assert_eq!(check_candidate_file(&small), None);
        let big = dir.join("big.py");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_CANDIDATE_BYTES + 1).unwrap();
        let why = check_candidate_file(&big).expect("refused");
        assert!(
            why.contains("over the limit") && why.contains("big.py"),
            "{why}"
        );
        assert!(check_candidate_file(&dir)
            .unwrap()
            .contains("not a regular file"));
        assert_eq!(check_candidate_file(&dir.join("missing.py")), None);
        let r = too_large_report(EvalMode::Compile, "k", why);
        assert_eq!(r.report.verdict, Verdict::CompileError);
        assert_eq!(r.report.reason.as_deref(), Some("file_too_large"));
        assert!(!r.report.is_infrastructure());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_group_of_only_oversized_candidates_never_reaches_a_judge() {
        // `cat` stands in for the judge: had a request been sent, nothing would answer it.
        let dir = std::env::temp_dir().join(format!("mkb-judge-size2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.py");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_CANDIDATE_BYTES * 4)
            .unwrap();
        let child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut judge = fake_judge(child, dir.clone());
        let req = EvalRequest::single(dir.clone(), mkb_core::Dsl::CUTE, EvalMode::Compile, big);
        let resp = tokio::time::timeout(
            Duration::from_secs(10),
            judge.evaluate(&req, 1, &mut |_| {}),
        )
        .await
        .expect("answered without the judge")
        .unwrap();
        assert_eq!(resp.reports.len(), 1);
        assert_eq!(
            resp.reports[0].report.reason.as_deref(),
            Some("file_too_large")
        );
        assert_eq!(judge.next_id, 0, "no request was sent");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn judge_stderr_is_scrubbed_before_the_log_file_and_the_tail() {
        let secret = "sk-judge-stderr-planted-7f3a9c";
        mkb_core::secret::register(secret);
        let dir = std::env::temp_dir().join(format!("mkb-judge-scrub-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("judge.log");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("echo \"key={secret} leaked\" >&2; echo done >&2"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let tail: Arc<Mutex<VecDeque<String>>> = Default::default();
        spawn_stderr_drain(
            child.stderr.take().unwrap(),
            tail.clone(),
            Some(log.clone()),
        );
        child.wait().await.unwrap();
        let mut text = String::new();
        for _ in 0..100 {
            text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("done") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(text.contains("key=") && text.contains("leaked"), "{text}");
        assert!(
            !text.contains(secret),
            "the log file holds the secret: {text}"
        );
        let t = tail
            .lock()
            .unwrap()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        assert!(!t.contains(secret) && t.contains("leaked"), "{t}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A process's state from /proc: dead (gone, or a zombie no one has reaped yet) or not.
    fn is_dead(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    #[tokio::test]
    async fn kill_reaches_the_judges_whole_process_group() {
        // `sh` stands in for the judge, with a runner (`sleep`) in its process group.
        let child = Command::new("sh")
            .arg("-c")
            .arg("sleep 300 & echo $!; wait")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut judge = fake_judge(child, std::env::temp_dir());
        let runner: u32 = judge
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("the runner's pid")
            .trim()
            .parse()
            .unwrap();
        assert!(!is_dead(runner), "the runner is up before the kill");
        judge.kill().await;
        let mut dead = false;
        for _ in 0..100 {
            dead = is_dead(runner);
            if dead {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(dead, "the judge's runner {runner} outlived the kill");
    }

    #[test]
    fn hello_without_sandbox_info_counts_as_unsafe() {
        let h: Hello = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(h.sandbox_unsafe());
        let h: Hello = serde_json::from_value(
            serde_json::json!({"sandbox": {"tool": "bubblewrap", "unsafe": false}}),
        )
        .unwrap();
        assert!(!h.sandbox_unsafe());
    }

    #[test]
    fn env_is_scrubbed() {
        std::env::set_var("MKB_TEST_PLANTED_API_KEY", "sk-planted-should-not-leak");
        std::env::set_var("MKB_EVAL_SOMETHING", "1");
        let spec = JudgeSpec {
            python: "python3".into(),
            root: "/repo".into(),
            gpu: None,
            log_file: None,
            backend: Backend::Local,
        };
        let env = judge_env(&spec);
        assert!(
            env.iter()
                .all(|(k, v)| !k.contains("PLANTED") && !v.contains("sk-planted")),
            "{env:?}"
        );
        assert!(env
            .iter()
            .any(|(k, v)| k == "PYTHONPATH" && v.starts_with("/repo/python")));
        assert!(env
            .iter()
            .any(|(k, v)| k == "CUDA_VISIBLE_DEVICES" && v.is_empty()));
        assert!(env.iter().any(|(k, _)| k == "MKB_EVAL_SOMETHING"));
    }

    #[test]
    fn the_dsls_descriptors_shape_the_environment() {
        // dsls/cute/dsl.toml: CUTE_DSL_* passes, CUTE_DSL_ARCH=sm_90a without a GPU.
        std::env::set_var("CUTE_DSL_LOG_LEVEL", "1");
        std::env::set_var("CUTE_DSL_SECRET_TOKEN", "sk-dsl-planted");
        let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let spec = |gpu| JudgeSpec {
            python: "python3".into(),
            root: repo.clone(),
            gpu,
            log_file: None,
            backend: Backend::Local,
        };
        let cpu = judge_env(&spec(None));
        assert!(cpu
            .iter()
            .any(|(k, v)| k == "CUTE_DSL_LOG_LEVEL" && v == "1"));
        assert!(!cpu.iter().any(|(k, _)| k == "CUTE_DSL_SECRET_TOKEN"));
        let dsls_dir = repo.join("dsls").to_string_lossy().to_string();
        assert!(cpu
            .iter()
            .any(|(k, v)| k == "MKB_EVAL_DSLS_DIR" && *v == dsls_dir));
        if std::env::var_os("CUTE_DSL_ARCH").is_none() {
            assert!(cpu
                .iter()
                .any(|(k, v)| k == "CUTE_DSL_ARCH" && v == "sm_90a"));
            let gpu = judge_env(&spec(Some(0)));
            assert!(!gpu.iter().any(|(k, _)| k == "CUTE_DSL_ARCH"));
        }
    }
}
