//! Build script of mkb-run: records the git commit the binary was built from (MKB_GIT_COMMIT,
//! "unknown" outside a git checkout or without git) for the provenance of every run.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=MKB_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it points to (a commit).
    let git = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.git");
    let head = git.join("HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed={}", head.display());
        if let Ok(text) = std::fs::read_to_string(&head) {
            if let Some(r) = text.trim().strip_prefix("ref: ") {
                let branch = git.join(r);
                if branch.exists() {
                    println!("cargo:rerun-if-changed={}", branch.display());
                }
                let packed = git.join("packed-refs");
                if packed.exists() {
                    println!("cargo:rerun-if-changed={}", packed.display());
                }
            }
        }
    }
}
