#!/usr/bin/env bash
# One GPU call for issues 13 and 16 (DEADLINE_S, default 540):
#   1. gather_probe folders .gprobe_ROBOT built here (`FLOATING=1 run.sh build .gprobe_g1
#      old=COMMIT new=$PWD`; the same for go2, and iiwa14; carry them): each probe at
#      B = 1,024, 16,384 and 65,536 (g1: not 65,536), and Nsight Compute on the entry
#      kernel (NCU_KERNEL, a regex; default idsva_so_gather_kernel) of each DIR/NAME of
#      NCU_PROBES (.gprobe_DIR/probe_NAME; default g1/old g1/new; DIR/NAME:REGEX picks that
#      entry's kernel) at NCU_BATCH (default 1,024), one after the other into ncu.txt, while
#      the runtime builds;
#   2. the gpu-tagged second-order and gradient-variant tests (pytest_so.txt; PYTEST_FILES
#      names others), in half the time left (all of it without the plant stage);
#   3. bench_plant.py --trace --variants for ROBOTS (default iiwa14,go2; BATCHES, default
#      each robot's own; ALGORITHMS, default the core profile) in the time left.
# STAGES (default "probes pytest plant") picks the stages; the runtime is built for the
# last two.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
deadline=${DEADLINE_S:-540}
left() { echo $((deadline - SECONDS + start)); }
has() { [[ " ${STAGES:-probes pytest plant} " == *" $1 "* ]]; }
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 &
core=$!
has probes && {
  for dir in .gprobe_*; do
    robot="${dir#.gprobe_}"; [ -d "$dir" ] || continue
    batches="1024 16384 65536"; [[ "$robot" == g1* ]] && batches="1024 16384"
    for b in $batches; do
      for p in "$dir"/probe_*; do echo "== $robot ${p##*/}"; "$p" "$b"; done
    done
  done
} >"$out/probe_times.txt" 2>&1
# NCU_PROBES: DIR/NAME[:KERNEL] (.gprobe_DIR/probe_NAME; KERNEL a regex, default NCU_KERNEL)
has probes && for entry in ${NCU_PROBES:-g1/old g1/new}; do
  p="${entry%%:*}" kernel="${NCU_KERNEL:-idsva_so_gather_kernel}"
  [[ "$entry" == *:* ]] && kernel="${entry#*:}"
  [ -x ".gprobe_${p%/*}/probe_${p#*/}" ] || continue
  timeout 90 ncu --clock-control none -k "regex:$kernel" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section Occupancy \
    ".gprobe_${p%/*}/probe_${p#*/}" "${NCU_BATCH:-1024}" \
    >"$out/ncu_one.txt" 2>&1 || echo "ncu $entry failed"
  { echo "=== ncu $p, kernel $kernel, B ${NCU_BATCH:-1024}"; cat "$out/ncu_one.txt"; } >>"$out/ncu.txt"
  rm -f "$out/ncu_one.txt"
done
echo "probes done after $((SECONDS - start)) s"
wait $core || echo "core build failed"
echo "runtime built after $((SECONDS - start)) s"
share=2; has plant || share=1  # without the plant stage, pytest takes the time left
has pytest && timeout $(( $(left) / share - 10 )) python3 -m pytest -q -m gpu ${PYTEST_FILES:-tests/test_second_order_kernels.py tests/test_tangents_gpu.py} \
  -p no:cacheprovider >"$out/pytest_so.txt" 2>&1
echo "pytest rc=$? after $((SECONDS - start)) s"; tail -3 "$out/pytest_so.txt"
limit=$(( $(left) - 10 ))
if has plant && [ "$limit" -gt 30 ]; then
  timeout "$limit" python3 tools/bench/bench_plant.py --device cuda --trace --variants \
    --robots "${ROBOTS:-iiwa14,go2}" ${BATCHES:+--batches "$BATCHES"} \
    ${ALGORITHMS:+--algorithms "$ALGORITHMS"} \
    --out "$out/plant.json" >"$out/plant.log" 2>&1 \
    || echo "bench_plant stopped (rc $?)"
fi
echo "done after $((SECONDS - start)) s"
