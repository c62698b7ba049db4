//! Grouping of the attempt rows into arms (model, target, problem, condition) with their
//! runs in order, the problem families, and the input checks that become warnings; plus the
//! per-problem tie threshold shared by the cells and the source tables.

use crate::row::AttemptRow;
use mkb_core::{Condition, Direction, Dsl, Family};
use std::collections::BTreeMap;

/// Key of a problem's runs: (model, target, problem, condition).
pub(super) type ArmKey<'a> = (&'a str, Dsl, &'a str, Condition);

pub(super) struct Grouped<'a> {
    pub(super) arms: BTreeMap<ArmKey<'a>, Vec<&'a AttemptRow>>,
    pub(super) family: BTreeMap<&'a str, Family>,
    /// The direction into each target DSL, from the rows (see [`AttemptRow::direction`]).
    pub(super) directions: BTreeMap<Dsl, Direction>,
}

impl Grouped<'_> {
    /// The direction whose target is `target`.
    pub(super) fn direction(&self, target: Dsl) -> Direction {
        self.directions.get(&target).copied().unwrap_or_else(|| {
            Direction::default_into(target).unwrap_or(Direction {
                source: target,
                target,
            })
        })
    }
}

pub(super) fn group_rows<'a>(rows: &'a [AttemptRow], warnings: &mut Vec<String>) -> Grouped<'a> {
    let mut arms: BTreeMap<ArmKey<'a>, Vec<&'a AttemptRow>> = BTreeMap::new();
    let mut family: BTreeMap<&'a str, Family> = BTreeMap::new();
    let mut seen: BTreeMap<(&str, &str, Dsl, Condition, u32, &str), usize> = BTreeMap::new();
    let mut bad_score = 0;
    let mut directions: BTreeMap<Dsl, Direction> = BTreeMap::new();
    let mut mixed: BTreeMap<Dsl, std::collections::BTreeSet<Dsl>> = BTreeMap::new();
    for r in rows {
        // A row that knows its source wins over one that does not (older rows).
        let d = r.direction();
        if r.source.is_some() {
            mixed.entry(r.target).or_default().insert(d.source);
            directions.insert(r.target, d);
        } else {
            directions.entry(r.target).or_insert(d);
        }
        arms.entry((r.model.as_str(), r.target, r.problem.as_str(), r.condition))
            .or_default()
            .push(r);
        if let Some(f) = family.insert(r.problem.as_str(), r.family) {
            if f != r.family {
                warnings.push(format!(
                    "problem {} appears in families {} and {}; using {}",
                    r.problem, f, r.family, r.family
                ));
            }
        }
        *seen
            .entry((
                r.model.as_str(),
                r.problem.as_str(),
                r.target,
                r.condition,
                r.run_index,
                r.run_name.as_str(),
            ))
            .or_default() += 1;
        if (!r.correct && r.score != 0.0) || !r.score.is_finite() || r.score < 0.0 {
            bad_score += 1;
        }
    }
    let dups = seen.values().filter(|&&c| c > 1).count();
    if dups > 0 {
        warnings.push(format!("{dups} (model, problem, dsl, condition, run, run_name) keys appear more than once; each row counts as a run"));
    }
    if bad_score > 0 {
        warnings.push(format!("{bad_score} rows have a score inconsistent with `correct` (or not a finite, non-negative number); they count as 0 unless correct"));
    }
    for (target, sources) in &mixed {
        if sources.len() > 1 {
            let names: Vec<&str> = sources.iter().map(|d| d.as_str()).collect();
            warnings.push(format!(
                "the rows into {target} come from several source DSLs ({}); they are analysed as one direction, {}",
                names.join(", "),
                directions[target]
            ));
        }
    }
    for v in arms.values_mut() {
        v.sort_by_key(|r| (r.run_index, r.run_name.as_str()));
    }
    Grouped {
        arms,
        family,
        directions,
    }
}

pub(super) fn share(k: usize, n: usize) -> f64 {
    if n == 0 {
        0.0
    } else {
        k as f64 / n as f64
    }
}

pub(super) fn problem_eps<'a>(rows: impl Iterator<Item = &'a AttemptRow>, default: f64) -> f64 {
    let mut eps: Option<f64> = None;
    for r in rows {
        let e = r.eps_or(default);
        eps = Some(eps.map_or(e, |x: f64| x.max(e)));
    }
    eps.unwrap_or(default)
}
