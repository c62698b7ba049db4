//! Kernel DSLs as data: the `Dsl` handle every stage passes around, and the descriptors under
//! `dsls/<name>/dsl.toml` that hold everything the product knows about one DSL (display name,
//! brief, Python adapter, static-check rules, leak markers, environment, sandbox allowances).
//! `DslRegistry::load` reads and validates them; every error names the file and the field.
//! A new DSL is a new folder there (docs/design.md, "Adding a DSL"); no code lists DSLs.

use crate::registry::LoadError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, RwLock};

/// The folder of DSL descriptors under the repository root.
pub const DSLS_DIR: &str = "dsls";
/// The descriptor's file name inside `dsls/<name>/`.
pub const DESCRIPTOR_FILE: &str = "dsl.toml";

/// A kernel DSL, by name (`cute`, `tirx`, ...): a small copyable handle. Ordered, compared and
/// serialized as its name; what the DSL is comes from its [`DslDescriptor`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Dsl(&'static str);

/// Interned names (a handful per process; each distinct name is leaked once).
static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
/// Display names of the DSLs any loaded registry described (for reports, which see names only).
static DISPLAY: RwLock<BTreeMap<&'static str, &'static str>> = RwLock::new(BTreeMap::new());

impl Dsl {
    /// The CuTe DSL (nvidia-cutlass-dsl), one of the two DSLs the suite is built for.
    pub const CUTE: Dsl = Dsl("cute");
    /// TIRx (apache-tvm-tirx), the other one.
    pub const TIRX: Dsl = Dsl("tirx");

    /// A DSL handle from its name: lowercase ASCII letters, digits and `_`, starting with a
    /// letter, at most 32 characters. Whether it is registered is the registry's question.
    pub fn new(name: &str) -> Result<Dsl, String> {
        if !is_dsl_name(name) {
            return Err(format!(
                "{name:?} is not a DSL name (lowercase letters, digits and _, starting with a letter, at most 32 characters)"
            ));
        }
        for known in [Dsl::CUTE, Dsl::TIRX] {
            if known.0 == name {
                return Ok(known);
            }
        }
        let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = names.get(name) {
            return Ok(Dsl(n));
        }
        let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
        names.insert(leaked);
        Ok(Dsl(leaked))
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// Human name (reports): the display name of a loaded descriptor, else the name itself.
    /// Prompts take it from the descriptor directly.
    pub fn display_name(self) -> &'static str {
        DISPLAY
            .read()
            .ok()
            .and_then(|m| m.get(self.0).copied())
            .unwrap_or(self.0)
    }
}

/// The DSLs of an experiment that names none (cute and tirx, both directions).
pub const DEFAULT_DSLS: [Dsl; 2] = [Dsl::CUTE, Dsl::TIRX];

fn is_dsl_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 32
        && matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl fmt::Display for Dsl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Dsl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dsl({})", self.0)
    }
}

impl FromStr for Dsl {
    type Err = String;
    /// The name, case-insensitively. Aliases (`cutedsl`) are the registry's: [`DslRegistry::parse`].
    fn from_str(s: &str) -> Result<Self, String> {
        Dsl::new(&s.trim().to_ascii_lowercase())
    }
}

impl Serialize for Dsl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Dsl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Dsl::new(&s).map_err(serde::de::Error::custom)
    }
}

// ---- descriptors -------------------------------------------------------------------------------

/// `dsl.toml` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DslFile {
    /// Must equal the folder's name.
    pub name: String,
    /// How prompts and reports name the DSL ("CuTe DSL").
    pub display_name: String,
    /// Other spellings accepted on the command line (`cutedsl`).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The brief agents read, relative to the descriptor's folder.
    pub brief: PathBuf,
    pub python: PythonSection,
    #[serde(rename = "static")]
    pub static_rules: StaticRules,
    #[serde(default)]
    pub skill: SkillSection,
    #[serde(default)]
    pub environment: EnvironmentSection,
    #[serde(default)]
    pub sandbox: SandboxSection,
}

/// The evaluator's side of the DSL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonSection {
    /// The module whose `ADAPTER` sets up, imports and hooks the DSL in a runner.
    pub adapter: String,
    /// The DSL's import name (availability is probed without importing it).
    pub import: String,
    /// Its pip distribution (the version reported with every result).
    pub distribution: String,
    /// Folders (relative to the descriptor) put first on the runners' PYTHONPATH, and
    /// readable inside the sandbox: where an out-of-tree adapter or DSL package lives.
    #[serde(default)]
    pub path: Vec<PathBuf>,
}

/// The static DSL-use check's rules for kernels in this DSL (docs/evaluator.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticRules {
    /// A kernel file must import one of these modules (or a submodule).
    pub roots: Vec<String>,
    /// ... define a kernel with a decorator whose resolved dotted name matches one of these
    /// shell-style patterns ...
    pub kernel_decorators: Vec<String>,
    /// ... (how the error message names them) ...
    pub kernel_text: String,
    /// ... and call a compiler whose resolved dotted name matches one of these.
    pub compile_calls: Vec<String>,
    pub compile_text: String,
    /// Modules of this DSL that kernels in every other DSL may not import (default: `roots`).
    #[serde(default)]
    pub owned_modules: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillSection {
    /// Text that marks code in this DSL: a skill given to an attempt in this DSL that holds
    /// one is flagged `target_dsl_code` (the leak audit).
    #[serde(default)]
    pub leak_markers: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSection {
    /// Variables with these prefixes pass from mkb's environment to judges and runners.
    #[serde(default)]
    pub inherit_prefixes: Vec<String>,
    /// Set (unless already set) for a judge that sees no GPU.
    #[serde(default)]
    pub compile_only: BTreeMap<String, String>,
    /// Set for every runner of this DSL; `{scratch}` is the runner's scratch folder.
    #[serde(default)]
    pub runner: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// Extra paths a runner of this DSL may read (absolute, or relative to the descriptor).
    #[serde(default)]
    pub read_only: Vec<PathBuf>,
}

/// A loaded, validated descriptor.
#[derive(Debug, Clone, PartialEq)]
pub struct DslDescriptor {
    pub dsl: Dsl,
    /// The `dsl.toml` it was read from.
    pub path: PathBuf,
    pub file: DslFile,
}

impl DslDescriptor {
    /// The descriptor's folder.
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }
    pub fn display_name(&self) -> &str {
        &self.file.display_name
    }
    pub fn brief_path(&self) -> PathBuf {
        self.dir().join(&self.file.brief)
    }
    /// The brief's text.
    pub fn read_brief(&self) -> std::io::Result<String> {
        std::fs::read_to_string(self.brief_path())
    }
    /// `python.path`, resolved.
    pub fn python_paths(&self) -> Vec<PathBuf> {
        self.file
            .python
            .path
            .iter()
            .map(|p| self.dir().join(p))
            .collect()
    }
    /// `sandbox.read_only`, resolved.
    pub fn read_only_paths(&self) -> Vec<PathBuf> {
        self.file
            .sandbox
            .read_only
            .iter()
            .map(|p| self.dir().join(p))
            .collect()
    }
    pub fn leak_markers(&self) -> &[String] {
        &self.file.skill.leak_markers
    }

    /// Read and validate one `dsl.toml` (its `name` must be its folder's name).
    pub fn load(path: &Path) -> Result<DslDescriptor, Vec<LoadError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![LoadError::new(
                path,
                "",
                format!("missing or unreadable: {e}"),
            )]
        })?;
        let mut file: DslFile = toml::from_str(&text).map_err(|e| {
            let line = e
                .span()
                .map(|s| {
                    format!(
                        " (line {})",
                        text[..s.start.min(text.len())].lines().count().max(1)
                    )
                })
                .unwrap_or_default();
            vec![LoadError::new(path, "", format!("{}{line}", e.message()))]
        })?;
        let mut errors = Vec::new();
        let mut err = |field: &str, msg: String| errors.push(LoadError::new(path, field, msg));
        let folder = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let dsl = match Dsl::new(&file.name) {
            Ok(d) => Some(d),
            Err(e) => {
                err("name", e);
                None
            }
        };
        if dsl.is_some() && file.name != folder {
            err(
                "name",
                format!(
                    "{:?} must equal the descriptor's folder name {folder:?}",
                    file.name
                ),
            );
        }
        if file.display_name.trim().is_empty() {
            err("display_name", "must not be empty".into());
        }
        for (i, a) in file.aliases.iter().enumerate() {
            if a.is_empty()
                || a.chars()
                    .any(|c| c.is_whitespace() || c.is_ascii_uppercase())
            {
                err(
                    &format!("aliases[{i}]"),
                    format!("{a:?}: lowercase, without spaces"),
                );
            }
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let brief = dir.join(&file.brief);
        match std::fs::read_to_string(&brief) {
            Ok(t) if t.trim().is_empty() => err("brief", format!("{} is empty", brief.display())),
            Ok(_) => {}
            Err(e) => err(
                "brief",
                format!("{}: missing or unreadable: {e}", brief.display()),
            ),
        }
        let py = &file.python;
        for (field, v) in [
            ("python.adapter", &py.adapter),
            ("python.import", &py.import),
        ] {
            if !is_dotted_name(v) {
                err(field, format!("{v:?} is not a dotted Python module name"));
            }
        }
        if py.distribution.trim().is_empty() {
            err("python.distribution", "must not be empty".into());
        }
        for (i, p) in py.path.iter().enumerate() {
            if !dir.join(p).is_dir() {
                err(
                    &format!("python.path[{i}]"),
                    format!("{} is not a folder", dir.join(p).display()),
                );
            }
        }
        let st = &file.static_rules;
        for (field, list) in [
            ("static.roots", &st.roots),
            ("static.kernel_decorators", &st.kernel_decorators),
            ("static.compile_calls", &st.compile_calls),
        ] {
            if list.is_empty() {
                err(field, "list at least one".into());
            }
            for (i, v) in list.iter().enumerate() {
                let ok = if field == "static.roots" {
                    is_dotted_name(v)
                } else {
                    is_dotted_name(&v.replace('*', "x"))
                };
                if !ok {
                    err(
                        &format!("{field}[{i}]"),
                        format!(
                            "{v:?} is not a dotted name{}",
                            if field == "static.roots" {
                                ""
                            } else {
                                " (with * wildcards)"
                            }
                        ),
                    );
                }
            }
        }
        for (i, v) in st.owned_modules.iter().enumerate() {
            if !is_dotted_name(v) {
                err(
                    &format!("static.owned_modules[{i}]"),
                    format!("{v:?} is not a dotted Python module name"),
                );
            }
        }
        for (field, v) in [
            ("static.kernel_text", &st.kernel_text),
            ("static.compile_text", &st.compile_text),
        ] {
            if v.trim().is_empty() {
                err(field, "must not be empty".into());
            }
        }
        for (i, m) in file.skill.leak_markers.iter().enumerate() {
            if m.trim().len() < 3 {
                err(
                    &format!("skill.leak_markers[{i}]"),
                    format!("{m:?} is too short to mark code (3 characters at least)"),
                );
            }
        }
        let env = &file.environment;
        for (i, p) in env.inherit_prefixes.iter().enumerate() {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                err(
                    &format!("environment.inherit_prefixes[{i}]"),
                    format!("{p:?}: uppercase letters, digits and _"),
                );
            }
        }
        for (section, map) in [("compile_only", &env.compile_only), ("runner", &env.runner)] {
            for (k, v) in map {
                if !is_env_name(k) {
                    err(
                        &format!("environment.{section}.{k}"),
                        "not an environment variable name (uppercase letters, digits and _)".into(),
                    );
                }
                let rest = v.replace("{scratch}", "");
                if rest.contains('{') || rest.contains('}') {
                    err(
                        &format!("environment.{section}.{k}"),
                        format!("{v:?}: the only placeholder is {{scratch}}"),
                    );
                }
            }
        }
        for (i, p) in file.sandbox.read_only.iter().enumerate() {
            let full = dir.join(p);
            if full.parent().is_none() || p.as_os_str().is_empty() {
                err(
                    &format!("sandbox.read_only[{i}]"),
                    "must name a path below the file system's root".into(),
                );
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if file.static_rules.owned_modules.is_empty() {
            file.static_rules.owned_modules = file.static_rules.roots.clone();
        }
        Ok(DslDescriptor {
            dsl: dsl.expect("checked"),
            path: path.to_path_buf(),
            file,
        })
    }
}

fn is_dotted_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut c = part.chars();
            matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
                && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        })
}

fn is_env_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_uppercase() || ch == '_')
        && c.all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_')
}

/// Every DSL described under one `dsls/` folder, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct DslRegistry {
    pub dir: PathBuf,
    dsls: BTreeMap<Dsl, DslDescriptor>,
}

impl DslRegistry {
    /// Load `<root>/dsls/*/dsl.toml` (folders starting with `.` or `_` are skipped). Collects
    /// every error. The display names become what [`Dsl::display_name`] answers.
    pub fn load_root(root: &Path) -> Result<DslRegistry, Vec<LoadError>> {
        DslRegistry::load(&root.join(DSLS_DIR))
    }

    /// Load every descriptor under `dir`.
    pub fn load(dir: &Path) -> Result<DslRegistry, Vec<LoadError>> {
        let rd = std::fs::read_dir(dir).map_err(|e| {
            vec![LoadError::new(
                dir,
                "",
                format!("cannot read the DSL descriptors folder: {e}"),
            )]
        })?;
        let mut folders: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(['.', '_']))
            })
            .collect();
        folders.sort();
        let mut errors = Vec::new();
        let mut descs = Vec::new();
        for f in folders {
            match DslDescriptor::load(&f.join(DESCRIPTOR_FILE)) {
                Ok(d) => descs.push(d),
                Err(mut e) => errors.append(&mut e),
            }
        }
        if descs.is_empty() && errors.is_empty() {
            errors.push(LoadError::new(
                dir,
                "",
                format!("no DSL is registered: add a folder <name>/ with a {DESCRIPTOR_FILE}"),
            ));
        }
        let reg = DslRegistry::from_descriptors(dir, descs);
        match reg {
            Ok(r) if errors.is_empty() => Ok(r),
            Ok(_) => Err(errors),
            Err(mut e) => {
                errors.append(&mut e);
                Err(errors)
            }
        }
    }

    /// A registry of already loaded descriptors (names and aliases must not collide).
    pub fn from_descriptors(
        dir: &Path,
        descs: Vec<DslDescriptor>,
    ) -> Result<DslRegistry, Vec<LoadError>> {
        let mut errors = Vec::new();
        let mut dsls = BTreeMap::new();
        let mut spellings: BTreeMap<String, Dsl> = BTreeMap::new();
        for d in &descs {
            spellings.insert(d.dsl.as_str().to_string(), d.dsl);
        }
        for d in descs {
            for (i, a) in d.file.aliases.iter().enumerate() {
                match spellings.get(a) {
                    Some(other) if *other != d.dsl || a == d.dsl.as_str() => {
                        errors.push(LoadError::new(
                            &d.path,
                            format!("aliases[{i}]"),
                            format!("{a:?} is already the name or an alias of {other}"),
                        ));
                    }
                    _ => {
                        spellings.insert(a.clone(), d.dsl);
                    }
                }
            }
            dsls.insert(d.dsl, d);
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if let Ok(mut m) = DISPLAY.write() {
            for d in dsls.values() {
                if m.get(d.dsl.as_str()).copied() != Some(d.display_name()) {
                    let name: &'static str =
                        Box::leak(d.display_name().to_string().into_boxed_str());
                    m.insert(d.dsl.as_str(), name);
                }
            }
        }
        Ok(DslRegistry {
            dir: dir.to_path_buf(),
            dsls,
        })
    }

    /// The registered DSLs, by name.
    pub fn dsls(&self) -> Vec<Dsl> {
        self.dsls.keys().copied().collect()
    }
    pub fn descriptors(&self) -> impl Iterator<Item = &DslDescriptor> {
        self.dsls.values()
    }
    pub fn get(&self, dsl: Dsl) -> Option<&DslDescriptor> {
        self.dsls.get(&dsl)
    }
    pub fn contains(&self, dsl: Dsl) -> bool {
        self.dsls.contains_key(&dsl)
    }
    /// The descriptor, or an error naming the registered DSLs.
    pub fn require(&self, dsl: Dsl) -> Result<&DslDescriptor, String> {
        self.get(dsl).ok_or_else(|| self.unknown(dsl.as_str()))
    }
    /// A registered DSL by name or alias, case-insensitively.
    pub fn parse(&self, s: &str) -> Result<Dsl, String> {
        let s = s.trim().to_ascii_lowercase();
        if let Some(d) = self.dsls.keys().find(|d| d.as_str() == s) {
            return Ok(*d);
        }
        self.dsls
            .values()
            .find(|d| d.file.aliases.contains(&s))
            .map(|d| d.dsl)
            .ok_or_else(|| self.unknown(&s))
    }

    fn unknown(&self, name: &str) -> String {
        format!(
            "unknown DSL {name:?} (registered: {}; a DSL is registered by {}/<name>/{DESCRIPTOR_FILE})",
            self.dsls
                .keys()
                .map(|d| d.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            self.dir.display()
        )
    }

    /// Environment prefixes of every DSL (judges and runners inherit these variables).
    pub fn inherit_prefixes(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .descriptors()
            .flat_map(|d| d.file.environment.inherit_prefixes.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Variables every DSL sets for a judge without a GPU.
    pub fn compile_only_env(&self) -> Vec<(String, String)> {
        self.descriptors()
            .flat_map(|d| d.file.environment.compile_only.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn repo_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn handles_are_names() {
        assert_eq!(Dsl::new("cute").unwrap(), Dsl::CUTE);
        assert_eq!("TIRX".parse::<Dsl>().unwrap(), Dsl::TIRX);
        let d = Dsl::new("dummy_2").unwrap();
        assert_eq!(d, Dsl::new("dummy_2").unwrap());
        assert_eq!(d.as_str(), "dummy_2");
        assert!(Dsl::CUTE < Dsl::TIRX, "ordered by name");
        for bad in ["", "2x", "Cute", "a-b", "x y", &"a".repeat(33)] {
            assert!(Dsl::new(bad).is_err(), "{bad:?}");
        }
        let json = serde_json::to_string(&[Dsl::CUTE, d]).unwrap();
        assert_eq!(json, r#"["cute","dummy_2"]"#);
        let back: Vec<Dsl> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![Dsl::CUTE, d]);
        assert!(serde_json::from_str::<Dsl>("\"Not A Name\"").is_err());
    }

    #[test]
    fn the_repository_registers_cute_and_tirx() {
        let reg = DslRegistry::load_root(&repo_root()).expect("dsls/ loads");
        assert_eq!(reg.dsls(), vec![Dsl::CUTE, Dsl::TIRX]);
        let cute = reg.require(Dsl::CUTE).unwrap();
        assert_eq!(cute.display_name(), "CuTe DSL");
        assert_eq!(Dsl::CUTE.display_name(), "CuTe DSL");
        assert!(cute.read_brief().unwrap().contains("CuTe"));
        assert_eq!(reg.parse("CuteDSL").unwrap(), Dsl::CUTE);
        let tirx = reg.require(Dsl::TIRX).unwrap();
        assert_eq!(
            tirx.file.static_rules.owned_modules,
            vec!["tvm_tirx", "tvm"]
        );
        // owned_modules defaults to roots.
        assert_eq!(cute.file.static_rules.owned_modules, vec!["cutlass"]);
        assert!(tirx.leak_markers().iter().any(|m| m == "@T.prim_func"));
        let e = reg.parse("triton").unwrap_err();
        assert!(e.contains("registered: cute, tirx"), "{e}");
        assert!(reg.inherit_prefixes().contains(&"CUTE_DSL_".to_string()));
        assert!(reg
            .compile_only_env()
            .contains(&("CUTE_DSL_ARCH".into(), "sm_90a".into())));
    }

    const GOOD: &str = r#"
name = "toy"
display_name = "Toy DSL"
brief = "brief.md"
[python]
adapter = "toy_dsl.adapter"
import = "toy_dsl"
distribution = "toy-dsl"
path = ["python"]
[static]
roots = ["toy_dsl"]
kernel_decorators = ["toy_dsl.kernel"]
kernel_text = "@toy.kernel"
compile_calls = ["toy_dsl.compile"]
compile_text = "toy.compile(...)"
[skill]
leak_markers = ["@toy.kernel"]
[environment]
runner = { TOY_CACHE = "{scratch}/toy" }
"#;

    fn write_toy(root: &Path, text: &str) -> PathBuf {
        let dir = root.join("toy");
        std::fs::create_dir_all(dir.join("python")).unwrap();
        std::fs::write(dir.join("brief.md"), "Write toy kernels.").unwrap();
        std::fs::write(dir.join(DESCRIPTOR_FILE), text).unwrap();
        dir.join(DESCRIPTOR_FILE)
    }

    fn errors_for(text: &str) -> Vec<LoadError> {
        let tmp = tempfile::tempdir().unwrap();
        write_toy(tmp.path(), text);
        DslRegistry::load(tmp.path()).expect_err("must fail")
    }

    #[test]
    fn loads_a_good_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        write_toy(tmp.path(), GOOD);
        let reg = DslRegistry::load(tmp.path()).unwrap();
        let toy = reg.require(Dsl::new("toy").unwrap()).unwrap();
        assert_eq!(toy.python_paths(), vec![tmp.path().join("toy/python")]);
        assert_eq!(toy.file.static_rules.owned_modules, vec!["toy_dsl"]);
        assert_eq!(Dsl::new("toy").unwrap().display_name(), "Toy DSL");
        assert_eq!(toy.read_brief().unwrap(), "Write toy kernels.");
    }

    #[test]
    fn bad_descriptors_name_the_file_and_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("name = \"toy\"", "name = \"other\"", "name"),
            ("brief = \"brief.md\"", "brief = \"nope.md\"", "brief"),
            (
                "adapter = \"toy_dsl.adapter\"",
                "adapter = \"toy-dsl\"",
                "python.adapter",
            ),
            (
                "path = [\"python\"]",
                "path = [\"missing\"]",
                "python.path[0]",
            ),
            ("roots = [\"toy_dsl\"]", "roots = []", "static.roots"),
            (
                "kernel_decorators = [\"toy_dsl.kernel\"]",
                "kernel_decorators = [\"toy dsl\"]",
                "static.kernel_decorators[0]",
            ),
            (
                "leak_markers = [\"@toy.kernel\"]",
                "leak_markers = [\"@\"]",
                "skill.leak_markers[0]",
            ),
            (
                "{scratch}/toy",
                "{home}/toy",
                "environment.runner.TOY_CACHE",
            ),
            (
                "display_name = \"Toy DSL\"",
                "display_name = \" \"",
                "display_name",
            ),
        ];
        for (from, to, field) in cases {
            assert!(GOOD.contains(from), "{from}");
            let errs = errors_for(&GOOD.replace(from, to));
            let hit = errs.iter().find(|e| e.field == *field);
            let Some(e) = hit else {
                panic!("no error for {field}: {errs:?}")
            };
            let msg = e.to_string();
            assert!(
                msg.contains("toy/dsl.toml") && msg.contains(&format!("field `{field}`")),
                "{msg}"
            );
        }
        // A missing field and an unknown one: serde's message, with the file.
        let errs = errors_for(&GOOD.replace("display_name = \"Toy DSL\"\n", ""));
        assert!(
            errs[0].to_string().contains("toy/dsl.toml")
                && errs[0].message.contains("display_name"),
            "{errs:?}"
        );
        let errs = errors_for(&GOOD.replace("[skill]", "colour = 3\n[skill]"));
        assert!(errs[0].message.contains("colour"), "{errs:?}");
        // A folder without a descriptor.
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
        let errs = DslRegistry::load(tmp.path()).unwrap_err();
        assert!(errs[0].path.ends_with("empty/dsl.toml"), "{errs:?}");
        // An alias that is another DSL's name.
        let tmp = tempfile::tempdir().unwrap();
        write_toy(tmp.path(), GOOD);
        let other = tmp.path().join("zed");
        std::fs::create_dir_all(other.join("python")).unwrap();
        std::fs::write(other.join("brief.md"), "z").unwrap();
        std::fs::write(
            other.join(DESCRIPTOR_FILE),
            GOOD.replace("name = \"toy\"", "name = \"zed\"\naliases = [\"toy\"]"),
        )
        .unwrap();
        let errs = DslRegistry::load(tmp.path()).unwrap_err();
        assert!(
            errs.iter()
                .any(|e| e.field == "aliases[0]" && e.path.ends_with("zed/dsl.toml")),
            "{errs:?}"
        );
    }
}
