//! The problem model: what `problem.toml` declares (tensors, shape sets, tolerances, baselines),
//! the variants a problem is posed in, and the enums every stage shares (family, dtype). The
//! `Dsl` handle lives in `crate::dsl`.

pub use crate::dsl::Dsl;
use crate::shape::DimExpr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The six problem families of docs/suite.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    A,
    B,
    C,
    D,
    E,
    F,
}

impl Family {
    pub fn from_letter(c: char) -> Option<Family> {
        Some(match c {
            'A' => Family::A,
            'B' => Family::B,
            'C' => Family::C,
            'D' => Family::D,
            'E' => Family::E,
            'F' => Family::F,
            _ => return None,
        })
    }
    pub fn letter(self) -> char {
        match self {
            Family::A => 'A',
            Family::B => 'B',
            Family::C => 'C',
            Family::D => 'D',
            Family::E => 'E',
            Family::F => 'F',
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Family::A => "Elementwise and activation epilogues",
            Family::B => "Normalization",
            Family::C => "Reductions, softmax and losses",
            Family::D => "GEMM with fused epilogues",
            Family::E => "Attention building blocks",
            Family::F => "MoE routing, quantization and data movement",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.letter())
    }
}

/// Element types, spelled as torch spells them (`torch.bfloat16` -> `"bfloat16"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    Bfloat16,
    Float16,
    Float32,
    Float64,
    Float8E4m3fn,
    Int8,
    Uint8,
    Int32,
    Int64,
    Bool,
}

impl DType {
    pub fn bytes(self) -> u64 {
        match self {
            DType::Float8E4m3fn | DType::Int8 | DType::Uint8 | DType::Bool => 1,
            DType::Bfloat16 | DType::Float16 => 2,
            DType::Float32 | DType::Int32 => 4,
            DType::Float64 | DType::Int64 => 8,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Bfloat16
                | DType::Float16
                | DType::Float32
                | DType::Float64
                | DType::Float8E4m3fn
        )
    }
    /// The inclusive value range of an integer dtype (bool: 0..=1); None for floats.
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::Int8 => (i8::MIN as i64, i8::MAX as i64),
            DType::Uint8 => (0, u8::MAX as i64),
            DType::Int32 => (i32::MIN as i64, i32::MAX as i64),
            DType::Int64 => (i64::MIN, i64::MAX),
            DType::Bool => (0, 1),
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            DType::Bfloat16 => "bfloat16",
            DType::Float16 => "float16",
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Float8E4m3fn => "float8_e4m3fn",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Bool => "bool",
        }
    }
    /// Default tolerance (atol is scaled by the reference's RMS; see docs/design.md).
    pub fn default_tolerance(self) -> Tolerance {
        match self {
            DType::Float64 => Tolerance {
                atol: 1e-9,
                rtol: 1e-9,
            },
            DType::Float32 => Tolerance {
                atol: 1e-4,
                rtol: 1e-4,
            },
            DType::Bfloat16 => Tolerance {
                atol: 1e-2,
                rtol: 2e-2,
            },
            DType::Float16 => Tolerance {
                atol: 2e-3,
                rtol: 4e-3,
            },
            DType::Float8E4m3fn => Tolerance {
                atol: 6e-2,
                rtol: 1.25e-1,
            },
            _ => Tolerance {
                atol: 0.0,
                rtol: 0.0,
            },
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How input values are drawn. Every trial draws fresh values from a secret seed; `normal`
/// and `uniform` also get a random per-trial offset and scale unless `jitter = false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Distribution {
    Normal {
        #[serde(default)]
        mean: f64,
        #[serde(default = "one")]
        std: f64,
        #[serde(default = "yes")]
        jitter: bool,
    },
    Uniform {
        lo: f64,
        hi: f64,
        #[serde(default = "yes")]
        jitter: bool,
    },
    /// Integers in [lo, hi); `lo`/`hi` an integer or a dimension expression (`hi = "V"`).
    Randint { lo: IntBound, hi: IntBound },
    /// Distinct integers in [0, hi) over the whole tensor, or with `per_row` within each row of
    /// the last dimension (slot mappings, block tables, top-k ids: valid by construction).
    Unique {
        hi: IntBound,
        #[serde(default)]
        per_row: bool,
    },
    /// Non-negative integers summing exactly to `total` over the tensor: ragged, zeros possible
    /// (per-expert token counts).
    Counts { total: IntBound },
}

/// An integer bound of a distribution: a literal (negative allowed) or a dimension expression
/// over the shape set's dims (`"V"`, `"2*E"`, `"T/2"`), resolved per shape set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "BoundRepr", into = "BoundRepr")]
pub enum IntBound {
    Int(i64),
    Dim(DimExpr),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum BoundRepr {
    Int(i64),
    Text(String),
}

impl TryFrom<BoundRepr> for IntBound {
    type Error = String;
    fn try_from(r: BoundRepr) -> Result<Self, String> {
        match r {
            BoundRepr::Int(n) => Ok(IntBound::Int(n)),
            BoundRepr::Text(s) => DimExpr::parse(&s).map(IntBound::Dim),
        }
    }
}

impl From<IntBound> for BoundRepr {
    fn from(b: IntBound) -> Self {
        match b {
            IntBound::Int(n) => BoundRepr::Int(n),
            IntBound::Dim(d) => BoundRepr::Text(d.to_string()),
        }
    }
}

impl From<i64> for IntBound {
    fn from(n: i64) -> Self {
        IntBound::Int(n)
    }
}

impl IntBound {
    /// The value under a shape set's dims (errors name an unbound symbol or an inexact division).
    pub fn resolve(&self, dims: &BTreeMap<String, u64>) -> Result<i64, String> {
        match self {
            IntBound::Int(n) => Ok(*n),
            IntBound::Dim(d) => {
                i64::try_from(d.resolve(dims)?).map_err(|_| format!("{d} overflows i64"))
            }
        }
    }
    /// The dimension symbols it uses (none for a literal).
    pub fn symbols(&self) -> Vec<String> {
        match self {
            IntBound::Int(_) => Vec::new(),
            IntBound::Dim(d) => d.symbols().map(String::from).collect(),
        }
    }
    /// The literal value, if it is one.
    pub fn literal(&self) -> Option<i64> {
        match self {
            IntBound::Int(n) => Some(*n),
            IntBound::Dim(_) => None,
        }
    }
}

impl fmt::Display for IntBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntBound::Int(n) => write!(f, "{n}"),
            IntBound::Dim(d) => write!(f, "{d}"),
        }
    }
}

impl Distribution {
    /// The dimension symbols its bounds use (they must be bound by every shape set).
    pub fn symbols(&self) -> Vec<String> {
        match self {
            Distribution::Randint { lo, hi } => {
                let mut v = lo.symbols();
                v.extend(hi.symbols());
                v
            }
            Distribution::Unique { hi, .. } => hi.symbols(),
            Distribution::Counts { total } => total.symbols(),
            _ => Vec::new(),
        }
    }
    /// Is it one of the integer kinds (randint, unique, counts)?
    pub fn is_integer(&self) -> bool {
        matches!(
            self,
            Distribution::Randint { .. }
                | Distribution::Unique { .. }
                | Distribution::Counts { .. }
        )
    }
}

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

impl Default for Distribution {
    fn default() -> Self {
        Distribution::Normal {
            mean: 0.0,
            std: 1.0,
            jitter: true,
        }
    }
}

/// Output tolerance: |out - ref| <= atol * rms(ref) + rtol * |ref|, elementwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub atol: f64,
    pub rtol: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputDecl {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<DimExpr>,
    #[serde(default)]
    pub dist: Distribution,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputDecl {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<DimExpr>,
    /// Overrides the dtype's default absolute tolerance (a multiple of the reference RMS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atol: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtol: Option<f64>,
    /// The output IS the input of the same name, updated in place (not a separate argument of
    /// run()); its tolerance applies to the change it makes (after - before).
    #[serde(default, skip_serializing_if = "is_false")]
    pub inplace: bool,
    /// Judged on the change `out - <input>` against `ref - <input>` (outputs dominated by one
    /// input, e.g. a residual add with a small scale).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<String>,
    /// On a float8_e4m3fn or int8 output: the output holding its scales; compared after
    /// dequantization (q * s, s broadcast blockwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<String>,
    /// With `scale`: the block size per axis of this output (e.g. `[128, 128]`), where the
    /// default ceil(q.dim / s.dim) is not the block meant (a ragged dim split into fixed blocks:
    /// 1000 columns in blocks of 128 need 8 scales, and ceil(1000 / 8) is 125).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Vec<u64>>,
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

impl OutputDecl {
    pub fn tolerance(&self) -> Tolerance {
        let d = self.dtype.default_tolerance();
        Tolerance {
            atol: self.atol.unwrap_or(d.atol),
            rtol: self.rtol.unwrap_or(d.rtol),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShapeKind {
    Benchmark,
    Check,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSet {
    pub name: String,
    pub kind: ShapeKind,
    pub dims: BTreeMap<String, u64>,
}

/// A scalar parameter fixed per problem (eps, alpha, scale, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Param {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            Param::Int(i) => write!(f, "{i}"),
            Param::Float(x) => write!(f, "{x:?}"),
            Param::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// `problem.toml` as written on disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemFile {
    pub id: String,
    pub slug: String,
    pub family: String,
    pub title: String,
    /// Functions in reference.py timed as eager PyTorch baselines; t_ref is the fastest.
    pub eager: Vec<String>,
    /// The eager formulation wrapped in torch.compile for the second baseline
    /// (default: the first of `eager`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_baseline: Option<String>,
    /// FLOPs of one call as a sum of products of dims (e.g. `2*M*N*K`), for compute-bound
    /// problems; memory-bound ones leave it out and the size rule uses bytes moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<String>,
    /// The tensor-core format the FLOPs run in (`"bf16"` by default, `"fp8"` for e4m3 operands):
    /// picks the peak rate of the ideal time (fp8 runs at twice the bf16 rate on Hopper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops_format: Option<FlopsFormat>,
    /// Minimal bytes one call moves (each input read once, each output written once) as a sum of
    /// products of dims (e.g. `4*T*H + 2*H`). Required: the registry refuses a problem without
    /// it (an Option only so that the error names the file and the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    #[serde(default)]
    pub params: BTreeMap<String, Param>,
    pub inputs: Vec<InputDecl>,
    pub outputs: Vec<OutputDecl>,
    pub shapes: Vec<ShapeSet>,
    /// `[validate]`: the formulations `mkb problems validate` runs and the waived checks
    /// (crate::validate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validate: Option<crate::validate::ValidateSection>,
}

/// A loaded, validated problem with its folder and texts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(flatten)]
    pub file: ProblemFile,
    pub family: Family,
    pub dir: PathBuf,
    pub statement: String,
    pub reference: String,
    /// The DSLs the problem is posed in: its `<dsl>/starter.py` folders, by name.
    #[serde(default)]
    pub variants: Vec<Dsl>,
}

impl Problem {
    pub fn id(&self) -> &str {
        &self.file.id
    }
    pub fn slug(&self) -> &str {
        &self.file.slug
    }
    pub fn title(&self) -> &str {
        &self.file.title
    }
    pub fn folder_name(&self) -> String {
        format!("{}_{}", self.file.id, self.file.slug)
    }
    pub fn benchmark_shape(&self) -> &ShapeSet {
        self.file
            .shapes
            .iter()
            .find(|s| s.kind == ShapeKind::Benchmark)
            .expect("validated: exactly one benchmark shape")
    }
    pub fn check_shapes(&self) -> impl Iterator<Item = &ShapeSet> {
        self.file
            .shapes
            .iter()
            .filter(|s| s.kind == ShapeKind::Check)
    }
    /// Is the problem posed in `dsl` (does it have `<dsl>/starter.py`)?
    pub fn has_variant(&self, dsl: Dsl) -> bool {
        self.variants.contains(&dsl)
    }
    pub fn variant_dir(&self, dsl: Dsl) -> PathBuf {
        self.dir.join(dsl.as_str())
    }
    pub fn starter_path(&self, dsl: Dsl) -> PathBuf {
        self.variant_dir(dsl).join("starter.py")
    }
    pub fn solution_path(&self, dsl: Dsl) -> PathBuf {
        self.variant_dir(dsl).join("solution.py")
    }
    pub fn has_solution(&self, dsl: Dsl) -> bool {
        self.solution_path(dsl).is_file()
    }

    /// Bytes one call at `shape` must move at least: the declared `bytes` expression.
    pub fn min_bytes(&self, shape: &ShapeSet) -> Result<u64, String> {
        let expr = self
            .file
            .bytes
            .as_deref()
            .ok_or("problem.toml declares no `bytes`")?;
        Ok(crate::shape::eval_sum_of_products(expr, &shape.dims)? as u64)
    }

    /// Bytes of every declared tensor at `shape` (each input read once, each output written
    /// once): what `bytes` is for a problem without partial reads.
    pub fn tensor_bytes(&self, shape: &ShapeSet) -> Result<u64, String> {
        let mut total = 0u64;
        for (shape_decl, dtype) in self
            .file
            .inputs
            .iter()
            .map(|i| (&i.shape, i.dtype))
            .chain(self.file.outputs.iter().map(|o| (&o.shape, o.dtype)))
        {
            let mut n = dtype.bytes();
            for d in shape_decl {
                n = n
                    .checked_mul(d.resolve(&shape.dims)?)
                    .ok_or("size overflows")?;
            }
            total += n;
        }
        Ok(total)
    }

    /// The format the declared FLOPs run in (bf16 unless `flops_format` says otherwise).
    pub fn flops_format(&self) -> FlopsFormat {
        self.file.flops_format.unwrap_or_default()
    }

    /// Ideal time in microseconds of one call at `shape` on the H200, from the measured
    /// ceilings in docs/suite.md (copy 4.2 TB/s, bf16 GEMM 787 TFLOP/s).
    pub fn ideal_us(&self, shape: &ShapeSet) -> Result<f64, String> {
        let bytes = self.min_bytes(shape)? as f64;
        let mem_us = bytes / H200_COPY_BYTES_PER_S * 1e6;
        let flop_us = match &self.file.flops {
            Some(expr) => {
                crate::shape::eval_sum_of_products(expr, &shape.dims)?
                    / self.flops_format().h200_flops()
                    * 1e6
            }
            None => 0.0,
        };
        Ok(mem_us.max(flop_us))
    }
}

/// Measured H200 ceilings (docs/suite.md): device copy bandwidth and bf16 GEMM rate.
pub const H200_COPY_BYTES_PER_S: f64 = 4.2e12;
pub const H200_BF16_FLOPS: f64 = 787e12;
/// The fp8 (e4m3) tensor-core rate used by the size rule: twice the bf16 rate, as Hopper's dense
/// peaks are (1979 vs 989 TFLOP/s); the judge measures its own (mkb_eval.timing.measure_ceilings).
pub const H200_FP8_FLOPS: f64 = 2.0 * H200_BF16_FLOPS;

/// The tensor-core format a problem's FLOPs run in (problem.toml `flops_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlopsFormat {
    #[default]
    Bf16,
    Fp8,
}

impl FlopsFormat {
    /// The size rule's peak rate for this format (FLOP/s).
    pub fn h200_flops(self) -> f64 {
        match self {
            FlopsFormat::Bf16 => H200_BF16_FLOPS,
            FlopsFormat::Fp8 => H200_FP8_FLOPS,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FlopsFormat::Bf16 => "bf16",
            FlopsFormat::Fp8 => "fp8",
        }
    }
}
/// The size rule of docs/suite.md: the benchmark shape's ideal time must be at least this.
pub const MIN_IDEAL_US: f64 = 40.0;
