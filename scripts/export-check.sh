#!/usr/bin/env bash
# Checks that `mkb export` files (parquet, csv, jsonl) read back in pandas (pyarrow) and polars
# with the documented schema (crates/mkb-analysis/tests/export_python.rs). Makes a throw-away
# venv with pandas, pyarrow and polars unless MKB_EXPORT_PYTHON already names a Python that has
# them (set MKB_EXPORT_VENV to keep and reuse the venv between runs).
set -euo pipefail
cd "$(dirname "$0")/.."
py="${MKB_EXPORT_PYTHON:-}"
if [ -z "$py" ]; then
    venv="${MKB_EXPORT_VENV:-}"
    if [ -z "$venv" ]; then
        venv="$(mktemp -d)/venv"
        trap 'rm -rf "$(dirname "$venv")"' EXIT
    fi
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet pandas pyarrow polars
    fi
    py="$venv/bin/python"
fi
MKB_EXPORT_PYTHON="$py" cargo test -p mkb-analysis --test export_python -- --nocapture
