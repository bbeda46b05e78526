#!/usr/bin/env bash
# GPU session for the batch-1 latency work (issue 20): build the runtime, run the gpu
# tests of the reverse-mode backwards and the mapped staging, profile each surface
# (tools/bench/profile_latency.py, tables packed into prof.tgz) and run the latency table
# (tools/bench/bench_latency.py).   tools/bench/gpu_latency_session.sh [OUT]
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 || { tail -30 "$out/core_build.log"; exit 1; }
export GRID_RBD_CACHE_DIR="${GRID_RBD_CACHE_DIR:-/tmp/grid_rbd_cache}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false GRID_RBD_BUILD_WORKERS=8
timeout "${TESTS_S:-200}" python3 -m pytest -q -p no:cacheprovider -rs \
  tests/test_vjp_backwards.py tests/test_contexts_gpu.py -k "${TESTS_K:-not overlap}" \
  >"$out/gpu_tests.log" 2>&1
tail -3 "$out/gpu_tests.log"
prof=/tmp/latency_prof
rm -rf "$prof"
timeout "${PROFILE_S:-200}" python3 tools/bench/profile_latency.py --out-dir "$prof" \
  ${PROFILE_ARGS:-} 2>&1 | grep -v "^\[grid" | tee "$out/profile.log"
tar -czf "$out/prof.tgz" -C "$prof" . 2>/dev/null
timeout "${LATENCY_S:-150}" python3 tools/bench/bench_latency.py --device cuda \
  --out "$out/latency.json" 2>&1 | grep -v "^\[grid" | tail -30
