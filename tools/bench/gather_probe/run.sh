#!/usr/bin/env bash
# tools/bench/gather_probe/run.sh build DIR [NAME=SOURCE ...] | time DIR
#   build: generate idsva_so + fdsva_so (float32, strategy auto: thread, gather, ...) for
#          iiwa14 (URDF=... to change) from each SOURCE (a folder holding codegen/, a
#          commit, or a FILE.patch applied to HEAD, checked out in a temporary git
#          worktree; default new=<this tree>) into
#          DIR/NAME, and compile probe.cu against each into DIR/probe_NAME (sm_90; ptxas -v
#          into DIR/ptxas_NAME.log); needs nvcc, not a GPU. Builds run in parallel.
#          FLOATING=1: the model on a free-flyer root; ALGORITHMS=idsva_so: one of the two.
#   time:  run each probe at B = 1,024, 16,384 and 65,536 (DIR/times.txt).
# A *.patch file here is a change not on main, kept to be measured this way, saying at
# its top what it changes and why; one measured and not taken is removed (its numbers
# stay in tools/bench/results). with_tree.py runs the CPU tests against a patched
# worktree's generator.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; repo="$(cd "$here/../../.." && pwd)"
mode="$1"; out="$(mkdir -p "$2" && cd "$2" && pwd)"
if [ "$mode" = time ]; then
  for b in 1024 16384 65536; do
    for probe in "$out"/probe_*; do echo "== ${probe##*/}"; "$probe" "$b"; done
  done | tee "$out/times.txt"
  exit 0
fi
urdf="${URDF:-$repo/robots/iiwa14/iiwa14.urdf}"
algorithms="${ALGORITHMS:-idsva_so,fdsva_so}"
floating=(); [ "${FLOATING:-0}" = 1 ] && floating=(--floating-base)
defines=(); for alg in ${algorithms//,/ }; do defines+=("-DHAS_${alg^^}"); done
build() {  # TREE NAME
  rm -rf "$out/$2"
  PYTHONPATH="$1/codegen" python3 -m grid_codegen generate "$urdf" --out-dir "$out/$2" \
    --dtype float32 --algorithms "$algorithms" "${floating[@]}" >/dev/null
  local dims
  dims=$(PYTHONPATH="$1/codegen" python3 -c "import sys; from grid_codegen import parse_urdf
m = parse_urdf(sys.argv[1], floating_base=sys.argv[2] == '1'); print(m.nq, m.nv)" \
    "$urdf" "${FLOATING:-0}")
  nvcc -x cu -arch=sm_90 -std=c++17 -O3 -I "$out/$2" -I "$here/.." \
    -I "$1/codegen/grid_codegen/include" -DGRID_COMPILED_ARCHS='"sm_90"' -DNQ="${dims% *}" \
    -DNV="${dims#* }" "${defines[@]}" -Xptxas -v -o "$out/probe_$2" "$here/probe.cu" \
    >"$out/ptxas_$2.log" 2>&1 || { tail -20 "$out/ptxas_$2.log"; return 1; }
}
shift 2
[ $# -gt 0 ] || set -- "new=$repo"
trees=()
for spec in "$@"; do
  name="${spec%%=*}" source="${spec#*=}"
  if [ -d "$source/codegen" ]; then
    build "$source" "$name" &
  else
    tree="$(mktemp -d)/tree"; trees+=("$tree")
    if [[ "$source" == *.patch ]]; then  # this checkout's HEAD with the patch applied
      git -C "$repo" worktree add -q --detach "$tree" HEAD
      git -C "$tree" apply "$(cd "$(dirname "$source")" && pwd)/$(basename "$source")"
    else
      git -C "$repo" worktree add -q --detach "$tree" "$source"
    fi
    build "$tree" "$name" &
  fi
done
wait
for tree in "${trees[@]}"; do git -C "$repo" worktree remove --force "$tree"; done
for log in "$out"/ptxas_*.log; do  # each kernel's entry line, its stack and registers
  echo "== ${log##*/}"; grep -A3 "Compiling entry" "$log" | grep -E "Compiling|registers|stack frame"
done > "$out/ptxas_summary.txt"
echo "built $(ls "$out" | grep '^probe_' | tr '\n' ' ')"
