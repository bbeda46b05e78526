#!/usr/bin/env bash
# GPU session for this stop's CPU-built pieces: the gpu-tagged collision, consumer
# collision, plant-Hessian and MuJoCo-convention tests, then the collision kernels'
# timings on CUDA (tools/bench/bench_collision.py, iiwa14; the accuracy table needs
# pinocchio, which the GPU image lacks).   tools/bench/gpu_helpers_session.sh [OUT]
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
# EXTRA_SITE: a `pip install --target` folder of wheels carried along (mujoco).
[ -n "${EXTRA_SITE:-}" ] && export PYTHONPATH="$PYTHONPATH:$EXTRA_SITE"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}" XLA_PYTHON_CLIENT_PREALLOCATE=false
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || { tail -30 "$out/core_build.log"; exit 1; }
timeout "${TESTS_S:-330}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_collision_gpu.py tests/test_plant_hessian_handles.py \
  tests/test_consumer_collision.py tests/test_mujoco_convention.py \
  tests/test_mujoco_convention_methods.py >"$out/gpu_tests.log" 2>&1
tail -15 "$out/gpu_tests.log"
timeout "${BENCH_S:-120}" python3 tools/bench/bench_collision.py --device cuda --robots iiwa14 \
  --accuracy-configs 0 --out "$out/bench_collision_h200.json" 2>&1 | grep -v "^\[grid" | tail -15
