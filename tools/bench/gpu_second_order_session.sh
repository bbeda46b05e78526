#!/usr/bin/env bash
# One GPU session for the second-order kernels (issue 13), inside one 10-minute call:
#   1. the runtime (tools/build_core.sh);
#   2. the gpu-tagged second-order tests: every variant of idsva_so / fdsva_so (thread,
#      directions, gather) and the forced forms (sweep loops, hyper-duals) on CUDA tensors;
#   3. tools/bench/bench_centroidal.py --profile second_order on the GPU (float32): iiwa14
#      and go2 at B = 1,024, iiwa14 at 65,536, then g1 at 1,024 with what time is left;
#      each build in a store with the autotune, whose per-variant times print_autotune
#      prints (autotune.txt).
# Results go to $1 (default ./gpu_results): gpu_tests.log, bench_so_*.json / .log,
# autotune.txt. Env: GRID_RBD_ROBOT_DATA (default .devkit/robots).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_second_order_kernels.py >"$out/gpu_tests.log" 2>&1
tail -4 "$out/gpu_tests.log"
bench() {  # SECONDS ROBOTS STORE NAME [--batch B]
  local limit=$1 robots=$2 store=$3 name=$4; shift 4
  timeout "$limit" python3 tools/bench/bench_centroidal.py --device cuda \
    --profile second_order --robots "$robots" --store "$store" "$@" \
    --out "$out/bench_so_$name.json" >"$out/bench_so_$name.log" 2>&1 || echo "bench $name failed"
}
bench 150 iiwa14,go2 /tmp/grid_so_store 1024
bench 60 iiwa14 /tmp/grid_so_store 65536 --batch 65536
bench $((570 - SECONDS + start)) g1 /tmp/grid_so_g1 g1
for s in /tmp/grid_so_store /tmp/grid_so_g1; do
  python3 tools/bench/print_autotune.py "$s" idsva_so fdsva_so
done >"$out/autotune.txt" 2>&1
grep -hE "ns/item" "$out"/bench_so_*.log; cat "$out/autotune.txt"
echo "done after $((SECONDS - start)) s"
