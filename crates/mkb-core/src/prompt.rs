//! The variant prompt: what an agent sees for one problem in one DSL. It is built from a
//! DSL-neutral part (statement, interface, reference, scoring, budget) that is byte-identical
//! for every variant, and a DSL part (the brief its descriptor names, e.g. docs/dsl/cute.md,
//! and the starter file).

use crate::attempt::Budget;
use crate::dsl::DslDescriptor;
use crate::model::{Distribution, Param, Problem, ShapeKind};
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
    }
}

/// The DSL-neutral part of the prompt.
pub fn common_part(problem: &Problem, budget: &Budget) -> String {
    let f = &problem.file;
    let mut s = String::new();
    let _ = writeln!(s, "# Problem {}: {}\n", f.id, f.title);
    let _ = writeln!(s, "{}\n", problem.statement.trim());

    let _ = writeln!(s, "## Interface\n");
    let _ = writeln!(
        s,
        "Write a Python file that defines `build(spec) -> run`. `build` receives one shape set and compiles \
         your kernel for it (compile time is recorded, never timed). The harness then calls \
         `run({})` many times with PyTorch CUDA tensors; `run` must write every output in place \
         (destination passing) on the current CUDA stream and return nothing. Inputs must not be modified.\n",
        f.inputs.iter().map(|i| i.name.as_str()).chain(f.outputs.iter().map(|o| o.name.as_str())).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        s,
        "| tensor | role | dtype | shape | values |\n|---|---|---|---|---|"
    );
    for i in &f.inputs {
        let shape: Vec<String> = i.shape.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            s,
            "| {} | input | {} | [{}] | {} |",
            i.name,
            i.dtype,
            shape.join(", "),
            dist_text(&i.dist)
        );
    }
    for o in &f.outputs {
        let shape: Vec<String> = o.shape.iter().map(|d| d.to_string()).collect();
        let t = o.tolerance();
        let _ = writeln!(
            s,
            "| {} | output | {} | [{}] | tolerance: atol {} x RMS(reference) + rtol {} |",
            o.name,
            o.dtype,
            shape.join(", "),
            t.atol,
            t.rtol
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
