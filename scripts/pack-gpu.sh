#!/usr/bin/env bash
# Prepare what a GPU call carries in .gpu/ (the GPU machine has no network and no Rust):
#   .gpu/{cute,tirx}/   the DSL bundles (scripts/pack-dsl-bundles.sh; packed once, minutes of CPU)
#   .gpu/bwrap/         the bubblewrap .deb (`apt-get download bubblewrap`) for the runner sandbox;
#                       it comes from this machine's distribution and needs only libc6 >= 2.34,
#                       libcap2 and libselinux1 on the GPU machine
#   .gpu/mkb.xz         a stripped, xz-compressed release build of `mkb`
#   scripts/pack-gpu.sh [--dry-run]     # --dry-run: say what would be done, change nothing
set -euo pipefail
cd "$(dirname "$0")/.."
DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; fi
MKB="${CARGO_TARGET_DIR:-target}/release/mkb"

if [ "$DRY" = 1 ]; then
  scripts/pack-dsl-bundles.sh --dry-run .gpu
  if ls .gpu/bwrap/bubblewrap_*.deb >/dev/null 2>&1; then echo ".gpu/bwrap: present, kept"
  else echo ".gpu/bwrap: would run 'apt-get download bubblewrap' there"; fi
  echo ".gpu/mkb.xz: would build $MKB (cargo build --release -p mkb-cli), strip it and compress it with xz"
  exit 0
fi

scripts/pack-dsl-bundles.sh .gpu

mkdir -p .gpu/bwrap
if ! ls .gpu/bwrap/bubblewrap_*.deb >/dev/null 2>&1; then
  (cd .gpu/bwrap && apt-get download bubblewrap)
fi
ls -la .gpu/bwrap

cargo build --release -p mkb-cli
strip -o .gpu/mkb "$MKB"
xz -9 -T1 -c .gpu/mkb > .gpu/mkb.xz.part && mv .gpu/mkb.xz.part .gpu/mkb.xz
rm -f .gpu/mkb
ls -la .gpu/mkb.xz
