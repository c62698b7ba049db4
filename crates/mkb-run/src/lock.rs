//! One writer per run folder: `mkb run` holds an exclusive lock on `<run>/mkb.lock` for as long
//! as it runs (an OS file lock, released by the kernel however the process ends). The file
//! names the holder (pid, host, start time, command), so that a second `mkb run` on the same
//! folder stops at once with a message saying who holds it.

use anyhow::{bail, Context as _, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

/// The lock file's name inside a run folder.
pub const LOCK_FILE: &str = "mkb.lock";

/// A held run lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    pub path: PathBuf,
}

/// This machine's name (for the lock file), or "unknown".
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

impl RunLock {
    /// Take the run folder's lock (creating the folder), or fail naming the holder.
    pub fn acquire(run_dir: &Path) -> Result<RunLock> {
        std::fs::create_dir_all(run_dir)
            .with_context(|| format!("creating {}", run_dir.display()))?;
        let path = run_dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                bail!(
                    "{} is in use by another `mkb run` ({}): one run folder has one writer. \
                     Wait for that run to end (or stop it), then run this command again.",
                    run_dir.display(),
                    if holder.is_empty() {
                        "holder unknown"
                    } else {
                        holder
                    }
                );
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()))
            }
        }
        let who = format!(
            "pid {} on host {} since {}: {}\n",
            std::process::id(),
            hostname(),
            mkb_core::utc_now(),
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(mkb_core::secret::scrub(&who).as_bytes())?;
        file.sync_all()?;
        Ok(RunLock { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_with_the_holder_named_until_the_first_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let first = RunLock::acquire(&dir).unwrap();
        let held = std::fs::read_to_string(&first.path).unwrap();
        assert!(
            held.starts_with(&format!("pid {} on host ", std::process::id())),
            "{held}"
        );
        let e = RunLock::acquire(&dir).unwrap_err().to_string();
        assert!(e.contains("in use by another `mkb run`"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(e.contains("since 20"), "{e}");
        drop(first);
        let again = RunLock::acquire(&dir).unwrap();
        drop(again);
    }
}
