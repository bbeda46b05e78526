#!/usr/bin/env bash
# GPU session for the thread strategy's staged stores: the runtime, the staging test,
# the plant step gradient against the FD gradient (iiwa14, default and thread strategy)
# and the kernel variants of iiwa14 and go2 (tools/bench/bench_kernels.py --variants).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/test_thread_staging_gpu.py \
  2>&1 | tail -3
for strategy in auto thread; do
  timeout 100 python3 tools/bench/bench_plant.py --device cuda --robots iiwa14,go2 \
    --strategy "$strategy" --out "$out/bench_plant_$strategy.json" 2>&1 | grep -v "^\[grid"
done
timeout 200 python3 tools/bench/bench_kernels.py --backend cuda --variants --graph 20 \
  --robots iiwa14 go2 --batches 1024 65536 --min-seconds 0.02 \
  --out "$out/bench_variants.json" 2>"$out/bench_variants.log" | tail -40 \
  || echo "variants failed"
