//! The exports must be readable by pandas (via pyarrow) and polars with the documented
//! schema. Runs only when MKB_EXPORT_PYTHON names a Python interpreter that has pandas,
//! pyarrow and polars (scripts/export-check.sh makes one in a temporary venv); skipped
//! otherwise, with a note.

use mkb_analysis::export::{export, ExportFormat, EXPORT_COLUMNS};
use mkb_analysis::{simulate, SimConfig};
use std::process::Command;

const CHECK: &str = r#"
import json, sys
import pandas as pd
import polars as pl
import pyarrow.parquet as pq

d, expected = sys.argv[1], json.loads(sys.argv[2])
names = [c["name"] for c in expected]
n_rows = int(sys.argv[3])
kinds = {"string": "string", "int32": "int", "int64": "int", "float64": "float", "bool": "bool"}

def check_pandas(df, fmt):
    assert list(df.columns) == names, (fmt, list(df.columns))
    assert len(df) == n_rows, (fmt, len(df))
    for c in expected:
        s = df[c["name"]]
        if not c["nullable"]:
            assert not s.isna().any(), (fmt, c["name"], "has nulls")
        k = kinds[c["ty"]]
        nonnull = s.dropna()
        if len(nonnull) == 0:
            continue
        if k == "float":
            assert pd.api.types.is_float_dtype(s), (fmt, c["name"], s.dtype)
        elif k == "int" and not c["nullable"]:
            assert pd.api.types.is_integer_dtype(s), (fmt, c["name"], s.dtype)
        elif k == "bool":
            assert pd.api.types.is_bool_dtype(s), (fmt, c["name"], s.dtype)

t = pq.read_table(f"{d}/rows.parquet")
meta = {k.decode(): v.decode() for k, v in (t.schema.metadata or {}).items()}
assert meta.get("mkb.export_schema_version") == sys.argv[4], meta
pa_types = {"string": "string", "int32": "int32", "int64": "int64", "float64": "double", "bool": "bool"}
for c in expected:
    f = t.schema.field(c["name"])
    assert str(f.type) == pa_types[c["ty"]], (c["name"], str(f.type))
    assert f.nullable == c["nullable"] or c["nullable"], (c["name"], f.nullable)

pq_df = pd.read_parquet(f"{d}/rows.parquet")
check_pandas(pq_df, "parquet")
check_pandas(pd.read_csv(f"{d}/rows.csv"), "csv")
check_pandas(pd.read_json(f"{d}/rows.jsonl", lines=True), "jsonl")

# Same values through every format (floats to 1e-12 relative).
csv_df = pd.read_csv(f"{d}/rows.csv")
for col in ["score", "runtime_us", "wall_s", "input_tokens", "run_index"]:
    a, b = pq_df[col], csv_df[col]
    assert ((a - b).abs() <= 1e-12 * a.abs().fillna(0) + 1e-12).fillna(True).all() or (a.isna() == b.isna()).all(), col
assert (pq_df["model"] == csv_df["model"]).all()
assert (pq_df["correct"] == csv_df["correct"]).all()
assert pq_df["verdict"].isna().sum() == csv_df["verdict"].isna().sum()

# JSONL keys in the schema's order on every line (read with the json module: polars' ndjson
# inference does not keep key order beyond 32 keys, so its column order is checked as a set).
import json
with open(f"{d}/rows.jsonl") as fh:
    for line in fh:
        assert list(json.loads(line).keys()) == names, list(json.loads(line).keys())
for fmt, df in [("parquet", pl.read_parquet(f"{d}/rows.parquet")), ("csv", pl.read_csv(f"{d}/rows.csv", infer_schema_length=None)), ("jsonl", pl.read_ndjson(f"{d}/rows.jsonl", infer_schema_length=None))]:
    if fmt == "jsonl":
        assert sorted(df.columns) == sorted(names), (fmt, df.columns)
        df = df.select(names)
    assert df.columns == names, (fmt, df.columns)
    assert df.height == n_rows, (fmt, df.height)
    assert df["score"].dtype == pl.Float64, (fmt, df["score"].dtype)
    assert df["correct"].dtype == pl.Boolean, (fmt, df["correct"].dtype)
    assert df["skill_tokens"].dtype == pl.Int64, (fmt, df["skill_tokens"].dtype)
    assert df["runtime_us"].dtype == pl.Float64, (fmt, df["runtime_us"].dtype)
pl_df = pl.read_parquet(f"{d}/rows.parquet")
assert pl_df["run_index"].dtype == pl.Int32 and pl_df["input_tokens"].dtype == pl.Int64
assert pl_df["score"].sum() == pl.read_csv(f"{d}/rows.csv")["score"].sum() or abs(pl_df["score"].sum() - pl.read_csv(f"{d}/rows.csv")["score"].sum()) < 1e-6
print("ok", n_rows, "rows", len(names), "columns")
"#;

#[test]
fn exports_read_back_in_pandas_and_polars() {
    let Ok(python) = std::env::var("MKB_EXPORT_PYTHON") else {
        // CI sets MKB_REQUIRE_ALL: there missing readers are a failure, not a skip.
        assert!(
            std::env::var_os("MKB_REQUIRE_ALL").is_none(),
            "MKB_REQUIRE_ALL is set but MKB_EXPORT_PYTHON is not"
        );
        eprintln!("skipped: set MKB_EXPORT_PYTHON to a Python with pandas, pyarrow and polars (scripts/export-check.sh)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rows = simulate(
        &SimConfig {
            problems: 18,
            runs: 2,
            ..SimConfig::example()
        },
        4,
    );
    // Exercise escaping and nulls in strings.
    rows[0].kernel_path = Some("attempts/a,b \"q\"/kernel.py".into());
    rows[1].skill_flags = vec!["target_dsl_code".into(), "truncated".into()];
    for (f, name) in [
        (ExportFormat::Parquet, "rows.parquet"),
        (ExportFormat::Csv, "rows.csv"),
        (ExportFormat::Jsonl, "rows.jsonl"),
    ] {
        export(&rows, f, &dir.path().join(name)).unwrap();
    }
    let schema = serde_json::to_string(EXPORT_COLUMNS).unwrap();
    let out = Command::new(&python)
        .arg("-c")
        .arg(CHECK)
        .arg(dir.path())
        .arg(&schema)
        .arg(rows.len().to_string())
        .arg(mkb_analysis::export::EXPORT_SCHEMA_VERSION.to_string())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "python check failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.starts_with("ok"), "{stdout}");
    eprintln!("{stdout}");
}
