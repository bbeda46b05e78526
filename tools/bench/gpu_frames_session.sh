#!/usr/bin/env bash
# One GPU call for issue 13's task-space kernels (DEADLINE_S, default 550): the runtime
# built, then
#   1. bench_centroidal.py --profile kinematics --trace for ROBOTS (default iiwa14) at
#      65,536 items, in BENCH_S seconds (default half the time left): fk_batched, world_kinematics, frame_jacobian_indexed, the Hessian and
#      frame_jacobian in its three reference frames through the torch handle (kin.json,
#      kin.log);
#   2. PYTEST_ARGS (default: the frame kernel's and the frame methods' CUDA tests and the
#      torch extension's file, whose handle is a CUDA one where a GPU is) in the time left
#      (pytest.txt).
# Carry .devkit (the example-robot-data URDFs) for go2 and g1.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
deadline=${DEADLINE_S:-550}
left() { echo $((deadline - SECONDS + start)); }
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || { echo "core build failed"; exit 1; }  # incremental
echo "runtime built after $((SECONDS - start)) s"
timeout "${BENCH_S:-$(( $(left) / 2 ))}" python3 tools/bench/bench_centroidal.py --device cuda \
  --profile kinematics --robots "${ROBOTS:-iiwa14}" --trace --out "$out/kin.json" \
  >"$out/kin.log" 2>&1 || echo "bench stopped (rc $?)"
echo "bench done after $((SECONDS - start)) s"
timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-\
  tests/test_frame_jacobian_kernel.py::test_the_kernel_on_cuda_tensors \
  tests/test_frame_methods.py::test_frame_methods_on_cuda_tensors tests/test_torch_native.py} \
  >"$out/pytest.txt" 2>&1
echo "pytest rc=$? after $((SECONDS - start)) s"; tail -3 "$out/pytest.txt"
grep -v "^\[grid" "$out/kin.log" | tail -40
