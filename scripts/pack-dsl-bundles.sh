#!/usr/bin/env bash
# Pack the two kernel DSLs for a GPU machine that has no network: one bundle per DSL, each an xz
# archive of the DSL's unpacked wheels plus an activate.sh, small enough (< 64 MiB) for one call.
# Target machine: x86-64 Linux, CPython 3.12, torch built for CUDA 13 (it brings cuda-bindings),
# driver >= 580, xz.
#
#   scripts/pack-dsl-bundles.sh [--dry-run] [OUT_DIR]     # OUT_DIR defaults to .gpu (git-ignored)
#
# Produces OUT_DIR/cute/{bundle.tar.xz,activate.sh}: nvidia-cutlass-dsl 4.8.1 with its base, core
# and cu13 libraries, and apache-tvm-ffi (the CuTe DSL's --enable-tvm-ffi calling path); and
# OUT_DIR/tirx/{bundle.tar.xz,activate.sh}: apache-tvm-tirx 0.1.0a4, apache-tvm-ffi, and
# apache-tvm-ffi-orcjit (about 33 MiB). A bundle already present is kept. Wheels are downloaded
# once into $MKB_WHEEL_CACHE (default ~/.cache/mkb-gpu-wheels). Compressing takes minutes.
# On the GPU machine: `source .gpu/cute/activate.sh` unpacks the bundle once into /tmp/dsl-cute
# (a finished unpack leaves /tmp/dsl-cute/.ok, which scripts/h200-job.sh also looks for) and puts
# it on PYTHONPATH.
set -euo pipefail

DRY=0
if [ "${1:-}" = "--dry-run" ]; then DRY=1; shift; fi
OUT=${1:-.gpu}
CACHE=${MKB_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mkb-gpu-wheels}
PY=${PYTHON:-python3}
MAX_MIB=64

TVM_FFI=apache-tvm-ffi==0.1.15.post2
CUTE_WHEELS=(nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
             nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 "$TVM_FFI")
TIRX_WHEELS=(apache-tvm-tirx==0.1.0a4 "$TVM_FFI" apache-tvm-ffi-orcjit==0.1.3)

# Wheels for the GPU machine, whatever this machine runs: binary only, CPython 3.12, manylinux x86-64.
TARGET=(--only-binary=:all: --implementation cp --python-version 3.12 --abi cp312 --abi abi3 --abi none)
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014; do
  TARGET+=(--platform "${tag}_x86_64")
done

# Write the activate.sh of bundle $1 into folder $2.
write_activate() {
  local name=$1 dir=$2
  cat > "$dir/activate.sh" <<EOF
# Source on the GPU machine: unpacks the $name bundle beside this file into /tmp/dsl-$name (once)
# and puts it on PYTHONPATH; CuTe DSL compiles for sm_90a unless CUTE_DSL_ARCH says otherwise.
_mkb_dir=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
if [ ! -f /tmp/dsl-$name/.ok ]; then
  mkdir -p /tmp/dsl-$name || return 1
  tar -xJf "\$_mkb_dir/bundle.tar.xz" -C /tmp/dsl-$name || return 1
  # readable by the runners' unprivileged sandbox uid (the archive's top folder may be 0700)
  chmod -R a+rX /tmp/dsl-$name
  touch /tmp/dsl-$name/.ok
fi
export PYTHONPATH=/tmp/dsl-$name:/tmp/dsl-$name/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}
export CUTE_DSL_ARCH=\${CUTE_DSL_ARCH:-sm_90a}
unset _mkb_dir
EOF
}

# Build bundle $1 from the wheels that follow.
bundle() {
  local name=$1; shift
  local dir="$OUT/$name" wheels="$CACHE/$name"
  if [ -s "$dir/bundle.tar.xz" ] && [ -s "$dir/activate.sh" ]; then
    echo "$dir: present, kept"; return
  fi
  if [ "$DRY" = 1 ]; then
    echo "$dir: would download into $wheels: $*"
    echo "$dir: would unpack them, compress with xz (x86 filter, preset 9e) to bundle.tar.xz (< $MAX_MIB MiB) and write activate.sh"
    return
  fi
  mkdir -p "$dir" "$wheels"
  echo "$dir: downloading $*"
  "$PY" -m pip download --quiet --no-deps "${TARGET[@]}" --dest "$wheels" "$@"
  local tree; tree=$(mktemp -d)
  local w
  for w in "$wheels"/*.whl; do "$PY" -m zipfile -e "$w" "$tree"; done
  chmod -R a+rX "$tree"  # mktemp -d is 0700: the sandboxed runner (another uid) must read the bundle
  echo "$dir: compressing $(du -sh "$tree" | cut -f1) of unpacked wheels (several minutes)"
  tar -C "$tree" -cf - . | xz --x86 --lzma2=preset=9e,dict=192MiB -T1 > "$dir/bundle.tar.xz.tmp"
  mv "$dir/bundle.tar.xz.tmp" "$dir/bundle.tar.xz"
  rm -rf "$tree"
  write_activate "$name" "$dir"
  local mib=$(( $(stat -c %s "$dir/bundle.tar.xz") / 1048576 ))
  echo "$dir: bundle.tar.xz is $mib MiB"
  if [ "$mib" -ge "$MAX_MIB" ]; then
    echo "error: $dir/bundle.tar.xz is $mib MiB, over the $MAX_MIB MiB a call may carry" >&2; exit 1
  elif [ "$mib" -ge $(( MAX_MIB - 2 )) ]; then
    echo "warning: $dir/bundle.tar.xz is $mib MiB, close to the $MAX_MIB MiB limit" >&2
  fi
}

bundle cute "${CUTE_WHEELS[@]}"
bundle tirx "${TIRX_WHEELS[@]}"
