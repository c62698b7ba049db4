//! A DSL is one descriptor folder, end to end: a copy of the repository gets a third DSL, the
//! dummy fixture of tests/dsls/dummy (descriptor, brief, Python adapter and DSL package; its
//! "kernels" are Python functions compiled on the CPU) and an A01 variant for it, and then
//! `mkb problems` lists the variant, `mkb eval --mode compile` gives compile verdicts by the
//! dummy DSL's own static rules, and an experiment over dsls = [cute, dummy] with the replay
//! provider in compile mode completes, its rows in both directions (cute->dummy, dummy->cute)
//! and its skills audited with the dummy DSL's leak markers. No code lists the dummy DSL.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name();
        if name == "__pycache__" {
            continue;
        }
        let (src, dst) = (e.path(), to.join(&name));
        if src.is_dir() {
            copy_dir(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A copy of what `mkb` reads of the repository (two of its problems), with the dummy DSL
/// registered and A01 posed in it.
fn repo_with_dummy(tmp: &Path) -> PathBuf {
    let repo = common::repo();
    let root = tmp.join("repo");
    for rel in [
        "problems/A/A01_bias_gelu",
        "problems/C/C01_softmax",
        "dsls",
        "docs/dsl",
        "python/mkb_eval",
    ] {
        copy_dir(&repo.join(rel), &root.join(rel));
    }
    let fixture = repo.join("tests/dsls/dummy");
    copy_dir(&fixture, &root.join("dsls/dummy"));
    for f in ["starter.py", "solution.py"] {
        std::fs::remove_file(root.join("dsls/dummy").join(f)).unwrap();
    }
    let variant = root.join("problems/A/A01_bias_gelu/dummy");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::copy(fixture.join("starter.py"), variant.join("starter.py")).unwrap();
    root
}

fn mkb(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mkb"));
    c.arg("--root")
        .arg(root)
        .arg("--python")
        .arg(common::python());
    c
}

fn ok(o: Output) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// One recorded conversation: the given assistant turns as tool calls (name, arguments), then
/// (for a solo attempt) the distilled skill.
fn recording(
    dir: &Path,
    dsl: &str,
    condition: &str,
    calls: &[(&str, serde_json::Value)],
    skill: Option<&str>,
) {
    let header = serde_json::json!({"format": "mkb-replay", "version": 1,
        "key": {"model_label": "replay-dummy", "problem": "A01", "dsl": dsl, "condition": condition, "run": 0},
        "created": "2026-12-01T00:00:00Z", "producer": "handwritten", "tool_mode": "native"});
    let mut lines = vec![header.to_string()];
    let turn = |i: usize, content: &str, calls: serde_json::Value, stop: &str| {
        serde_json::json!({"turn": i, "response": {"message": {"role": "assistant", "content": content, "tool_calls": calls},
            "usage": {"input_tokens": 100, "output_tokens": 20}, "stop_reason": stop, "model": "handwritten"}})
        .to_string()
    };
    for (i, (name, args)) in calls.iter().enumerate() {
        let call =
            serde_json::json!([{"id": format!("call_{i}"), "name": name, "arguments": args}]);
        lines.push(turn(i, &format!("Calling {name}."), call, "tool_calls"));
    }
    if let Some(s) = skill {
        lines.push(turn(calls.len(), s, serde_json::json!([]), "stop"));
    }
    let path = dir.join(format!("A01_{dsl}_{condition}_r0.jsonl"));
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn a_third_dsl_runs_end_to_end_in_compile_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_with_dummy(tmp.path());
    let solution = common::repo().join("tests/dsls/dummy/solution.py");
    let starter = root.join("problems/A/A01_bias_gelu/dummy/starter.py");

    // The registry: A01 is posed in three DSLs, the others in two.
    let list = ok(mkb(&root).args(["problems", "list"]).output().unwrap());
    let a01 = list.lines().find(|l| l.starts_with("A01")).unwrap();
    assert!(a01.contains("cute,dummy,tirx"), "{list}");
    let c01 = list.lines().find(|l| l.starts_with("C01")).unwrap();
    assert!(
        c01.contains("cute,tirx") && !c01.contains("dummy"),
        "{list}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(mkb(&root)
        .args(["problems", "list", "--json"])
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(
        json[0]["variants"],
        serde_json::json!(["cute", "dummy", "tirx"])
    );
    // The variant prompt: the descriptor's display name, its brief and the starter.
    let prompt = ok(mkb(&root)
        .args(["problems", "show", "A01", "--dsl", "dummy", "--prompt"])
        .output()
        .unwrap());
    assert!(prompt.contains("# Your DSL: Dummy DSL"), "{prompt}");
    assert!(prompt.contains("`dummy.compile(fn)` checks it"), "{prompt}");
    assert!(prompt.contains("write the Dummy DSL kernel"), "{prompt}");
    // A DSL without a descriptor is refused, naming the registered ones.
    let o = mkb(&root)
        .args(["problems", "show", "A01", "--dsl", "triton", "--prompt"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("registered: cute, dummy, tirx"),
        "{err}"
    );

    // Compile-mode evaluation, by the dummy DSL's own rules and adapter.
    // (The exit status says whether the kernel passed; the report is printed either way.)
    let eval = |file: &Path| -> serde_json::Value {
        let o = mkb(&root)
            .args([
                "eval", "A01", "--dsl", "dummy", "--mode", "compile", "--gpus", "none",
            ])
            .args(["--cpu-workers", "1", "--json", "--file"])
            .arg(file)
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
    };
    let good = eval(&solution);
    assert_eq!(good["verdict"], "correct", "{good:#}");
    assert_eq!(good["mode"], "compile", "{good:#}");
    let bad = eval(&starter);
    assert_eq!(bad["verdict"], "static_check_failed", "{bad:#}");
    let msg = bad["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("@dummy.kernel") && msg.contains("Dummy DSL"),
        "{msg}"
    );

    // An experiment over cute and the dummy DSL, both directions, replayed in compile mode.
    let replay = tmp.path().join("replay");
    let rec = replay.join("replay-dummy");
    std::fs::create_dir_all(&rec).unwrap();
    let dummy_src = std::fs::read_to_string(&solution).unwrap();
    let cute_src =
        std::fs::read_to_string(root.join("problems/A/A01_bias_gelu/cute/starter.py")).unwrap();
    let write = |src: &str| ("write_kernel", serde_json::json!({ "source": src }));
    let submit = ("submit", serde_json::json!({}));
    let compile = ("compile", serde_json::json!({}));
    // The cute skill shows dummy-DSL code: the audit flags it with the dummy DSL's markers.
    recording(&rec, "cute", "solo", &[write(&cute_src), submit.clone()],
        Some("---\nname: a\ndescription: b\n---\nWrap the kernel with @dummy.kernel and call dummy.compile(fn)."));
    recording(&rec, "dummy", "solo", &[write(&dummy_src), compile.clone(), submit.clone()],
        Some("---\nname: c\ndescription: d\n---\nOne fused elementwise pass; fp32 math, one rounding."));
    recording(
        &rec,
        "cute",
        "conditioned",
        &[write(&cute_src), submit.clone()],
        None,
    );
    recording(
        &rec,
        "dummy",
        "conditioned",
        &[write(&dummy_src), compile, submit],
        None,
    );
    let cfg = tmp.path().join("exp.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"name = "dummy-e2e"
problems = ["A01"]
dsls = ["cute", "dummy"]
concurrency = 2
[budget]
max_turns = 8
max_output_tokens = 100000
max_tool_evals = 4
max_wall_s = 900
[controls]
placebo = false
repeat_solo = false
[eval]
gpus = "none"
cpu_workers = 1
final_mode = "compile"
[[models]]
label = "replay-dummy"
provider = {{ kind = "replay", dir = "{}" }}
"#,
            replay.display()
        ),
    )
    .unwrap();
    let runs = tmp.path().join("runs");
    let out = ok(mkb(&root)
        .arg("run")
        .arg(&cfg)
        .arg("--runs-dir")
        .arg(&runs)
        .arg("--no-progress")
        .output()
        .unwrap());
    let run_dir = runs.join("dummy-e2e");
    assert_eq!(common::count(&run_dir, "attempts"), 4, "{out}");
    assert_eq!(common::count(&run_dir, "final_evals"), 4, "{out}");

    let conn = rusqlite::Connection::open(run_dir.join("mkb.sqlite")).unwrap();
    // Skill sources, and the leak audit of the cute skill (given to dummy attempts).
    let flags: String = conn
        .query_row(
            "SELECT flags FROM skills WHERE source_dsl = 'cute'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(flags.contains("target_dsl_code"), "{flags}");
    let flags: String = conn
        .query_row(
            "SELECT flags FROM skills WHERE source_dsl = 'dummy'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!flags.contains("target_dsl_code"), "{flags}");
    // The dummy kernels compiled in the final evaluation; the cute starter failed its check.
    let verdict = |id: &str| -> String {
        let report: String = conn
            .query_row(
                "SELECT report FROM final_evals WHERE attempt_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&report).unwrap();
        v["verdict"].as_str().unwrap_or("").to_string()
    };
    assert_eq!(verdict("replay-dummy/A01/dummy/solo/r0"), "correct");
    assert_eq!(verdict("replay-dummy/A01/dummy/conditioned/r0"), "correct");
    assert_eq!(
        verdict("replay-dummy/A01/cute/solo/r0"),
        "static_check_failed"
    );

    // The rows: both directions, each conditioned attempt with its source.
    let export = tmp.path().join("rows.jsonl");
    ok(mkb(&root)
        .arg("export")
        .arg(&run_dir)
        .args(["--format", "jsonl", "-o"])
        .arg(&export)
        .output()
        .unwrap());
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&export)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 4);
    let mut seen: Vec<(String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["condition"].as_str().unwrap().to_string(),
                r["direction"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("conditioned".to_string(), "cute->dummy".to_string()),
            ("conditioned".to_string(), "dummy->cute".to_string()),
            ("solo".to_string(), "cute->dummy".to_string()),
            ("solo".to_string(), "dummy->cute".to_string()),
        ]
    );
}
