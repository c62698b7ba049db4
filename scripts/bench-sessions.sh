#!/usr/bin/env bash
# The sessions benchmark (not a test): `mkb run` with many concurrent agent sessions against a
# stub OpenAI-compatible model server with realistic, randomized latency (lognormal, median 5 s,
# 2-20 s per call, the body streamed in chunks) and fake judges whose evaluations take 2-8 s and
# never use a GPU. It measures mkb itself: CPU and memory of the `mkb` process, session
# throughput, and how the evaluator queue was used (per judge, the time it sat idle while a
# request waited; queue waits). docs/sessions-benchmark.md says what is measured and how to read it.
#
#   scripts/bench-sessions.sh [--sessions N] [--out DIR] [--keep-work]
#
# --sessions N   concurrent sessions (default 64; even): N/2 runs of A01 in both directions,
#                so each phase (solo, then skill-conditioned) starts N sessions at once.
# --out DIR      where results go (default bench/cpu/<UTC date>-sessions).
# --keep-work    keep the work folder (run store, logs) and print its path.
# Needs target/release/mkb (built when missing) and Python 3 (the stub, the fake judges and the
# report use only the standard library; the run's reference.py check uses $MKB_PYTHON or .venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/scripts/bench_sessions"
SESSIONS=64
OUT=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sessions) SESSIONS="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --keep-work) KEEP=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ $((SESSIONS % 2)) -ne 0 ] || [ "$SESSIONS" -lt 2 ]; then
  echo "--sessions must be an even number >= 2" >&2; exit 2
fi
OUT="${OUT:-$ROOT/bench/cpu/$(date -u +%F)-sessions}"
MKB="$ROOT/target/release/mkb"
REAL_PY="${MKB_PYTHON:-$ROOT/.venv/bin/python}"
if [ ! -x "$MKB" ]; then
  (cd "$ROOT" && cargo build --release -p mkb-cli)
fi
[ -x "$REAL_PY" ] || { echo "no Python with torch at $REAL_PY (scripts/setup-python.sh, or set MKB_PYTHON)" >&2; exit 2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/mkb-bench-sessions.XXXXXX")"
STUB_PID=""
MON_PID=""
cleanup() {
  [ -n "$STUB_PID" ] && kill "$STUB_PID" 2>/dev/null || true
  [ -n "$MON_PID" ] && kill "$MON_PID" 2>/dev/null || true
  if [ "$KEEP" = 1 ]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# Its own small problem root: A01, the DSL descriptors and the briefs as committed (the
# working tree's problems/ may hold work in progress that the registry refuses); a copy of the
# working tree where this is not a git checkout.
mkdir -p "$WORK/root"
if git -C "$ROOT" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  git -C "$ROOT" archive HEAD problems/A/A01_bias_gelu dsls docs/dsl | tar -x -C "$WORK/root"
else
  mkdir -p "$WORK/root/problems/A" "$WORK/root/docs"
  cp -r "$ROOT/problems/A/A01_bias_gelu" "$WORK/root/problems/A/"
  cp -r "$ROOT/dsls" "$WORK/root/"
  cp -r "$ROOT/docs/dsl" "$WORK/root/docs/"
fi
ln -s "$ROOT/python" "$WORK/root/python"

# `python -m mkb_eval.judge` runs the fake judge; anything else (the reference.py check) the
# real interpreter.
cat > "$WORK/python" <<EOF
#!/bin/sh
if [ "\$1" = "-m" ]; then exec python3 "$TOOLS/fake_judge.py"; fi
exec "$REAL_PY" "\$@"
EOF
chmod +x "$WORK/python"

python3 "$TOOLS/stub_llm.py" --port-file "$WORK/port" --log "$WORK/llm-calls.jsonl" &
STUB_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT="$(cat "$WORK/port")"

CFG="$WORK/sessions.toml"
cat > "$CFG" <<EOF
# The sessions benchmark's experiment (scripts/bench-sessions.sh).
name = "sessions"
problems = ["A01"]
runs = $((SESSIONS / 2))
concurrency = $SESSIONS
[budget]
max_turns = 12
max_output_tokens = 200000
max_tool_evals = 6
max_wall_s = 600
[controls]
placebo = false
repeat_solo = false
[eval]
# Four fake GPUs with two judges each (test, benchmark, final) and three GPU-less judges
# (compile): eleven fake judges, none touching a GPU.
gpus = "0,1,2,3"
judges_per_gpu = 2
cpu_workers = 3
final_mode = "full"
timing_sessions = 1
[[models]]
label = "stub"
[models.provider]
kind = "openai"
model = "stub-model"
base_url = "http://127.0.0.1:$PORT/v1"
request_timeout_s = 60
EOF

mem_line() { free -m | awk '/^Mem:/ {print "total " $2 " MiB, used " $3 " MiB, available " $7 " MiB"}'; }
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
DIRTY="$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo ", with uncommitted changes" || true)"
UPTIME_BEFORE="$(uptime)"
MEM_BEFORE="$(mem_line)"
echo "sessions benchmark: $SESSIONS sessions, work folder $WORK"
echo "load before: $UPTIME_BEFORE"

START="$(date +%s.%N)"
set +e
MKB_EVAL_BENCH_JUDGE_LOG="$WORK/judge-evals.jsonl" /usr/bin/time -v -o "$WORK/time-v.txt" \
  "$MKB" --root "$WORK/root" --python "$WORK/python" run "$CFG" --runs-dir "$WORK/runs" \
  --no-progress >"$WORK/mkb.out" 2>"$WORK/mkb.err" &
TIME_PID=$!
MKB_PID=""
for _ in $(seq 200); do
  MKB_PID="$(pgrep -P "$TIME_PID" | head -n1)"
  [ -n "$MKB_PID" ] && break
  sleep 0.05
done
[ -n "$MKB_PID" ] && { python3 "$TOOLS/procmon.py" "$MKB_PID" "$WORK/procmon.jsonl" & MON_PID=$!; }
wait "$TIME_PID"
CODE=$?
set -e
END="$(date +%s.%N)"
[ -n "$MON_PID" ] && wait "$MON_PID" 2>/dev/null || true
MON_PID=""
UPTIME_AFTER="$(uptime)"
echo "load after:  $UPTIME_AFTER"
echo "mkb run exited with $CODE"
tail -n 5 "$WORK/mkb.out" || true

python3 - "$WORK/facts.json" <<EOF
import json, sys
json.dump({
    "date_utc": "$(date -u +%FT%TZ)", "command": "scripts/bench-sessions.sh --sessions $SESSIONS",
    "commit": "$COMMIT$DIRTY", "nproc": $(nproc), "cpu": "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1)",
    "memory_before": "$MEM_BEFORE", "memory_after": "$(mem_line)",
    "uptime_before": "$UPTIME_BEFORE", "uptime_after": "$UPTIME_AFTER",
    "sessions": $SESSIONS, "mkb_start": $START, "mkb_end": $END, "exit_code": $CODE,
}, open(sys.argv[1], "w"), indent=2)
EOF

mkdir -p "$OUT"
python3 "$TOOLS/report.py" "$WORK" --run-dir "$WORK/runs/sessions" --out "$OUT/results.json" \
  | tee "$OUT/summary.md"
cp "$CFG" "$WORK/facts.json" "$OUT/"
# What is kept names the temporary work folder <work> and this checkout <repo>.
for f in mkb.out:mkb-stdout.txt mkb.err:mkb-stderr.txt time-v.txt:time-v.txt; do
  sed -e "s#$WORK#<work>#g" -e "s#$ROOT#<repo>#g" "$WORK/${f%%:*}" >"$OUT/${f##*:}"
done
for f in llm-calls judge-evals procmon; do
  [ -f "$WORK/$f.jsonl" ] && gzip -c "$WORK/$f.jsonl" >"$OUT/$f.jsonl.gz"
done
echo "results: $OUT"
exit "$CODE"
