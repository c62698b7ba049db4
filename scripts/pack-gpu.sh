#!/usr/bin/env bash
# Prepare what a GPU call carries: the DSL bundles (../shared/gpu/pack-dsl-bundles, once) and a
# stripped, xz-compressed release build of `mkb` in .gpu/mkb.xz (the GPU machine has no Rust).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -s .gpu/cute/bundle.tar.xz ] && [ -s .gpu/tirx/bundle.tar.xz ] || ../shared/gpu/pack-dsl-bundles .gpu
cargo build --release -p mkb-cli
mkdir -p .gpu
strip -o .gpu/mkb target/release/mkb
xz -9 -T1 -c .gpu/mkb > .gpu/mkb.xz.part && mv .gpu/mkb.xz.part .gpu/mkb.xz
rm -f .gpu/mkb
ls -la .gpu/mkb.xz
