//! The variant prompt: what an agent sees for one problem in one DSL. It is built from a
//! DSL-neutral part (statement, interface, reference, scoring, budget) that is byte-identical
//! for every variant, and a DSL part (the brief its descriptor names, e.g. docs/dsl/cute.md,
//! and the starter file).

use crate::attempt::Budget;
use crate::dsl::DslDescriptor;
use crate::model::{Distribution, OutputDecl, Param, Problem, ShapeKind};
use crate::registry::dims_literal;
use std::fmt::Write as _;

/// Heading that opens the DSL part; everything before it is shared by both variants.
pub const DSL_SECTION_MARKER: &str = "\n# Your DSL: ";

#[derive(Debug, Clone, PartialEq)]
pub struct VariantPrompt {
    /// Identical for every variant of one problem.
    pub common: String,
    /// The DSL brief and the starter file.
    pub dsl_section: String,
}

impl VariantPrompt {
    pub fn render(&self) -> String {
        format!("{}{}", self.common, self.dsl_section)
    }
}

/// Read the brief of one DSL (the file its descriptor names).
pub fn read_brief(dsl: &DslDescriptor) -> std::io::Result<String> {
    dsl.read_brief()
}

fn dist_text(d: &Distribution) -> String {
    match d {
        Distribution::Normal { mean, std, jitter } => {
            let mut s = format!("normal(mean {mean}, std {std})");
            if *jitter {
                s.push_str(", with a random per-trial offset and scale");
            }
            s
        }
        Distribution::Uniform { lo, hi, jitter } => {
            let mut s = format!("uniform in [{lo}, {hi})");
            if *jitter {
                s.push_str(", with a random per-trial offset and scale");
            }
            s
        }
        Distribution::Randint { lo, hi } => format!("integers in [{lo}, {hi})"),
        Distribution::Unique { hi, per_row } => {
            if *per_row {
                format!("integers in [0, {hi}), distinct within each row (last dimension)")
            } else {
                format!("distinct integers in [0, {hi}) (no value repeats in the tensor)")
            }
        }
        Distribution::Counts { total } => format!(
            "non-negative integers summing exactly to {total} (ragged: uneven, zeros possible)"
        ),
    }
}

/// A declared shape as the prompt shows it: `[T, H]`, or `[] (scalar: a 0-d tensor)`.
fn shape_text(shape: &[crate::shape::DimExpr]) -> String {
    if shape.is_empty() {
        return "[] (scalar: a 0-d tensor)".into();
    }
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(", "))
}

/// How an output is judged: its tolerance and, for the output kinds of docs/design.md, on what.
fn output_text(o: &OutputDecl) -> String {
    let t = o.tolerance();
    if !o.dtype.is_float() && o.scale.is_none() {
        return if o.inplace {
            format!(
                "updated in place (it is the input {}): after the call it must equal the reference's exactly",
                o.name
            )
        } else {
            "compared exactly".into()
        };
    }
    if o.inplace {
        return format!(
            "updated in place (it is the input {n}); judged on the change {n}_after - {n}_before: \
             tolerance atol {} x RMS(reference change) + rtol {} x |reference change|",
            t.atol,
            t.rtol,
            n = o.name
        );
    }
    if let Some(d) = &o.delta {
        return format!(
            "judged on the change {} - {d} against reference - {d}: tolerance atol {} x \
             RMS(reference - {d}) + rtol {} x |reference - {d}|",
            o.name, t.atol, t.rtol
        );
    }
    if let Some(sc) = &o.scale {
        let blocks = match &o.block {
            Some(b) => format!(
                "blocks of [{}]",
                b.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!("block size per axis = ceil({}.dim / {sc}.dim)", o.name),
        };
        return format!(
            "compared after dequantization with {sc} ({} * {sc}, {sc} broadcast blockwise: {blocks}): \
             tolerance atol {} x RMS(dequantized reference) + rtol {} x |dequantized reference| + one \
             quantization step",
            o.name, t.atol, t.rtol
        );
    }
    format!(
        "tolerance: atol {} x RMS(reference) + rtol {}",
        t.atol, t.rtol
    )
}

/// The DSL-neutral part of the prompt.
pub fn common_part(problem: &Problem, budget: &Budget) -> String {
    let f = &problem.file;
    let mut s = String::new();
    let _ = writeln!(s, "# Problem {}: {}\n", f.id, f.title);
    let _ = writeln!(s, "{}\n", problem.statement.trim());

    let _ = writeln!(s, "## Interface\n");
    let inplace: Vec<&str> = f
        .outputs
        .iter()
        .filter(|o| o.inplace)
        .map(|o| o.name.as_str())
        .collect();
    let run_args = f
        .inputs
        .iter()
        .map(|i| i.name.as_str())
        .chain(
            f.outputs
                .iter()
                .filter(|o| !o.inplace)
                .map(|o| o.name.as_str()),
        )
        .collect::<Vec<_>>()
        .join(", ");
    let unchanged = if inplace.is_empty() {
        "Inputs must not be modified.".to_string()
    } else {
        format!(
            "{} {} updated in place: {} both input and output (not passed twice), holds fresh values before \
             every call, and must hold the updated values when `run` returns. Every other input must not be modified.",
            inplace.join(", "),
            if inplace.len() == 1 { "is" } else { "are" },
            if inplace.len() == 1 { "it is" } else { "each is" },
        )
    };
    let _ = writeln!(
        s,
        "Write a Python file that defines `build(spec) -> run`. `build` receives one shape set and compiles \
         your kernel for it (compile time is recorded, never timed). The harness then calls \
         `run({run_args})` many times with PyTorch CUDA tensors; `run` must write every output in place \
         (destination passing) on the current CUDA stream and return nothing. {unchanged}\n"
    );
    let _ = writeln!(
        s,
        "| tensor | role | dtype | shape | values |\n|---|---|---|---|---|"
    );
    for i in &f.inputs {
        let role = if inplace.contains(&i.name.as_str()) {
            "input, updated in place"
        } else {
            "input"
        };
        let _ = writeln!(
            s,
            "| {} | {role} | {} | {} | {} |",
            i.name,
            i.dtype,
            shape_text(&i.shape),
            dist_text(&i.dist)
        );
    }
    for o in &f.outputs {
        let _ = writeln!(
            s,
            "| {} | output | {} | {} | {} |",
            o.name,
            o.dtype,
            shape_text(&o.shape),
            output_text(o)
        );
    }
    s.push('\n');
    if !f.params.is_empty() {
        let params: Vec<String> = f
            .params
            .iter()
            .map(|(k, v): (&String, &Param)| format!("`{k} = {v}`"))
            .collect();
        let _ = writeln!(
            s,
            "Scalar parameters (fixed, also in `spec.params`): {}.\n",
            params.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "Shape sets (`spec.dims`); all tensors are contiguous and row-major:\n"
    );
    for sh in &f.shapes {
        let kind = match sh.kind {
            ShapeKind::Benchmark => "timed",
            ShapeKind::Check => "checked for correctness",
        };
        let _ = writeln!(s, "- `{}` ({kind}): {}", sh.name, dims_literal(&sh.dims));
    }
    let _ = writeln!(
        s,
        "\n`spec` has `spec.name` (the shape set), `spec.dims` (dict of the dimensions above), `spec.params`, \
         and `spec.inputs` / `spec.outputs` (lists of objects with `name`, `shape` (tuple of ints) and \
         `dtype` (a torch dtype)).\n"
    );

    let _ = writeln!(s, "## Reference (PyTorch)\n\nYour kernel must compute what `reference` computes:\n\n```python\n{}\n```\n", problem.reference.trim_end());

    let _ = writeln!(s, "## How you are scored\n");
    let _ = writeln!(
        s,
        "- Correct means: the file compiles with the required DSL, passes a static and a run-time check that \
         all GPU work comes from kernels you compiled with that DSL (no PyTorch compute, no other kernel \
         language, no extra streams or threads, no files, network or environment), and matches the reference \
         on every shape set over several trials with fresh random inputs (outputs are filled with NaN before \
         each call; inputs are verified unchanged; results are re-checked during and after timing).\n\
         - Runtime is the end-to-end time of one `run` call on the benchmark shape (host launch overhead \
         included), median over many repetitions with a cold L2 cache, on an NVIDIA H200 (sm_90a).\n\
         - Score = (time of the fastest eager PyTorch formulation) / (your time) if correct, else 0. \
         The speedup over torch.compile is reported too."
    );
    let _ = writeln!(s, "\n## Budget\n\n{}\n", budget.describe());
    s
}

/// The DSL part: the brief and the starter file.
pub fn dsl_part(problem: &Problem, dsl: &DslDescriptor, brief: &str, starter: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{}{}\n\n",
        DSL_SECTION_MARKER.trim_start_matches('\n'),
        dsl.display_name()
    );
    let _ = writeln!(s, "Write the kernel in {} only.\n", dsl.display_name());
    let _ = writeln!(s, "{}\n", brief.trim());
    let _ = writeln!(
        s,
        "## Starter file for {} ({})\n\n```python\n{}\n```",
        problem.file.id,
        dsl.display_name(),
        starter.trim_end()
    );
    s
}

/// Build the full variant prompt, reading the brief and the starter from disk.
pub fn variant_prompt(
    problem: &Problem,
    dsl: &DslDescriptor,
    budget: &Budget,
) -> std::io::Result<VariantPrompt> {
    let brief = read_brief(dsl)?;
    let starter = std::fs::read_to_string(problem.starter_path(dsl.dsl))?;
    Ok(VariantPrompt {
        common: common_part(problem, budget),
        dsl_section: format!("\n{}", dsl_part(problem, dsl, &brief, &starter)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Family, ProblemFile};
    use std::path::PathBuf;

    /// An in-place p, a delta output, a quantized q with its scales, a scalar output and the
    /// integer distributions (the registry's tests load the same kinds from disk).
    const KINDS: &str = r#"
id = "F99"
slug = "kinds"
family = "F"
title = "Every kind"
eager = ["eager"]
bytes = "4*T*H"

[[inputs]]
name = "p"
dtype = "float32"
shape = ["T", "H"]

[[inputs]]
name = "r"
dtype = "bfloat16"
shape = ["T", "H"]

[[inputs]]
name = "tok"
dtype = "int64"
shape = ["T"]
dist = { kind = "randint", lo = 0, hi = "V" }

[[inputs]]
name = "ids"
dtype = "int32"
shape = ["T", 4]
dist = { kind = "unique", hi = "E", per_row = true }

[[inputs]]
name = "slots"
dtype = "int32"
shape = ["T"]
dist = { kind = "unique", hi = "S" }

[[inputs]]
name = "cnt"
dtype = "int32"
shape = ["E"]
dist = { kind = "counts", total = "4*T" }

[[outputs]]
name = "p"
dtype = "float32"
shape = ["T", "H"]
inplace = true

[[outputs]]
name = "y"
dtype = "bfloat16"
shape = ["T", "H"]
delta = "r"

[[outputs]]
name = "q"
dtype = "int8"
shape = ["T", "H"]
scale = "s"

[[outputs]]
name = "s"
dtype = "float32"
shape = ["T", 1]

[[outputs]]
name = "loss"
dtype = "float32"
shape = []

[[shapes]]
name = "benchmark"
kind = "benchmark"
dims = { T = 64, H = 64, V = 10, E = 8, S = 64 }
"#;

    fn problem(toml_text: &str) -> Problem {
        let file: ProblemFile = toml::from_str(toml_text).unwrap();
        Problem {
            file,
            family: Family::F,
            dir: PathBuf::from("problems/F/F99_kinds"),
            statement: "Every kind.".into(),
            reference: "def reference(p, r, tok, ids, slots, cnt, y, q, s, loss):\n    pass\n"
                .into(),
            variants: Vec::new(),
        }
    }

    #[test]
    fn the_interface_describes_every_output_kind() {
        let s = common_part(&problem(KINDS), &Budget::default());
        // run() gets the in-place tensor once, as an input.
        assert!(
            s.contains("`run(p, r, tok, ids, slots, cnt, y, q, s, loss)`"),
            "{s}"
        );
        assert!(s.contains("p is updated in place"), "{s}");
        assert!(
            s.contains("| p | input, updated in place | float32 | [T, H] |"),
            "{s}"
        );
        assert!(s.contains("judged on the change p_after - p_before"), "{s}");
        assert!(
            s.contains("judged on the change y - r against reference - r"),
            "{s}"
        );
        assert!(
            s.contains("compared after dequantization with s (q * s"),
            "{s}"
        );
        assert!(
            s.contains("ceil(q.dim / s.dim)") && s.contains("one quantization step"),
            "{s}"
        );
        assert!(
            s.contains("| loss | output | float32 | [] (scalar: a 0-d tensor) |"),
            "{s}"
        );
        assert!(s.contains("integers in [0, V)"), "{s}");
        assert!(s.contains("distinct within each row"), "{s}");
        assert!(s.contains("distinct integers in [0, S)"), "{s}");
        assert!(s.contains("summing exactly to 4*T"), "{s}");
        // A problem without the kinds reads as before.
        let plain = problem(&KINDS.replace("inplace = true\n", "").replace(
            "name = \"p\"\ndtype = \"float32\"\nshape = [\"T\", \"H\"]\n\n[[outputs]]",
            "name = \"p2\"\ndtype = \"float32\"\nshape = [\"T\", \"H\"]\n\n[[outputs]]",
        ));
        let s = common_part(&plain, &Budget::default());
        assert!(s.contains("Inputs must not be modified."), "{s}");
        assert!(!s.contains("updated in place"), "{s}");
    }

    #[test]
    fn declared_blocks_are_shown() {
        let p = problem(&KINDS.replace("scale = \"s\"", "scale = \"s\"\nblock = [1, 64]"));
        let s = common_part(&p, &Budget::default());
        assert!(
            s.contains("blocks of [1, 64]") && !s.contains("ceil(q.dim"),
            "{s}"
        );
    }
}
