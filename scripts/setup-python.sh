#!/usr/bin/env bash
# Create .venv (Python 3.11+) with the pinned CPU environment of python/requirements-cpu.txt
# and the mkb_eval package installed in editable mode. Idempotent: a venv whose requirements
# stamp matches is kept as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum python/requirements-cpu.txt python/pyproject.toml | sha256sum | cut -d' ' -f1)
if [[ -x .venv/bin/python && -f $stamp && "$(cat $stamp)" == "$want" ]]; then
  echo "setup-python: .venv is up to date"
  exit 0
fi
"$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r python/requirements-cpu.txt
.venv/bin/python -m pip install -q --no-deps -e python
echo "$want" > "$stamp"
echo "setup-python: .venv ready ($(.venv/bin/python --version))"
