#!/usr/bin/env bash
# tools/bench/thread_store_probe/run.sh build OUT [URDF] | time OUT
#   build: generate iiwa14's thread-strategy FD gradient and euler step gradient (runtime
#          inertia, as register_robot builds them), compile probe.cu against them (sm_90,
#          ptxas -v into OUT/ptxas.log); needs nvcc, not a GPU. CODEGEN=DIR generates
#          with another tree's codegen/ (a before/after pair).
#   time:  time every variant at B = 65,536 and 16,384 (OUT/times.txt); where ncu runs,
#          Nsight Compute's throughput, memory, stall and occupancy sections of
#          NCU_VARIANTS (default: the compute-only, generated and best stores of both)
#          into OUT/ncu_VARIANT.txt.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$here/../../.."
mode="$1"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
if [ "$mode" = time ]; then
  "$out/probe" 65536 | tee "$out/times.txt"
  "$out/probe" 16384 | tee -a "$out/times.txt"
  if command -v ncu >/dev/null && [ "${NCU_VARIANTS:-}" != none ]; then
    variants="fd.compute fd.generated fd.linear.cs step.compute step.generated step.scalar.cs"
    for v in ${NCU_VARIANTS:-$variants step.linear.cs}; do
      timeout 120 ncu --cache-control all --clock-control none -c 1 \
        -k regex:"thread_kernel|staged" --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section WarpStateStats \
        --section Occupancy --section LaunchStats \
        "$out/probe" 65536 "$v" >"$out/ncu_$v.txt" 2>&1 || echo "ncu $v failed (rc $?)"
    done
  fi
  exit 0
fi
urdf="${3:-$repo/robots/iiwa14/iiwa14.urdf}"
codegen="${CODEGEN:-$repo/codegen}"
gen="$out/gen"; rm -rf "$gen"
PYTHONPATH="$codegen" python3 -m grid_codegen generate "$urdf" --out-dir "$gen" \
  --algorithms forward_dynamics_gradient,plant_step_gradient_euler --strategy thread \
  --runtime-inertia >/dev/null || exit 1
cp "$here/probe.cu" "$gen/"
nvcc -x cu -arch=sm_90 -std=c++17 -O3 -I "$codegen/grid_codegen/include" -I "$here/.." \
  -I "$gen" -DGRID_COMPILED_ARCHS='"sm_90"' -Xptxas -v -o "$out/probe" "$gen/probe.cu" \
  >"$out/ptxas.log" 2>&1 || { tail -20 "$out/ptxas.log"; exit 1; }
grep -A2 "Compiling entry" "$out/ptxas.log" | grep -E "Compiling|registers|stack" \
  >"$out/ptxas_summary.txt"
echo "built $out/probe"
