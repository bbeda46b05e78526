#!/usr/bin/env bash
# Where the second-order kernels spend their time (issue 13), inside one 10-minute call:
#   1. the runtime (tools/build_core.sh);
#   2. g1's second-order build (idsva_so, fdsva_so; its nvcc build takes minutes) starts in
#      the background while
#   3. iiwa14 runs each variant (thread, gather) of both kernels at B = 16,384 and 65,536
#      with the kernels each call launches and their device time (bench_centroidal.py
#      --variant V --trace), then Nsight Compute reads the gather kernels at 65,536
#      (ncu.txt; --clock-control none, as the device notes ask);
#   4. g1 at B = 1,024 once its build is done (every variant, then the dispatch).
# Results go to $1 (default ./gpu_results; more files than a device call brings back: tar
# them). Env: GRID_RBD_ROBOT_DATA (default .devkit/robots).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
bench() {  # SECONDS ROBOT STORE NAME [ARGS...]
  local limit=$1 robot=$2 store=$3 name=$4; shift 4
  timeout "$limit" python3 tools/bench/bench_centroidal.py --device cuda \
    --profile second_order --robots "$robot" --store "$store" "$@" \
    --out "$out/so_$name.json" >>"$out/so_$name.log" 2>&1 || echo "bench $name failed"
}
# g1's build: a registration in the store, timed, in the background.
( t0=$SECONDS; bench 420 g1 /tmp/grid_so_g1 g1_build --batch 1 --reps 1
  echo "g1 build + batch-1 call: $((SECONDS - t0)) s" >>"$out/so_g1_build.log" ) &
g1=$!
for batch in 16384 65536; do
  for variant in thread gather; do
    bench 200 iiwa14 /tmp/grid_so_store "iiwa14_${variant}_$batch" --batch "$batch" \
      --variant "$variant" --trace --reps 5
  done
done
echo "iiwa14 done after $((SECONDS - start)) s"
timeout 150 ncu --clock-control none --kernel-name regex:gather --launch-count 2 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis \
  python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
  --robots iiwa14 --store /tmp/grid_so_store --batch 65536 --variant gather --reps 1 \
  --algorithms idsva_so --out /tmp/ncu_bench.json >"$out/ncu.txt" 2>&1 || echo "ncu failed"
echo "ncu done after $((SECONDS - start)) s"
wait $g1
left=$((540 - SECONDS + start))
for variant in gather thread directions ""; do
  [ "$left" -gt 30 ] || break
  bench $((left / 2)) g1 /tmp/grid_so_g1 "g1_${variant:-dispatch}" --batch 1024 \
    ${variant:+--variant "$variant"} --reps 5
  left=$((540 - SECONDS + start))
done
python3 tools/bench/print_autotune.py /tmp/grid_so_store idsva_so fdsva_so >"$out/autotune.txt" 2>&1
python3 tools/bench/print_autotune.py /tmp/grid_so_g1 idsva_so fdsva_so >>"$out/autotune.txt" 2>&1
grep -h "ns/item\|  us \|has no variant\|build" "$out"/so_*.log; cat "$out/autotune.txt"
echo "done after $((SECONDS - start)) s"
