//! `mkb export RUN --format parquet|csv|jsonl`: the attempt rows as one flat table with a
//! fixed, documented schema ([`EXPORT_COLUMNS`]; rendered by [`export_schema_markdown`] into
//! docs/analysis.md). All three formats carry the same columns in the same order; a missing
//! value is null (JSONL), an empty field (CSV) or a null (Parquet, OPTIONAL column).
//! CSV is written by the `csv` crate, Parquet by the `parquet` crate's low-level column writer
//! (no arrow; uncompressed, one row group).

use crate::row::AttemptRow;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Version of the export schema, also written into the Parquet key-value metadata.
/// 2: `eval_mode` after `verdict`; a compile-only kernel's verdict reads `compiled_only`.
pub const EXPORT_SCHEMA_VERSION: u32 = 2;

/// Output format of `mkb export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    Parquet,
    Csv,
    Jsonl,
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "parquet" => Ok(ExportFormat::Parquet),
            "csv" => Ok(ExportFormat::Csv),
            "jsonl" | "ndjson" => Ok(ExportFormat::Jsonl),
            _ => Err(format!("unknown export format {s:?} (parquet, csv, jsonl)")),
        }
    }
}

impl ExportFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Parquet => "parquet",
            ExportFormat::Csv => "csv",
            ExportFormat::Jsonl => "jsonl",
        }
    }
}

/// Logical type of an export column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColType {
    /// UTF-8 string (Parquet BYTE_ARRAY / STRING).
    String,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// 64-bit float.
    Float64,
    Bool,
}

impl ColType {
    pub fn as_str(self) -> &'static str {
        match self {
            ColType::String => "string",
            ColType::Int32 => "int32",
            ColType::Int64 => "int64",
            ColType::Float64 => "float64",
            ColType::Bool => "bool",
        }
    }
}

/// One column of the export schema.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ExportColumn {
    pub name: &'static str,
    pub ty: ColType,
    pub nullable: bool,
    pub doc: &'static str,
}

const fn col(name: &'static str, ty: ColType, nullable: bool, doc: &'static str) -> ExportColumn {
    ExportColumn {
        name,
        ty,
        nullable,
        doc,
    }
}

/// The export schema, in column order.
pub const EXPORT_COLUMNS: &[ExportColumn] = &[
    col("run_name", ColType::String, false, "run the attempt belongs to (runs/<name>)"),
    col("attempt_id", ColType::String, true, "the store's id of the attempt"),
    col("model", ColType::String, false, "model name"),
    col("problem", ColType::String, false, "problem id, e.g. A01 (same for both DSL variants)"),
    col("family", ColType::String, false, "problem family letter A-F"),
    col("source_dsl", ColType::String, false, "source DSL of the direction: the DSL the skills given to attempts in target_dsl come from (e.g. cute)"),
    col("target_dsl", ColType::String, false, "DSL the attempt was written in (e.g. tirx)"),
    col("direction", ColType::String, false, "source_dsl->target_dsl, e.g. cute->tirx"),
    col("condition", ColType::String, false, "solo, conditioned, placebo or repeat_solo"),
    col("run_index", ColType::Int32, false, "run r = 0..R-1 of the (model, problem, target, condition) cell"),
    col("verdict", ColType::String, true, "final evaluation verdict (correct, compiled_only, compile_error, static_check_failed, incorrect, timeout, crashed); compiled_only: a compile-mode evaluation passed, nothing was checked for correctness; null: no kernel evaluated"),
    col("eval_mode", ColType::String, true, "mode of the final evaluation: full (correctness and timing) or compile (compiled only, never correct); null: none"),
    col("correct", ColType::Bool, false, "final evaluation passed"),
    col("runtime_us", ColType::Float64, true, "median end-to-end runtime t of the final kernel, microseconds"),
    col("t_ref_us", ColType::Float64, true, "fastest eager PyTorch formulation, same shape and session, microseconds"),
    col("t_compile_us", ColType::Float64, true, "torch.compile baseline, same shape and session, microseconds"),
    col("score", ColType::Float64, false, "s = correct ? t_ref / t : 0"),
    col("source_score", ColType::Float64, true, "conditioned/placebo: score of the solo attempt whose skill was in the prompt, in its own DSL"),
    col("source_attempt_id", ColType::String, true, "id of that source attempt"),
    col("noise_eps", ColType::Float64, false, "relative tie band of the attempt's problem variant: measured from repeated timing sessions of its solo kernels, else the fixed 0.03"),
    col("noise_sessions", ColType::Int32, false, "timing sessions noise_eps was measured from (0: the fixed default)"),
    col("input_tokens", ColType::Int64, false, "prompt tokens over the attempt's model calls (distillation excluded)"),
    col("output_tokens", ColType::Int64, false, "completion tokens over the attempt's model calls (distillation excluded)"),
    col("skill_tokens", ColType::Int64, true, "tokens of the distillation turn that wrote a skill from this attempt (solo rows)"),
    col("cost_usd", ColType::Float64, true, "cost of the attempt's tokens in US dollars at the configured model price (distillation excluded); null: no price"),
    col("wall_s", ColType::Float64, false, "wall-clock seconds of the attempt, time queued for the evaluator included"),
    col("eval_wait_s", ColType::Float64, true, "seconds of wall_s queued for the shared evaluator, not charged to the wall budget; null: not recorded (older runs)"),
    col("end_reason", ColType::String, true, "why the conversation ended (submitted, stopped, max_turns, max_output_tokens, max_input_tokens, max_tool_evals, wall_clock, provider_error)"),
    col("turns", ColType::Int32, false, "assistant turns used (0 = unknown)"),
    col("tool_evals", ColType::Int32, false, "evaluation tool calls used (0 = unknown)"),
    col("skill_flags", ColType::String, true, "leak-audit / format flags of the skill involved, joined by ';' (null: none)"),
    col("kernel_path", ColType::String, true, "final kernel, relative to the run directory"),
    col("skill_path", ColType::String, true, "skill file (distilled, or in the prompt), relative to the run directory"),
    col("trajectory_path", ColType::String, true, "trajectory JSONL, relative to the run directory"),
];

/// A cell value of the export.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Str(String),
    I32(i32),
    I64(i64),
    F64(f64),
    Bool(bool),
}

fn s(x: &str) -> Value {
    Value::Str(x.to_string())
}
fn os(x: &Option<String>) -> Value {
    x.as_ref().map_or(Value::Null, |v| Value::Str(v.clone()))
}
fn of(x: Option<f64>) -> Value {
    x.map_or(Value::Null, Value::F64)
}
fn i64_of(x: u64) -> Value {
    Value::I64(i64::try_from(x).unwrap_or(i64::MAX))
}
fn i32_of(x: u32) -> Value {
    Value::I32(i32::try_from(x).unwrap_or(i32::MAX))
}

/// The values of one row, in [`EXPORT_COLUMNS`] order.
pub fn row_values(r: &AttemptRow) -> Vec<Value> {
    let d = r.direction();
    vec![
        s(&r.run_name),
        os(&r.attempt_id),
        s(&r.model),
        s(&r.problem),
        Value::Str(r.family.to_string()),
        s(d.source.as_str()),
        s(d.target.as_str()),
        Value::Str(d.label()),
        s(r.condition.as_str()),
        i32_of(r.run_index),
        r.verdict_label().map_or(Value::Null, s),
        os(&r.eval_mode),
        Value::Bool(r.correct),
        of(r.runtime_us),
        of(r.t_ref_us),
        of(r.t_compile_us),
        Value::F64(r.score),
        of(r.source_score),
        os(&r.source_attempt_id),
        Value::F64(r.noise_eps),
        i32_of(r.noise_sessions),
        i64_of(r.input_tokens),
        i64_of(r.output_tokens),
        r.skill_tokens.map_or(Value::Null, i64_of),
        of(r.cost_usd),
        Value::F64(r.wall_s),
        of(r.eval_wait_s),
        r.end_reason.map_or(Value::Null, |e| s(e.as_str())),
        i32_of(r.turns),
        i32_of(r.tool_evals),
        if r.skill_flags.is_empty() {
            Value::Null
        } else {
            Value::Str(r.skill_flags.join(";"))
        },
        os(&r.kernel_path),
        os(&r.skill_path),
        os(&r.trajectory_path),
    ]
}

fn json_value(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Str(x) => serde_json::Value::String(x.clone()),
        Value::I32(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        Value::F64(x) => serde_json::Number::from_f64(*x)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Value::Bool(x) => (*x).into(),
    }
}

fn csv_value(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Str(x) => x.clone(),
        Value::I32(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F64(x) if x.is_finite() => format!("{x}"),
        Value::F64(_) => String::new(),
        Value::Bool(x) => x.to_string(),
    }
}

/// Write the rows in `format` to `w`.
pub fn export_to_writer(
    rows: &[AttemptRow],
    format: ExportFormat,
    w: &mut (impl Write + Send),
) -> anyhow::Result<()> {
    match format {
        ExportFormat::Jsonl => {
            // Written by hand so that keys keep the schema's column order.
            for r in rows {
                let mut line = String::from("{");
                for (i, (c, v)) in EXPORT_COLUMNS.iter().zip(row_values(r)).enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    line.push_str(&serde_json::to_string(c.name)?);
                    line.push(':');
                    line.push_str(&serde_json::to_string(&json_value(&v))?);
                }
                line.push_str("}\n");
                w.write_all(line.as_bytes())?;
            }
        }
        ExportFormat::Csv => {
            let mut out = csv::Writer::from_writer(w);
            out.write_record(EXPORT_COLUMNS.iter().map(|c| c.name))?;
            for r in rows {
                out.write_record(row_values(r).iter().map(csv_value))?;
            }
            out.flush()?;
        }
        ExportFormat::Parquet => write_parquet(rows, w)?,
    }
    Ok(())
}

/// The Parquet schema of [`EXPORT_COLUMNS`]: one flat message, strings as BYTE_ARRAY with the
/// STRING logical type, nullable columns OPTIONAL.
fn parquet_schema() -> parquet::errors::Result<parquet::schema::types::Type> {
    use parquet::basic::{LogicalType, Repetition, Type as Physical};
    use parquet::schema::types::Type;
    let fields = EXPORT_COLUMNS
        .iter()
        .map(|c| {
            let (physical, logical) = match c.ty {
                ColType::String => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
                ColType::Int32 => (Physical::INT32, None),
                ColType::Int64 => (Physical::INT64, None),
                ColType::Float64 => (Physical::DOUBLE, None),
                ColType::Bool => (Physical::BOOLEAN, None),
            };
            Type::primitive_type_builder(c.name, physical)
                .with_repetition(if c.nullable {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                })
                .with_logical_type(logical)
                .build()
                .map(std::sync::Arc::new)
        })
        .collect::<parquet::errors::Result<Vec<_>>>()?;
    Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
}

/// The present values of column `i` (`pick` takes the values of its type) and, for a
/// nullable column, its definition levels (1 = present, 0 = null).
fn column_of<T>(
    values: &[Vec<Value>],
    i: usize,
    nullable: bool,
    pick: impl Fn(&Value) -> Option<T>,
) -> (Vec<T>, Option<Vec<i16>>) {
    let picked: Vec<Option<T>> = values.iter().map(|r| pick(&r[i])).collect();
    let levels = nullable.then(|| picked.iter().map(|v| i16::from(v.is_some())).collect());
    (picked.into_iter().flatten().collect(), levels)
}

/// Write the rows as one uncompressed row group, with the export schema version in the file's
/// key-value metadata.
fn write_parquet(rows: &[AttemptRow], w: &mut (impl Write + Send)) -> anyhow::Result<()> {
    use parquet::data_type::{
        BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type,
    };
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    let props = WriterProperties::builder()
        .set_key_value_metadata(Some(vec![
            KeyValue::new(
                "mkb.export_schema_version".to_string(),
                EXPORT_SCHEMA_VERSION.to_string(),
            ),
            KeyValue::new(
                "mkb.schema_doc".to_string(),
                "docs/analysis.md#export-schema".to_string(),
            ),
        ]))
        .build();
    let mut writer =
        SerializedFileWriter::new(w, std::sync::Arc::new(parquet_schema()?), props.into())?;
    if !rows.is_empty() {
        let values: Vec<Vec<Value>> = rows.iter().map(row_values).collect();
        let mut group = writer.next_row_group()?;
        for (i, c) in EXPORT_COLUMNS.iter().enumerate() {
            let mut col = group
                .next_column()?
                .with_context(|| format!("the Parquet writer has no column {}", c.name))?;
            let n = c.nullable;
            match c.ty {
                ColType::String => {
                    let (v, d) = column_of(&values, i, n, |x| match x {
                        Value::Str(s) => Some(ByteArray::from(s.as_str())),
                        _ => None,
                    });
                    col.typed::<ByteArrayType>()
                        .write_batch(&v, d.as_deref(), None)?;
                }
                ColType::Int32 => {
                    let (v, d) = column_of(&values, i, n, |x| match x {
                        Value::I32(v) => Some(*v),
                        _ => None,
                    });
                    col.typed::<Int32Type>()
                        .write_batch(&v, d.as_deref(), None)?;
                }
                ColType::Int64 => {
                    let (v, d) = column_of(&values, i, n, |x| match x {
                        Value::I64(v) => Some(*v),
                        _ => None,
                    });
                    col.typed::<Int64Type>()
                        .write_batch(&v, d.as_deref(), None)?;
                }
                ColType::Float64 => {
                    let (v, d) = column_of(&values, i, n, |x| match x {
                        Value::F64(v) => Some(*v),
                        _ => None,
                    });
                    col.typed::<DoubleType>()
                        .write_batch(&v, d.as_deref(), None)?;
                }
                ColType::Bool => {
                    let (v, d) = column_of(&values, i, n, |x| match x {
                        Value::Bool(v) => Some(*v),
                        _ => None,
                    });
                    col.typed::<BoolType>()
                        .write_batch(&v, d.as_deref(), None)?;
                }
            }
            col.close()?;
        }
        group.close()?;
    }
    writer.close()?;
    Ok(())
}

/// Write the rows to `path` in `format` (the file is replaced).
pub fn export(rows: &[AttemptRow], format: ExportFormat, path: &Path) -> anyhow::Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    export_to_writer(rows, format, &mut w)
        .with_context(|| format!("writing {}", path.display()))?;
    w.flush()?;
    Ok(())
}

/// The export schema as a Markdown table (kept in docs/analysis.md; a test checks it).
pub fn export_schema_markdown() -> String {
    let mut out = String::from("| column | type | nullable | meaning |\n|---|---|---|---|\n");
    for c in EXPORT_COLUMNS {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            c.name,
            c.ty.as_str(),
            if c.nullable { "yes" } else { "no" },
            c.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{simulate, SimConfig};

    #[test]
    fn a_compile_only_kernel_is_never_exported_as_correct() {
        let mut r = crate::row::test_row(
            "m",
            "A01",
            mkb_core::Dsl::TIRX,
            mkb_core::Condition::Solo,
            0,
            0.0,
        );
        r.verdict = Some(mkb_core::Verdict::Correct);
        r.eval_mode = Some("compile".into());
        let v = row_values(&r);
        let at = |name: &str| EXPORT_COLUMNS.iter().position(|c| c.name == name).unwrap();
        assert_eq!(v[at("verdict")], Value::Str("compiled_only".into()));
        assert_eq!(v[at("eval_mode")], Value::Str("compile".into()));
        assert_eq!(v[at("correct")], Value::Bool(false));
        r.eval_mode = Some("full".into());
        r.correct = true;
        assert_eq!(row_values(&r)[at("verdict")], Value::Str("correct".into()));
    }

    #[test]
    fn values_match_schema_types() {
        let rows = simulate(
            &SimConfig {
                problems: 6,
                runs: 1,
                ..SimConfig::default()
            },
            2,
        );
        for r in &rows {
            let vals = row_values(r);
            assert_eq!(vals.len(), EXPORT_COLUMNS.len());
            for (c, v) in EXPORT_COLUMNS.iter().zip(&vals) {
                let ok = matches!(
                    (c.ty, v),
                    (ColType::String, Value::Str(_))
                        | (ColType::Int32, Value::I32(_))
                        | (ColType::Int64, Value::I64(_))
                        | (ColType::Float64, Value::F64(_))
                        | (ColType::Bool, Value::Bool(_))
                ) || (c.nullable && *v == Value::Null);
                assert!(ok, "column {} has {v:?}", c.name);
            }
        }
    }

    #[test]
    fn jsonl_and_csv_round_trip_shape() {
        let rows = simulate(
            &SimConfig {
                problems: 6,
                runs: 1,
                ..SimConfig::default()
            },
            2,
        );
        let mut j = Vec::new();
        export_to_writer(&rows, ExportFormat::Jsonl, &mut j).unwrap();
        let text = String::from_utf8(j).unwrap();
        assert_eq!(text.lines().count(), rows.len());
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first.as_object().unwrap().len(), EXPORT_COLUMNS.len());
        let first_line = text.lines().next().unwrap();
        assert!(first_line.starts_with("{\"run_name\":"), "{first_line}");
        assert_eq!(first["model"], rows[0].model.as_str());
        assert_eq!(first["score"].as_f64().unwrap(), rows[0].score);
        let mut c = Vec::new();
        export_to_writer(&rows, ExportFormat::Csv, &mut c).unwrap();
        let text = String::from_utf8(c).unwrap();
        assert_eq!(text.lines().count(), rows.len() + 1);
        // direction labels contain '>' but no commas; every line has every column.
        for l in text.lines() {
            assert_eq!(l.split(',').count(), EXPORT_COLUMNS.len(), "{l}");
        }
        assert_eq!(
            "PARQUET".parse::<ExportFormat>().unwrap(),
            ExportFormat::Parquet
        );
        assert!("xls".parse::<ExportFormat>().is_err());
    }

    #[test]
    fn csv_quotes_and_reads_back() {
        let mut rows = simulate(
            &SimConfig {
                problems: 4,
                runs: 1,
                ..SimConfig::default()
            },
            5,
        );
        rows[0].kernel_path = Some("attempts/a,b \"q\"\nx/kernel.py".into());
        let mut buf = Vec::new();
        export_to_writer(&rows, ExportFormat::Csv, &mut buf).unwrap();
        let mut rd = csv::Reader::from_reader(buf.as_slice());
        let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let names: Vec<&str> = EXPORT_COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(header, names);
        let back: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        assert_eq!(back.len(), rows.len());
        let at = |name: &str| names.iter().position(|n| *n == name).unwrap();
        assert_eq!(
            &back[0][at("kernel_path")],
            "attempts/a,b \"q\"\nx/kernel.py"
        );
        for (r, b) in rows.iter().zip(&back) {
            assert_eq!(b[at("score")].parse::<f64>().unwrap(), r.score);
            assert_eq!(&b[at("model")], r.model.as_str());
        }
    }

    #[test]
    fn parquet_reads_back_with_the_schema() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::record::Field;
        let dir = tempfile::tempdir().unwrap();
        let mut rows = simulate(
            &SimConfig {
                problems: 6,
                runs: 2,
                ..SimConfig::default()
            },
            3,
        );
        rows[1].skill_flags = vec!["truncated".into()];
        let path = dir.path().join("rows.parquet");
        export(&rows, ExportFormat::Parquet, &path).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let meta = reader.metadata().file_metadata();
        assert_eq!(meta.num_rows() as usize, rows.len());
        let version = meta
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == "mkb.export_schema_version"))
            .and_then(|k| k.value.clone());
        assert_eq!(version, Some(EXPORT_SCHEMA_VERSION.to_string()));
        let schema = meta.schema_descr();
        assert_eq!(schema.num_columns(), EXPORT_COLUMNS.len());
        for (i, c) in EXPORT_COLUMNS.iter().enumerate() {
            assert_eq!(schema.column(i).name(), c.name);
            assert_eq!(schema.column(i).max_def_level(), i16::from(c.nullable));
        }
        let back: Vec<_> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(back.len(), rows.len());
        for (r, b) in rows.iter().zip(&back) {
            let fields: Vec<(&String, &Field)> = b.get_column_iter().collect();
            assert_eq!(fields.len(), EXPORT_COLUMNS.len());
            for ((name, f), v) in fields.iter().zip(row_values(r)) {
                let same = match (f, &v) {
                    (Field::Null, Value::Null) => true,
                    (Field::Str(a), Value::Str(b)) => a == b,
                    (Field::Int(a), Value::I32(b)) => a == b,
                    (Field::Long(a), Value::I64(b)) => a == b,
                    (Field::Double(a), Value::F64(b)) => a == b,
                    (Field::Bool(a), Value::Bool(b)) => a == b,
                    _ => false,
                };
                assert!(same, "column {name}: {f:?} vs {v:?}");
            }
        }
        // No rows: a valid file with the schema and no row group.
        let empty = dir.path().join("empty.parquet");
        export(&[], ExportFormat::Parquet, &empty).unwrap();
        let reader = SerializedFileReader::new(std::fs::File::open(&empty).unwrap()).unwrap();
        assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
        assert_eq!(reader.num_row_groups(), 0);
    }

    #[test]
    fn export_writes_files() {
        let dir = tempfile::tempdir().unwrap();
        let rows = simulate(
            &SimConfig {
                problems: 6,
                runs: 1,
                ..SimConfig::default()
            },
            2,
        );
        for f in [
            ExportFormat::Parquet,
            ExportFormat::Csv,
            ExportFormat::Jsonl,
        ] {
            let p = dir.path().join(format!("x.{}", f.extension()));
            export(&rows, f, &p).unwrap();
            assert!(std::fs::metadata(&p).unwrap().len() > 100);
        }
        // Empty exports are valid too.
        export(
            &[],
            ExportFormat::Parquet,
            &dir.path().join("empty.parquet"),
        )
        .unwrap();
    }

    #[test]
    fn schema_doc_is_in_sync() {
        let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/analysis.md");
        let doc = std::fs::read_to_string(doc_path).expect("docs/analysis.md exists");
        assert!(
            doc.contains(&export_schema_markdown()),
            "docs/analysis.md's export schema table is stale: paste export_schema_markdown()"
        );
    }
}
