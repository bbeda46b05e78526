#!/usr/bin/env bash
# A short follow-up GPU session: the runtime, the gpu tests of joint dynamics and runtime
# transforms, the plant step gradient against the FD gradient with the default and the
# thread strategy (iiwa14), the iLQR example at 1,024 trajectories and the second-order
# profile of iiwa14 at 16,384. Results to $1 (default ./gpu_results).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
(timeout 300 python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
   --robots iiwa14 --batch 16384 --reps 1 --store /tmp/so_store --out /tmp/w.json \
   >"$out/warm.log" 2>&1) &
timeout 150 python3 -m pytest -q -p no:cacheprovider -rs -m gpu -n 4 \
  tests/test_joint_dynamics_handles.py tests/test_runtime_transform_handles.py 2>&1 \
  | tee "$out/gpu_tests.log" | tail -4
for strategy in auto thread; do
  timeout 100 python3 tools/bench/bench_plant.py --device cuda --robots iiwa14 \
    --strategy "$strategy" --out "$out/bench_plant_$strategy.json" 2>&1 | grep -v "^\[grid"
done
timeout 120 python3 examples/ilqr_reach_iiwa14.py --device cuda --batch 1024 --iters 10 \
  --json "$out/ilqr_cuda.json" >"$out/ilqr.log" 2>&1 || echo "ilqr failed"
tail -n 4 "$out/ilqr.log"
wait
timeout 100 python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
  --robots iiwa14 --batch 16384 --store /tmp/so_store --out "$out/bench_so_16384.json" \
  2>&1 | grep -v "^\[grid"
