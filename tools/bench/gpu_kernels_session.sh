#!/usr/bin/env bash
# One GPU session for the generated kernels (issue 11), sized for one 10-minute call:
#   1. every CUDA artifact the GPU tests and the benchmark use, built in parallel (and each
#      in parallel translation units) with `-Xptxas -v` (registers, stack and spills per
#      kernel in the logs);
#   2. the gpu-tagged codegen tests (every strategy of every algorithm on the GPU against
#      the float64 reference, launch widths and grid caps, the robot set);
#   3. every variant of iiwa14, go2 and g1 timed at batches 1, 1024, 16384, 65536 (the
#      GPU's time per kernel, from CUDA-graph replays);
#   4. the runtime, handle and framework suites on CUDA artifacts (WITH_RUNTIME=, to skip).
# Results go to $1 (default ./gpu_results): builds.log, ptxas.txt, gpu_tests.log,
# bench_variants.json, bench_variants.log.
# Env: ROBOTS (benchmark robots), GRID_RBD_BUILD_WORKERS (builds at once, 8),
# GRID_RBD_BUILD_JOBS (units per build at once, 3), GRID_RBD_ROBOT_DATA (a copy of
# example-robot-data's robots/, default .devkit/robots from tools/bench/make_devkit.sh).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_BUILD_WORKERS="${GRID_RBD_BUILD_WORKERS:-8}"
export GRID_RBD_BUILD_JOBS="${GRID_RBD_BUILD_JOBS:-3}"  # translation units per build at once
export GRID_RBD_TEST_NVCCFLAGS="-Xptxas -v"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
robots="${ROBOTS:-iiwa14 go2 g1}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 &
core_pid=$!
start=$SECONDS
python3 - "$robots" >"$out/builds.log" 2>&1 <<'PY'
import sys
from artifact_harness import _BUILDS, prebuild
from support import ROBOTS
configs = [(r, "cuda", {"dtype": d}) for d in ("float64", "float32") for r in sorted(ROBOTS)]
configs += [(r, "cuda", {"dtype": "float32", "max_batch_size": 65536})
            for r in sys.argv[1].split()]
prebuild(sorted(configs, key=lambda c: c[0] != "g1"))  # the longest first
for key, (_, _, seconds) in sorted(_BUILDS.items(), key=lambda kv: -kv[1][2]):
    print(f"{seconds:7.1f} s  {key}")
PY
echo "builds: exit $? after $((SECONDS - start)) s" >>"$out/builds.log"

# Registers, stack frames and spills of the gradient kernels, from ptxas.
for f in "$GRID_RBD_TEST_BUILD_DIR"/*/robot.build.log; do
  robot=$(basename "$(dirname "$f")")
  python3 - "$f" "$robot" <<'PY' >>"$out/ptxas.txt"
import re, sys
text = open(sys.argv[1]).read()
for m in re.finditer(r"Compiling entry function '_ZN4grid(\d+)(\w+?)_kernelI(\w)EEv.*?"
                     r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill "
                     r"loads.*?Used (\d+) registers", text, re.S):
    name = m.group(2)
    print(f"{sys.argv[2]:34s} {name:40s} {m.group(3)} regs {m.group(7):>3} stack "
          f"{m.group(4):>6} spill st {m.group(5):>5} ld {m.group(6):>5}")
PY
done

timeout "${TEST_SECONDS:-170}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_codegen_gpu.py 2>&1 | tee "$out/gpu_tests.log" | tail -4
timeout "${BENCH_SECONDS:-200}" python3 tools/bench/bench_kernels.py --backend cuda \
  --variants --graph 20 --robots $robots --batches 1 1024 16384 65536 --min-seconds 0.02 \
  --out "$out/bench_variants.json" 2>"$out/bench_variants.log" || echo "bench failed"
# The runtime, the handles and the frameworks on CUDA artifacts (they register their own).
wait "$core_pid" || echo "core build failed" >>"$out/builds.log"
if [ -n "${WITH_RUNTIME:-1}" ]; then
  timeout "${RUNTIME_SECONDS:-200}" python3 -m pytest -q -p no:cacheprovider -rs \
    tests/test_runtime_core.py tests/test_runtime_contexts.py tests/test_contexts_gpu.py \
    tests/test_handle_numpy.py tests/test_torch_backend.py tests/test_jax_backend.py \
    tests/test_strategy_selection.py 2>&1 | tee "$out/runtime_tests.log" | tail -6
fi
tail -n 3 "$out/builds.log"
grep -E "gradient" "$out/ptxas.txt" | grep -E "iiwa14|go2" | grep float | head -20
