//! Where a run's results came from: the mkb version and git commit that ran it, the
//! evaluator's package versions (python, torch, CUDA, each DSL), the GPU and its driver
//! (`collect`, stored in the run's meta), and the hashes that tie a final evaluation to exactly
//! what it judged (`file_sha256` of the kernel, `problem_hash` of the problem variant).

use anyhow::{Context as _, Result};
use mkb_core::{Dsl, Problem};
use mkb_eval::EvalPool;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The mkb version of this build.
pub const MKB_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit this build was made from ("unknown" outside a checkout).
pub const GIT_COMMIT: &str = env!("MKB_GIT_COMMIT");

/// sha256 (hex) of a file's bytes.
pub fn file_sha256(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// The files that define a problem variant, relative to the problem folder: the spec
/// (problem.toml), the reference, the statement and the DSL's starter. Expert solutions are
/// not part of it (nothing is judged against them).
pub fn problem_files(dsl: Dsl) -> [String; 4] {
    [
        "problem.toml".into(),
        "reference.py".into(),
        "statement.md".into(),
        format!("{dsl}/starter.py"),
    ]
}

/// Content hash of a problem variant: sha256 over each file of `problem_files` as
/// (relative path, NUL, length in bytes as decimal, NUL, bytes); a missing file contributes
/// its path and "missing". Independent of where the checkout lives.
pub fn problem_hash(problem: &Problem, dsl: Dsl) -> String {
    let mut h = Sha256::new();
    for rel in problem_files(dsl) {
        h.update(rel.as_bytes());
        h.update([0]);
        match std::fs::read(problem.dir.join(&rel)) {
            Ok(bytes) => {
                h.update(bytes.len().to_string().as_bytes());
                h.update([0]);
                h.update(&bytes);
            }
            Err(_) => h.update(b"missing\0"),
        }
    }
    hex::encode(h.finalize())
}

/// The NVIDIA driver version of this host (from /proc/driver/nvidia/version), if any.
pub fn driver_version() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_driver(&text)
}

/// The version in the first line of /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX
/// x86_64 Kernel Module  570.86.15  ...").
fn parse_driver(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let after = line.split("Kernel Module").nth(1)?;
    after
        .split_whitespace()
        .next()
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .map(str::to_string)
}

/// The provenance of work done now with `pool`: mkb's version and commit, the evaluator's
/// package versions as its judges reported them at start, the GPU and driver.
pub fn collect(pool: &EvalPool) -> Value {
    let judge = |h: &mkb_eval::protocol::Hello| {
        json!({
            "python": h.python,
            "torch": h.torch,
            "cuda": h.cuda,
            "gpu": h.gpu,
            "can_run": h.can_run,
            "dsls": h.dsls.iter().map(|(k, v)| (k.clone(), json!({"available": v.available, "version": v.version}))).collect::<serde_json::Map<_, _>>(),
            "sandbox_unsafe": h.sandbox_unsafe(),
        })
    };
    let gpu = pool.gpu_hello.as_ref();
    json!({
        "mkb_version": MKB_VERSION,
        "git_commit": GIT_COMMIT,
        "recorded_at": mkb_core::utc_now(),
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "gpu": gpu.and_then(|h| h.gpu.clone()),
        "gpu_ids": pool.gpu_ids(),
        "driver": driver_version(),
        "judge": judge(gpu.unwrap_or(&pool.cpu_hello)),
        "judge_cpu": judge(&pool.cpu_hello),
    })
}

/// Store `prov` as the run's provenance (meta `provenance`: the latest session) and append it
/// to meta `provenance_history` (every `mkb run` session that worked on the run, in order).
pub fn record(store: &mkb_store::Store, prov: &Value) -> Result<()> {
    let mut history: Vec<Value> = match store.meta("provenance_history")? {
        Some(h) => serde_json::from_str(&h).unwrap_or_default(),
        None => Vec::new(),
    };
    history.push(prov.clone());
    store.set_meta("provenance", &prov.to_string())?;
    store.set_meta("provenance_history", &Value::Array(history).to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_records_a_commit_or_says_unknown() {
        assert!(
            GIT_COMMIT == "unknown"
                || (GIT_COMMIT.len() == 40 && GIT_COMMIT.chars().all(|c| c.is_ascii_hexdigit())),
            "{GIT_COMMIT}"
        );
        assert!(!MKB_VERSION.is_empty());
    }

    #[test]
    fn driver_line_is_parsed() {
        let t = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Thu Jan 16 2025\nGCC version: gcc";
        assert_eq!(parse_driver(t).as_deref(), Some("570.86.15"));
        assert_eq!(parse_driver("garbage"), None);
    }

    #[test]
    fn problem_hash_follows_the_variant_files_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../problems");
        let dsls = mkb_core::DslRegistry::load_root(&src.join("..")).unwrap();
        let reg = mkb_core::Registry::load(&src, &dsls).unwrap();
        let p = reg.select(&["A01".to_string()]).unwrap()[0].clone();
        // A copy of the problem folder elsewhere hashes the same.
        let copy = root.join("A01");
        for rel in problem_files(Dsl::CUTE)
            .iter()
            .chain(problem_files(Dsl::TIRX).iter())
            .chain(["cute/solution.py".to_string()].iter())
        {
            let to = copy.join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(p.dir.join(rel), &to).unwrap();
        }
        let mut moved = p.clone();
        moved.dir = copy.clone();
        let h = problem_hash(&p, Dsl::CUTE);
        assert_eq!(h.len(), 64);
        assert_eq!(problem_hash(&moved, Dsl::CUTE), h);
        assert_ne!(problem_hash(&moved, Dsl::TIRX), h, "the starter differs");
        // An expert solution is not part of it; the reference is.
        std::fs::write(copy.join("cute/solution.py"), "changed").unwrap();
        assert_eq!(problem_hash(&moved, Dsl::CUTE), h);
        let r = copy.join("reference.py");
        let mut text = std::fs::read_to_string(&r).unwrap();
        text.push('\n');
        std::fs::write(&r, text).unwrap();
        assert_ne!(problem_hash(&moved, Dsl::CUTE), h);
        let k = root.join("k.py");
        std::fs::write(&k, b"abc").unwrap();
        assert_eq!(
            file_sha256(&k).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
