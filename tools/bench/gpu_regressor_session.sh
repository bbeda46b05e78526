#!/usr/bin/env bash
# GPU session for the inverse-dynamics regressor's warp strategy: the runtime, its gpu
# test (iiwa14, go2, g1; regressor-only artifacts), every variant's kernel time
# (bench_kernels.py --variants, CUDA-graph replays) and the handle's time beside the
# output-write bound (bench_centroidal.py).   tools/bench/gpu_regressor_session.sh [OUT]
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || { tail -30 "$out/core_build.log"; exit 1; }
timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_regressor_warp_gpu.py >"$out/gpu_tests.log" 2>&1
tail -8 "$out/gpu_tests.log"
alg=inverse_dynamics_regressor
timeout 150 python3 tools/bench/bench_kernels.py --backend cuda --variants --graph 20 \
  --robots g1 --algorithms $alg --batches 1 1024 16384 --min-seconds 0.05 \
  --out "$out/variants_g1.json" 2>&1 | grep -v "^\[grid" | tail -12
timeout 150 python3 tools/bench/bench_kernels.py --backend cuda --variants --graph 20 \
  --robots iiwa14 go2 --algorithms $alg --batches 1 65536 --min-seconds 0.05 \
  --out "$out/variants_iiwa14_go2.json" 2>&1 | grep -v "^\[grid" | tail -12
timeout 200 python3 tools/bench/bench_centroidal.py --device cuda --algorithms $alg \
  --robots iiwa14,go2,g1 --out "$out/handle_regressor.json" 2>&1 | grep -v "^\[grid" | tail -8
