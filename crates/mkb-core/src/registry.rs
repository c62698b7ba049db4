//! The problem registry: finds `problems/<family>/<id>_<slug>/`, parses `problem.toml`,
//! reads the texts, finds the variants (one `<dsl>/starter.py` folder per registered DSL the
//! problem is posed in) and validates everything. Every error names the file and the field.

use crate::dsl::DslRegistry;
use crate::model::{
    DType, Distribution, Dsl, Family, OutputDecl, Problem, ProblemFile, ShapeKind, ShapeSet,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A problem that failed to load: the file, the field (a dotted path into the TOML, or
/// empty for whole-file problems) and what is wrong.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{}: {}{}", path.display(), if field.is_empty() { String::new() } else { format!("field `{field}`: ") }, message)]
pub struct LoadError {
    pub path: PathBuf,
    pub field: String,
    pub message: String,
}

impl LoadError {
    pub fn new(path: &Path, field: impl Into<String>, message: impl Into<String>) -> Self {
        LoadError {
            path: path.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// All problems under one root, sorted by id.
#[derive(Debug, Clone)]
pub struct Registry {
    pub root: PathBuf,
    problems: Vec<Problem>,
}

impl Registry {
    /// Load every problem under `root` (the `problems/` folder); a problem's variants are the
    /// folders named after DSLs of `dsls`. Collects all errors instead of stopping at the
    /// first, so one run of `mkb problems list` shows every broken file.
    pub fn load(root: &Path, dsls: &DslRegistry) -> Result<Registry, Vec<LoadError>> {
        let mut problems = Vec::new();
        let mut errors = Vec::new();
        let families = match fs::read_dir(root) {
            Ok(rd) => rd,
            Err(e) => {
                return Err(vec![LoadError::new(
                    root,
                    "",
                    format!("cannot read problems folder: {e}"),
                )])
            }
        };
        let mut fam_dirs: Vec<PathBuf> = families
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        fam_dirs.sort();
        for fam_dir in fam_dirs {
            let fam_name = fam_dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            if fam_name.starts_with('.') || fam_name.starts_with('_') {
                continue;
            }
            if fam_name.len() != 1
                || Family::from_letter(fam_name.chars().next().unwrap_or(' ')).is_none()
            {
                errors.push(LoadError::new(
                    &fam_dir,
                    "",
                    "a family folder must be one of A, B, C, D, E, F",
                ));
                continue;
            }
            let mut dirs: Vec<PathBuf> = match fs::read_dir(&fam_dir) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_dir())
                    .collect(),
                Err(e) => {
                    errors.push(LoadError::new(&fam_dir, "", format!("cannot read: {e}")));
                    continue;
                }
            };
            dirs.sort();
            for dir in dirs {
                if dir
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(['.', '_']))
                {
                    continue;
                }
                match load_problem(&dir, dsls) {
                    Ok(p) => problems.push(p),
                    Err(mut e) => errors.append(&mut e),
                }
            }
        }
        let mut seen = BTreeSet::new();
        for p in &problems {
            if !seen.insert(p.id().to_string()) {
                errors.push(LoadError::new(
                    &p.dir.join("problem.toml"),
                    "id",
                    format!("duplicate problem id {}", p.id()),
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        problems.sort_by(|a, b| a.id().cmp(b.id()));
        Ok(Registry {
            root: root.to_path_buf(),
            problems,
        })
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Find by id (`C01`), by slug (`softmax`) or by folder name (`C01_softmax`), case-insensitively.
    pub fn get(&self, key: &str) -> Option<&Problem> {
        let k = key.to_ascii_lowercase();
        self.problems.iter().find(|p| {
            p.id().to_ascii_lowercase() == k
                || p.slug() == k
                || p.folder_name().to_ascii_lowercase() == k
        })
    }

    /// Resolve a selection: ids, slugs, or family letters (`A`) ; empty selects all.
    pub fn select(&self, keys: &[String]) -> Result<Vec<&Problem>, String> {
        if keys.is_empty() {
            return Ok(self.problems.iter().collect());
        }
        let mut out: Vec<&Problem> = Vec::new();
        for key in keys {
            let fam = if key.len() == 1 {
                key.chars()
                    .next()
                    .and_then(|c| Family::from_letter(c.to_ascii_uppercase()))
            } else {
                None
            };
            if let Some(f) = fam {
                out.extend(self.problems.iter().filter(|p| p.family == f));
            } else if let Some(p) = self.get(key) {
                out.push(p);
            } else {
                return Err(format!(
                    "no problem {key:?} (known: {})",
                    self.problems
                        .iter()
                        .map(|p| p.id())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        out.sort_by(|a, b| a.id().cmp(b.id()));
        out.dedup_by(|a, b| a.id() == b.id());
        Ok(out)
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn read_text(path: &Path, errors: &mut Vec<LoadError>) -> Option<String> {
    match fs::read_to_string(path) {
        Ok(s) if s.trim().is_empty() => {
            errors.push(LoadError::new(path, "", "file is empty"));
            None
        }
        Ok(s) => Some(s),
        Err(e) => {
            errors.push(LoadError::new(
                path,
                "",
                format!("missing or unreadable: {e}"),
            ));
            None
        }
    }
}

/// Does the Python source define a top-level function `name`?
pub fn defines_function(src: &str, name: &str) -> bool {
    let pat = format!("def {name}(");
    src.lines().any(|l| l.starts_with(&pat))
}

/// Load and validate one problem folder.
pub fn load_problem(dir: &Path, dsls: &DslRegistry) -> Result<Problem, Vec<LoadError>> {
    let toml_path = dir.join("problem.toml");
    let mut errors = Vec::new();
    let text = match fs::read_to_string(&toml_path) {
        Ok(t) => t,
        Err(e) => {
            return Err(vec![LoadError::new(
                &toml_path,
                "",
                format!("missing or unreadable: {e}"),
            )])
        }
    };
    let file: ProblemFile = match toml::from_str(&text) {
        Ok(f) => f,
        Err(e) => {
            let span = e.span().map(|s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!(" (line {line})")
            });
            return Err(vec![LoadError::new(
                &toml_path,
                "",
                format!("{}{}", e.message(), span.unwrap_or_default()),
            )]);
        }
    };
    let err = |field: &str, msg: String| LoadError::new(&toml_path, field, msg);

    // Identity: id, family, folder.
    let id_ok = file.id.len() == 3
        && file
            .id
            .chars()
            .next()
            .is_some_and(|c| Family::from_letter(c).is_some())
        && file.id[1..].chars().all(|c| c.is_ascii_digit());
    if !id_ok {
        errors.push(err(
            "id",
            format!(
                "{:?} must look like A01 (family letter A-F and two digits)",
                file.id
            ),
        ));
    }
    let family = Family::from_letter(file.family.chars().next().unwrap_or(' '));
    match family {
        Some(f) if file.family.len() == 1 => {
            if id_ok && !file.id.starts_with(f.letter()) {
                errors.push(err(
                    "family",
                    format!("{:?} does not match the id {}", file.family, file.id),
                ));
            }
        }
        _ => errors.push(err(
            "family",
            format!("{:?} must be one of A, B, C, D, E, F", file.family),
        )),
    }
    if file.slug.is_empty()
        || !file
            .slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    {
        errors.push(err(
            "slug",
            format!("{:?} must be lowercase letters, digits and _", file.slug),
        ));
    }
    let expected_folder = format!("{}_{}", file.id, file.slug);
    let folder = dir
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    if folder != expected_folder {
        errors.push(err(
            "slug",
            format!("folder is named {folder:?} but id and slug say {expected_folder:?}"),
        ));
    }
    if let Some(parent) = dir.parent().and_then(|p| p.file_name()) {
        if parent.to_string_lossy() != file.family {
            errors.push(err(
                "family",
                format!(
                    "problem lives under {:?}, not under its family folder {:?}",
                    parent.to_string_lossy(),
                    file.family
                ),
            ));
        }
    }
    if file.title.trim().is_empty() {
        errors.push(err("title", "must not be empty".into()));
    }

    // Tensors.
    let mut names = BTreeSet::new();
    let mut symbols = BTreeSet::new();
    if file.inputs.is_empty() {
        errors.push(err("inputs", "at least one input is required".into()));
    }
    if file.outputs.is_empty() {
        errors.push(err("outputs", "at least one output is required".into()));
    }
    for (i, inp) in file.inputs.iter().enumerate() {
        let f = format!("inputs[{i}]");
        if !is_identifier(&inp.name) {
            errors.push(err(
                &format!("{f}.name"),
                format!("{:?} is not a Python identifier", inp.name),
            ));
        }
        if !names.insert(inp.name.clone()) {
            errors.push(err(
                &format!("{f}.name"),
                format!("duplicate tensor name {:?}", inp.name),
            ));
        }
        symbols.extend(
            inp.shape
                .iter()
                .flat_map(|d| d.symbols().map(String::from).collect::<Vec<_>>()),
        );
        symbols.extend(inp.dist.symbols());
        match &inp.dist {
            Distribution::Normal { std, .. } if !(*std > 0.0 && std.is_finite()) => {
                errors.push(err(&format!("{f}.dist.std"), "must be positive".into()))
            }
            Distribution::Uniform { lo, hi, .. }
                if lo.partial_cmp(hi) != Some(std::cmp::Ordering::Less) =>
            {
                errors.push(err(
                    &format!("{f}.dist"),
                    format!("uniform needs lo < hi, got [{lo}, {hi})"),
                ))
            }
            Distribution::Randint { lo, hi } if matches!((lo.literal(), hi.literal()), (Some(l), Some(h)) if l >= h) => {
                errors.push(err(
                    &format!("{f}.dist"),
                    format!("randint needs lo < hi, got [{lo}, {hi})"),
                ))
            }
            d if d.is_integer() && inp.dtype.is_float() => errors.push(err(
                &format!("{f}.dist"),
                format!("{} needs an integer dtype", dist_kind(d)),
            )),
            Distribution::Unique { .. } | Distribution::Counts { .. }
                if inp.dtype == DType::Bool =>
            {
                errors.push(err(
                    &format!("{f}.dist"),
                    format!("{} needs an integer dtype, not bool", dist_kind(&inp.dist)),
                ))
            }
            Distribution::Unique { per_row: true, .. } if inp.shape.is_empty() => errors.push(err(
                &format!("{f}.dist.per_row"),
                "a scalar has no rows: per_row needs at least one dimension".into(),
            )),
            d if d.is_integer() => {}
            _ if !inp.dtype.is_float() => errors.push(err(
                &format!("{f}.dist"),
                format!(
                    "integer input {:?} needs dist.kind = \"randint\", \"unique\" or \"counts\"",
                    inp.name
                ),
            )),
            _ => {}
        }
    }
    let mut output_names = BTreeSet::new();
    for (i, out) in file.outputs.iter().enumerate() {
        let f = format!("outputs[{i}]");
        if !is_identifier(&out.name) {
            errors.push(err(
                &format!("{f}.name"),
                format!("{:?} is not a Python identifier", out.name),
            ));
        }
        let is_input = file.inputs.iter().any(|x| x.name == out.name);
        if !output_names.insert(out.name.clone())
            || (!out.inplace && !names.insert(out.name.clone()))
        {
            errors.push(err(
                &format!("{f}.name"),
                if is_input {
                    format!(
                        "{:?} is also an input: an output updated in place needs `inplace = true`",
                        out.name
                    )
                } else {
                    format!("duplicate tensor name {:?}", out.name)
                },
            ));
        }
        check_output_kind(&file, i, out, &mut |field, msg| {
            errors.push(err(field, msg))
        });
        symbols.extend(
            out.shape
                .iter()
                .flat_map(|d| d.symbols().map(String::from).collect::<Vec<_>>()),
        );
        for (k, v) in [("atol", out.atol), ("rtol", out.rtol)] {
            if let Some(v) = v {
                if !(v >= 0.0 && v.is_finite()) {
                    errors.push(err(
                        &format!("{f}.{k}"),
                        format!("must be a finite number >= 0, got {v}"),
                    ));
                }
            }
        }
    }
    for name in file.params.keys() {
        if !is_identifier(name) {
            errors.push(err(
                &format!("params.{name}"),
                "parameter names must be Python identifiers".into(),
            ));
        }
        if names.contains(name) {
            errors.push(err(
                &format!("params.{name}"),
                "collides with a tensor name".into(),
            ));
        }
    }

    // Shape sets.
    let mut shape_names = BTreeSet::new();
    let n_bench = file
        .shapes
        .iter()
        .filter(|s| s.kind == ShapeKind::Benchmark)
        .count();
    let n_check = file
        .shapes
        .iter()
        .filter(|s| s.kind == ShapeKind::Check)
        .count();
    if n_bench != 1 {
        errors.push(err(
            "shapes",
            format!("exactly one shape set of kind \"benchmark\" is required, found {n_bench}"),
        ));
    }
    if n_check < 2 {
        errors.push(err(
            "shapes",
            format!("at least two shape sets of kind \"check\" are required, found {n_check}"),
        ));
    }
    let mut has_ragged = false;
    for (i, s) in file.shapes.iter().enumerate() {
        let f = format!("shapes[{i}]");
        if !shape_names.insert(s.name.clone()) {
            errors.push(err(
                &format!("{f}.name"),
                format!("duplicate shape set name {:?}", s.name),
            ));
        }
        for sym in &symbols {
            if !s.dims.contains_key(sym) {
                errors.push(err(
                    &format!("{f}.dims"),
                    format!(
                        "dimension {sym} is used by a tensor but not bound in shape set {:?}",
                        s.name
                    ),
                ));
            }
        }
        for (k, v) in &s.dims {
            if !symbols.contains(k) {
                errors.push(err(
                    &format!("{f}.dims.{k}"),
                    format!("no tensor uses dimension {k}"),
                ));
            }
            if *v == 0 {
                errors.push(err(&format!("{f}.dims.{k}"), "must be positive".into()));
            }
        }
        // Every tensor must resolve (exact divisions) under this set.
        let all_shapes = file
            .inputs
            .iter()
            .map(|t| (&t.name, &t.shape))
            .chain(file.outputs.iter().map(|t| (&t.name, &t.shape)));
        let mut resolved_ok = true;
        let mut resolved_dims: Vec<u64> = Vec::new();
        for (name, shape) in all_shapes {
            for d in shape {
                match d.resolve(&s.dims) {
                    Ok(v) => resolved_dims.push(v),
                    Err(e)
                        if s.dims.keys().all(|k| symbols.contains(k))
                            && d.symbols().all(|x| s.dims.contains_key(x)) =>
                    {
                        resolved_ok = false;
                        errors.push(err(&format!("{f}.dims"), format!("tensor {name}: {e}")));
                    }
                    Err(_) => resolved_ok = false,
                }
            }
        }
        if resolved_ok {
            check_shape_set(&file, s, &mut |field, msg| errors.push(err(field, msg)));
        }
        if resolved_ok && s.kind == ShapeKind::Check && resolved_dims.iter().any(|v| v % 64 != 0) {
            has_ragged = true;
        }
    }
    if n_check >= 2 && !has_ragged && errors.is_empty() {
        errors.push(err(
            "shapes",
            "one check shape set must be ragged: some dimension not a multiple of 64".into(),
        ));
    }

    // Texts.
    let statement = read_text(&dir.join("statement.md"), &mut errors).unwrap_or_default();
    let ref_path = dir.join("reference.py");
    let reference = read_text(&ref_path, &mut errors).unwrap_or_default();
    if !reference.is_empty() {
        if !defines_function(&reference, "reference") {
            errors.push(LoadError::new(
                &ref_path,
                "reference",
                "reference.py must define `def reference(...)` (destination-passing)",
            ));
        }
        if file.eager.is_empty() {
            errors.push(err(
                "eager",
                "list at least one eager formulation defined in reference.py".into(),
            ));
        }
        for (i, e) in file.eager.iter().enumerate() {
            if !defines_function(&reference, e) {
                errors.push(err(
                    &format!("eager[{i}]"),
                    format!("reference.py defines no top-level function {e:?}"),
                ));
            }
        }
        if let Some(c) = &file.compile_baseline {
            if !file.eager.contains(c) {
                errors.push(err(
                    "compile_baseline",
                    format!("{c:?} is not one of `eager`"),
                ));
            }
        }
    }
    // Variants: every sub-folder (but `.`/`_` ones) is one, named after a registered DSL.
    let mut variants: Vec<Dsl> = Vec::new();
    let mut subdirs: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    subdirs.sort();
    for sub in subdirs {
        let name = sub
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if name.starts_with(['.', '_']) {
            continue;
        }
        let dsl = match name.parse::<Dsl>().and_then(|d| dsls.require(d).map(|_| d)) {
            Ok(d) => d,
            Err(e) => {
                errors.push(LoadError::new(
                    &sub,
                    "",
                    format!("a variant folder must be named after a registered DSL: {e}"),
                ));
                continue;
            }
        };
        let starter = sub.join("starter.py");
        if let Some(src) = read_text(&starter, &mut errors) {
            if !defines_function(&src, "build") {
                errors.push(LoadError::new(
                    &starter,
                    "build",
                    "the starter must define the entry point `def build(spec)`",
                ));
            }
        }
        let sol = sub.join("solution.py");
        if sol.exists() {
            if let Some(src) = read_text(&sol, &mut errors) {
                if !defines_function(&src, "build") {
                    errors.push(LoadError::new(
                        &sol,
                        "build",
                        "the solution must define the entry point `def build(spec)`",
                    ));
                }
            }
        }
        variants.push(dsl);
    }
    if variants.is_empty() && errors.is_empty() {
        errors.push(LoadError::new(
            dir,
            "",
            format!(
                "the problem is posed in no DSL: add a <dsl>/starter.py folder (registered: {})",
                dsls.dsls()
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if file.bytes.is_none() {
        errors.push(err(
            "bytes",
            "required: the minimal bytes one call moves as an expression over the dims (each input read once, each output written once), e.g. \"4*T*H + 2*H\"".into(),
        ));
    }
    if file.flops_format.is_some() && file.flops.is_none() {
        errors.push(err(
            "flops_format",
            "says which tensor cores run the FLOPs, but the problem declares no `flops`".into(),
        ));
    }
    for (field, expr) in [("flops", &file.flops), ("bytes", &file.bytes)] {
        let Some(expr) = expr else { continue };
        for s in &file.shapes {
            match crate::shape::eval_sum_of_products(expr, &s.dims) {
                Ok(v) if v > 0.0 => {}
                Ok(v) => errors.push(err(
                    field,
                    format!("evaluates to {v} on shape set {:?}; must be > 0", s.name),
                )),
                Err(e) => errors.push(err(field, format!("{e} (shape set {:?})", s.name))),
            }
        }
    }

    if !errors.is_empty() {
        return Err(errors);
    }
    let problem = Problem {
        family: family.expect("checked"),
        dir: dir.to_path_buf(),
        statement,
        reference,
        file,
        variants,
    };
    // The static checks of crate::validate (the size rule of docs/suite.md on the benchmark
    // shape, the memory cap, `[validate]`'s formulations, prompt parity), unless waived there.
    let errors = crate::validate::load_errors(&problem, dsls);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(problem)
}

fn dist_kind(d: &Distribution) -> &'static str {
    match d {
        Distribution::Normal { .. } => "normal",
        Distribution::Uniform { .. } => "uniform",
        Distribution::Randint { .. } => "randint",
        Distribution::Unique { .. } => "unique",
        Distribution::Counts { .. } => "counts",
    }
}

/// The output kinds of docs/design.md (`inplace`, `delta`, `scale`), checked on the declarations;
/// what depends on sizes is checked per shape set by `check_shape_set`.
fn check_output_kind(
    file: &ProblemFile,
    i: usize,
    out: &OutputDecl,
    push: &mut dyn FnMut(&str, String),
) {
    let f = format!("outputs[{i}]");
    let input = |name: &str| file.inputs.iter().find(|x| x.name == name);
    if out.inplace {
        match input(&out.name) {
            None => push(
                &format!("{f}.inplace"),
                format!(
                    "no input is named {:?}: an output updated in place is the input of the same name",
                    out.name
                ),
            ),
            Some(inp) if inp.dtype != out.dtype => push(
                &format!("{f}.dtype"),
                format!(
                    "{} differs from the dtype {} of input {:?}, which it updates in place",
                    out.dtype, inp.dtype, out.name
                ),
            ),
            Some(_) => {}
        }
        if out.delta.is_some() {
            push(
                &format!("{f}.delta"),
                "an output updated in place is already judged on its change: drop `delta`".into(),
            );
        }
        if out.scale.is_some() {
            push(
                &format!("{f}.scale"),
                "an output updated in place cannot be compared after dequantization".into(),
            );
        }
    }
    if let Some(d) = &out.delta {
        match input(d) {
            None => push(
                &format!("{f}.delta"),
                format!(
                    "no input is named {d:?} (known: {})",
                    file.inputs
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Some(inp) if !inp.dtype.is_float() || !out.dtype.is_float() => push(
                &format!("{f}.delta"),
                format!(
                    "a change out - {d} needs float tensors (output {}, input {})",
                    out.dtype, inp.dtype
                ),
            ),
            Some(_) => {}
        }
    }
    if out.block.is_some() && out.scale.is_none() {
        push(
            &format!("{f}.block"),
            "a block size is only meaningful with `scale`".into(),
        );
    }
    if let Some(sname) = &out.scale {
        if !matches!(out.dtype, DType::Float8E4m3fn | DType::Int8) {
            push(
                &format!("{f}.scale"),
                format!(
                    "only float8_e4m3fn and int8 outputs are compared after dequantization, not {}",
                    out.dtype
                ),
            );
        }
        match file.outputs.iter().find(|o| &o.name == sname) {
            None => push(
                &format!("{f}.scale"),
                format!(
                    "no output is named {sname:?} (known: {})",
                    file.outputs
                        .iter()
                        .map(|x| x.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Some(s) if s.name == out.name => push(
                &format!("{f}.scale"),
                "an output cannot scale itself".into(),
            ),
            Some(s) => {
                if !s.dtype.is_float() || s.dtype == DType::Float8E4m3fn {
                    push(
                        &format!("{f}.scale"),
                        format!(
                            "the scale output {sname:?} must be bfloat16, float16, float32 or float64, not {}",
                            s.dtype
                        ),
                    );
                }
                if s.inplace || s.scale.is_some() || s.delta.is_some() {
                    push(
                        &format!("{f}.scale"),
                        format!("the scale output {sname:?} must be a plain output (no inplace, delta or scale)"),
                    );
                }
                if let Some(b) = &out.block {
                    if b.len() != out.shape.len() || s.shape.len() != out.shape.len() {
                        push(
                            &format!("{f}.block"),
                            format!(
                                "one block size per axis of {:?} ({} axes) and a scale output with as many axes ({sname:?} has {})",
                                out.name,
                                out.shape.len(),
                                s.shape.len()
                            ),
                        );
                    }
                    if b.contains(&0) {
                        push(&format!("{f}.block"), "block sizes must be positive".into());
                    }
                }
                if s.shape.len() > out.shape.len() {
                    push(
                        &format!("{f}.scale"),
                        format!(
                            "the scale output {sname:?} has {} dimensions, more than the {} of {:?}",
                            s.shape.len(),
                            out.shape.len(),
                            out.name
                        ),
                    );
                }
            }
        }
    }
}

/// Everything of the output kinds and the integer distributions that depends on sizes, under one
/// shape set whose tensors all resolve.
fn check_shape_set(file: &ProblemFile, s: &ShapeSet, push: &mut dyn FnMut(&str, String)) {
    let size = |shape: &[crate::shape::DimExpr]| -> Option<Vec<u64>> {
        shape.iter().map(|d| d.resolve(&s.dims).ok()).collect()
    };
    let at = format!("shape set {:?}", s.name);
    for (i, inp) in file.inputs.iter().enumerate() {
        let field = format!("inputs[{i}].dist");
        let Some(dims) = size(&inp.shape) else {
            continue;
        };
        let numel: u64 = dims.iter().product();
        let (tmin, tmax) = inp.dtype.int_range().unwrap_or((i64::MIN, i64::MAX));
        let resolve =
            |b: &crate::model::IntBound, name: &str, push: &mut dyn FnMut(&str, String)| {
                b.resolve(&s.dims)
                    .map_err(|e| push(&format!("{field}.{name}"), format!("{e} ({at})")))
                    .ok()
            };
        match &inp.dist {
            Distribution::Randint { lo, hi } => {
                let (Some(l), Some(h)) = (resolve(lo, "lo", push), resolve(hi, "hi", push)) else {
                    continue;
                };
                if l >= h {
                    push(
                        &field,
                        format!("randint needs lo < hi, got [{l}, {h}) at {at}"),
                    );
                } else if l < tmin || h - 1 > tmax {
                    push(
                        &field,
                        format!("[{l}, {h}) at {at} does not fit in {}", inp.dtype),
                    );
                }
            }
            Distribution::Unique { hi, per_row } => {
                let Some(h) = resolve(hi, "hi", push) else {
                    continue;
                };
                let (n, what) = if *per_row {
                    (dims.last().copied().unwrap_or(1), "a row holds")
                } else {
                    (numel, "the tensor holds")
                };
                if h < 1 || (n as i128) > h as i128 {
                    push(
                        &format!("{field}.hi"),
                        format!("{what} {n} distinct values at {at}, but [0, {h}) has only {} (hi must be at least the {})",
                            h.max(0), if *per_row { "row length" } else { "number of elements" }),
                    );
                } else if h - 1 > tmax {
                    push(
                        &format!("{field}.hi"),
                        format!("[0, {h}) at {at} does not fit in {}", inp.dtype),
                    );
                }
            }
            Distribution::Counts { total } => {
                let Some(t) = resolve(total, "total", push) else {
                    continue;
                };
                if t < 0 {
                    push(
                        &format!("{field}.total"),
                        format!("{t} at {at} is negative"),
                    );
                } else if t > tmax {
                    push(
                        &format!("{field}.total"),
                        format!("{t} at {at} does not fit in {}", inp.dtype),
                    );
                } else if numel == 0 {
                    push(&field, format!("counts need at least one element ({at})"));
                }
            }
            _ => {}
        }
    }
    for (i, out) in file.outputs.iter().enumerate() {
        let Some(odims) = size(&out.shape) else {
            continue;
        };
        let same_as = |name: &str| {
            file.inputs
                .iter()
                .find(|x| x.name == name)
                .and_then(|x| size(&x.shape))
        };
        if out.inplace {
            if let Some(idims) = same_as(&out.name) {
                if idims != odims {
                    push(
                        &format!("outputs[{i}].shape"),
                        format!("{odims:?} at {at} differs from {idims:?} of the input it updates in place"),
                    );
                }
            }
        }
        if let Some(d) = &out.delta {
            if let Some(idims) = same_as(d) {
                if idims != odims {
                    push(
                        &format!("outputs[{i}].delta"),
                        format!("input {d:?} has shape {idims:?} at {at}, the output {odims:?}: a change needs the same shape"),
                    );
                }
            }
        }
        if let Some(sname) = &out.scale {
            let Some(sdims) = file
                .outputs
                .iter()
                .find(|o| &o.name == sname)
                .and_then(|o| size(&o.shape))
            else {
                continue;
            };
            if sdims.len() > odims.len() {
                continue; // reported by check_output_kind
            }
            for (axis, (&q, &n)) in odims.iter().zip(&sdims).enumerate() {
                match out.block.as_ref().and_then(|b| b.get(axis)) {
                    Some(&b) if b > 0 && q.div_ceil(b) != n => push(
                        &format!("outputs[{i}].block"),
                        format!("axis {axis} at {at}: {q} elements in blocks of {b} need {} scales, {sname:?} has {n}", q.div_ceil(b)),
                    ),
                    Some(_) => {}
                    None if !(n >= 1 && q >= 1 && q.div_ceil(q.div_ceil(n)) == n) => push(
                        &format!("outputs[{i}].scale"),
                        format!("axis {axis} at {at}: {n} scales cannot cover {q} elements in blocks of ceil({q}/{n}) (every block must hold at least one element)"),
                    ),
                    None => {}
                }
            }
        }
    }
}

/// Dims of a shape set as Python literal `{"T": 16384, ...}` (prompts and docs).
pub fn dims_literal(dims: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn dsls() -> DslRegistry {
        DslRegistry::load_root(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap()
    }

    const GOOD: &str = r#"
id = "A01"
slug = "bias_gelu"
family = "A"
title = "Bias + GELU"
eager = ["gelu_add"]
bytes = "4*T*H + 2*H"

[[inputs]]
name = "x"
dtype = "bfloat16"
shape = ["T", "H"]

[[inputs]]
name = "b"
dtype = "bfloat16"
shape = ["H"]

[[outputs]]
name = "y"
dtype = "bfloat16"
shape = ["T", "H"]

[[shapes]]
name = "benchmark"
kind = "benchmark"
dims = { T = 16384, H = 14336 }

[[shapes]]
name = "small"
kind = "check"
dims = { T = 128, H = 256 }

[[shapes]]
name = "ragged"
kind = "check"
dims = { T = 333, H = 1000 }
"#;

    fn write_problem(root: &Path, toml_text: &str) -> PathBuf {
        let dir = root.join("A").join("A01_bias_gelu");
        fs::create_dir_all(dir.join("cute")).unwrap();
        fs::create_dir_all(dir.join("tirx")).unwrap();
        fs::write(dir.join("problem.toml"), toml_text).unwrap();
        fs::write(dir.join("statement.md"), "Compute gelu(x + b).").unwrap();
        fs::write(
            dir.join("reference.py"),
            "def reference(x, b, y):\n    pass\n\ndef gelu_add(x, b):\n    pass\n",
        )
        .unwrap();
        for d in ["cute", "tirx"] {
            fs::write(
                dir.join(d).join("starter.py"),
                "def build(spec):\n    pass\n",
            )
            .unwrap();
        }
        dir
    }

    #[test]
    fn loads_a_good_problem() {
        let tmp = tempfile::tempdir().unwrap();
        write_problem(tmp.path(), GOOD);
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let p = reg.get("a01").unwrap();
        assert_eq!(p.slug(), "bias_gelu");
        assert_eq!(p.check_shapes().count(), 2);
        assert!(reg.get("bias_gelu").is_some());
        assert_eq!(reg.select(&["A".into()]).unwrap().len(), 1);
        assert!(reg.select(&["Z99".into()]).is_err());
    }

    fn errors_for(toml_text: &str) -> Vec<LoadError> {
        let tmp = tempfile::tempdir().unwrap();
        write_problem(tmp.path(), toml_text);
        Registry::load(tmp.path(), &dsls()).expect_err("must fail")
    }

    #[test]
    fn names_file_and_field() {
        let errs = errors_for(&GOOD.replace(
            "dtype = \"bfloat16\"\nshape = [\"H\"]",
            "dtype = \"bf17\"\nshape = [\"H\"]",
        ));
        let msg = errs[0].to_string();
        assert!(
            msg.contains("problem.toml") && msg.contains("bf17"),
            "{msg}"
        );

        let errs = errors_for(&GOOD.replace("dims = { T = 128, H = 256 }", "dims = { T = 4 }"));
        assert!(
            errs.iter()
                .any(|e| e.field == "shapes[1].dims" && e.message.contains("dimension H")),
            "{errs:?}"
        );

        let errs = errors_for(&GOOD.replace("eager = [\"gelu_add\"]", "eager = [\"nope\"]"));
        assert!(errs.iter().any(|e| e.field == "eager[0]"), "{errs:?}");

        let errs = errors_for(&GOOD.replace(
            "dims = { T = 333, H = 1000 }",
            "dims = { T = 64, H = 1024 }",
        ));
        assert!(
            errs.iter().any(|e| e.message.contains("ragged")),
            "{errs:?}"
        );

        let errs = errors_for(&GOOD.replace("T = 16384, H = 14336", "T = 16, H = 64"));
        assert!(
            errs.iter().any(|e| e.message.contains("size rule")),
            "{errs:?}"
        );

        let errs =
            errors_for(&GOOD.replace("slug = \"bias_gelu\"", "slug = \"bias_gelu\"\ncolour = 3"));
        assert!(errs[0].message.contains("colour"), "{errs:?}");

        let errs = errors_for(&GOOD.replace("id = \"A01\"", "id = \"A1\""));
        assert!(errs.iter().any(|e| e.field == "id"), "{errs:?}");

        let errs = errors_for(&GOOD.replace(
            "name = \"b\"\ndtype = \"bfloat16\"",
            "name = \"b\"\ndtype = \"int32\"",
        ));
        assert!(
            errs.iter()
                .any(|e| e.field == "inputs[1].dist" && e.message.contains("randint")),
            "{errs:?}"
        );
    }

    #[test]
    fn flops_format_needs_flops_and_a_known_format() {
        let errs = errors_for(&GOOD.replace(
            "bytes = \"4*T*H + 2*H\"\n",
            "bytes = \"4*T*H + 2*H\"\nflops_format = \"fp8\"\n",
        ));
        assert!(
            errs.iter()
                .any(|e| e.field == "flops_format" && e.message.contains("no `flops`")),
            "{errs:?}"
        );
        let errs = errors_for(&GOOD.replace(
            "bytes = \"4*T*H + 2*H\"\n",
            "bytes = \"4*T*H + 2*H\"\nflops = \"2*T*H\"\nflops_format = \"fp4\"\n",
        ));
        assert!(
            errs.iter()
                .any(|e| e.to_string().contains("fp4") && e.path.ends_with("problem.toml")),
            "{errs:?}"
        );
    }

    #[test]
    fn bytes_is_required_and_checked() {
        let errs = errors_for(&GOOD.replace("bytes = \"4*T*H + 2*H\"\n", ""));
        assert!(
            errs.iter().any(|e| e.field == "bytes"
                && e.message.contains("required")
                && e.path.ends_with("problem.toml")),
            "{errs:?}"
        );
        let msg = errs
            .iter()
            .find(|e| e.field == "bytes")
            .unwrap()
            .to_string();
        assert!(msg.contains("problem.toml: field `bytes`"), "{msg}");
        let errs = errors_for(&GOOD.replace("4*T*H + 2*H", "4*T*Q"));
        assert!(
            errs.iter()
                .any(|e| e.field == "bytes" && e.message.contains("Q is not bound")),
            "{errs:?}"
        );
        // The declared bytes set the ideal time: x, b, y of A01 at the benchmark shape.
        let tmp = tempfile::tempdir().unwrap();
        write_problem(tmp.path(), GOOD);
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let p = reg.get("A01").unwrap();
        let b = p.benchmark_shape();
        assert_eq!(p.min_bytes(b).unwrap(), 4 * 16384 * 14336 + 2 * 14336);
        assert_eq!(p.min_bytes(b).unwrap(), p.tensor_bytes(b).unwrap());
    }

    /// A problem using every output kind and integer distribution of docs/design.md.
    const KINDS: &str = r#"
id = "A01"
slug = "bias_gelu"
family = "A"
title = "Every kind"
eager = ["gelu_add"]
bytes = "4*T*H + 2*H"

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
name = "slots"
dtype = "int32"
shape = ["T"]
dist = { kind = "unique", hi = "S" }

[[inputs]]
name = "ids"
dtype = "int32"
shape = ["T", 4]
dist = { kind = "unique", hi = "E", per_row = true }

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
dtype = "float8_e4m3fn"
shape = ["T", "H"]
scale = "s"
block = [1, 128]

[[outputs]]
name = "s"
dtype = "float32"
shape = ["T", "G"]

[[outputs]]
name = "loss"
dtype = "float32"
shape = []

[[shapes]]
name = "benchmark"
kind = "benchmark"
dims = { T = 16384, H = 14336, G = 112, V = 128256, S = 20000, E = 64 }

[[shapes]]
name = "small"
kind = "check"
dims = { T = 128, H = 256, G = 2, V = 1000, S = 128, E = 4 }

[[shapes]]
name = "ragged"
kind = "check"
dims = { T = 333, H = 1000, G = 8, V = 77, S = 400, E = 5 }
"#;

    #[test]
    fn loads_every_output_kind_and_distribution() {
        use crate::model::IntBound;
        let tmp = tempfile::tempdir().unwrap();
        write_problem(tmp.path(), KINDS);
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let p = reg.get("A01").unwrap();
        let f = &p.file;
        assert!(f.outputs[0].inplace && f.outputs[0].delta.is_none());
        assert_eq!(f.outputs[1].delta.as_deref(), Some("r"));
        assert_eq!(f.outputs[2].scale.as_deref(), Some("s"));
        assert_eq!(f.outputs[2].block, Some(vec![1, 128]));
        assert!(f.outputs[4].shape.is_empty());
        let Distribution::Randint { lo, hi } = &f.inputs[2].dist else {
            panic!("{:?}", f.inputs[2].dist)
        };
        assert_eq!(*lo, IntBound::Int(0));
        assert_eq!(hi.resolve(&p.benchmark_shape().dims).unwrap(), 128256);
        assert!(matches!(
            &f.inputs[4].dist,
            Distribution::Unique { per_row: true, .. }
        ));
        assert!(matches!(
            &f.inputs[3].dist,
            Distribution::Unique { per_row: false, .. }
        ));
        let Distribution::Counts { total } = &f.inputs[5].dist else {
            panic!()
        };
        assert_eq!(total.resolve(&p.benchmark_shape().dims).unwrap(), 4 * 16384);
        // A scalar output is one element of its dtype.
        let b = p.benchmark_shape();
        let sizes: u64 = p.tensor_bytes(b).unwrap();
        assert!(sizes > 4 * 16384 * 14336, "{sizes}");
        // Written back, the file reads the same (the new fields serialize only where set).
        let back = toml::to_string(f).unwrap();
        assert!(
            back.contains("inplace = true") && back.contains("hi = \"V\""),
            "{back}"
        );
        assert_eq!(toml::from_str::<ProblemFile>(&back).unwrap(), *f);
        let plain = toml::to_string(&errors_free_good()).unwrap();
        assert!(
            !plain.contains("inplace") && !plain.contains("delta"),
            "{plain}"
        );
    }

    #[test]
    fn integer_bounds_are_literals_or_dimension_expressions() {
        use crate::model::{InputDecl, IntBound};
        let d: InputDecl = toml::from_str(
            "name = \"i\"\ndtype = \"int32\"\nshape = []\ndist = { kind = \"randint\", lo = -5, hi = \"2*E\" }",
        )
        .unwrap();
        let Distribution::Randint { lo, hi } = &d.dist else {
            panic!("{:?}", d.dist)
        };
        assert_eq!(*lo, IntBound::Int(-5));
        let dims = BTreeMap::from([("E".to_string(), 8u64)]);
        assert_eq!(hi.resolve(&dims).unwrap(), 16);
        assert_eq!(d.dist.symbols(), vec!["E".to_string()]);
        assert!(hi
            .resolve(&BTreeMap::new())
            .unwrap_err()
            .contains("E is not bound"));
        // Written back as written: an integer stays an integer, an expression a string.
        let back = toml::to_string(&d).unwrap();
        assert!(
            back.contains("lo = -5") && back.contains("hi = \"2*E\""),
            "{back}"
        );
        let e = toml::from_str::<InputDecl>(
            "name = \"i\"\ndtype = \"int32\"\nshape = []\ndist = { kind = \"unique\", hi = 1.5 }",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("did not match") || e.to_string().contains("invalid"),
            "{e}"
        );
    }

    fn errors_free_good() -> ProblemFile {
        toml::from_str(GOOD).unwrap()
    }

    /// `KINDS` with `from` replaced by `to` must fail with an error on `field` containing `needle`.
    fn kinds_error(from: &str, to: &str, field: &str, needle: &str) {
        assert!(
            KINDS.contains(from),
            "the test edit {from:?} matches nothing"
        );
        let errs = errors_for(&KINDS.replacen(from, to, 1));
        assert!(
            errs.iter().any(|e| e.field == field
                && e.message.contains(needle)
                && e.path.ends_with("problem.toml")),
            "{from:?} -> {to:?}: expected `{field}` with {needle:?}, got {errs:?}"
        );
    }

    #[test]
    fn output_kinds_are_validated_by_name() {
        // inplace: the input must exist, with the same dtype and shape.
        kinds_error(
            "name = \"p\"\ndtype = \"float32\"\nshape = [\"T\", \"H\"]\ninplace = true",
            "name = \"pp\"\ndtype = \"float32\"\nshape = [\"T\", \"H\"]\ninplace = true",
            "outputs[0].inplace",
            "no input is named \"pp\"",
        );
        kinds_error(
            "dtype = \"float32\"\nshape = [\"T\", \"H\"]\ninplace = true",
            "dtype = \"bfloat16\"\nshape = [\"T\", \"H\"]\ninplace = true",
            "outputs[0].dtype",
            "differs from the dtype float32",
        );
        kinds_error(
            "shape = [\"T\", \"H\"]\ninplace = true",
            "shape = [\"H\", \"T\"]\ninplace = true",
            "outputs[0].shape",
            "of the input it updates in place",
        );
        kinds_error(
            "shape = [\"T\", \"H\"]\ninplace = true",
            "shape = [\"T\", \"H\"]",
            "outputs[0].name",
            "needs `inplace = true`",
        );
        kinds_error(
            "inplace = true",
            "inplace = true\ndelta = \"r\"",
            "outputs[0].delta",
            "already judged on its change",
        );
        // delta: an input of the same shape, float.
        kinds_error(
            "delta = \"r\"",
            "delta = \"rr\"",
            "outputs[1].delta",
            "no input is named \"rr\"",
        );
        kinds_error(
            "delta = \"r\"",
            "delta = \"tok\"",
            "outputs[1].delta",
            "needs float tensors",
        );
        // scale: a float8/int8 output, another plain float output, blocks that cover.
        kinds_error(
            "scale = \"s\"",
            "scale = \"t\"",
            "outputs[2].scale",
            "no output is named \"t\"",
        );
        kinds_error(
            "dtype = \"float8_e4m3fn\"",
            "dtype = \"bfloat16\"",
            "outputs[2].scale",
            "only float8_e4m3fn and int8",
        );
        kinds_error(
            "scale = \"s\"",
            "scale = \"loss\"",
            "outputs[2].block",
            "as many axes",
        );
        kinds_error(
            "scale = \"s\"",
            "scale = \"q\"",
            "outputs[2].scale",
            "cannot scale itself",
        );
        kinds_error(
            "block = [1, 128]",
            "block = [1, 64]",
            "outputs[2].block",
            "blocks of 64 need",
        );
        // Without `block`, ceil(q.dim / s.dim): 8 scales over 1000 columns are blocks of 125 (valid);
        // 600 scales would be blocks of 2, of which only 500 hold an element.
        let errs = errors_for(
            &KINDS
                .replace("block = [1, 128]\n", "")
                .replace("G = 8,", "G = 600,"),
        );
        assert!(
            errs.iter().any(|e| e.field == "outputs[2].scale"
                && e.message.contains("600 scales cannot cover 1000 elements")),
            "{errs:?}"
        );
        let tmp = tempfile::tempdir().unwrap();
        write_problem(tmp.path(), &KINDS.replace("block = [1, 128]\n", ""));
        assert!(
            Registry::load(tmp.path(), &dsls()).is_ok(),
            "the default block rule accepts 8 scales over 1000 columns"
        );
        kinds_error(
            "name = \"loss\"\ndtype = \"float32\"",
            "name = \"loss\"\ndtype = \"float32\"\nblock = [2]",
            "outputs[4].block",
            "only meaningful with `scale`",
        );
    }

    #[test]
    fn integer_distributions_are_validated_per_shape_set() {
        kinds_error(
            "lo = 0, hi = \"V\"",
            "lo = 0, hi = \"W\"",
            "shapes[0].dims",
            "dimension W is used by a tensor but not bound",
        );
        kinds_error(
            "lo = 0, hi = \"V\"",
            "lo = 100, hi = \"V\"",
            "inputs[2].dist",
            "randint needs lo < hi, got [100, 77) at shape set \"ragged\"",
        );
        kinds_error(
            "dtype = \"int64\"\nshape = [\"T\"]\ndist = { kind = \"randint\"",
            "dtype = \"int8\"\nshape = [\"T\"]\ndist = { kind = \"randint\"",
            "inputs[2].dist",
            "does not fit in int8",
        );
        kinds_error(
            "S = 128, E = 4 }",
            "S = 127, E = 4 }",
            "inputs[3].dist.hi",
            "the tensor holds 128 distinct values at shape set \"small\"",
        );
        kinds_error(
            "S = 128, E = 4 }",
            "S = 128, E = 3 }",
            "inputs[4].dist.hi",
            "a row holds 4 distinct values",
        );
        kinds_error(
            "dtype = \"int32\"\nshape = [\"T\"]\ndist = { kind = \"unique\"",
            "dtype = \"float32\"\nshape = [\"T\"]\ndist = { kind = \"unique\"",
            "inputs[3].dist",
            "unique needs an integer dtype",
        );
        kinds_error(
            "dtype = \"int32\"\nshape = [\"E\"]",
            "dtype = \"int8\"\nshape = [\"E\"]",
            "inputs[5].dist.total",
            "does not fit in int8",
        );
        kinds_error(
            "name = \"r\"\ndtype = \"bfloat16\"\nshape = [\"T\", \"H\"]",
            "name = \"r\"\ndtype = \"int32\"\nshape = [\"T\", \"H\"]",
            "inputs[1].dist",
            "\"randint\", \"unique\" or \"counts\"",
        );
        // A bad expression is a parse error naming the line.
        let errs = errors_for(&KINDS.replace("total = \"4*T\"", "total = \"4*T-1\""));
        assert!(
            errs[0].message.contains("bad term") && errs[0].message.contains("line"),
            "{errs:?}"
        );
    }

    #[test]
    fn missing_starter_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_problem(tmp.path(), GOOD);
        fs::remove_file(dir.join("tirx").join("starter.py")).unwrap();
        let errs = Registry::load(tmp.path(), &dsls()).unwrap_err();
        assert!(
            errs.iter().any(|e| e.path.ends_with("tirx/starter.py")),
            "{errs:?}"
        );
    }

    #[test]
    fn variants_are_the_registered_dsl_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_problem(tmp.path(), GOOD);
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let p = reg.get("A01").unwrap();
        assert_eq!(p.variants, vec![Dsl::CUTE, Dsl::TIRX]);
        // A DSL with no starter for a problem has no variant for it.
        fs::remove_dir_all(dir.join("tirx")).unwrap();
        fs::create_dir_all(dir.join("__pycache__")).unwrap();
        let reg = Registry::load(tmp.path(), &dsls()).unwrap();
        let p = reg.get("A01").unwrap();
        assert!(p.has_variant(Dsl::CUTE) && !p.has_variant(Dsl::TIRX));
        // A folder named after no registered DSL is an error naming it.
        fs::create_dir_all(dir.join("triton")).unwrap();
        let errs = Registry::load(tmp.path(), &dsls()).unwrap_err();
        assert!(
            errs.iter().any(|e| e.path.ends_with("triton")
                && e.message.contains("unknown DSL \"triton\"")
                && e.message.contains("registered: cute, tirx")),
            "{errs:?}"
        );
        // No variant at all.
        fs::remove_dir_all(dir.join("triton")).unwrap();
        fs::remove_dir_all(dir.join("cute")).unwrap();
        let errs = Registry::load(tmp.path(), &dsls()).unwrap_err();
        assert!(
            errs.iter().any(|e| e.message.contains("posed in no DSL")),
            "{errs:?}"
        );
    }
}
