#!/usr/bin/env bash
# One GPU session for this stop's surface (issues 13-18), sized for one 10-minute call:
#   1. the runtime (tools/build_core.sh), then the gpu-tagged tests of the second-order
#      kernels, joint types, joint dynamics, runtime transforms, the MuJoCo convention
#      and collision (each registers its own CUDA artifacts);
#   2. the second-order profile per item (bench_centroidal.py --profile second_order) and
#      the plant step gradient against the FD gradient (bench_plant.py);
#   3. the iLQR example at 1,024 trajectories on the GPU.
# Results go to $1 (default ./gpu_results). Env: GRID_RBD_ROBOT_DATA (default
# .devkit/robots), TEST_SECONDS, BENCH_ROBOTS (default "iiwa14,go2").
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
# The test-only packages the GPU image lacks (mujoco and its parts, trimesh), as wheels in
# .whl/ (see /work/.library/device/README.md), after the tree on the import path.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
robots="${BENCH_ROBOTS:-iiwa14,go2}"
# The benchmarks' artifacts built while the tests run (their own stores), timed after.
(timeout 420 python3 tools/bench/bench_plant.py --device cuda --robots "$robots,g1" \
   --reps 1 --store /tmp/plant_store --out /tmp/plant_warm.json >"$out/warm.log" 2>&1) &
(timeout 420 python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
   --robots "$robots" --reps 1 --store /tmp/so_store --out /tmp/so_warm.json \
   >>"$out/warm.log" 2>&1) &
timeout "${TEST_SECONDS:-330}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  -n 4 --dist loadfile tests/test_second_order_kernels.py tests/test_joint_types.py \
  tests/test_joint_dynamics_handles.py tests/test_runtime_transform_handles.py \
  tests/test_mujoco_convention.py tests/test_collision_gpu.py 2>&1 \
  | tee "$out/gpu_tests.log" | tail -25
wait
timeout 100 python3 tools/bench/bench_plant.py --device cuda --robots "$robots,g1" \
  --store /tmp/plant_store --out "$out/bench_plant_cuda.json" >"$out/bench_plant.log" \
  2>&1 || echo "plant bench failed"
timeout 100 python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
  --robots "$robots" --store /tmp/so_store --out "$out/bench_second_order_cuda.json" \
  >"$out/bench_second_order.log" 2>&1 || echo "second-order bench failed"
timeout 90 python3 examples/ilqr_reach_iiwa14.py --device cuda --batch 1024 --iters 10 \
  --json "$out/ilqr_cuda.json" >"$out/ilqr.log" 2>&1 || echo "ilqr failed"
tail -n 12 "$out/bench_plant.log" "$out/bench_second_order.log" "$out/ilqr.log"
