#!/usr/bin/env bash
# The main command: MetaKernelBench end to end on any Linux machine, no API key needed.
#   1. sets up .venv and builds mkb (minutes the first time, seconds afterwards);
#   2. lists the problems;
#   3. runs the replay experiment on this machine: the whole protocol driven by recorded
#      conversations, through the real evaluator.
#        with a GPU:  examples/replay.toml (A01, C01, D01), fully evaluated -> runs/replay-demo;
#        without:     compile-only (no correctness or timing, so every score is 0). By default only
#                     A01 (runs/replay-quick: solo + distillation, conditioned and repeat solo in
#                     both directions; the placebo needs a second problem), about 3 minutes on
#                     2 cores; --full runs examples/replay.toml (about 12 minutes on 2 cores);
#   4. summarizes that run and writes its HTML report;
#   5. without a GPU: analyzes and reports the committed H200 run of the same experiment
#      (bench/h200/replay-demo, made by the same evaluator on an NVIDIA H200), so the lifts, CIs,
#      plots and the source table can be seen on this machine.
#   scripts/demo.sh [--full | --skip-replay]
# Re-running resumes the local run; delete its folder under runs/ to start over.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=quick
case "${1:-}" in
  "") ;;
  --full) MODE=full ;;
  --skip-replay) MODE=skip ;;
  *) echo "usage: scripts/demo.sh [--full | --skip-replay]" >&2; exit 2 ;;
esac

START=$SECONDS
STEP=0
clock() { local t=$((SECONDS - START)); printf '%d:%02d' $((t / 60)) $((t % 60)); }
step() { STEP=$((STEP + 1)); printf '\n==== [%d/5, %s] %s\n' "$STEP" "$(clock)" "$*"; }

# The test mkb's "auto" GPU selection makes: nvidia-smi lists a GPU and CUDA_VISIBLE_DEVICES
# does not hide them all.
has_gpu() {
  case "${CUDA_VISIBLE_DEVICES-unset}" in "" | -1) return 1 ;; esac
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}

# Print run $2's progress every 30 s while process $1 lives (mkb draws progress bars only on a
# terminal; this keeps a log or a pipe informed as well).
ticker() {
  local pid=$1 run=$2
  while sleep 30 && kill -0 "$pid" 2>/dev/null; do
    "$MKB" status "$run" 2>/dev/null | awk -v t="$(clock)" '
      $4 == "/" { done += $3; planned += $5 }
      /^final evaluations:/ { final = $3 " of " $5 }
      END { if (planned) printf "  [%s] attempts %d/%d done; final evaluations %s\n", t, done, planned, final }'
  done
}

# Run experiment config $1 (run folder $2), with progress; exit code 4 (units deferred, e.g. the
# test tools without a GPU) is expected, anything else stops the demo.
run_experiment() {
  local config=$1 run=$2 rc
  set +e
  if [ -t 2 ]; then
    "$MKB" run "$config"
    rc=$?
  else
    "$MKB" run "$config" --no-progress &
    local pid=$!
    ticker "$pid" "$run" &
    local tick=$!
    wait "$pid"
    rc=$?
    kill "$tick" 2>/dev/null
    wait "$tick" 2>/dev/null
  fi
  set -e
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then exit "$rc"; fi
}

# The one-problem variant of examples/replay.toml, written under runs/ (git-ignored).
write_quick_config() {
  mkdir -p runs
  sed -e 's/^name = "replay-demo"/name = "replay-quick"/' \
      -e 's/^problems = .*/problems = ["A01"]/' \
      -e 's/^placebo = true/placebo = false/' \
      -e 's|dir = "replay"|dir = "../examples/replay"|' \
      examples/replay.toml > runs/replay-quick.toml
  local n
  n=$(grep -cE '^name = "replay-quick"|^problems = \["A01"\]|^placebo = false|dir = "\.\./examples/replay"' runs/replay-quick.toml)
  if [ "$n" -ne 4 ]; then
    echo "error: examples/replay.toml changed shape; cannot derive runs/replay-quick.toml (use --full)" >&2
    exit 1
  fi
}

step "Python side (.venv) and the mkb binary"
scripts/setup-python.sh
scripts/setup-sandbox.sh
cargo build --release -q -p mkb-cli
MKB="${CARGO_TARGET_DIR:-target}/release/mkb"

step "The problems"
"$MKB" problems list

if has_gpu; then GPU=1; else GPU=0; fi
if [ "$GPU" = 1 ] && [ "$MODE" = quick ]; then MODE=full; fi
RUN=
case "$MODE" in
  skip)
    step "Replay experiment on this machine: skipped (--skip-replay)"
    step "Its summary: skipped" ;;
  full)
    RUN=runs/replay-demo
    if [ "$GPU" = 1 ]; then
      step "Replay experiment on this machine (A01, C01, D01), fully evaluated on its GPU -> $RUN"
    else
      step "Replay experiment on this machine (A01, C01, D01), compile-only: no GPU -> $RUN (about 12 minutes on 2 cores)"
    fi
    run_experiment examples/replay.toml "$RUN" ;;
  quick)
    RUN=runs/replay-quick
    step "Replay experiment on this machine, compile-only (no GPU), problem A01 only -> $RUN (about 3 minutes)"
    echo "Each kernel the recorded agents write is compiled for sm_90a on the CPU; nothing runs without a"
    echo "GPU, so there is no correctness or timing and every score is 0. Step 5 shows the H200 numbers."
    write_quick_config
    run_experiment runs/replay-quick.toml "$RUN" ;;
esac

if [ -n "$RUN" ]; then
  if [ "$GPU" = 1 ]; then
    step "Analysis of the run made on this machine ($RUN)"
    "$MKB" analyze "$RUN"
  else
    step "What the run made on this machine holds ($RUN; no scores without a GPU)"
    "$MKB" status "$RUN"
  fi
  "$MKB" report "$RUN" -o "$RUN/report.html"
fi

H200_REPORT=runs/h200-replay-demo/report.html
if [ "$GPU" = 0 ]; then
  step "THE COMMITTED H200 RUN (bench/h200/replay-demo): the same experiment, evaluated on an NVIDIA H200"
  echo "Not measured on this machine: these are the results the real evaluator stored on the H200"
  echo "(bench/h200/README.md lists the calls that made them). The agents' conversations are"
  echo "hand-written recordings, not a model: read the numbers as a demonstration of the analysis."
  echo
  "$MKB" analyze bench/h200/replay-demo
  mkdir -p "$(dirname "$H200_REPORT")"
  "$MKB" report bench/h200/replay-demo -o "$H200_REPORT"
else
  step "The committed H200 run: shown by 'mkb analyze bench/h200/replay-demo' (not needed on a GPU machine)"
fi

echo
echo "Done in $(clock)."
[ -z "$RUN" ] || echo "  report of the run made on this machine: $RUN/report.html"
[ "$GPU" = 1 ] || echo "  report of the committed H200 run:       $H200_REPORT (lifts, CIs, plots, source table)"
