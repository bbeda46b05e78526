#!/usr/bin/env bash
# One batched session on a GPU machine: build grid_rbd._core in-tree and every CUDA
# artifact the GPU tests and the benchmark need (in parallel), run the `gpu`-tagged tests,
# the handle and store suites (device="auto" picks the GPU there), the main job, then the
# kernel benchmark (block and thread strategies). Results go to $1 (default ./gpu_results):
#   gpu.txt  nvcc and GPU identity      builds.log  compile times
#   gpu_tests.log, handle_tests.log, demo.log   bench_block.json / bench_thread.json
# Env: GRID_RBD_ROBOT_DATA (a copy of example-robot-data's robots/ when the package is
# not installed), GRID_RBD_BUILD_WORKERS (parallel nvcc builds, default 12).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-12}"

tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
start=$SECONDS
python3 - >"$out/builds.log" 2>&1 <<'PY'
from artifact_harness import _BUILDS, prebuild
from test_codegen_gpu import CONFIGS
configs = [(r, "cuda", {"dtype": d}) for r, d in CONFIGS]
configs += [(r, "cuda", {"dtype": "float32", "strategy": "block", "max_batch_size": 65536})
            for r in ("iiwa14", "go2", "g1")]
configs += [("iiwa14", "cuda", {"dtype": "float32", "strategy": "thread",
                                "max_batch_size": 65536})]
prebuild(configs)
for key, (_, _, seconds) in sorted(_BUILDS.items(), key=lambda kv: -kv[1][2]):
    print(f"{seconds:7.1f} s  {key}")
PY
echo "builds: exit $? after $((SECONDS - start)) s" >>"$out/builds.log"

# By name: the reference suites import pinocchio, which GPU machines may not have.
python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_codegen_gpu.py \
  tests/test_runtime_core.py tests/test_runtime_contexts.py \
  2>&1 | tee "$out/gpu_tests.log" | tail -5
python3 -m pytest -q -p no:cacheprovider -rs tests/test_handle_numpy.py tests/test_store.py \
  2>&1 | tee "$out/handle_tests.log" | tail -5
python3 -m grid_rbd.demo --cold >"$out/demo.log" 2>&1; echo "demo exit $?" >>"$out/demo.log"
python3 tools/bench/bench_kernels.py --backend cuda --strategy block \
  --out "$out/bench_block.json" 2>"$out/bench_block.log" || echo "bench block failed"
python3 tools/bench/bench_kernels.py --backend cuda --strategy thread --robots iiwa14 \
  --out "$out/bench_thread.json" 2>"$out/bench_thread.log" || echo "bench thread failed"
tail -n 3 "$out"/bench_*.log "$out/demo.log"
