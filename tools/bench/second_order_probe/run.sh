#!/usr/bin/env bash
# tools/bench/second_order_probe/run.sh build DIR [URDF] | time DIR
#   build: generate iiwa14's idsva_so (thread strategy) twice, as emitted (the world-frame
#          sweep, symbolic/idsva.py) and on hyper-duals traced in groups of outer
#          directions (GROUP_OPS, default 8000), and compile probe.cu
#          against each (sm_90, ptxas -v into DIR/ptxas_*.log); needs nvcc, not a GPU.
#   time:  run both probes at B = 1,024, 16,384 and 65,536 (DIR/times.txt).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$here/../../.."
mode="$1"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
if [ "$mode" = time ]; then
  for b in 1024 16384 65536; do
    "$out/probe_single" "$b"; "$out/probe_grouped" "$b" | grep grouped
  done | tee "$out/times.txt"
  exit 0
fi
urdf="${3:-$repo/robots/iiwa14/iiwa14.urdf}"
generate() {  # DIR SINGLE_PASS_OPS GROUP_OPS HYPERDUAL(0|1)
  PYTHONPATH="$repo/codegen" python3 - "$urdf" "$1" "$2" "$3" "$4" <<'PY'
import sys
import grid_codegen.emit.second_order as so
from grid_codegen import cli
urdf, out, single, group, hyperdual = sys.argv[1:6]
so.SINGLE_PASS_OPS, so.GROUP_OPS = int(single), int(group)
if hyperdual == "1":  # the groups exist on hyper-duals only
    so.idsva.supported = lambda model: False
sys.argv = ["grid_codegen", "generate", urdf, "--out-dir", out, "--dtype", "float32",
            "--algorithms", "idsva_so", "--strategy", "thread"]
cli.main()
PY
}
rm -rf "$out/single" "$out/grouped"
generate "$out/single" 60000 40000 0
generate "$out/grouped" 0 "${GROUP_OPS:-8000}" 1
# so_group(k, ...): each group's out-of-line call with the arguments its signature names.
python3 - "$out/grouped/grid.cuh" > "$out/grouped/groups.inc" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
calls = re.findall(r"GRID_NOINLINE void (rnea_second_order_g(\d+)_call)\(([^)]*)\)", text)
names = {"X": "X", "qd": "qd", "acc": "acc", "f_ext": "nullptr", "gravity": "gravity", "out": "out"}
print(f"#define SO_GROUPS_FOUND {len(calls)}")
print("__device__ __forceinline__ void so_group(int k, const float* X, const float* qd, "
      "const float* acc, float gravity, float* out) {\n  switch (k) {")
for name, k, params in calls:
    args = [names[p.split()[-1]] for p in params.split(",") if p.strip()]
    print(f"    case {k}: {name}<float, float>({', '.join(args)}); break;")
print("  }\n}")
PY
groups=$(sed -n 's/#define SO_GROUPS_FOUND //p' "$out/grouped/groups.inc")
for kind in single grouped; do
  cp "$here/probe.cu" "$out/$kind/"
  extra=(); [ "$kind" = grouped ] && extra=(-DSO_GROUPS="$groups")
  nvcc -x cu -arch=sm_90 -std=c++17 -O3 -I "$out/$kind" -I "$here/.." -DGRID_COMPILED_ARCHS='"sm_90"' "${extra[@]}" -Xptxas -v \
    -o "$out/probe_$kind" "$out/$kind/probe.cu" > "$out/ptxas_$kind.log" 2>&1 \
    || { tail -20 "$out/ptxas_$kind.log"; exit 1; }
done
grep -A2 "Compiling entry" "$out"/ptxas_*.log | grep -E "Compiling|registers|stack" > "$out/ptxas_summary.txt"
echo "built $out/probe_single, $out/probe_grouped ($groups groups)"
