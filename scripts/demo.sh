#!/usr/bin/env bash
# The main job on a fresh machine, no GPU or API key needed: set up the Python side, build mkb,
# list the problems, run the replay experiment end to end through the real evaluator (compile-
# only without a GPU; it says what it could not do), then analyze it and write its HTML report.
# Re-running resumes the same run; delete runs/replay-demo to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh
cargo build --release -q -p mkb-cli
MKB="${CARGO_TARGET_DIR:-target}/release/mkb"
$MKB problems list
set +e
$MKB run examples/replay.toml
rc=$?
set -e
if [ $rc -ne 0 ] && [ $rc -ne 4 ]; then exit $rc; fi
$MKB analyze runs/replay-demo
$MKB report runs/replay-demo -o runs/replay-demo/report.html
echo "report: runs/replay-demo/report.html"
