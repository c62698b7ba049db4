#!/usr/bin/env bash
# The test suite (CI runs it through .ci/run): Rust formatting, crate layering, lints and tests
# (stub-server provider tests, kill-and-resume, API-key secrecy, simulation coverage, export
# read-back in pandas and polars, the browser test of the report when MKB_CHROMIUM or chromium is
# present); Python lint and tests (static check, correctness logic, sandbox, protocol, red-team
# cases that need no GPU, brief examples, replay recordings, the Ray backend on a local Ray head);
# compile-only checks of every expert solution for sm_90a in both DSLs; the red team's no-GPU
# cases; the replay experiment end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh
scripts/setup-sandbox.sh
export MKB_PYTHON=$PWD/.venv/bin/python
if [ -z "${MKB_CHROMIUM:-}" ] && command -v chromium >/dev/null 2>&1; then export MKB_CHROMIUM=$(command -v chromium); fi
step() { echo; echo "== $* ($(date -u +%T))"; }
step "export readers (pandas, pyarrow, polars) and scipy for the export and recomputation tests"
# scipy: the independent recomputation of the analysis headline (crates/mkb-analysis/tests).
# polars 2: polars 1.17 cannot read the footer the parquet crate (60) writes; pyarrow 18 can.
EXPORT_VENV=.cache/export-venv-2
if ! $EXPORT_VENV/bin/python -c "import pandas, pyarrow, polars, scipy" 2>/dev/null; then
  python3 -m venv $EXPORT_VENV
  $EXPORT_VENV/bin/pip install -q numpy==2.4.6 pandas==2.2.3 pyarrow==18.1.0 polars==2.1.0 scipy==1.16.3
fi
export MKB_EXPORT_PYTHON=$PWD/$EXPORT_VENV/bin/python
step "ray into .venv for the Ray backend's tests (python/tests/test_ray_bridge.py, docs/cluster.md)"
# Pinned, from PyPI: about 40 s and 285 MB with its dependencies, measured on the 2-core machine.
RAY_VERSION=2.60.0
if ! .venv/bin/python -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  .venv/bin/python -m pip install -q "ray==$RAY_VERSION"
fi
step "cargo fmt --check";   cargo fmt --all -- --check
step "crate layering: the store and the analysis pull in no runner, agent, evaluator, tokio, reqwest"
for crate in mkb-store mkb-analysis; do
  deps=$(cargo tree -p "$crate" -e normal --prefix none)
  bad=$(awk '$1 ~ /^(reqwest|tokio|mkb-run|mkb-agent|mkb-eval)$/ {print $1}' <<<"$deps" | sort -u | tr '\n' ' ')
  if [ -n "$bad" ]; then echo "$crate depends on: $bad(docs/design.md, Components)" >&2; exit 1; fi
done
step "cargo clippy";        cargo clippy --workspace --all-targets --release -q -- -D warnings
step "cargo test";          cargo test --workspace --release -q
step "cargo build mkb";     cargo build --release -q -p mkb-cli
MKB="${CARGO_TARGET_DIR:-target}/release/mkb"
MKB_BIN=$(realpath "$MKB"); export MKB_BIN  # the end-to-end tests of python/tests run this mkb
step "ruff";                .venv/bin/ruff check python tests examples docs/dsl/examples
step "pytest";              .venv/bin/python -m pytest python/tests -q
step "expert solutions compile for sm_90a"; $MKB solutions --mode compile --gpus none
step "red team (no-GPU cases)";            $MKB redteam --cpu-only --gpus none
tmp=$(mktemp -d)
step "replay experiment";   $MKB run examples/replay.toml --runs-dir "$tmp" --gpus none --no-progress
$MKB status "$tmp/replay-demo" --attempts
$MKB analyze "$tmp/replay-demo" > /dev/null
$MKB report "$tmp/replay-demo" -o "$tmp/report.html"
rm -rf "$tmp"
step "problems validate (CPU: static checks, reference, [validate] formulations, input influence)"; $MKB problems validate --failures-only
step "all tests passed"
