#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the repository root, with ONE DSL bundle
# carried in .gpu/<dsl>/ and mkb in .gpu/mkb.xz (scripts/pack-gpu.sh). A bundle unpacked by an
# earlier call on the same (still warm) machine is used too, so both DSLs can be available.
# Writes evidence, logs and the replay run's folder (as a tarball) to $OUT.
#   scripts/h200-job.sh STEP...
#   steps: solutions-<dsl|all> (problems: $SOLUTIONS_PROBLEMS)  redteam-<dsl>  pyredteam-<dsl>  throughput-<dsl>  tune  adopt  spinprobe  sandbox  examples  replay
#          copyceiling
#          validate-gpu[-<problems>]
#   (<dsl>: cute or tirx)
#   copyceiling: torch's copy / read / write times at each problem's byte count ($COPY_PROBLEMS: ids or
#   family letters, default A B; $COPY_SOLUTIONS: `mkb solutions` JSONs whose expert times are put
#   beside them), python -m mkb_eval.copyceiling; output $OUT/${COPY_NAME:-copyceiling}.{json,md}
#   ncu: Nsight Compute counters of one expert (or variant) beside torch's copy and sum of the same
#   byte count (python -m mkb_eval.ncuprobe): $NCU_PROBLEM (F08), $NCU_DSL (cute), $NCU_FILE (a
#   variant file, optional), $NCU_METRICS (default: DRAM/L2/L1 bytes, throughputs, issue, stalls);
#   output $OUT/${NCU_NAME:-ncu}.csv (one row per kernel and metric) and .txt.
#   flushprobe: the timed time of each expert ($FLUSH_DSL, default cute) of $FLUSH_PROBLEMS (default
#   F08 C10 B09 A01) and of torch's read and copy of the same bytes under each L2 flush mode
#   (python -m mkb_eval.flushprobe); output $OUT/flushprobe.{json,txt}.
#   spinprobe: $SPIN_PROBLEMS, $SPIN_ARGS (e.g. --solutions tirx: the expert kernels), output name $SPIN_NAME
#   validate-gpu[-<problems>]: `mkb problems validate --device cuda` over all problems (or the
#   comma-separated ids / family letters, e.g. validate-gpu-A,C01): the validation checks at the
#   check and benchmark shapes on the GPU, every eager formulation, torch.compile and the floor
#   timed by the judge's baseline code, the ideal time; $OUT/<step>.json (bench-ready) and .md.
#   throughput-<dsl>[-j<N>]: N judges (default 1) sharing the GPU, the three experts evaluated
#   $THROUGHPUT_REPEAT (10) times each as a queue (full mode): median eval seconds, evaluations
#   per GPU-hour, runtime CV per expert, median phases. $THROUGHPUT_ARGS: more arguments of
#   mkb_eval.throughput (e.g. --seed N --problems C01 D01).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/job.log") 2>&1
for d in cute tirx; do
  if [ -f ".gpu/$d/activate.sh" ]; then source ".gpu/$d/activate.sh" || echo "could not unpack $d"; fi
done
# The runners' OS sandbox reads the bundles as an unprivileged uid (bundles packed before this
# rule have a 0700 top folder).
chmod -R a+rX /tmp/dsl-* 2>/dev/null
[ -f /tmp/dsl-cute/.ok ] && export PYTHONPATH=/tmp/dsl-cute:/tmp/dsl-cute/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}
[ -f /tmp/dsl-tirx/.ok ] && export PYTHONPATH=/tmp/dsl-tirx:${PYTHONPATH:-}
export CUTE_DSL_ARCH=sm_90a MKB_PYTHON=${MKB_PYTHON:-python3}
# bubblewrap for the runners' OS sandbox (docs/threat-model.md): the machine has no network, so the
# Debian .deb is carried in .gpu/bwrap/ (apt-get download bubblewrap) and unpacked here.
if [ -z "${MKB_BWRAP:-}" ] && ! command -v bwrap >/dev/null; then
  deb=$(ls .gpu/bwrap/*.deb 2>/dev/null | head -1)
  if [ -n "$deb" ]; then
    rm -rf /tmp/bwrap-deb && dpkg -x "$deb" /tmp/bwrap-deb && export MKB_BWRAP=/tmp/bwrap-deb/usr/bin/bwrap
    chmod 0755 /tmp/bwrap-deb /tmp/bwrap-deb/usr /tmp/bwrap-deb/usr/bin 2>/dev/null
  fi
fi
echo "== bwrap: ${MKB_BWRAP:-$(command -v bwrap || echo MISSING)} $(${MKB_BWRAP:-bwrap} --version 2>&1 | head -1)"
if [ -f .gpu/mkb.xz ]; then xz -dc .gpu/mkb.xz > /tmp/mkb && chmod +x /tmp/mkb; fi
MKB=/tmp/mkb
# python -m mkb_eval.{redteam,throughput,selfcheck} ask mkb for the problem specs and the red-team
# cases (python/mkb_eval/bundle.py): problem.toml and the manifest are parsed by mkb only.
export MKB_BIN=$MKB
LOGS=/tmp/mkb-logs; mkdir -p $LOGS
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1) x$(nvidia-smi -L | wc -l); DSL bundles: $(ls -d /tmp/dsl-* 2>/dev/null | tr '\n' ' ')"
STEP_TIMEOUT=${STEP_TIMEOUT:-420}
for step in "$@"; do
  echo "== step $step ($(date -u +%T))"
  case $step in
    solutions-*)
      # solutions-all: both DSLs in one mkb call (the other bundle unpacked by an earlier call)
      d=${step#solutions-}; dsl=(--dsl "$d"); [ "$d" = all ] && dsl=()
      # $SOLUTIONS_PROBLEMS: ids or family letters (default: every problem with solutions)
      timeout $STEP_TIMEOUT $MKB solutions "${dsl[@]}" ${SOLUTIONS_PROBLEMS:-} --mode full --gpus auto --cpu-workers 4 \
        --log-dir $LOGS/$step --evidence-dir "$OUT" --evidence-name "solutions-$d" ;;
    redteam-*)
      d=${step#redteam-}
      # $REDTEAM_ARGS: more arguments (e.g. --manifest <a subset of the manifest>)
      timeout $STEP_TIMEOUT $MKB redteam --dsl "$d" ${REDTEAM_ARGS:-} --mode full --gpus auto --cpu-workers 4 --log-dir $LOGS/$step \
        --evidence-dir "$OUT" --evidence-name "redteam-$d" ;;
    pyredteam-*)
      # the same red-team run through the Python judge client (the cases and specs from $MKB_BIN)
      d=${step#pyredteam-}
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.redteam --dsl "$d" --out "$OUT/redteam-$d.json" ;;
    throughput-*)
      # throughput-<dsl> or throughput-<dsl>-j<N>: N judges sharing the GPU (default 1)
      spec=${step#throughput-}; d=${spec%%-j*}; j=1; [ "$spec" != "$d" ] && j=${spec##*-j}
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.throughput --dsl "$d" --judges "$j" \
        --repeat ${THROUGHPUT_REPEAT:-10} ${THROUGHPUT_ARGS:-} --out "$OUT/$step.json" > "$OUT/$step.txt" 2>&1; tail -25 "$OUT/$step.txt" ;;
    copyceiling)
      sol=(); for f in ${COPY_SOLUTIONS:-}; do sol+=(--solutions "$f"); done
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.copyceiling ${COPY_PROBLEMS:-A B} "${sol[@]}" \
        --out "$OUT/${COPY_NAME:-copyceiling}.json"; cat "$OUT/${COPY_NAME:-copyceiling}.md" ;;
    ncu)
      ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
      nm=${NCU_METRICS:-gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sector_op_read_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__warps_active.avg.per_cycle_active}
      nf=(); [ -n "${NCU_FILE:-}" ] && nf=(--file "$NCU_FILE")
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT "$ncu_bin" --clock-control none --nvtx --nvtx-include probe/ --metrics "$nm" --csv \
        python3 -m mkb_eval.ncuprobe "${NCU_PROBLEM:-F08}" --dsl "${NCU_DSL:-cute}" "${nf[@]}" \
        > "$OUT/${NCU_NAME:-ncu}.csv" 2> "$OUT/${NCU_NAME:-ncu}.txt"
      tail -5 "$OUT/${NCU_NAME:-ncu}.txt"; wc -l "$OUT/${NCU_NAME:-ncu}.csv" ;;
    flushprobe)
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.flushprobe ${FLUSH_PROBLEMS:-F08 C10 B09 A01} \
        --dsl "${FLUSH_DSL:-cute}" --out "$OUT/flushprobe.json" > "$OUT/flushprobe.txt" 2>&1
      cat "$OUT/flushprobe.txt" ;;
    spinprobe)
      # the wake spin against each baseline's host enqueue time ($SPIN_PROBLEMS, python -m mkb_eval.spinprobe)
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.spinprobe ${SPIN_PROBLEMS:-A03 A07 A08 B05 C12 D10 F09} \
        ${SPIN_ARGS:-} --out "$OUT/${SPIN_NAME:-spinprobe}.json" > "$OUT/${SPIN_NAME:-spinprobe}.txt" 2>&1
      tail -40 "$OUT/${SPIN_NAME:-spinprobe}.txt" ;;
    tune)
      # Tuning variants (untracked files tune/<problem folder>/<dsl>/<name>.py) timed in one judge,
      # bench mode (python -m mkb_eval.selfcheck --variants).
      # $TUNE_DIR (default tune) holds them; $TUNE_MODE (default bench); output $OUT/$TUNE_NAME.{json,txt}
      # and a copy of the JSON in /tmp/mkb-tune/ (for `adopt` in a later call on the same machine).
      # $TUNE_EXPERTS=1 also times each varied expert in the same run (label `expert`).
      tn=${TUNE_NAME:-tune}; ex=(); [ "${TUNE_EXPERTS:-0}" = 1 ] && ex=(--with-experts)
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.selfcheck --variants "${TUNE_DIR:-tune}" \
        "${ex[@]}" --only tune/ --no-fixtures --mode "${TUNE_MODE:-bench}" --out "$OUT/$tn.json" > "$OUT/$tn.txt" 2>&1
      tail -40 "$OUT/$tn.txt"; mkdir -p /tmp/mkb-tune && cp "$OUT/$tn.json" /tmp/mkb-tune/ 2>/dev/null ;;
      # (each target's median is on its progress line and in tune.json as soon as it is measured)
    adopt)
      # python -m mkb_eval.adopt over the tuning runs of this machine ($ADOPT_TUNE: names, default
      # $TUNE_NAME; read from /tmp/mkb-tune/) with $ADOPT_REFERENCE (`mkb solutions` JSONs): the winners
      # are copied over solution.py here (tracked files are re-sent with every call: run it in each call
      # that needs them); $OUT/adopted-<name>.json.
      ref=(); for f in ${ADOPT_REFERENCE:-}; do ref+=(--reference "$f"); done
      tj=(); for n in ${ADOPT_TUNE:-${TUNE_NAME:-tune}}; do tj+=("/tmp/mkb-tune/$n.json"); done
      PYTHONPATH=python:${PYTHONPATH:-} python3 -m mkb_eval.adopt "${tj[@]}" "${ref[@]}" --variants "${TUNE_DIR:-tune}" \
        --apply --out "$OUT/adopted-${TUNE_NAME:-tune}.json" ;;
    sandbox)
      # The OS sandbox on the GPU: IPC buffers work for a correct expert under it (full mode),
      # every escape case of tests/adversarial is blocked in full mode.
      PYTHONPATH=python:${PYTHONPATH:-} timeout $STEP_TIMEOUT python3 -m mkb_eval.selfcheck --sandbox --out "$OUT/sandbox-selfcheck.json" ;;
    examples)
      timeout $STEP_TIMEOUT python3 docs/dsl/examples/check_on_gpu.py > "$OUT/brief-examples.txt" 2>&1; tail -40 "$OUT/brief-examples.txt" ;;
    replay)
      mkdir -p /tmp/runs
      [ -f .gpu/replay-run.tar.gz ] && tar -C /tmp/runs -xzf .gpu/replay-run.tar.gz
      timeout $STEP_TIMEOUT $MKB run examples/replay.toml --runs-dir /tmp/runs --no-progress --cpu-workers 8
      $MKB status /tmp/runs/replay-demo
      tar -C /tmp/runs -czf "$OUT/replay-run.tar.gz" replay-demo ;;
    validate-gpu|validate-gpu-*)
      sel=""; [ "$step" != validate-gpu ] && sel=$(tr ',' ' ' <<<"${step#validate-gpu-}")
      name=$(tr ',' '_' <<<"$step")
      timeout $STEP_TIMEOUT $MKB problems validate --device cuda $sel --json "$OUT/$name.json" \
        --markdown "$OUT/$name.md" > "$OUT/$name.txt" 2>&1
      rc=$?; grep -v " pass " "$OUT/$name.txt" | tail -40; (exit $rc) ;;
    *) echo "unknown step $step" ;;
  esac
  echo "== step $step ended rc=$? ($(date -u +%T))"
done
tar -C $LOGS -czf "$OUT/logs.tgz" . 2>/dev/null
echo "== done $(date -u +%T)"
