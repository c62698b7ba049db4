//! The run store: one SQLite file per run directory (`runs/<name>/mkb.sqlite`) plus artifact
//! files beside it. Every unit of work (an attempt, a final evaluation group) is committed in
//! one transaction after its artifacts are on disk, so killing the process at any moment loses
//! at most the unit in flight, which a re-run redoes from scratch; nothing is recorded twice.
//! Every text written is scrubbed of the process's secrets (`mkb_core::secret`). Readers
//! (`open_existing`: status, analyze, report, export) open the file read-only and never create
//! a schema; a missing, empty or damaged store is an error naming the file.
//!
//! Schema versions: 1 (the first stores) and 2, which adds columns and tables through
//! [`MIGRATIONS`]: each attempt's time queued for the evaluator, each final evaluation's kernel
//! and problem hashes and repeated timing sessions, and named evaluation sets (`mkb rescore`).
//! `open` migrates a store it will write to; readers open both versions unchanged, and what a
//! version-1 store lacks reads as absent.

use anyhow::{Context as _, Result};
use mkb_core::secret::scrub;
use mkb_core::{Condition, Dsl, EndReason, EvalReport};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA_VERSION: i64 = 2;
/// The oldest schema version readers still open (read-only, unchanged).
pub const OLDEST_READABLE: i64 = 1;
/// The evaluation set the run itself wrote (table `final_evals`); `mkb rescore` adds others.
pub const ORIGINAL_SET: &str = "original";

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

/// Schema changes after version 1, applied in order by `open` to a store it writes: (version
/// reached, statements). Each ALTER is skipped when its column exists already.
pub const MIGRATIONS: &[(i64, &str)] = &[(
    2,
    r#"
ALTER TABLE attempts ADD COLUMN eval_wait_s REAL;
ALTER TABLE final_evals ADD COLUMN kernel_sha256 TEXT;
ALTER TABLE final_evals ADD COLUMN problem_hash TEXT;
ALTER TABLE final_evals ADD COLUMN session_medians TEXT;
CREATE TABLE IF NOT EXISTS eval_sets (
    name        TEXT PRIMARY KEY,
    mode        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    provenance  TEXT NOT NULL,
    command     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS set_evals (
    eval_set   TEXT NOT NULL REFERENCES eval_sets(name),
    attempt_id TEXT NOT NULL REFERENCES attempts(id),
    grp        TEXT NOT NULL,
    mode       TEXT NOT NULL,
    verdict    TEXT NOT NULL,
    reason     TEXT,
    runtime_us REAL,
    t_ref_us   REAL,
    t_compile_us REAL,
    score      REAL NOT NULL,
    report     TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    kernel_sha256 TEXT,
    problem_hash TEXT,
    session_medians TEXT,
    PRIMARY KEY (eval_set, attempt_id)
);
"#,
)];

/// Apply the migrations a store at `version` lacks (inside one transaction).
fn migrate(conn: &mut Connection, version: i64) -> Result<()> {
    let tx = conn.transaction()?;
    for (to, sql) in MIGRATIONS {
        if *to <= version {
            continue;
        }
        for stmt in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            if let Some((table, column)) = added_column(stmt) {
                if has_column(&tx, table, column)? {
                    continue;
                }
            }
            tx.execute_batch(stmt)
                .with_context(|| format!("migrating the store to schema {to}: {stmt}"))?;
        }
        tx.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [to.to_string()],
        )?;
    }
    tx.commit()?;
    Ok(())
}

/// `ALTER TABLE t ADD COLUMN c ...` -> (t, c).
fn added_column(stmt: &str) -> Option<(&str, &str)> {
    let rest = stmt.strip_prefix("ALTER TABLE ")?;
    let (table, rest) = rest.split_once(' ')?;
    let rest = rest.strip_prefix("ADD COLUMN ")?;
    Some((table, rest.split_whitespace().next()?))
}

fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool> {
    let mut st = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = st
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(names.iter().any(|n| n == column))
}

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
    /// Wall seconds of the whole attempt (queueing for the evaluator included).
    pub wall_s: f64,
    /// Seconds of `wall_s` spent queued for the shared evaluator (its tool calls' time before
    /// a judge took them up); not charged to the wall budget. `None` in version-1 stores.
    #[serde(default)]
    pub eval_wait_s: Option<f64>,
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
    /// sha256 (hex) of the kernel file evaluated; `None` without a kernel or in old stores.
    #[serde(default)]
    pub kernel_sha256: Option<String>,
    /// Content hash of the problem variant it was judged against (`problem_hash`).
    #[serde(default)]
    pub problem_hash: Option<String>,
    /// Median runtime (us) of each timing session of this kernel, the first being the one in
    /// `report`; more than one for solo attempts timed in repeated sessions (the tie band).
    #[serde(default)]
    pub session_medians_us: Vec<f64>,
}

/// A named evaluation set made by `mkb rescore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSetRecord {
    pub name: String,
    /// "full" or "compile".
    pub mode: String,
    pub created_at: String,
    /// JSON: the provenance of the machine and mkb that evaluated it.
    pub provenance: String,
    /// The command line that made it.
    pub command: String,
}

pub struct Store {
    conn: Connection,
    pub dir: PathBuf,
    /// The schema version of the file (readers open older versions unchanged).
    pub version: i64,
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
        let mut conn = conn;
        conn.execute_batch(SCHEMA)?;
        let stored: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let version = match stored.as_deref().map(str::parse::<i64>) {
            None => 1,
            Some(Ok(v)) if (OLDEST_READABLE..=SCHEMA_VERSION).contains(&v) => v,
            Some(_) => anyhow::bail!(
                "{}: store schema version {}, this mkb reads {OLDEST_READABLE} to {SCHEMA_VERSION}",
                path.display(),
                stored.unwrap_or_default()
            ),
        };
        migrate(&mut conn, version).with_context(|| format!("migrating {}", path.display()))?;
        Ok(Store {
            conn,
            dir: dir.to_path_buf(),
            version: SCHEMA_VERSION,
        })
    }

    /// Open an existing store read-only (analysis, status, report, export): nothing is created
    /// or written, and a missing, empty, foreign or corrupt file is an error naming it.
    pub fn open_existing(dir: &Path) -> Result<Store> {
        let path = dir.join("mkb.sqlite");
        let meta = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => m,
            _ => anyhow::bail!(
                "{}: no run store here (expected mkb.sqlite; start a run with `mkb run CONFIG`)",
                dir.display()
            ),
        };
        if meta.len() == 0 {
            anyhow::bail!(
                "{}: the store is an empty file (0 bytes), not a run store; a run that was \
                 killed before it wrote anything leaves this, `mkb run` starts it again",
                path.display()
            );
        }
        let damaged = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!(
                "{}: not a readable run store ({e}); it is damaged or not an mkb store",
                path.display()
            )
        };
        // A WAL store opened read-only gets -shm (and -wal) files created beside it, which
        // must not happen to a committed store. Without a -wal file no writer holds the store
        // (a writer keeps one while it is open), so it is opened immutable: SQLite then
        // creates nothing. With one, a run is (or was) writing: open it normally, read-only.
        let wal = PathBuf::from(format!("{}-wal", path.display()));
        let conn = if wal.exists() {
            Connection::open_with_flags(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
        } else {
            let abs = std::path::absolute(&path).unwrap_or_else(|_| path.clone());
            Connection::open_with_flags(
                format!("file:{}?immutable=1", uri_path(&abs)),
                OpenFlags::SQLITE_OPEN_READ_ONLY
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
        }
        .map_err(|e| damaged(&e))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(|e| damaged(&e))?;
        let version: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| damaged(&e))?;
        let version = match version.as_deref().map(str::parse::<i64>) {
            Some(Ok(v)) if (OLDEST_READABLE..=SCHEMA_VERSION).contains(&v) => v,
            Some(_) => anyhow::bail!(
                "{}: store schema version {}, this mkb reads {OLDEST_READABLE} to {SCHEMA_VERSION}",
                path.display(),
                version.unwrap_or_default()
            ),
            None => anyhow::bail!(
                "{}: not a run store (no schema version); it is damaged or not an mkb store",
                path.display()
            ),
        };
        conn.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0))
            .map_err(|e| damaged(&e))
            .and_then(|ok| {
                if ok == "ok" {
                    Ok(())
                } else {
                    Err(damaged(&ok))
                }
            })?;
        Ok(Store {
            conn,
            dir: dir.to_path_buf(),
            version,
        })
    }

    /// Forget what must not count as a result, so that this run redoes it: attempts that ended
    /// in a provider error (stores written before provider faults stopped being attempts), with
    /// everything that used their skills, and final evaluations that failed for infrastructure
    /// reasons. Returns (attempts, final evaluations) removed.
    pub fn forget_not_final(&mut self) -> Result<(usize, usize)> {
        let tx = self.conn.transaction()?;
        let mut doomed: Vec<String> = {
            let mut st =
                tx.prepare("SELECT id FROM attempts WHERE end_reason = 'provider_error'")?;
            let ids = st
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            ids
        };
        let mut i = 0;
        while i < doomed.len() {
            let skill = format!("skill:{}", doomed[i]);
            let users: Vec<String> = {
                let mut st = tx.prepare(
                    "SELECT id FROM attempts WHERE skill_id = ?1 OR skill_id IN (SELECT id FROM skills WHERE source_attempt = ?2)",
                )?;
                let ids = st
                    .query_map(params![skill, doomed[i]], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                ids
            };
            for u in users {
                if !doomed.contains(&u) {
                    doomed.push(u);
                }
            }
            i += 1;
        }
        for id in &doomed {
            tx.execute("DELETE FROM tool_evals WHERE attempt_id = ?1", [id])?;
            tx.execute("DELETE FROM final_evals WHERE attempt_id = ?1", [id])?;
            tx.execute("DELETE FROM set_evals WHERE attempt_id = ?1", [id])?;
            tx.execute("DELETE FROM skills WHERE source_attempt = ?1", [id])?;
            tx.execute("DELETE FROM attempts WHERE id = ?1", [id])?;
        }
        let reasons: Vec<String> = mkb_core::INFRA_REASONS
            .iter()
            .chain([&mkb_core::eval::JUDGE_FAILED])
            .map(|r| format!("'{r}'"))
            .collect();
        let finals = tx.execute(
            &format!(
                "DELETE FROM final_evals WHERE verdict = 'crashed' AND reason IN ({})",
                reasons.join(", ")
            ),
            [],
        )?;
        tx.commit()?;
        Ok((doomed.len(), finals))
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    }

    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        let value = scrub(value);
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
                tool_evals, wall_s, final_kernel, final_source, trajectory, error, finished_at, eval_wait_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
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
                a.error.as_deref().map(scrub),
                a.finished_at,
                a.eval_wait_s
            ],
        )?;
        for e in evals {
            let report = serde_json::to_string(&e.report)?;
            tx.execute(
                "INSERT INTO tool_evals (attempt_id, seq, tool, mode, verdict, kernel, report) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![a.id, e.seq, e.tool, e.mode, e.verdict, e.kernel, scrub(&report)],
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
                    scrub(&s.name),
                    scrub(&s.description),
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
        let wait = if self.version >= 2 {
            "eval_wait_s"
        } else {
            "NULL"
        };
        let sql = format!(
            "SELECT id, model, problem, family, dsl, condition, run, skill_id, end_reason, turns, input_tokens, output_tokens, tool_evals,
                    wall_s, final_kernel, final_source, trajectory, error, finished_at, {wait} FROM attempts {clause}"
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
                    r.get::<_, Option<f64>>(19)?,
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
            let (wall_s, final_kernel, final_source, trajectory, error, finished_at, eval_wait_s) =
                rest;
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
                eval_wait_s,
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
        self.record_set_group(ORIGINAL_SET, rows)
    }

    /// `record_final_group` into an evaluation set: the run's own (`ORIGINAL_SET`) or one
    /// `create_eval_set` made.
    pub fn record_set_group(&mut self, set: &str, rows: &[FinalEvalRecord]) -> Result<usize> {
        let original = set == ORIGINAL_SET;
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
            let sessions = if f.session_medians_us.is_empty() {
                None
            } else {
                Some(serde_json::to_string(&f.session_medians_us)?)
            };
            let (table, set_col, set_val) = if original {
                ("final_evals", "", "")
            } else {
                ("set_evals", "eval_set, ", "?15, ")
            };
            let sql = format!(
                "INSERT OR IGNORE INTO {table} ({set_col}attempt_id, grp, mode, verdict, reason, runtime_us, t_ref_us, t_compile_us, score, report, finished_at, kernel_sha256, problem_hash, session_medians)
                 VALUES ({set_val}?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            );
            let json = serde_json::to_string(r)?;
            let report = scrub(&json);
            let reason = r.reason.as_deref().map(scrub);
            let args = params![
                f.attempt_id,
                f.group,
                f.mode,
                r.verdict.as_str(),
                reason,
                r.runtime.as_ref().map(|t| t.median_us),
                r.t_ref_us,
                t_compile,
                r.score(),
                report,
                f.finished_at,
                f.kernel_sha256,
                f.problem_hash,
                sessions,
                set
            ];
            n += if original {
                tx.execute(&sql, &args[..14])?
            } else {
                tx.execute(&sql, args)?
            };
        }
        tx.commit()?;
        Ok(n)
    }

    /// The run's own final evaluations (the `ORIGINAL_SET`).
    pub fn final_evals(&self) -> Result<Vec<FinalEvalRecord>> {
        self.set_evals(ORIGINAL_SET)
    }

    /// The final evaluations of an evaluation set; an unknown set is an error naming the
    /// sets there are.
    pub fn set_evals(&self, set: &str) -> Result<Vec<FinalEvalRecord>> {
        let extra = if self.version >= 2 {
            "kernel_sha256, problem_hash, session_medians"
        } else {
            "NULL, NULL, NULL"
        };
        let sql = if set == ORIGINAL_SET {
            format!("SELECT attempt_id, grp, mode, report, finished_at, {extra} FROM final_evals ORDER BY attempt_id")
        } else {
            if !self.eval_sets()?.iter().any(|e| e.name == set) {
                anyhow::bail!(
                    "{}: no evaluation set {set:?} in this run (sets: {})",
                    self.dir.join("mkb.sqlite").display(),
                    std::iter::once(ORIGINAL_SET.to_string())
                        .chain(self.eval_sets()?.into_iter().map(|e| e.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            format!("SELECT attempt_id, grp, mode, report, finished_at, {extra} FROM set_evals WHERE eval_set = ?1 ORDER BY attempt_id")
        };
        let mut stmt = self.conn.prepare(&sql)?;
        let map = |r: &rusqlite::Row| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
            ))
        };
        let rows = if set == ORIGINAL_SET {
            stmt.query_map([], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        } else {
            stmt.query_map([set], map)?
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        let mut out = Vec::new();
        for (attempt_id, group, mode, report, finished_at, ksha, phash, sessions) in rows {
            out.push(FinalEvalRecord {
                report: serde_json::from_str(&report)
                    .with_context(|| format!("the final evaluation of {attempt_id}"))?,
                attempt_id,
                group,
                mode,
                finished_at,
                kernel_sha256: ksha,
                problem_hash: phash,
                session_medians_us: match sessions {
                    Some(s) => serde_json::from_str(&s)?,
                    None => Vec::new(),
                },
            });
        }
        Ok(out)
    }

    /// The evaluation sets `mkb rescore` made (not the original), oldest first.
    pub fn eval_sets(&self) -> Result<Vec<EvalSetRecord>> {
        if self.version < 2 {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare(
            "SELECT name, mode, created_at, provenance, command FROM eval_sets ORDER BY created_at, name",
        )?;
        let rows = st
            .query_map([], |r| {
                Ok(EvalSetRecord {
                    name: r.get(0)?,
                    mode: r.get(1)?,
                    created_at: r.get(2)?,
                    provenance: r.get(3)?,
                    command: r.get(4)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }

    /// Create an evaluation set (the name must be new and not `ORIGINAL_SET`).
    pub fn create_eval_set(&self, e: &EvalSetRecord) -> Result<()> {
        if e.name == ORIGINAL_SET {
            anyhow::bail!("{ORIGINAL_SET:?} names the run's own final evaluations");
        }
        self.conn.execute(
            "INSERT INTO eval_sets (name, mode, created_at, provenance, command) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![e.name, e.mode, e.created_at, scrub(&e.provenance), scrub(&e.command)],
        )?;
        Ok(())
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
        "max_input_tokens" => EndReason::MaxInputTokens,
        "max_tool_evals" => EndReason::MaxToolEvals,
        "wall_clock" => EndReason::WallClock,
        "provider_error" => EndReason::ProviderError,
        other => anyhow::bail!("unknown end reason {other:?} in the store"),
    })
}

/// A file path as the path part of an SQLite `file:` URI (RFC 3986 percent-encoding of what
/// is not a plain path character).
fn uri_path(p: &Path) -> String {
    let mut out = String::new();
    for b in p.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
    let bytes = mkb_core::secret::scrub_bytes(bytes);
    std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
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
            dsl: Dsl::CUTE,
            condition: cond,
            run: 0,
            skill_id: None,
            end_reason: EndReason::Submitted,
            turns: 3,
            input_tokens: 10,
            output_tokens: 20,
            tool_evals: 2,
            wall_s: 1.5,
            eval_wait_s: Some(0.25),
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
            source_dsl: Dsl::CUTE,
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
            kernel_sha256: Some("ab".into()),
            problem_hash: None,
            session_medians_us: vec![10.0, 11.0],
        };
        assert_eq!(s.record_final_group(std::slice::from_ref(&f)).unwrap(), 1);
        assert_eq!(s.record_final_group(&[f]).unwrap(), 0);
        assert_eq!(s.integrity_counts().unwrap(), (1, 1, 1, 1));
        drop(s);
        let s = Store::open_existing(tmp.path()).unwrap();
        assert_eq!(s.meta("schema_version").unwrap().as_deref(), Some("2"));
        let back = &s.final_evals().unwrap()[0];
        assert_eq!(back.kernel_sha256.as_deref(), Some("ab"));
        assert_eq!(back.session_medians_us, vec![10.0, 11.0]);
        assert_eq!(s.attempts().unwrap()[0].eval_wait_s, Some(0.25));
    }

    /// A store as version 1 wrote it: the first schema, version "1" in meta, one attempt with
    /// its final evaluation.
    fn v1_store(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let conn = Connection::open(dir.join("mkb.sqlite")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('schema_version', '1')",
            [],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO attempts VALUES ('m/A01/cute/solo/r0', 'm', 'A01', 'A', 'cute', 'solo', 0, NULL, 'submitted', 3, 10, 20, 2, 1.5, 'k.py', 'last_written', 't.jsonl', NULL, 't')",
            [],
        )
        .unwrap();
        let rep = EvalReport::infrastructure(EvalMode::Full, Verdict::Correct, "ok", "m".into());
        conn.execute(
            "INSERT INTO final_evals VALUES ('m/A01/cute/solo/r0', 'A01/cute', 'full', 'correct', NULL, 5.0, 6.0, NULL, 1.2, ?1, 't')",
            [serde_json::to_string(&rep).unwrap()],
        )
        .unwrap();
        // Checkpoint and close: no -wal file is left, as with a committed store.
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .unwrap();
        drop(conn);
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn version_1_stores_are_read_unchanged_and_migrated_by_writers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("old");
        v1_store(&dir);
        let db = dir.join("mkb.sqlite");
        let bytes = std::fs::read(&db).unwrap();
        let files = listing(&dir);
        {
            let s = Store::open_existing(&dir).unwrap();
            assert_eq!(s.version, 1);
            let a = s.attempts().unwrap();
            assert_eq!(a.len(), 1);
            assert_eq!(a[0].eval_wait_s, None);
            let f = s.final_evals().unwrap();
            assert_eq!(
                (f[0].kernel_sha256.clone(), f[0].session_medians_us.len()),
                (None, 0)
            );
            assert!(s.eval_sets().unwrap().is_empty());
            let e = s.set_evals("again").unwrap_err().to_string();
            assert!(
                e.contains("no evaluation set \"again\"") && e.contains("original"),
                "{e}"
            );
        }
        assert_eq!(
            std::fs::read(&db).unwrap(),
            bytes,
            "a reader changed the file"
        );
        assert_eq!(listing(&dir), files, "a reader left files beside the store");
        // A writer migrates: the old rows stay, the new columns and tables work.
        let mut s = Store::open(&dir).unwrap();
        assert_eq!(s.meta("schema_version").unwrap().as_deref(), Some("2"));
        assert_eq!(s.attempts().unwrap().len(), 1);
        assert_eq!(s.final_evals().unwrap()[0].report.verdict, Verdict::Correct);
        s.create_eval_set(&EvalSetRecord {
            name: "again".into(),
            mode: "compile".into(),
            created_at: "t".into(),
            provenance: "{}".into(),
            command: "mkb rescore".into(),
        })
        .unwrap();
        let mut f = s.final_evals().unwrap()[0].clone();
        f.report.verdict = Verdict::Incorrect;
        f.kernel_sha256 = Some("cd".into());
        assert_eq!(s.record_set_group("again", &[f.clone()]).unwrap(), 1);
        assert_eq!(s.record_set_group("again", &[f]).unwrap(), 0);
        // The original is kept beside the new set.
        assert_eq!(s.final_evals().unwrap()[0].report.verdict, Verdict::Correct);
        let again = s.set_evals("again").unwrap();
        assert_eq!(again[0].report.verdict, Verdict::Incorrect);
        assert_eq!(again[0].kernel_sha256.as_deref(), Some("cd"));
        assert!(s
            .create_eval_set(&EvalSetRecord {
                name: ORIGINAL_SET.into(),
                mode: "full".into(),
                created_at: "t".into(),
                provenance: "{}".into(),
                command: "x".into(),
            })
            .is_err());
        drop(s);
        // Opening again (now version 2) is a no-op migration.
        let s = Store::open(&dir).unwrap();
        assert_eq!(s.set_evals("again").unwrap().len(), 1);
    }

    #[test]
    fn the_committed_replay_store_opens_read_only_leaving_no_files() {
        // A copy: the test must not touch the committed file, and the point is what a reader
        // leaves beside a store that has no -wal file (as committed).
        let src =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/h200/replay-demo/mkb.sqlite");
        let tmp = tempfile::tempdir().unwrap();
        std::fs::copy(&src, tmp.path().join("mkb.sqlite")).unwrap();
        let before = listing(tmp.path());
        let bytes = std::fs::read(tmp.path().join("mkb.sqlite")).unwrap();
        let s = Store::open_existing(tmp.path()).unwrap();
        assert!(!s.attempts().unwrap().is_empty());
        assert!(!s.final_evals().unwrap().is_empty());
        assert!(!s.skills().unwrap().is_empty());
        drop(s);
        assert_eq!(listing(tmp.path()), before, "-shm/-wal files were created");
        assert_eq!(std::fs::read(tmp.path().join("mkb.sqlite")).unwrap(), bytes);
    }

    #[test]
    fn open_existing_needs_a_store() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Store::open_existing(tmp.path()).err().unwrap().to_string();
        assert!(err.contains("no run store"), "{err}");
    }

    #[test]
    fn readers_never_write_and_name_the_damaged_file() {
        let tmp = tempfile::tempdir().unwrap();
        let cases: [(&str, &[u8], &str); 3] = [
            ("zero", b"", "empty file (0 bytes)"),
            (
                "corrupt",
                b"this is not a database, just forty-odd bytes of text",
                "not a readable run store",
            ),
            (
                "garbage",
                &[0x53, 0x51, 0x4c, 0xff, 0x00, 0x13].repeat(700),
                "not a readable run store",
            ),
        ];
        for (name, bytes, expect) in cases {
            let dir = tmp.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let db = dir.join("mkb.sqlite");
            std::fs::write(&db, bytes).unwrap();
            let e = format!("{:#}", Store::open_existing(&dir).err().unwrap());
            assert!(e.contains(&db.display().to_string()), "{name}: {e}");
            assert!(e.contains(expect), "{name}: {e}");
            assert_eq!(
                std::fs::read(&db).unwrap(),
                bytes,
                "{name}: the file changed"
            );
        }
        // A valid SQLite file without mkb's tables: no schema is created in it.
        let dir = tmp.path().join("foreign");
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("mkb.sqlite");
        Connection::open(&db)
            .unwrap()
            .execute_batch("CREATE TABLE other (x INTEGER);")
            .unwrap();
        let before = std::fs::read(&db).unwrap();
        let e = format!("{:#}", Store::open_existing(&dir).err().unwrap());
        assert!(
            e.contains(&db.display().to_string()) && e.contains("no such table"),
            "{e}"
        );
        assert_eq!(std::fs::read(&db).unwrap(), before, "no schema was written");
        // A real store opens read-only: writing through it fails.
        let dir = tmp.path().join("real");
        drop(Store::open(&dir).unwrap());
        let ro = Store::open_existing(&dir).unwrap();
        assert!(ro.set_meta("x", "y").is_err(), "a reader cannot write");
    }

    #[test]
    fn provider_errors_and_infrastructure_failures_are_forgotten_with_what_used_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path()).unwrap();
        let mut solo = attempt("m/A01/cute/solo/r0", Condition::Solo);
        solo.end_reason = EndReason::ProviderError;
        let skill = SkillRecord {
            id: format!("skill:{}", solo.id),
            source_attempt: solo.id.clone(),
            model: "m".into(),
            problem: "A01".into(),
            source_dsl: Dsl::CUTE,
            name: "n".into(),
            description: "d".into(),
            path: "p".into(),
            chars: 1,
            input_tokens: 0,
            output_tokens: 0,
            flags: vec!["distill_failed".into()],
        };
        s.record_attempt(&solo, &[], Some(&skill)).unwrap();
        let mut cond = attempt("m/A01/tirx/conditioned/r0", Condition::Conditioned);
        cond.skill_id = Some(skill.id.clone());
        cond.dsl = Dsl::TIRX;
        s.record_attempt(&cond, &[], None).unwrap();
        let mut fine = attempt("m/A01/tirx/solo/r0", Condition::Solo);
        fine.dsl = Dsl::TIRX;
        s.record_attempt(&fine, &[], None).unwrap();
        let fin = |id: &str, v, reason: &str| FinalEvalRecord {
            attempt_id: id.into(),
            group: "g".into(),
            mode: "full".into(),
            report: EvalReport::infrastructure(EvalMode::Full, v, reason, "m".into()),
            finished_at: "t".into(),
            kernel_sha256: Some("ab".into()),
            problem_hash: None,
            session_medians_us: vec![10.0, 11.0],
        };
        s.record_final_group(&[
            fin(&cond.id, Verdict::Correct, "ok"),
            fin(&fine.id, Verdict::Crashed, "runner_killed"),
        ])
        .unwrap();
        assert_eq!(s.forget_not_final().unwrap(), (2, 1));
        let left: Vec<String> = s.attempts().unwrap().into_iter().map(|a| a.id).collect();
        assert_eq!(left, vec![fine.id.clone()]);
        assert!(s.skills().unwrap().is_empty() && s.final_evals().unwrap().is_empty());
        assert_eq!(s.forget_not_final().unwrap(), (0, 0));
    }

    #[test]
    fn secrets_never_reach_the_store() {
        let key = "sk-store-planted-5e1d2c3b4a";
        mkb_core::secret::register(key);
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Store::open(tmp.path()).unwrap();
        let mut a = attempt("m/A01/cute/solo/r0", Condition::Solo);
        a.error = Some(format!("HTTP 401: bad key {key}"));
        let mut rep = EvalReport::infrastructure(
            EvalMode::Compile,
            Verdict::Correct,
            "ok",
            format!("printed {key}"),
        );
        rep.log = format!("environ: OPENAI_API_KEY={key}");
        let ev = ToolEvalRecord {
            seq: 0,
            tool: "compile".into(),
            mode: "compile".into(),
            verdict: "correct".into(),
            kernel: "k.py".into(),
            report: rep.clone(),
        };
        s.record_attempt(&a, &[ev], None).unwrap();
        s.set_meta("note", key).unwrap();
        s.record_final_group(&[FinalEvalRecord {
            attempt_id: a.id.clone(),
            group: "g".into(),
            mode: "compile".into(),
            report: rep,
            finished_at: "t".into(),
            kernel_sha256: None,
            problem_hash: None,
            session_medians_us: vec![],
        }])
        .unwrap();
        write_atomic(&tmp.path().join("SKILL.md"), key.as_bytes()).unwrap();
        drop(s);
        for f in std::fs::read_dir(tmp.path()).unwrap() {
            let bytes = std::fs::read(f.unwrap().path()).unwrap();
            assert!(!String::from_utf8_lossy(&bytes).contains(key));
        }
        let s = Store::open_existing(tmp.path()).unwrap();
        assert!(s.tool_evals(&a.id).unwrap()[0]
            .report
            .log
            .contains("[REDACTED]"));
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
