//! The problem as the Python judge receives it: `problem.toml` is parsed and validated once, by
//! the Rust registry, and every evaluate request carries this resolved form (docs/protocol.md,
//! "The problem spec"): defaults filled in (distributions, tolerances, the torch.compile
//! formulation) and, per shape set, every tensor's size and the bytes and FLOPs of one call.
//! Python builds its `Problem` from it (python/mkb_eval/problem.py) and parses no TOML.
//! `mkb problems spec` prints the same objects for the Python tools that run without `mkb`'s
//! pool (python -m mkb_eval.cli, .redteam, .throughput, .selfcheck).

use mkb_core::model::{DType, Distribution, Family, FlopsFormat, Param, Problem, ShapeKind};
use mkb_core::registry::load_problem;
use mkb_core::{DslRegistry, EvalMode, EvalReport, Registry, PROTOCOL_VERSION};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One validated problem, resolved for the judge. Every field is required on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemSpec {
    pub id: String,
    pub slug: String,
    pub family: Family,
    pub title: String,
    /// The problem folder.
    pub dir: PathBuf,
    /// Its reference.py (trusted code of the benchmark: `reference` and the eager formulations).
    pub reference: PathBuf,
    /// Functions of reference.py timed as eager baselines; t_ref is the fastest.
    pub eager: Vec<String>,
    /// The formulation wrapped in torch.compile (the declared one, else the first of `eager`).
    pub compile_baseline: String,
    pub params: BTreeMap<String, Param>,
    pub inputs: Vec<InputSpec>,
    pub outputs: Vec<OutputSpec>,
    pub shapes: Vec<ShapeSpec>,
    /// The tensor-core format of the FLOPs (`"fp8"`); on the wire only where it is not bf16, so
    /// the spec of every other problem is what protocol 2 always sent.
    #[serde(default, skip_serializing_if = "is_bf16")]
    pub flops_format: FlopsFormat,
}

fn is_bf16(f: &FlopsFormat) -> bool {
    *f == FlopsFormat::Bf16
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    pub name: String,
    pub dtype: DType,
    /// The declared dimension expressions (`"T"`, `"2*H"`), for messages; sizes are per shape set.
    pub shape: Vec<String>,
    /// The distribution with its defaults filled in.
    pub dist: Distribution,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<String>,
    /// Tolerance with the dtype's defaults applied: |out - ref| <= atol * rms(ref) + rtol * |ref|.
    pub atol: f64,
    pub rtol: f64,
    /// The output kinds (docs/protocol.md "The problem spec"): on the wire only where set, so the
    /// spec of a problem that uses none is what protocol 2 always sent.
    /// The output is the input of the same name, updated in place (judged on its change).
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
    /// Judged on `out - <input>` against `ref - <input>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// The output holding this (float8_e4m3fn / int8) output's scales: compared dequantized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<String>,
    /// With `scale`: the declared block size per axis (else ceil(q.dim / s.dim)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Vec<u64>>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    pub name: String,
    pub kind: ShapeKind,
    pub dims: BTreeMap<String, u64>,
    /// Every tensor's size at these dims, by tensor name.
    pub sizes: BTreeMap<String, Vec<u64>>,
    /// Minimal bytes one call moves (the declared `bytes` at these dims).
    pub bytes: u64,
    /// FLOPs of one call (the declared `flops`; 0 where none is declared).
    pub flops: u64,
}

impl ProblemSpec {
    /// The spec of a loaded (hence validated) problem.
    pub fn from_problem(p: &Problem) -> Result<ProblemSpec, String> {
        let f = &p.file;
        let where_ = |what: &str, e: String| format!("{} ({what}): {e}", p.id());
        let mut shapes = Vec::new();
        for s in &f.shapes {
            let mut sizes = BTreeMap::new();
            for (name, decl) in f
                .inputs
                .iter()
                .map(|t| (&t.name, &t.shape))
                .chain(f.outputs.iter().map(|t| (&t.name, &t.shape)))
            {
                let dims = decl
                    .iter()
                    .map(|d| d.resolve(&s.dims))
                    .collect::<Result<Vec<u64>, String>>()
                    .map_err(|e| where_(&format!("shape set {}, tensor {name}", s.name), e))?;
                sizes.insert(name.clone(), dims);
            }
            let flops = match &f.flops {
                Some(expr) => mkb_core::shape::eval_sum_of_products(expr, &s.dims)
                    .map_err(|e| where_("flops", e))? as u64,
                None => 0,
            };
            shapes.push(ShapeSpec {
                name: s.name.clone(),
                kind: s.kind,
                dims: s.dims.clone(),
                sizes,
                bytes: p.min_bytes(s).map_err(|e| where_("bytes", e))?,
                flops,
            });
        }
        let compile_baseline = f
            .compile_baseline
            .clone()
            .or_else(|| f.eager.first().cloned())
            .ok_or_else(|| where_("eager", "no eager formulation".into()))?;
        Ok(ProblemSpec {
            id: f.id.clone(),
            slug: f.slug.clone(),
            family: p.family,
            title: f.title.clone(),
            dir: p.dir.clone(),
            reference: p.dir.join("reference.py"),
            eager: f.eager.clone(),
            compile_baseline,
            params: f.params.clone(),
            inputs: f
                .inputs
                .iter()
                .map(|i| InputSpec {
                    name: i.name.clone(),
                    dtype: i.dtype,
                    shape: i.shape.iter().map(|d| d.to_string()).collect(),
                    dist: i.dist.clone(),
                })
                .collect(),
            outputs: f
                .outputs
                .iter()
                .map(|o| {
                    let t = o.tolerance();
                    OutputSpec {
                        name: o.name.clone(),
                        dtype: o.dtype,
                        shape: o.shape.iter().map(|d| d.to_string()).collect(),
                        atol: t.atol,
                        rtol: t.rtol,
                        inplace: o.inplace,
                        delta: o.delta.clone(),
                        scale: o.scale.clone(),
                        block: o.block.clone(),
                    }
                })
                .collect(),
            shapes,
            flops_format: p.flops_format(),
        })
    }

    /// Load, validate and resolve the problem in `dir`, posed in DSLs of `dsls` (errors name the
    /// file and the field).
    pub fn load(dir: &Path, dsls: &DslRegistry) -> Result<ProblemSpec, String> {
        let p = load_problem(dir, dsls).map_err(|errs| {
            errs.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        ProblemSpec::from_problem(&p)
    }

    /// The same spec with `dir` and `reference` relative to `base` (for committed fixtures).
    pub fn relative_to(mut self, base: &Path) -> ProblemSpec {
        if let Ok(d) = self.dir.strip_prefix(base) {
            self.dir = d.to_path_buf();
        }
        if let Ok(r) = self.reference.strip_prefix(base) {
            self.reference = r.to_path_buf();
        }
        self
    }
}

/// What `mkb problems spec` prints: what a Python tool needs to build evaluate requests without
/// `mkb`'s pool: the protocol version, the report template and the problem specs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpecBundle {
    pub v: u32,
    /// [`EvalReport::template`] (its `mode` is replaced by the request's).
    pub report: serde_json::Value,
    pub problems: Vec<ProblemSpec>,
}

impl SpecBundle {
    /// The bundle of `problems`; with `base`, their paths are made relative to it.
    pub fn new<'a>(
        problems: impl IntoIterator<Item = &'a Problem>,
        base: Option<&Path>,
    ) -> Result<SpecBundle, String> {
        let mut specs = Vec::new();
        for p in problems {
            let s = ProblemSpec::from_problem(p)?;
            specs.push(match base {
                Some(b) => s.relative_to(b),
                None => s,
            });
        }
        Ok(SpecBundle {
            v: PROTOCOL_VERSION,
            report: EvalReport::template(EvalMode::Compile),
            problems: specs,
        })
    }

    /// Every problem of a registry.
    pub fn of_registry(reg: &Registry, base: Option<&Path>) -> Result<SpecBundle, String> {
        SpecBundle::new(reg.problems(), base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn load(dir: &Path) -> Result<ProblemSpec, String> {
        ProblemSpec::load(dir, &DslRegistry::load_root(&repo()).unwrap())
    }

    #[test]
    fn a01_resolves_sizes_tolerances_and_defaults() {
        let s = load(&repo().join("problems/A/A01_bias_gelu")).unwrap();
        assert_eq!(s.id, "A01");
        assert_eq!(s.compile_baseline, s.eager[0]);
        assert!(s.reference.ends_with("reference.py"));
        let ragged = s.shapes.iter().find(|x| x.name == "ragged").unwrap();
        let t = ragged.dims["T"];
        let h = ragged.dims["H"];
        assert_eq!(ragged.sizes["x"], vec![t, h]);
        assert_eq!(ragged.sizes["b"], vec![h]);
        assert_eq!(ragged.bytes, 4 * t * h + 2 * h);
        assert_eq!(ragged.flops, 0);
        let y = &s.outputs[0];
        // The bf16 default atol; rtol from problem.toml (3.2e-2: a one-ulp bf16 difference
        // between two correct results stays under a quarter of the bound).
        assert_eq!((y.atol, y.rtol), (1e-2, 3.2e-2));
        assert!(matches!(s.inputs[0].dist, Distribution::Normal { std, .. } if std == 1.0));
        // Every field is written, and read back only when all are there; the output kinds only
        // where set (A01 has none: its spec is what protocol 2 always sent).
        let v = serde_json::to_value(&s).unwrap();
        let out = v["outputs"][0].as_object().unwrap();
        assert_eq!(
            out.keys().map(String::as_str).collect::<Vec<_>>(),
            ["atol", "dtype", "name", "rtol", "shape"]
        );
        assert_eq!(serde_json::from_value::<ProblemSpec>(v.clone()).unwrap(), s);
        let mut extra = v.clone();
        extra["colour"] = 1.into();
        assert!(serde_json::from_value::<ProblemSpec>(extra)
            .unwrap_err()
            .to_string()
            .contains("colour"));
        let mut short = v;
        short.as_object_mut().unwrap().remove("shapes");
        assert!(serde_json::from_value::<ProblemSpec>(short)
            .unwrap_err()
            .to_string()
            .contains("shapes"));
    }

    #[test]
    fn d01_declares_flops_and_relative_paths() {
        let root = repo().canonicalize().unwrap();
        let s = load(&root.join("problems/D/D01_gemm"))
            .unwrap()
            .relative_to(&root);
        assert_eq!(s.dir, PathBuf::from("problems/D/D01_gemm"));
        assert_eq!(
            s.reference,
            PathBuf::from("problems/D/D01_gemm/reference.py")
        );
        assert!(s.shapes.iter().all(|x| x.flops > 0));
    }

    #[test]
    fn fp8_flops_are_on_the_wire_and_halve_the_ideal_compute_time() {
        let root = repo().canonicalize().unwrap();
        let d11 = load(&root.join("problems/D/D11_gemm_fp8")).unwrap();
        assert_eq!(d11.flops_format, FlopsFormat::Fp8);
        let wire = serde_json::to_value(&d11).unwrap();
        assert_eq!(wire["flops_format"], "fp8");
        // A bf16 problem's spec has no such field (what protocol 2 always sent).
        let d01 = serde_json::to_value(load(&root.join("problems/D/D01_gemm")).unwrap()).unwrap();
        assert!(d01.get("flops_format").is_none(), "{d01}");
        // The size rule counts D11's FLOPs at the fp8 rate: half the bf16 time.
        let dsls = DslRegistry::load_root(&root).unwrap();
        let p = load_problem(&root.join("problems/D/D11_gemm_fp8"), &dsls).unwrap();
        let bench = p.benchmark_shape();
        let flops =
            mkb_core::shape::eval_sum_of_products(p.file.flops.as_deref().unwrap(), &bench.dims)
                .unwrap();
        let us = p.ideal_us(bench).unwrap();
        assert!(
            (us - flops / mkb_core::model::H200_FP8_FLOPS * 1e6).abs() < 1e-6,
            "{us}"
        );
        assert!(us < flops / mkb_core::model::H200_BF16_FLOPS * 1e6 * 0.51);
    }

    #[test]
    fn a_missing_folder_is_an_error_naming_the_file() {
        let e = load(&repo().join("problems/A/A99_nothing")).unwrap_err();
        assert!(e.contains("problem.toml") && e.contains("missing"), "{e}");
    }
}
