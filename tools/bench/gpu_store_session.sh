#!/usr/bin/env bash
# Streaming output stores (grid::store_once), before and after, in one call (DEADLINE_S,
# default 540):
#   1. tools/bench/thread_store_probe built twice here (`run.sh build .sprobe` and
#      `CODEGEN=<old tree>/codegen run.sh build .sprobe_old`; carry both): iiwa14's FD
#      gradient and euler step thread kernels and their hand variants, while the runtime
#      builds;
#   2. tools/bench/gather_probe (.gprobe and .gprobe_go2, each with `old` and `new`):
#      idsva_so / fdsva_so gather kernels of iiwa14 (tile form) and go2 (memory form);
#   3. the gpu-tagged tests of the staged stores, the tangents kernels and second order;
#   4. the plant handle (bench_plant.py --trace): PLANT_ROBOTS (default iiwa14) at
#      PLANT_BATCHES (default: each robot's large batch, then 1), the step gradients
#      beside the FD gradient.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
deadline=${DEADLINE_S:-540}
left() { echo $((deadline - SECONDS + start)); }
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 &
core=$!
for probe in .sprobe_old .sprobe; do
  [ -x "$probe/probe" ] || continue
  NCU_VARIANTS=none tools/bench/thread_store_probe/run.sh time "$probe" >/dev/null 2>&1
  { echo "== $probe"; cat "$probe/times.txt"; } >>"$out/store_probe.txt"
done
for probe in .gprobe .gprobe_go2; do
  [ -d "$probe" ] || continue
  tools/bench/gather_probe/run.sh time "$probe" >/dev/null 2>&1
  { echo "== $probe"; cat "$probe/times.txt"; } >>"$out/gather_probe.txt"
done
cat "$out/store_probe.txt" "$out/gather_probe.txt"
wait $core || echo "core build failed"
echo "probes and runtime done after $((SECONDS - start)) s"
timeout "$(( $(left) / 2 ))" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_thread_staging_gpu.py tests/test_tangents_gpu.py \
  tests/test_second_order_kernels.py >"$out/gpu_tests.log" 2>&1
tail -3 "$out/gpu_tests.log"
echo "tests done after $((SECONDS - start)) s"
batches=()
[ -n "${PLANT_BATCHES:-}" ] && batches=(--batches "$PLANT_BATCHES")
timeout "$(left)" python3 tools/bench/bench_plant.py --device cuda --robots "${PLANT_ROBOTS:-iiwa14}" \
  "${batches[@]}" --trace --store /tmp/grid_plant_store --out "$out/plant.json" \
  >"$out/plant.log" 2>&1 || echo "bench_plant failed or ran out of time"
grep -E "ns/item|^#" "$out/plant.log" | head -40
echo "done after $((SECONDS - start)) s"
