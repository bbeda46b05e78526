#!/usr/bin/env bash
# One GPU session for the second-order kernels (issue 13) on the world-frame sweep:
#   1. the runtime (tools/build_core.sh);
#   2. tools/bench/bench_centroidal.py --profile second_order on the GPU (float32, iiwa14,
#      go2, g1 at B = 1,024, then iiwa14 at 65,536): builds in its own store with the
#      autotune, per-item times beside the output-write bound; the recorded dispatch;
#   3. the gpu-tagged second-order tests (the sweep, its loop form and the hyper-dual
#      passes on CUDA tensors) and the tangents strategy's GPU tests;
#   4. the second-order probe (the generated thread kernel beside hand variants).
# Results go to $1 (default ./gpu_results): bench_so_*.json / .log, autotune.txt,
# gpu_tests.log, probe/.
# Env: GRID_RBD_ROBOT_DATA (default .devkit/robots), BENCH_SECONDS, TEST_SECONDS.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || echo "core build failed"
store=/tmp/grid_second_order_store
start=$SECONDS
(tools/bench/second_order_probe/run.sh build "$out/probe" >"$out/probe_build.log" 2>&1) &
probe_pid=$!
timeout "${BENCH_SECONDS:-330}" python3 tools/bench/bench_centroidal.py --device cuda \
  --profile second_order --robots iiwa14,go2,g1 --store "$store" \
  --out "$out/bench_so_1024.json" >"$out/bench_so_1024.log" 2>&1 || echo "bench 1024 failed"
timeout 120 python3 tools/bench/bench_centroidal.py --device cuda --profile second_order \
  --robots iiwa14 --batch 65536 --store "$store" --out "$out/bench_so_65536.json" \
  >"$out/bench_so_65536.log" 2>&1 || echo "bench 65536 failed"
python3 tools/bench/print_autotune.py "$store" idsva_so fdsva_so >"$out/autotune.txt" 2>&1
echo "benchmarks done after $((SECONDS - start)) s"
timeout "${TEST_SECONDS:-150}" python3 -m pytest -q -p no:cacheprovider -rs -m gpu \
  tests/test_second_order_kernels.py tests/test_tangents_gpu.py \
  2>&1 | tee "$out/gpu_tests.log" | tail -8
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs -m gpu tests/test_codegen_gpu.py \
  -k tangents 2>&1 | tee -a "$out/gpu_tests.log" | tail -4
wait "$probe_pid" && timeout 60 tools/bench/second_order_probe/run.sh time "$out/probe" \
  >/dev/null 2>&1 || echo "probe failed (see probe_build.log)"
grep -E "ns/item" "$out"/bench_so_*.log; cat "$out/autotune.txt"
