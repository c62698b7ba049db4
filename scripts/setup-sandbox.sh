#!/usr/bin/env bash
# Make sure bubblewrap (`bwrap`), the OS sandbox every runner of candidate code starts in
# (docs/threat-model.md), is installed: as root with apt-get, install Debian's package; otherwise
# say what to do. MKB_BWRAP may name another bwrap binary.
set -euo pipefail
if [ -n "${MKB_BWRAP:-}" ] && [ -x "${MKB_BWRAP}" ]; then exit 0; fi
if command -v bwrap >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup-sandbox: installing bubblewrap (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq bubblewrap >/dev/null
  command -v bwrap >/dev/null && exit 0
fi
echo "setup-sandbox: bubblewrap (bwrap) is missing; install it (e.g. 'sudo apt-get install bubblewrap')" \
     "or set MKB_BWRAP. mkb refuses to run candidate code without it unless --unsafe-no-sandbox is given." >&2
exit 1
