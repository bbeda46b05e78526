#!/usr/bin/env bash
# GPU session for the inverse-dynamics regressor's warp strategy: the runtime, its gpu
# test (iiwa14, go2, g1; regressor-only artifacts) beside the staged-store and plant-handle
# gpu tests, every variant's kernel time (bench_kernels.py --variants, CUDA-graph replays)
# and the handle's time beside the output-write bound with each kernel's device time
# (bench_centroidal.py --trace).   tools/bench/gpu_regressor_session.sh [OUT]
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || { tail -30 "$out/core_build.log"; exit 1; }
timeout "${TESTS_S:-300}" python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_regressor_warp_gpu.py tests/test_thread_staging_gpu.py \
  "tests/test_plant_hessian_handles.py::test_torch_handle_on_cuda_tensors" \
  >"$out/gpu_tests.log" 2>&1
tail -4 "$out/gpu_tests.log"
alg=inverse_dynamics_regressor
bk() { timeout 150 python3 tools/bench/bench_kernels.py --backend cuda --variants --graph 20 \
  --algorithms $alg --min-seconds 0.05 "$@" 2>&1 | grep -v "^\[grid" | grep -E "warp|thread"; }
bk --robots g1 --batches 1 1024 16384 --out "$out/variants_g1.json"
bk --robots iiwa14 go2 --batches 1 65536 --out "$out/variants_iiwa14_go2.json"
timeout 200 python3 tools/bench/bench_centroidal.py --device cuda --algorithms $alg --trace \
  --robots iiwa14,go2,g1 --out "$out/handle_regressor.json" 2>&1 | grep -v "^\[grid" \
  | grep -v -i warn | tail -12
