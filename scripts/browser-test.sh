#!/usr/bin/env bash
# Headless-Chromium test of the HTML report (mkb-analysis): renders a simulated report, opens it
# in Chromium and fails on console messages or missing plots (crates/mkb-analysis/tests/browser.rs).
# Needs Debian's chromium package (apt-get install -y chromium); MKB_CHROMIUM may name the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${MKB_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$bin" ]; then
    echo "browser-test: chromium not found (apt-get install -y chromium, or set MKB_CHROMIUM)" >&2
    exit 2
fi
MKB_CHROMIUM="$bin" exec cargo test -p mkb-analysis --test browser -- --nocapture
