#!/usr/bin/env bash
# One GPU session for the build profiles "centroidal" and "kinematics" (issues 13, 14):
#   1. the runtime (tools/build_core.sh) and every CUDA artifact their gpu-tagged tests
#      use, built in parallel, longest first; the benchmark's own store filled beside;
#   2. the gpu-tagged tests of the centroidal kernels, the kinematics kernels and the
#      frame methods on CUDA tensors;
#   3. tools/bench/bench_centroidal.py on the GPU (float32, the issue's batches).
# Results go to $1 (default ./gpu_results): builds.log, gpu_tests.log,
# bench_centroidal_cuda.json / .log.
# Env: GRID_RBD_BUILD_WORKERS (builds at once, 8), GRID_RBD_BUILD_JOBS (units per build,
# 2), GRID_RBD_ROBOT_DATA (default .devkit/robots), TEST_SECONDS, BENCH_SECONDS.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
export GRID_RBD_BUILD_JOBS="${GRID_RBD_BUILD_JOBS:-2}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
store=/tmp/grid_centroidal_bench_store
start=$SECONDS
# The benchmark's artifacts (register_robot, its own store) while the tests' build.
(timeout 420 python3 tools/bench/bench_centroidal.py --device cuda --reps 1 \
   --store "$store" --out /tmp/warm.json >"$out/bench_warm.log" 2>&1) &
warm_pid=$!
python3 - >"$out/builds.log" 2>&1 <<'PY'
from artifact_harness import _BUILDS, prebuild
from support import ROBOTS
import test_centroidal_gpu as c
import test_kinematics_kernels as k
configs = [(r, "cuda", {"dtype": d, **c.OPTIONS}) for r, d in c.CONFIGS]
configs += [(r, "cuda", {"dtype": "float64", **k.OPTIONS}) for r in ("iiwa14", "go2", "g1")]
configs += [(r, "cpu", {"dtype": d, **k.OPTIONS}) for r, d in k.CONFIGS]
prebuild(sorted(configs, key=lambda c: c[0] != "g1"))
for key, (_, _, seconds) in sorted(_BUILDS.items(), key=lambda kv: -kv[1][2]):
    print(f"{seconds:7.1f} s  {key}")
PY
echo "builds: exit $? after $((SECONDS - start)) s" >>"$out/builds.log"
timeout "${TEST_SECONDS:-200}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_centroidal_gpu.py tests/test_kinematics_kernels.py tests/test_frame_methods.py \
  2>&1 | tee "$out/gpu_tests.log" | tail -15
wait "$warm_pid"; echo "warm-up exit $? after $((SECONDS - start)) s"
timeout "${BENCH_SECONDS:-150}" python3 tools/bench/bench_centroidal.py --device cuda \
  --store "$store" --out "$out/bench_centroidal_cuda.json" \
  >"$out/bench_centroidal_cuda.log" 2>&1 || echo "bench failed"
tail -n 40 "$out/bench_centroidal_cuda.log"; tail -n 4 "$out/builds.log" "$out/bench_warm.log"
