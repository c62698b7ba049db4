//! The contract between mkb (Rust) and mkb_eval (Python), across the real process boundary: for
//! every problem under problems/ and every registered DSL, the evaluate request mkb builds goes to
//! `python -m mkb_eval.contract` as JSON lines; Python reads its problem spec as the judge does and
//! echoes it back canonically (it must equal what was sent, field for field), and builds every
//! kind of report with the judge's own code (correct, each failure reason of docs/protocol.md,
//! infrastructure failures, and the timing fields of bench and full mode), which mkb parses with
//! the strict parser the judge's answers go through. A field one side adds and the other lacks
//! fails here: an extra or missing spec field is refused by Python naming it, an extra or missing
//! report field by Rust naming it (both checked below on purpose).

use mkb_core::{DslRegistry, EvalMode, Registry, Verdict, INFRA_REASONS};
use mkb_eval::protocol::{parse_line, Incoming};
use mkb_eval::{EvalRequest, EvalResponse, ProblemSpec};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The evaluator's interpreter: $MKB_PYTHON, else the repository's .venv.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("MKB_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = repo().join(".venv/bin/python");
    assert!(
        venv.exists(),
        "the contract test needs the evaluator's Python: run scripts/setup-python.sh (or set MKB_PYTHON)"
    );
    venv
}

/// Send every message to one `python -m mkb_eval.contract` and return its answers in order
/// (the bodies of protocol lines: the version is checked by `parse_line`).
fn exchange(messages: &[Value]) -> Vec<Value> {
    let mut child = Command::new(python())
        .args(["-m", "mkb_eval.contract"])
        .current_dir(repo())
        .env("PYTHONPATH", repo().join("python"))
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start python -m mkb_eval.contract");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = messages.iter().map(|m| format!("{m}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let answers: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| match parse_line(&l.unwrap()) {
            Ok(Incoming::Response { body, .. }) => body,
            other => panic!("not a response: {other:?}"),
        })
        .collect();
    writer.join().unwrap().unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(answers.len(), messages.len(), "one answer per message");
    answers
}

fn registries() -> (DslRegistry, Registry) {
    let dsls = DslRegistry::load_root(&repo()).unwrap();
    let reg = Registry::load(&repo().join("problems"), &dsls).unwrap();
    (dsls, reg)
}

/// Where two JSON values differ in structure or value (numbers compared as numbers), if they do.
fn json_diff(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let kx: Vec<_> = x.keys().collect();
            let ky: Vec<_> = y.keys().collect();
            if kx != ky {
                return Some(format!("{at}: fields {kx:?} vs {ky:?}"));
            }
            x.iter()
                .find_map(|(k, v)| json_diff(v, &y[k], &format!("{at}.{k}")))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| json_diff(p, q, &format!("{at}[{i}]"))),
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(format!("{at}: {a} vs {b}")),
    }
}

fn request(spec: &ProblemSpec, dsl: mkb_core::Dsl, mode: EvalMode) -> Value {
    EvalRequest::single(spec.dir.clone(), dsl, mode, "/contract/candidate.py".into())
        .to_wire("c1", 7, spec)
}

#[test]
fn every_problem_spec_crosses_intact_for_every_dsl() {
    let (dsls, reg) = registries();
    let mut sent = Vec::new();
    let mut messages = Vec::new();
    for p in reg.problems() {
        let spec = ProblemSpec::from_problem(p).unwrap();
        for dsl in dsls.dsls() {
            let req = request(&spec, dsl, EvalMode::Full);
            messages.push(json!({"op": "problem", "request": req}));
            sent.push((format!("{} [{dsl}]", p.id()), req["problem"].clone()));
        }
    }
    assert!(sent.len() >= 2 * reg.problems().len());
    for ((what, spec), answer) in sent.iter().zip(exchange(&messages)) {
        assert_eq!(answer["ok"], true, "{what}: {answer}");
        if let Some(d) = json_diff(spec, &answer["spec"], "spec") {
            panic!("{what}: the echoed spec differs from the one sent: {d}");
        }
        let back: ProblemSpec = serde_json::from_value(answer["spec"].clone())
            .unwrap_or_else(|e| panic!("{what}: the echo does not parse strictly: {e}"));
        assert_eq!(serde_json::to_value(&back).unwrap(), *spec, "{what}");
    }
}

#[test]
fn a_spec_field_one_side_lacks_is_refused_by_name() {
    let (dsls, reg) = registries();
    let spec = ProblemSpec::from_problem(&reg.problems()[0]).unwrap();
    let req = request(&spec, dsls.dsls()[0], EvalMode::Compile);
    let mut extra = req.clone();
    extra["problem"]["layout"] = json!("row_major");
    let mut nested = req.clone();
    nested["problem"]["outputs"][0]["ulp"] = json!(2);
    let mut missing = req.clone();
    missing["problem"]
        .as_object_mut()
        .unwrap()
        .remove("compile_baseline");
    let mut missing_nested = req.clone();
    missing_nested["problem"]["shapes"][0]
        .as_object_mut()
        .unwrap()
        .remove("bytes");
    let mut bad_dist = req;
    bad_dist["problem"]["inputs"][0]["dist"]["kind"] = json!("poisson");
    let cases = [
        (extra, "`layout` is unknown"),
        (nested, "`ulp` is unknown"),
        (missing, "`compile_baseline` is missing"),
        (missing_nested, "`bytes` is missing"),
        (bad_dist, "poisson"),
    ];
    let messages: Vec<Value> = cases
        .iter()
        .map(|(r, _)| json!({"op": "problem", "request": r}))
        .collect();
    for ((_, needle), answer) in cases.iter().zip(exchange(&messages)) {
        assert_eq!(answer["ok"], false, "{needle}: accepted: {answer}");
        let e = answer["error"].as_str().unwrap();
        assert!(e.contains(needle), "{needle}: {e}");
    }
}

/// Every failure reason of docs/protocol.md with its verdict (the infrastructure ones come
/// from `INFRA_REASONS`).
fn failure_kinds() -> Vec<(Verdict, String)> {
    let mut out: Vec<(Verdict, String)> = Vec::new();
    for r in ["static:forbidden_import", "static:torch_call"] {
        out.push((Verdict::StaticCheckFailed, r.into()));
    }
    for r in ["build_error", "load_error", "missing_build"] {
        out.push((Verdict::CompileError, r.into()));
    }
    for r in [
        "mismatch",
        "nan_or_inf",
        "unwritten_output",
        "input_mutated",
        "perturbation",
        "recheck_failed",
        "forbidden_torch_op",
        "forbidden_kernel",
        "side_stream",
        "kernel_set_changed",
        "timing_mismatch",
        "timing_check_failed",
        "timing_impossible",
        "sandbox_violation",
    ] {
        out.push((Verdict::Incorrect, r.into()));
    }
    for r in ["build_timeout", "call_timeout", "total_timeout"] {
        out.push((Verdict::Timeout, r.into()));
    }
    for r in ["runtime_error", "process_died", "memory_limit"] {
        out.push((Verdict::Crashed, r.into()));
    }
    for r in INFRA_REASONS {
        out.push((Verdict::Crashed, r.into()));
    }
    out
}

#[test]
fn every_report_kind_parses_strictly_in_every_mode() {
    let (dsls, reg) = registries();
    let mut messages = Vec::new();
    let mut plans = Vec::new();
    for p in reg.problems() {
        let spec = ProblemSpec::from_problem(p).unwrap();
        for (i, mode) in [
            EvalMode::Compile,
            EvalMode::Test,
            EvalMode::Bench,
            EvalMode::Full,
        ]
        .into_iter()
        .enumerate()
        {
            let dsl = dsls.dsls()[i % dsls.dsls().len()];
            let mut kinds = vec![json!({"key": "pass", "verdict": "correct", "reason": null})];
            for (j, (v, r)) in failure_kinds().into_iter().enumerate() {
                kinds.push(json!({"key": format!("k{j}"), "verdict": v, "reason": r}));
            }
            for r in ["no_gpu", "dsl_unavailable"] {
                kinds.push(json!({"key": format!("group_{r}"), "verdict": "crashed", "reason": r, "whole_group": true}));
            }
            messages.push(
                json!({"op": "reports", "request": request(&spec, dsl, mode), "kinds": kinds}),
            );
            plans.push((format!("{} [{dsl}] {}", p.id(), mode.as_str()), mode, kinds));
        }
    }
    for ((what, mode, kinds), answer) in plans.iter().zip(exchange(&messages)) {
        assert_eq!(answer["ok"], true, "{what}: {answer}");
        // Strict: exactly the template's fields in every report.
        let resp = EvalResponse::from_wire(&answer)
            .unwrap_or_else(|e| panic!("{what}: the judge's reports break the schema: {e}"));
        assert_eq!(resp.reports.len(), kinds.len(), "{what}");
        for (kr, k) in resp.reports.iter().zip(kinds) {
            let r = &kr.report;
            assert_eq!(kr.key, k["key"], "{what}");
            assert_eq!(r.mode, *mode, "{what} {}", kr.key);
            assert_eq!(r.verdict.as_str(), k["verdict"], "{what} {}", kr.key);
            assert_eq!(
                r.reason.as_deref(),
                k["reason"].as_str(),
                "{what} {}",
                kr.key
            );
            assert!(!r.message.is_empty(), "{what} {}", kr.key);
            let infra = k["reason"]
                .as_str()
                .is_some_and(|x| INFRA_REASONS.contains(&x));
            assert_eq!(r.is_infrastructure(), infra, "{what} {}", kr.key);
            if kr.key == "pass" {
                assert!(r.compile_s.is_some() && r.phases.is_some() && !r.kernels.is_empty());
                let timed = matches!(mode, EvalMode::Bench | EvalMode::Full);
                assert_eq!(r.runtime.is_some(), timed, "{what}");
                assert_eq!(r.ideal_us.is_some(), timed, "{what}");
                assert_eq!(r.floor_us.is_some(), timed, "{what}");
                assert_eq!(
                    r.t_ref_us.is_some() && r.speedup_eager.is_some(),
                    timed,
                    "{what}"
                );
                assert_eq!(
                    r.speedup_compile.is_some(),
                    *mode == EvalMode::Full,
                    "{what}"
                );
                if timed {
                    assert!(r.score() > 0.0, "{what}");
                    assert!(r.runtime.as_ref().unwrap().wall_us_per_call.is_some());
                }
            } else {
                assert_eq!(r.score(), 0.0, "{what} {}", kr.key);
            }
        }
    }
}

#[test]
fn a_report_field_one_side_lacks_is_refused_by_name() {
    let (dsls, reg) = registries();
    let spec = ProblemSpec::from_problem(&reg.problems()[0]).unwrap();
    let kinds = json!([{"key": "pass", "verdict": "correct", "reason": null}]);
    let answer = exchange(&[json!({"op": "reports",
        "request": request(&spec, dsls.dsls()[0], EvalMode::Full), "kinds": kinds})])
    .remove(0);
    assert!(EvalResponse::from_wire(&answer).is_ok(), "{answer}");
    let mut extra = answer.clone();
    extra["reports"][0]["report"]["gpu_temp_c"] = json!(61);
    let e = EvalResponse::from_wire(&extra).unwrap_err();
    assert!(e.contains("`gpu_temp_c` is unknown"), "{e}");
    let mut missing = answer.clone();
    missing["reports"][0]["report"]
        .as_object_mut()
        .unwrap()
        .remove("ideal_us");
    let e = EvalResponse::from_wire(&missing).unwrap_err();
    assert!(e.contains("`ideal_us` is missing"), "{e}");
    let mut nested = answer;
    nested["reports"][0]["report"]["runtime"]["p99_us"] = json!(70.0);
    let e = EvalResponse::from_wire(&nested).unwrap_err();
    assert!(e.contains("p99_us"), "{e}");
}

/// The output-kind fixtures (python/tests/fixtures/kinds/problems: an output updated in place,
/// one judged on its change from an input, a quantized output with its scales, a scalar output,
/// the integer distributions with dimension-expression bounds) cross intact, and their spec
/// bundle, committed for the Python tests (python/tests/fixtures/kinds/spec-bundle.json), is
/// current (`MKB_BLESS=1` rewrites it).
#[test]
fn the_output_kinds_cross_intact() {
    let dsls = DslRegistry::load_root(&repo()).unwrap();
    let root = repo().join("python/tests/fixtures/kinds/problems");
    let reg = Registry::load(&root, &dsls).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(reg.problems().len(), 2);
    let mut sent = Vec::new();
    let mut messages = Vec::new();
    for p in reg.problems() {
        let spec = ProblemSpec::from_problem(p).unwrap();
        let req = request(&spec, dsls.dsls()[0], EvalMode::Test);
        messages.push(json!({"op": "problem", "request": req}));
        sent.push((p.id().to_string(), req["problem"].clone()));
    }
    let kinds = &sent.iter().find(|(id, _)| id == "F98").unwrap().1;
    let outs = &kinds["outputs"];
    assert_eq!(outs[0]["inplace"], true);
    assert_eq!(outs[1]["delta"], "r");
    assert_eq!(outs[2]["scale"], "s");
    assert!(outs[3].get("inplace").is_none() && outs[3].get("scale").is_none());
    assert_eq!(outs[6]["shape"], json!([]));
    assert_eq!(
        kinds["inputs"][3]["dist"],
        json!({"kind": "randint", "lo": 0, "hi": "V"})
    );
    assert_eq!(
        kinds["inputs"][5]["dist"],
        json!({"kind": "unique", "hi": "E", "per_row": true})
    );
    assert_eq!(
        kinds["inputs"][6]["dist"],
        json!({"kind": "counts", "total": "K*T"})
    );
    assert_eq!(kinds["shapes"][2]["sizes"]["total"], json!([]));
    for ((what, spec), answer) in sent.iter().zip(exchange(&messages)) {
        assert_eq!(answer["ok"], true, "{what}: {answer}");
        if let Some(d) = json_diff(spec, &answer["spec"], "spec") {
            panic!("{what}: the echoed spec differs from the one sent: {d}");
        }
        let back: ProblemSpec = serde_json::from_value(answer["spec"].clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), *spec, "{what}");
    }
    // Python refuses a kind that names nothing, or a malformed bound, naming the field.
    let spec = ProblemSpec::from_problem(reg.get("F98").unwrap()).unwrap();
    let base = request(&spec, dsls.dsls()[0], EvalMode::Test);
    let mut bad_delta = base.clone();
    bad_delta["problem"]["outputs"][1]["delta"] = json!("nope");
    let mut bad_bound = base.clone();
    bad_bound["problem"]["inputs"][3]["dist"]["hi"] = json!("V-1");
    let mut bad_field = base;
    bad_field["problem"]["outputs"][0]["in_place"] = json!(true);
    let cases = [
        (bad_delta, "delta: no input 'nope'"),
        (
            bad_bound,
            "inputs[3].dist.hi: malformed dimension expression",
        ),
        (bad_field, "`in_place` is unknown"),
    ];
    let messages: Vec<Value> = cases
        .iter()
        .map(|(r, _)| json!({"op": "problem", "request": r}))
        .collect();
    for ((_, needle), answer) in cases.iter().zip(exchange(&messages)) {
        assert_eq!(answer["ok"], false, "{needle}: accepted: {answer}");
        let e = answer["error"].as_str().unwrap();
        assert!(e.contains(needle), "{needle}: {e}");
    }
    // The committed bundle the Python tests read.
    let bundle = mkb_eval::SpecBundle::new(reg.problems(), Some(&repo())).unwrap();
    let fresh = serde_json::to_string_pretty(&bundle).unwrap() + "\n";
    let path = repo().join("python/tests/fixtures/kinds/spec-bundle.json");
    if std::env::var_os("MKB_BLESS").is_some() {
        std::fs::write(&path, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is out of date: run `MKB_BLESS=1 cargo test -p mkb-eval --test contract`",
        path.display()
    );
}
