#!/usr/bin/env bash
# The framework backends on a GPU machine, in one batched call: build grid_rbd._core
# in-tree, run the runtime's gpu-tagged suites (the artifact ABI they load), the torch and
# JAX suites (device="auto" picks CUDA there, so every test runs on the GPU), then the
# overhead benchmark at batch 1 and 16384. Results go to $1 (default ./gpu_results):
#   gpu.txt  core_build.log  runtime_tests.log  torch_tests.log  jax_tests.log
#   frameworks.json / frameworks.log
# Env: GRID_RBD_ROBOT_DATA (a copy of example-robot-data's robots/ when the package is
# not installed).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
# JAX and torch share the GPU in the benchmark: no JAX preallocation of 75% of it.
export XLA_PYTHON_CLIENT_PREALLOCATE=false

tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_runtime_core.py \
  tests/test_runtime_contexts.py 2>&1 | tee "$out/runtime_tests.log" | tail -3
python3 -m pytest -q -p no:cacheprovider -rs tests/test_torch_backend.py \
  2>&1 | tee "$out/torch_tests.log" | tail -3
python3 -m pytest -q -p no:cacheprovider -rs tests/test_jax_backend.py \
  2>&1 | tee "$out/jax_tests.log" | tail -3
python3 tools/bench/bench_frameworks.py --device cuda --batches 1 16384 \
  --out "$out/frameworks.json" 2>"$out/frameworks.log" || echo "framework bench failed"
grep "^B=" "$out/frameworks.log"
