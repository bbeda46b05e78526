#!/usr/bin/env bash
# Where the second-order kernels spend their time (issue 13), in one 10-minute call
# (DEADLINE_S, default 540):
#   1. tools/bench/gather_probe (built here: `run.sh build .gprobe NAME=SOURCE...`, carry
#      .gprobe) times every probe at B = 1,024 / 16,384 / 65,536 and Nsight Compute reads
#      the gather kernels of PROBES (default "tile") at 65,536 (ncu_NAME.txt;
#      --clock-control none, as the device notes ask), while the runtime builds;
#   2. g1's idsva_so build starts in the background; the gpu-tagged second-order tests;
#   3. iiwa14 through the torch handle, each variant (gather, thread) of both kernels at
#      B = 65,536 with the kernels each call launches (bench_centroidal.py --variant V
#      --trace);
#   4. g1's idsva_so at B = 1,024 and 16,384 with the kernels each call launches, then
#      iiwa14 at 16,384. SKIP_G1=1 leaves g1 out (stages 2 and 4).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
deadline=${DEADLINE_S:-540}
left() { echo $((deadline - SECONDS + start)); }
bench() {  # SECONDS ROBOT STORE NAME [ARGS...]
  local limit=$1 robot=$2 store=$3 name=$4; shift 4
  [ "$limit" -gt 20 ] || { echo "no time for $name"; return; }
  timeout "$limit" python3 tools/bench/bench_centroidal.py --device cuda \
    --profile second_order --robots "$robot" --store "$store" "$@" \
    --out "$out/so_$name.json" >>"$out/so_$name.log" 2>&1 || echo "bench $name failed"
}
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 &
core=$!
if [ -d .gprobe ]; then
  tools/bench/gather_probe/run.sh time .gprobe >/dev/null 2>&1
  cp .gprobe/times.txt "$out/probe_times.txt"
  for p in ${PROBES:-tile}; do
    timeout 100 ncu --clock-control none -k regex:gather --launch-count 2 \
      --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
      --section Occupancy --section LaunchStats --section ComputeWorkloadAnalysis \
      ".gprobe/probe_$p" 65536 >"$out/ncu_$p.txt" 2>&1 || echo "ncu $p failed"
  done
  cat "$out/probe_times.txt"
fi
wait $core || echo "core build failed"
echo "probe and runtime done after $((SECONDS - start)) s"
[ -n "${SKIP_G1:-}" ] || ( t0=$SECONDS; bench 360 g1 /tmp/grid_so_g1 g1_build --batch 1 --reps 1 --algorithms idsva_so
  echo "g1 idsva_so build + batch-1 call: $((SECONDS - t0)) s" >>"$out/so_g1_build.log" ) &
g1=$!
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_second_order_kernels.py >"$out/gpu_tests.log" 2>&1
tail -3 "$out/gpu_tests.log"
for variant in gather thread; do
  bench 100 iiwa14 /tmp/grid_so_store "iiwa14_${variant}_65536" --batch 65536 \
    --variant "$variant" --trace --reps 5
done
wait $g1
[ -n "${SKIP_G1:-}" ] || for batch in 1024 16384; do  # with the kernels each call launches
  bench $(($(left) / 2)) g1 /tmp/grid_so_g1 "g1_$batch" --batch "$batch" \
    --algorithms idsva_so --trace --reps 5
done
bench "$(left)" iiwa14 /tmp/grid_so_store iiwa14_dispatch_16384 --batch 16384 --reps 5
python3 tools/bench/print_autotune.py /tmp/grid_so_store idsva_so fdsva_so >"$out/autotune.txt" 2>&1
[ -n "${SKIP_G1:-}" ] || python3 tools/bench/print_autotune.py /tmp/grid_so_g1 idsva_so fdsva_so \
  >>"$out/autotune.txt" 2>&1
grep -h "ns/item\|  us \|has no variant\|build" "$out"/so_*.log; cat "$out/autotune.txt"
echo "done after $((SECONDS - start)) s"
