//! Between the run store (crates/mkb-store) and the analysis: one `AttemptRow` per stored
//! attempt (its final evaluation, its skill's source score, tokens, cost, artifacts), and the
//! reverse for `mkb simulate`, which writes synthetic rows into a store exactly like a real
//! run's. The cost comes from the model prices in the stored run config
//! (`mkb_store::StoredConfig`), so none of this needs the runner.

use crate::row::{measured_eps, DEFAULT_NOISE_EPS};
use crate::AttemptRow;
use anyhow::Result;
use mkb_core::{
    Baseline, Condition, Dsl, EndReason, EvalMode, EvalReport, Family, Timing, Verdict,
};
use mkb_store::{AttemptRecord, FinalEvalRecord, Price, SkillRecord, Store, ORIGINAL_SET};
use std::collections::BTreeMap;

/// The analysis rows of a run. A final evaluation in compile mode proves compilation only,
/// so such attempts count as not correct (no correctness was checked, no runtime measured).
/// What is not a result never becomes a row (never a score of 0): an attempt that ended in a
/// provider error (older stores), and an attempt whose final evaluation is pending or failed
/// for infrastructure reasons (not evaluated).
pub fn rows_from_store(store: &Store, run_name: &str) -> Result<Vec<AttemptRow>> {
    rows_from_eval_set(store, run_name, ORIGINAL_SET)
}

/// `rows_from_store` with the final evaluations of an evaluation set (`ORIGINAL_SET`, or one
/// `mkb rescore` made). Each row's tie band is measured from its problem variant's repeated
/// timing sessions where the set has them ([`measured_eps`]), and its cost comes from the
/// model's price in the run's config, where one is set.
pub fn rows_from_eval_set(store: &Store, run_name: &str, set: &str) -> Result<Vec<AttemptRow>> {
    let finals: BTreeMap<String, FinalEvalRecord> = store
        .set_evals(set)?
        .into_iter()
        .filter(|f| !f.report.is_infrastructure())
        .map(|f| (f.attempt_id.clone(), f))
        .collect();
    let attempts: Vec<AttemptRecord> = store
        .attempts()?
        .into_iter()
        .filter(|a| a.end_reason != EndReason::ProviderError && finals.contains_key(&a.id))
        .collect();
    let skills: BTreeMap<String, SkillRecord> = store
        .skills()?
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect();
    let skill_of_attempt: BTreeMap<String, &SkillRecord> = skills
        .values()
        .map(|s| (s.source_attempt.clone(), s))
        .collect();
    // The run's model prices (a simulated store has no config: no prices). A config this
    // build cannot read leaves the costs out rather than the whole analysis.
    let prices: BTreeMap<String, Price> = match store.run_config() {
        Ok(c) => c.map(|c| c.prices()).unwrap_or_default(),
        Err(e) => {
            tracing::warn!("{e:#}; costs are left out");
            BTreeMap::new()
        }
    };
    // The tie band of each problem variant, from its solo kernels' repeated sessions.
    let mut sessions: BTreeMap<(String, Dsl), Vec<Vec<f64>>> = BTreeMap::new();
    for a in &attempts {
        if a.condition == Condition::Solo {
            if let Some(f) = finals.get(&a.id) {
                sessions
                    .entry((a.problem.clone(), a.dsl))
                    .or_default()
                    .push(f.session_medians_us.clone());
            }
        }
    }
    let eps: BTreeMap<(String, Dsl), (f64, u32)> = sessions
        .into_iter()
        .filter_map(|(k, v)| measured_eps(&v).map(|e| (k, e)))
        .collect();
    let score_of =
        |id: &str| -> Option<f64> { finals.get(id).map(|f| effective(&f.report, &f.mode).2) };
    // The source DSL of the direction into each target: that of the skills its conditioned
    // and placebo attempts were given (solo rows of the target belong to that direction).
    let mut source_into: BTreeMap<Dsl, Dsl> = BTreeMap::new();
    for a in &attempts {
        if let Some(s) = a.skill_id.as_ref().and_then(|id| skills.get(id)) {
            source_into.entry(a.dsl).or_insert(s.source_dsl);
        }
    }
    let mut rows = Vec::with_capacity(attempts.len());
    for a in &attempts {
        let fin = finals.get(&a.id);
        let (verdict, correct, score) = match fin {
            Some(f) => effective(&f.report, &f.mode),
            None => (None, false, 0.0),
        };
        let report = fin.map(|f| &f.report);
        let used_skill = a.skill_id.as_ref().and_then(|id| skills.get(id));
        let own_skill = skill_of_attempt.get(&a.id).copied();
        let skill = own_skill.or(used_skill);
        rows.push(AttemptRow {
            run_name: run_name.to_string(),
            attempt_id: Some(a.id.clone()),
            model: a.model.clone(),
            problem: a.problem.clone(),
            family: a
                .family
                .chars()
                .next()
                .and_then(Family::from_letter)
                .unwrap_or(Family::A),
            target: a.dsl,
            source: used_skill
                .map(|s| s.source_dsl)
                .or_else(|| source_into.get(&a.dsl).copied()),
            condition: a.condition,
            run_index: a.run,
            verdict,
            correct,
            runtime_us: if correct {
                report.and_then(|r| r.runtime.as_ref().map(|t| t.median_us))
            } else {
                None
            },
            t_ref_us: report.and_then(|r| r.t_ref_us),
            t_compile_us: report.and_then(|r| {
                r.baselines
                    .iter()
                    .filter(|b| b.kind == "compile")
                    .map(|b| b.timing.median_us)
                    .reduce(f64::min)
            }),
            score,
            source_score: used_skill.and_then(|s| score_of(&s.source_attempt)),
            source_attempt_id: used_skill.map(|s| s.source_attempt.clone()),
            noise_eps: eps
                .get(&(a.problem.clone(), a.dsl))
                .map_or(DEFAULT_NOISE_EPS, |e| e.0),
            noise_sessions: eps.get(&(a.problem.clone(), a.dsl)).map_or(0, |e| e.1),
            cost_usd: prices
                .get(&a.model)
                .map(|p| p.cost(a.input_tokens, a.output_tokens)),
            input_tokens: a.input_tokens,
            output_tokens: a.output_tokens,
            skill_tokens: own_skill.map(|s| s.input_tokens + s.output_tokens),
            wall_s: a.wall_s,
            eval_wait_s: a.eval_wait_s,
            end_reason: Some(a.end_reason),
            turns: a.turns,
            tool_evals: a.tool_evals,
            skill_flags: skill.map(|s| s.flags.clone()).unwrap_or_default(),
            kernel_path: a.final_kernel.clone(),
            skill_path: skill.map(|s| s.path.clone()),
            trajectory_path: Some(a.trajectory.clone()).filter(|t| !t.is_empty() && t != SIMULATED),
            eval_mode: fin.map(|f| f.mode.clone()),
        });
    }
    Ok(rows)
}

/// (verdict, correct, score) of a final evaluation.
fn effective(r: &EvalReport, mode: &str) -> (Option<Verdict>, bool, f64) {
    let correct = r.verdict == Verdict::Correct && mode != EvalMode::Compile.as_str();
    (
        Some(r.verdict),
        correct,
        if correct { r.score() } else { 0.0 },
    )
}

/// The trajectory path of a simulated attempt (there is none).
pub const SIMULATED: &str = "(simulated)";

/// Write simulated rows into a store as attempts, skills and final evaluations, so that every
/// command that reads a run (analyze, export, report, status) reads it the same way.
pub fn write_simulated(store: &mut Store, rows: &[AttemptRow]) -> Result<usize> {
    store.set_meta("simulated", "true")?;
    let id_of = |r: &AttemptRow| {
        format!(
            "{}/{}/{}/{}/r{}",
            r.model, r.problem, r.target, r.condition, r.run_index
        )
    };
    // The simulator names attempts its own way: map its ids to the store's.
    let ids: BTreeMap<String, String> = rows
        .iter()
        .filter_map(|r| r.attempt_id.clone().map(|a| (a, id_of(r))))
        .collect();
    // Solo attempts first, so that their skills exist before the attempts that use them.
    let mut order: Vec<&AttemptRow> = rows.iter().collect();
    order.sort_by_key(|r| (r.condition != Condition::Solo, id_of(r)));
    let mut n = 0;
    for r in order {
        let id = id_of(r);
        let skill_id = match r.condition {
            Condition::Conditioned | Condition::Placebo => r
                .source_attempt_id
                .as_ref()
                .map(|s| format!("skill:{}", ids.get(s).cloned().unwrap_or_else(|| s.clone()))),
            _ => None,
        };
        let rec = AttemptRecord {
            id: id.clone(),
            model: r.model.clone(),
            problem: r.problem.clone(),
            family: r.family.to_string(),
            dsl: r.target,
            condition: r.condition,
            run: r.run_index,
            skill_id,
            end_reason: r.end_reason.unwrap_or(EndReason::Submitted),
            turns: r.turns,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            tool_evals: r.tool_evals,
            wall_s: r.wall_s,
            eval_wait_s: r.eval_wait_s,
            final_kernel: None,
            final_source: "none".into(),
            trajectory: SIMULATED.into(),
            error: None,
            finished_at: mkb_core::utc_now(),
        };
        let skill = (r.condition == Condition::Solo).then(|| SkillRecord {
            id: format!("skill:{id}"),
            source_attempt: id.clone(),
            model: r.model.clone(),
            problem: r.problem.clone(),
            source_dsl: r.target,
            name: "simulated".into(),
            description: "a simulated skill".into(),
            path: SIMULATED.into(),
            chars: 0,
            input_tokens: r.skill_tokens.unwrap_or(0),
            output_tokens: 0,
            flags: r.skill_flags.clone(),
        });
        if store.record_attempt(&rec, &[], skill.as_ref())? {
            n += 1;
        }
        let verdict = r.verdict.unwrap_or(Verdict::CompileError);
        let mut report = EvalReport::infrastructure(
            EvalMode::Full,
            verdict,
            "simulated",
            "a simulated evaluation".into(),
        );
        report.reason = if verdict == Verdict::Correct {
            None
        } else {
            Some("simulated".into())
        };
        let timing = |us: f64| Timing {
            median_us: us,
            iqr_us: 0.0,
            reps: 100,
            timer: "simulated".into(),
            wall_us_per_call: None,
        };
        report.runtime = r.runtime_us.filter(|_| r.correct).map(timing);
        report.t_ref_us = r.t_ref_us;
        report.t_ref_name = r.t_ref_us.map(|_| "eager".to_string());
        if let Some(tc) = r.t_compile_us {
            report.baselines.push(Baseline {
                name: "torch.compile".into(),
                kind: "compile".into(),
                timing: timing(tc),
            });
        }
        store.record_final_group(&[FinalEvalRecord {
            attempt_id: id,
            group: format!("{}/{}", r.problem, r.target),
            mode: "full".into(),
            report,
            finished_at: mkb_core::utc_now(),
            kernel_sha256: None,
            problem_hash: None,
            session_medians_us: Vec::new(),
        }])?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analyze, simulate, AnalysisOptions, SimConfig};
    use rusqlite::Connection;

    #[test]
    fn what_is_not_a_result_is_not_a_row() {
        let cfg = SimConfig {
            problems: 2,
            runs: 1,
            ..SimConfig::default()
        };
        let rows = simulate(&cfg, 3);
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(tmp.path()).unwrap();
        write_simulated(&mut store, &rows).unwrap();
        let all = rows_from_store(&store, "x").unwrap().len();
        assert_eq!(all, rows.len());
        // One final evaluation turns into "not evaluated" (an older store), one disappears
        // (pending): both attempts leave the analysis instead of counting as 0.
        let finals = store.final_evals().unwrap();
        let (a, b) = (&finals[0].attempt_id, &finals[1].attempt_id);
        // A second connection to the same WAL file, as another process would have.
        let conn = Connection::open(tmp.path().join("mkb.sqlite")).unwrap();
        conn.execute(
                "UPDATE final_evals SET verdict = 'crashed', reason = 'host_overload', report = json_set(report, '$.verdict', 'crashed', '$.reason', 'host_overload') WHERE attempt_id = ?1",
                [a],
            )
            .unwrap();
        conn.execute("DELETE FROM final_evals WHERE attempt_id = ?1", [b])
            .unwrap();
        let left = rows_from_store(&store, "x").unwrap();
        assert_eq!(left.len(), all - 2);
        assert!(left
            .iter()
            .all(|r| r.attempt_id.as_deref() != Some(a.as_str())
                && r.attempt_id.as_deref() != Some(b.as_str())));
    }

    #[test]
    fn rows_carry_the_measured_tie_band_the_cost_and_the_queueing() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(&tmp.path().join("run")).unwrap();
        // The shape `mkb run` stores (mkb-run checks that its config reads back this way).
        let cfg = r#"{"name":"x","problems":["A01"],"models":[{"label":"m",
            "provider":{"kind":"replay","dir":"r"},
            "price":{"input_per_mtok":2.0,"output_per_mtok":10.0}}]}"#;
        store.set_meta(mkb_store::CONFIG_META, cfg).unwrap();
        let attempt = |problem: &str, cond: Condition, run: u32| AttemptRecord {
            id: format!("m/{problem}/tirx/{cond}/r{run}"),
            model: "m".into(),
            problem: problem.into(),
            family: "A".into(),
            dsl: Dsl::TIRX,
            condition: cond,
            run,
            skill_id: None,
            end_reason: EndReason::Submitted,
            turns: 2,
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            tool_evals: 1,
            wall_s: 100.0,
            eval_wait_s: Some(30.0),
            final_kernel: None,
            final_source: "none".into(),
            trajectory: String::new(),
            error: None,
            finished_at: "t".into(),
        };
        let fin = |id: &str, sessions: Vec<f64>| {
            let mut report =
                EvalReport::infrastructure(EvalMode::Full, Verdict::Correct, "ok", "m".into());
            report.reason = None;
            report.runtime = Some(Timing {
                median_us: sessions[0],
                iqr_us: 0.0,
                reps: 100,
                timer: "t".into(),
                wall_us_per_call: None,
            });
            report.t_ref_us = Some(100.0);
            FinalEvalRecord {
                attempt_id: id.into(),
                group: "g".into(),
                mode: "full".into(),
                report,
                finished_at: "t".into(),
                kernel_sha256: None,
                problem_hash: None,
                session_medians_us: sessions,
            }
        };
        // A01: two solo kernels timed three times (ranges 10% and 4%: median 7%, eps 14%);
        // C01: one session only (the fixed default).
        for (p, run, sessions) in [
            ("A01", 0, vec![100.0, 110.0, 105.0]),
            ("A01", 1, vec![50.0, 52.0, 51.0]),
            ("C01", 0, vec![80.0]),
        ] {
            let a = attempt(p, Condition::Solo, run);
            store.record_attempt(&a, &[], None).unwrap();
            store.record_final_group(&[fin(&a.id, sessions)]).unwrap();
        }
        let c = attempt("A01", Condition::RepeatSolo, 0);
        store.record_attempt(&c, &[], None).unwrap();
        store.record_final_group(&[fin(&c.id, vec![90.0])]).unwrap();
        let rows = rows_from_store(&store, "x").unwrap();
        assert_eq!(rows.len(), 4);
        let expect = 2.0 * ((10.0 / 105.0 + 2.0 / 51.0) / 2.0);
        for r in &rows {
            if r.problem == "A01" {
                assert!(
                    (r.noise_eps - expect).abs() < 1e-12,
                    "{}: {}",
                    r.label(),
                    r.noise_eps
                );
                assert_eq!(r.noise_sessions, 3);
            } else {
                assert_eq!(r.noise_eps, DEFAULT_NOISE_EPS);
                assert_eq!(r.noise_sessions, 0);
            }
            // $2 per million input, $10 per million output.
            assert!((r.cost_usd.unwrap() - 3.0).abs() < 1e-12);
            assert_eq!(r.eval_wait_s, Some(30.0));
            assert!((r.agent_wall_s() - 70.0).abs() < 1e-12);
        }
    }

    #[test]
    fn simulated_rows_roundtrip_through_the_store() {
        let cfg = SimConfig {
            problems: 6,
            runs: 2,
            ..SimConfig::default()
        };
        let rows = simulate(&cfg, 7);
        let tmp = tempfile::tempdir().unwrap();
        let mut store = Store::open(tmp.path()).unwrap();
        let n = write_simulated(&mut store, &rows).unwrap();
        assert_eq!(n, rows.len());
        let back = rows_from_store(&store, &cfg.run_name).unwrap();
        assert_eq!(back.len(), rows.len());
        let key = |r: &AttemptRow| {
            (
                r.model.clone(),
                r.problem.clone(),
                r.target,
                r.condition,
                r.run_index,
            )
        };
        let orig: BTreeMap<_, _> = rows.iter().map(|r| (key(r), r)).collect();
        for b in &back {
            let o = orig[&key(b)];
            assert_eq!(b.correct, o.correct, "{}", b.label());
            assert!(
                (b.effective_score() - o.effective_score()).abs() < 1e-9,
                "{}",
                b.label()
            );
            if b.condition == Condition::Conditioned {
                assert_eq!(
                    b.source_score.map(|x| (x * 1e6).round()),
                    o.source_score.map(|x| (x * 1e6).round()),
                    "{}",
                    b.label()
                );
            }
        }
        // The analysis of the stored run equals the analysis of the simulated rows.
        let opts = AnalysisOptions {
            resamples: 200,
            ..AnalysisOptions::default()
        };
        let lift = |rows: &[AttemptRow]| {
            analyze(rows, &opts)
                .cells
                .iter()
                .map(|c| c.lift.unwrap_or(f64::NAN))
                .collect::<Vec<_>>()
        };
        let (l1, l2) = (lift(&rows), lift(&back));
        assert!(!l1.is_empty());
        assert_eq!(l1.len(), l2.len());
        for (x, y) in l1.iter().zip(&l2) {
            assert!(
                (x - y).abs() < 1e-9 || (x.is_nan() && y.is_nan()),
                "{l1:?} vs {l2:?}"
            );
        }
    }

    #[test]
    fn the_committed_replay_store_reads_as_rows() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/h200/replay-demo");
        let store = Store::open_existing(&dir).unwrap();
        let cfg = store
            .run_config()
            .unwrap()
            .expect("the replay run stored its config");
        assert!(cfg.budget.is_some());
        let rows = rows_from_store(&store, "replay-demo").unwrap();
        assert_eq!(rows.len(), store.final_evals().unwrap().len());
        // One timing session per kernel there: the fixed tie band; no prices: no cost.
        assert!(rows.iter().all(|r| r.noise_sessions == 0
            && r.noise_eps == DEFAULT_NOISE_EPS
            && r.cost_usd.is_none()));
    }
}
