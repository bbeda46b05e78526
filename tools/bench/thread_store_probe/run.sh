#!/usr/bin/env bash
# tools/bench/thread_store_probe/run.sh OUT [URDF]: generate iiwa14's thread-strategy FD
# gradient and euler step gradient, build probe.cu against them (sm_90, ptxas -v), time
# every variant, and profile the generated kernels with Nsight Compute where it runs.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$here/../../.."
out="$(mkdir -p "$1" && cd "$1" && pwd)"; urdf="${2:-$repo/robots/iiwa14/iiwa14.urdf}"
gen="$out/gen"; rm -rf "$gen"
PYTHONPATH="$repo/codegen" python3 -m grid_codegen generate "$urdf" --out-dir "$gen" \
  --algorithms forward_dynamics_gradient,plant_step_gradient_euler --strategy thread >/dev/null
cp "$here/probe.cu" "$gen/"
nvcc -x cu -arch=sm_90 -std=c++17 -O3 --extended-lambda -I "$repo/codegen/grid_codegen/include" -I "$here/.." \
  -I "$gen" -DGRID_COMPILED_ARCHS='"sm_90"' -Xptxas -v -o "$out/probe" "$gen/probe.cu" \
  >"$out/ptxas.log" 2>&1 || { tail -20 "$out/ptxas.log"; exit 1; }
grep -E "Compiling entry|registers|spill" "$out/ptxas.log" | grep -B1 -A1 "_kernel\|compute_only\|direct_store" | head -60 > "$out/ptxas_summary.txt"
"$out/probe" 65536 | tee "$out/times.txt"
"$out/probe" 16384 | tee -a "$out/times.txt"
if command -v ncu >/dev/null && [ "${NCU_VARIANTS:-}" != none ]; then
  for v in ${NCU_VARIANTS:-fd.compute fd.c32w4}; do
    timeout 200 ncu --clock-control none --section WarpStateStats --section SourceCounters \
      --import-source no -c 1 -k regex:"thread_kernel|staged|compute_only" --page source \
      --print-source sass --csv "$out/probe" 65536 "$v" >"$out/sass_$v.csv" 2>"$out/sass_$v.err" \
      || echo "ncu $v failed (rc $?)"
  done
fi
