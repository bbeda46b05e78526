#!/usr/bin/env bash
# tools/bench/gather_probe/run.sh build DIR [COMMIT [URDF]] | time DIR
#   build: generate idsva_so + fdsva_so (float32, strategy auto: thread, gather, ...) from
#          this tree into DIR/new and, with COMMIT, from that commit (a temporary git
#          worktree) into DIR/old, and compile probe.cu against each (sm_90; ptxas -v into
#          DIR/ptxas_*.log); needs nvcc, not a GPU. URDF: default iiwa14.
#   time:  run each probe at B = 1,024, 16,384 and 65,536 (DIR/times.txt).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$(cd "$here/../../.." && pwd)"
mode="$1"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
if [ "$mode" = time ]; then
  for b in 1024 16384 65536; do
    for probe in "$out"/probe_*; do echo "== ${probe##*/}"; "$probe" "$b"; done
  done | tee "$out/times.txt"
  exit 0
fi
commit="${3:-}"; urdf="${4:-$repo/robots/iiwa14/iiwa14.urdf}"
build() {  # TREE NAME
  rm -rf "$out/$2"
  PYTHONPATH="$1/codegen" python3 -m grid_codegen generate "$urdf" --out-dir "$out/$2" \
    --dtype float32 --algorithms idsva_so,fdsva_so >/dev/null
  local nv
  nv=$(PYTHONPATH="$1/codegen" python3 -c "import sys; from grid_codegen import parse_urdf; print(parse_urdf(sys.argv[1]).nv)" "$urdf")
  nvcc -x cu -arch=sm_90 -std=c++17 -O3 -I "$out/$2" -I "$here/.." -I "$1/codegen/grid_codegen/include" \
    -DGRID_COMPILED_ARCHS='"sm_90"' -DNV="$nv" -Xptxas -v -o "$out/probe_$2" "$here/probe.cu" \
    >"$out/ptxas_$2.log" 2>&1 || { tail -20 "$out/ptxas_$2.log"; exit 1; }
}
build "$repo" new &
if [ -n "$commit" ]; then
  tree="$(mktemp -d)/tree"
  git -C "$repo" worktree add -q --detach "$tree" "$commit"
  build "$tree" old
  git -C "$repo" worktree remove --force "$tree"
fi
wait
for log in "$out"/ptxas_*.log; do  # each kernel's entry line, its stack and registers
  echo "== ${log##*/}"; grep -A3 "Compiling entry" "$log" | grep -E "Compiling|registers|stack frame"
done > "$out/ptxas_summary.txt"
echo "built $(ls "$out" | grep '^probe_' | tr '\n' ' ')"
