#!/usr/bin/env bash
# tools/bench/fd_gradient_latency_probe/run.sh build DIR [URDF] | time DIR
#   build: generate the FD gradient of an `auto` artifact (float32) with every small-batch
#          variant, compile probe.cu against it (sm_90, ptxas -v into DIR/ptxas.log);
#          needs nvcc, not a GPU.
#   time:  time the variants at B = 1, 16, 64, 1,024 and 16,384 (DIR/times.txt).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$here/../../.."
mode="$1"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
if [ "$mode" = time ]; then
  "$out/probe" 1 16 64 1024 16384 | tee "$out/times.txt"
  exit 0
fi
urdf="${3:-$repo/robots/iiwa14/iiwa14.urdf}"
rm -rf "$out/gen"
PYTHONPATH="$repo/codegen" python3 - "$urdf" "$out/gen" <<'PY'
import sys
import grid_codegen.emit.wrapper as wrapper
from grid_codegen import cli
wrapper.MAX_VARIANTS = 8  # the probe reads grid.cuh only: every variant, whatever the ABI holds
urdf, out = sys.argv[1:3]
sys.argv = ["grid_codegen", "generate", urdf, "--out-dir", out, "--dtype", "float32",
            "--algorithms", "forward_dynamics_gradient,forward_dynamics_vjp"]
cli.main()
PY
nv=$(sed -n 's/.*constexpr int kNv = \([0-9]*\);.*/\1/p' "$out/gen/grid.cuh" | head -1)
nvcc -x cu -arch=sm_90 -std=c++17 -O3 -I "$out/gen" -I "$here/.." -DGRID_COMPILED_ARCHS='"sm_90"' \
  -DGRID_PROBE_NV="${nv:-7}" -Xptxas -v -o "$out/probe" "$here/probe.cu" > "$out/ptxas.log" 2>&1 \
  || { tail -20 "$out/ptxas.log"; exit 1; }
grep -A2 "Compiling entry" "$out/ptxas.log" | grep -E "Compiling|registers|stack" > "$out/ptxas_summary.txt"
echo "built $out/probe (nv ${nv:-7})"
