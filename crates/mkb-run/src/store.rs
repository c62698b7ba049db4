//! The run store: one SQLite file per run directory (`runs/<name>/mkb.sqlite`) plus artifact
//! files beside it. Every unit of work (an attempt, a final evaluation group) is committed in
//! one transaction after its artifacts are on disk, so killing the process at any moment loses
//! at most the unit in flight, which a re-run redoes from scratch; nothing is recorded twice.

use anyhow::{Context as _, Result};
use mkb_core::{Condition, Dsl, EndReason, EvalReport};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    id            TEXT PRIMARY KEY,
    model         TEXT NOT NULL,
    problem       TEXT NOT NULL,
    family        TEXT NOT NULL,
    dsl           TEXT NOT NULL,
    condition     TEXT NOT NULL,
    run           INTEGER NOT NULL,
    skill_id      TEXT,
    end_reason    TEXT NOT NULL,
    turns         INTEGER NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    tool_evals    INTEGER NOT NULL,
    wall_s        REAL NOT NULL,
    final_kernel  TEXT,
    final_source  TEXT NOT NULL,
    trajectory    TEXT NOT NULL,
    error         TEXT,
    finished_at   TEXT NOT NULL,
    UNIQUE (model, problem, dsl, condition, run)
);
CREATE TABLE IF NOT EXISTS skills (
    id             TEXT PRIMARY KEY,
    source_attempt TEXT NOT NULL UNIQUE REFERENCES attempts(id),
    model          TEXT NOT NULL,
    problem        TEXT NOT NULL,
    source_dsl     TEXT NOT NULL,
    name           TEXT NOT NULL,
    description    TEXT NOT NULL,
    path           TEXT NOT NULL,
    chars          INTEGER NOT NULL,
    input_tokens   INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    flags          TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_evals (
    attempt_id TEXT NOT NULL REFERENCES attempts(id),
    seq        INTEGER NOT NULL,
    tool       TEXT NOT NULL,
    mode       TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    kernel     TEXT NOT NULL,
    report     TEXT NOT NULL,
    PRIMARY KEY (attempt_id, seq)
);
CREATE TABLE IF NOT EXISTS final_evals (
    attempt_id TEXT PRIMARY KEY REFERENCES attempts(id),
    grp        TEXT NOT NULL,
    mode       TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    reason     TEXT,
    runtime_us REAL,
    t_ref_us   REAL,
    t_compile_us REAL,
    score      REAL NOT NULL,
    report     TEXT NOT NULL,
    finished_at TEXT NOT NULL
);
"#;

/// A finished attempt as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub id: String,
    pub model: String,
    pub problem: String,
    pub family: String,
    pub dsl: Dsl,
    pub condition: Condition,
    pub run: u32,
    pub skill_id: Option<String>,
    pub end_reason: EndReason,
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tool_evals: u32,
    pub wall_s: f64,
    /// Path of the final kernel, relative to the run directory.
    pub final_kernel: Option<String>,
    /// "best_correct", "last_written" or "none".
    pub final_source: String,
    pub trajectory: String,
    pub error: Option<String>,
    pub finished_at: String,
}

/// A distilled skill as stored (the body lives in `path`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillRecord {
    pub id: String,
    pub source_attempt: String,
    pub model: String,
    pub problem: String,
    pub source_dsl: Dsl,
    pub name: String,
    pub description: String,
    pub path: String,
    pub chars: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Leak-audit and format flags (e.g. "target_dsl_code", "source_kernel_copy", "truncated").
    pub flags: Vec<String>,
}

/// One evaluation an agent's tool call triggered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolEvalRecord {
    pub seq: u32,
    pub tool: String,
    pub mode: String,
    pub verdict: String,
    /// Kernel snapshot path relative to the run dir.
    pub kernel: String,
    pub report: EvalReport,
}

/// The final, clean-process evaluation of an attempt's final kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinalEvalRecord {
    pub attempt_id: String,
    pub group: String,
    pub mode: String,
    pub report: EvalReport,
    pub finished_at: String,
}

pub struct Store {
    conn: Connection,
    pub dir: PathBuf,
}

impl Store {
    /// Open (creating if needed) the store of a run directory.
    pub fn open(dir: &Path) -> Result<Store> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("mkb.sqlite");
        let conn =
            Connection::open(&path).with_context(|| format!("opening {}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        conn.execute_batch(SCHEMA)?;
        let store = Store {
            conn,
            dir: dir.to_path_buf(),
        };
        match store.meta("schema_version")? {
            None => store.set_meta("schema_version", &SCHEMA_VERSION.to_string())?,
            Some(v) if v == SCHEMA_VERSION.to_string() => {}
            Some(v) => anyhow::bail!(
                "{}: store schema version {v}, this mkb reads {SCHEMA_VERSION}",
                path.display()
            ),
        }
        Ok(store)
    }

    /// Open an existing store read-mostly (analysis, status); fails if there is none.
    pub fn open_existing(dir: &Path) -> Result<Store> {
        if !dir.join("mkb.sqlite").is_file() {
            anyhow::bail!(
                "{}: no run store here (expected mkb.sqlite; start a run with `mkb run CONFIG`)",
                dir.display()
            );
        }
        Store::open(dir)
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute("INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value", params![key, value])?;
        Ok(())
    }

    /// Record a finished attempt, its tool evaluations and (for solo attempts) its skill, in one
    /// transaction. Returns false, changing nothing, if the attempt was already recorded.
    pub fn record_attempt(
        &mut self,
        a: &AttemptRecord,
        evals: &[ToolEvalRecord],
        skill: Option<&SkillRecord>,
    ) -> Result<bool> {
        let tx = self.conn.transaction()?;
        let exists: bool = tx
            .query_row("SELECT 1 FROM attempts WHERE id = ?1", [&a.id], |_| {
                Ok(true)
            })
            .optional()?
            .unwrap_or(false);
        if exists {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO attempts (id, model, problem, family, dsl, condition, run, skill_id, end_reason, turns, input_tokens, output_tokens,
                tool_evals, wall_s, final_kernel, final_source, trajectory, error, finished_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            params![
                a.id,
                a.model,
                a.problem,
                a.family,
                a.dsl.as_str(),
                a.condition.as_str(),
                a.run,
                a.skill_id,
                a.end_reason.as_str(),
                a.turns,
                a.input_tokens as i64,
                a.output_tokens as i64,
                a.tool_evals,
                a.wall_s,
                a.final_kernel,
                a.final_source,
                a.trajectory,
                a.error,
                a.finished_at
            ],
        )?;
        for e in evals {
            tx.execute(
                "INSERT INTO tool_evals (attempt_id, seq, tool, mode, verdict, kernel, report) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![a.id, e.seq, e.tool, e.mode, e.verdict, e.kernel, serde_json::to_string(&e.report)?],
            )?;
        }
        if let Some(s) = skill {
            tx.execute(
                "INSERT INTO skills (id, source_attempt, model, problem, source_dsl, name, description, path, chars, input_tokens, output_tokens, flags)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    s.id,
                    s.source_attempt,
                    s.model,
                    s.problem,
                    s.source_dsl.as_str(),
                    s.name,
                    s.description,
                    s.path,
                    s.chars as i64,
                    s.input_tokens as i64,
                    s.output_tokens as i64,
                    serde_json::to_string(&s.flags)?
                ],
            )?;
        }
        tx.commit()?;
        Ok(true)
    }

    pub fn attempt(&self, id: &str) -> Result<Option<AttemptRecord>> {
        Ok(self.attempts_where("WHERE id = ?1", &[&id])?.pop())
    }

    pub fn attempts(&self) -> Result<Vec<AttemptRecord>> {
        self.attempts_where("ORDER BY id", &[])
    }

    fn attempts_where(
        &self,
        clause: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<AttemptRecord>> {
        let sql = format!(
            "SELECT id, model, problem, family, dsl, condition, run, skill_id, end_reason, turns, input_tokens, output_tokens, tool_evals,
                    wall_s, final_kernel, final_source, trajectory, error, finished_at FROM attempts {clause}"
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map(args, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, u32>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, String>(8)?,
                r.get::<_, u32>(9)?,
                r.get::<_, i64>(10)?,
                r.get::<_, i64>(11)?,
                r.get::<_, u32>(12)?,
                (
                    r.get::<_, f64>(13)?,
                    r.get::<_, Option<String>>(14)?,
                    r.get::<_, String>(15)?,
                    r.get::<_, String>(16)?,
                    r.get::<_, Option<String>>(17)?,
                    r.get::<_, String>(18)?,
                ),
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                model,
                problem,
                family,
                dsl,
                condition,
                run,
                skill_id,
                end_reason,
                turns,
                it,
                ot,
                te,
                rest,
            ) = row?;
            let (wall_s, final_kernel, final_source, trajectory, error, finished_at) = rest;
            out.push(AttemptRecord {
                id,
                model,
                problem,
                family,
                dsl: dsl.parse().map_err(anyhow::Error::msg)?,
                condition: condition.parse().map_err(anyhow::Error::msg)?,
                run,
                skill_id,
                end_reason: parse_end_reason(&end_reason)?,
                turns,
                input_tokens: it as u64,
                output_tokens: ot as u64,
                tool_evals: te,
                wall_s,
                final_kernel,
                final_source,
                trajectory,
                error,
                finished_at,
            });
        }
        Ok(out)
    }

    pub fn skills(&self) -> Result<Vec<SkillRecord>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, source_attempt, model, problem, source_dsl, name, description, path, chars, input_tokens, output_tokens, flags FROM skills ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, i64>(10)?,
                r.get::<_, String>(11)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (
                id,
                source_attempt,
                model,
                problem,
                dsl,
                name,
                description,
                path,
                chars,
                it,
                ot,
                flags,
            ) = row?;
            out.push(SkillRecord {
                id,
                source_attempt,
                model,
                problem,
                source_dsl: dsl.parse().map_err(anyhow::Error::msg)?,
                name,
                description,
                path,
                chars: chars as u64,
                input_tokens: it as u64,
                output_tokens: ot as u64,
                flags: serde_json::from_str(&flags)?,
            });
        }
        Ok(out)
    }

    pub fn skill_for_attempt(&self, attempt_id: &str) -> Result<Option<SkillRecord>> {
        Ok(self
            .skills()?
            .into_iter()
            .find(|s| s.source_attempt == attempt_id))
    }

    pub fn tool_evals(&self, attempt_id: &str) -> Result<Vec<ToolEvalRecord>> {
        let mut stmt = self.conn.prepare("SELECT seq, tool, mode, verdict, kernel, report FROM tool_evals WHERE attempt_id = ?1 ORDER BY seq")?;
        let rows = stmt.query_map([attempt_id], |r| {
            Ok((
                r.get::<_, u32>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, tool, mode, verdict, kernel, report) = row?;
            out.push(ToolEvalRecord {
                seq,
                tool,
                mode,
                verdict,
                kernel,
                report: serde_json::from_str(&report)?,
            });
        }
        Ok(out)
    }

    /// Record the final evaluations of one group in one transaction; already-recorded
    /// attempts are left as they are. Returns how many rows were new.
    pub fn record_final_group(&mut self, rows: &[FinalEvalRecord]) -> Result<usize> {
        let tx = self.conn.transaction()?;
        let mut n = 0;
        for f in rows {
            let r = &f.report;
            let t_compile = r
                .baselines
                .iter()
                .filter(|b| b.kind == "compile")
                .map(|b| b.timing.median_us)
                .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))));
            n += tx.execute(
                "INSERT OR IGNORE INTO final_evals (attempt_id, grp, mode, verdict, reason, runtime_us, t_ref_us, t_compile_us, score, report, finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    f.attempt_id,
                    f.group,
                    f.mode,
                    r.verdict.as_str(),
                    r.reason,
                    r.runtime.as_ref().map(|t| t.median_us),
                    r.t_ref_us,
                    t_compile,
                    r.score(),
                    serde_json::to_string(r)?,
                    f.finished_at
                ],
            )?;
        }
        tx.commit()?;
        Ok(n)
    }

    pub fn final_evals(&self) -> Result<Vec<FinalEvalRecord>> {
        let mut stmt = self.conn.prepare("SELECT attempt_id, grp, mode, report, finished_at FROM final_evals ORDER BY attempt_id")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (attempt_id, group, mode, report, finished_at) = row?;
            out.push(FinalEvalRecord {
                attempt_id,
                group,
                mode,
                report: serde_json::from_str(&report)?,
                finished_at,
            });
        }
        Ok(out)
    }

    /// Counts for integrity checks: (attempts, distinct attempt keys, skills, final evals).
    pub fn integrity_counts(&self) -> Result<(i64, i64, i64, i64)> {
        let a: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))?;
        let d: i64 = self.conn.query_row("SELECT COUNT(*) FROM (SELECT DISTINCT model, problem, dsl, condition, run FROM attempts)", [], |r| r.get(0))?;
        let s: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM skills", [], |r| r.get(0))?;
        let f: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM final_evals", [], |r| r.get(0))?;
        Ok((a, d, s, f))
    }
}

pub fn parse_end_reason(s: &str) -> Result<EndReason> {
    Ok(match s {
        "submitted" => EndReason::Submitted,
        "stopped" => EndReason::Stopped,
        "max_turns" => EndReason::MaxTurns,
        "max_output_tokens" => EndReason::MaxOutputTokens,
        "max_tool_evals" => EndReason::MaxToolEvals,
        "wall_clock" => EndReason::WallClock,
        "provider_error" => EndReason::ProviderError,
        other => anyhow::bail!("unknown end reason {other:?} in the store"),
    })
}

/// Write a file atomically (temp file + rename), creating parent folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    let f = std::fs::File::open(&tmp)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mkb_core::{EvalMode, Verdict};

    fn attempt(id: &str, cond: Condition) -> AttemptRecord {
        AttemptRecord {
            id: id.into(),
            model: "m".into(),
            problem: "A01".into(),
            family: "A".into(),
            dsl: Dsl::Cute,
            condition: cond,
            run: 0,
            skill_id: None,
            end_reason: EndReason::Submitted,
            turns: 3,
            input_tokens: 10,
            output_tokens: 20,
            tool_evals: 2,
            wall_s: 1.5,
            final_kernel: Some("attempts/x/final.py".into()),
            final_source: "last_written".into(),
            trajectory: "attempts/x/trajectory.jsonl".into(),
            error: None,
            finished_at: "2026-11-29T00:00:00Z".into(),
        }
    }

    #[test]
    fn roundtrip_and_no_duplicates() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path()).unwrap();
        let a = attempt("m/A01/cute/solo/r0", Condition::Solo);
        let rep = EvalReport::infrastructure(
            EvalMode::Compile,
            Verdict::Correct,
            "ok",
            "compiled".into(),
        );
        let ev = ToolEvalRecord {
            seq: 0,
            tool: "compile".into(),
            mode: "compile".into(),
            verdict: "correct".into(),
            kernel: "k.py".into(),
            report: rep.clone(),
        };
        let skill = SkillRecord {
            id: "skill-1".into(),
            source_attempt: a.id.clone(),
            model: "m".into(),
            problem: "A01".into(),
            source_dsl: Dsl::Cute,
            name: "n".into(),
            description: "d".into(),
            path: "p".into(),
            chars: 5,
            input_tokens: 1,
            output_tokens: 2,
            flags: vec!["truncated".into()],
        };
        assert!(s.record_attempt(&a, &[ev], Some(&skill)).unwrap());
        assert!(
            !s.record_attempt(&a, &[], None).unwrap(),
            "second insert must be refused"
        );
        assert_eq!(s.attempts().unwrap(), vec![a.clone()]);
        assert_eq!(s.skills().unwrap()[0].flags, vec!["truncated".to_string()]);
        assert_eq!(s.tool_evals(&a.id).unwrap()[0].report, rep);
        let f = FinalEvalRecord {
            attempt_id: a.id.clone(),
            group: "A01/cute".into(),
            mode: "compile".into(),
            report: rep,
            finished_at: "t".into(),
        };
        assert_eq!(s.record_final_group(std::slice::from_ref(&f)).unwrap(), 1);
        assert_eq!(s.record_final_group(&[f]).unwrap(), 0);
        assert_eq!(s.integrity_counts().unwrap(), (1, 1, 1, 1));
        drop(s);
        let s = Store::open_existing(tmp.path()).unwrap();
        assert_eq!(s.meta("schema_version").unwrap().as_deref(), Some("1"));
    }

    #[test]
    fn open_existing_needs_a_store() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Store::open_existing(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("no run store"), "{err}");
    }

    #[test]
    fn atomic_write() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/c.txt");
        write_atomic(&p, b"hi").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hi");
        assert!(!tmp.path().join("a/b/c.txt.tmp").exists());
    }
}
