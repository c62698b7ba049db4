//! Shared plumbing of the subcommands: finding the repository, the Python interpreter, the
//! registered DSLs (dsls/*/dsl.toml), the problem registry (with its reference.py files
//! checked before anything is evaluated), starting an
//! evaluator pool, logging (scrubbed of secrets), printing to a stdout that may be closed, and
//! the tokio runtime.

use anyhow::{anyhow, bail, Context as _, Result};
use mkb_core::{Dsl, DslRegistry, Registry};
#[cfg(test)]
use mkb_eval::GpuSelection;
use mkb_eval::{EvalPool, PoolConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Context {
    pub root: PathBuf,
    pub python: PathBuf,
    /// The registered DSLs (`<root>/dsls/*/dsl.toml`).
    pub dsls: DslRegistry,
}

impl Context {
    pub fn new(root: Option<PathBuf>, python: Option<PathBuf>) -> Result<Context> {
        let root = match root {
            Some(r) => r.canonicalize().with_context(|| format!("--root {}", r.display()))?,
            None => find_root(&std::env::current_dir()?).ok_or_else(|| {
                anyhow!("cannot find the MetaKernelBench repository (a folder with problems/ and python/mkb_eval/) above the current folder; pass --root")
            })?,
        };
        let python = match python.or_else(|| std::env::var_os("MKB_PYTHON").map(PathBuf::from)) {
            Some(p) => p,
            None => {
                let venv = root.join(".venv/bin/python");
                if venv.exists() {
                    venv
                } else {
                    PathBuf::from("python3")
                }
            }
        };
        let dsls = DslRegistry::load_root(&root).map_err(|errs| {
            let lines: Vec<String> = errs.iter().map(|e| format!("  {e}")).collect();
            anyhow!(
                "{} DSL descriptor error(s):\n{}",
                errs.len(),
                lines.join("\n")
            )
        })?;
        Ok(Context { root, python, dsls })
    }

    /// A DSL given on the command line: registered (by name or alias), or an error listing
    /// the registered ones.
    pub fn dsl(&self, given: Dsl) -> Result<Dsl> {
        self.dsls.parse(given.as_str()).map_err(anyhow::Error::msg)
    }

    pub fn problems_dir(&self) -> PathBuf {
        self.root.join("problems")
    }

    pub fn registry(&self) -> Result<Registry> {
        Registry::load(&self.problems_dir(), &self.dsls).map_err(|errs| {
            let lines: Vec<String> = errs.iter().map(|e| format!("  {e}")).collect();
            anyhow!(
                "{} problem file error(s):\n{}",
                errs.len(),
                lines.join("\n")
            )
        })
    }

    pub async fn pool(
        &self,
        gpus: &str,
        cpu_workers: usize,
        log_dir: Option<PathBuf>,
        backend: mkb_eval::Backend,
    ) -> Result<EvalPool> {
        let gpus = parse_gpus(gpus)?;
        self.check_references().await?;
        EvalPool::start(PoolConfig {
            python: self.python.clone(),
            root: self.root.clone(),
            gpus,
            cpu_workers,
            log_dir,
            start_timeout: Duration::from_secs(300),
            judges_per_gpu: mkb_eval::DEFAULT_JUDGES_PER_GPU,
            backend,
        })
        .await
        .with_context(|| format!("starting the evaluator with {}", self.python.display()))
    }
}

impl Context {
    /// Every problem's reference.py parses and imports with the evaluator's Python (one
    /// process for all; errors name the file and line). Compile-mode evaluations never run the
    /// reference, so this is what catches a broken one in every mode.
    pub async fn check_references(&self) -> Result<()> {
        let reg = self.registry()?;
        let files: Vec<PathBuf> = reg
            .problems()
            .iter()
            .map(|p| p.dir.join("reference.py"))
            .collect();
        mkb_eval::pool::check_reference_files(
            &self.python,
            &self.root,
            &files,
            Duration::from_secs(300),
        )
        .await
        .map_err(anyhow::Error::msg)
    }
}

/// Write `text` to stdout; a closed stdout (`mkb ... | head`) is not an error.
pub fn emit(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// stderr for the log, every line scrubbed of this process's secrets; a closed stderr is
/// ignored.
struct ScrubbingStderr;

impl std::io::Write for ScrubbingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let clean = mkb_core::secret::scrub_bytes(buf);
        let _ = std::io::stderr().lock().write_all(&clean);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

pub use mkb_eval::pool::parse_gpus;

fn find_root(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .find(|d| d.join("problems").is_dir() && d.join("python").join("mkb_eval").is_dir())
        .map(Path::to_path_buf)
}

pub fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| ScrubbingStderr)
        .with_target(false)
        .try_init();
}

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// The shell command that invoked us, for evidence files.
pub fn command_line() -> String {
    std::env::args()
        .map(|a| if a.contains(' ') { format!("{a:?}") } else { a })
        .collect::<Vec<_>>()
        .join(" ")
}

pub use mkb_core::utc_now;

pub fn ensure_file(p: &Path) -> Result<PathBuf> {
    if !p.is_file() {
        bail!("{}: no such file", p.display());
    }
    Ok(p.canonicalize()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_format() {
        let s = utc_now();
        assert_eq!(s.len(), 20, "{s}");
        assert!(s.starts_with("20") && s.ends_with('Z'));
    }

    #[test]
    fn gpu_selection() {
        assert_eq!(parse_gpus("auto").unwrap(), GpuSelection::Auto);
        assert_eq!(parse_gpus("0,1").unwrap(), GpuSelection::List(vec![0, 1]));
        assert!(parse_gpus("zero").is_err());
    }
}
