#!/usr/bin/env bash
# One GPU call for the batch-1 FD gradient (issue 11), sized for 10 minutes (DEADLINE_S,
# default 560):
#   1. the FD gradient latency probe (fd_gradient_latency_probe) built from this tree and,
#      where BASELINE names another checkout's root (a plain copy, e.g. `git archive`),
#      from that one; both timed in turn, twice (probe_<tree>_<k>.txt), and one tangents
#      launch at B = 1 of each under Nsight Compute where `ncu` exists (ncu_<tree>.txt);
#   2. the gpu-tagged tests PYTEST_ARGS (default: the tangents variants, the joint types
#      and the codegen matrix on the GPU) in the time left (pytest.txt), once the runtime
#      (tools/build_core.sh, started first, in the background) is built.
# Results go to $1 (default ./gpu_results); the runtime stays built for a later script.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh" "${1:-gpu_results}"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
start=$SECONDS
deadline=${DEADLINE_S:-560}
left() { echo $((deadline - SECONDS + start)); }
tools/build_core.sh python3 >"$out/core_build.log" 2>&1 &
core=$!
trees=("this:$repo")
[ -n "${BASELINE:-}" ] && trees+=("base:$(cd "$BASELINE" && pwd)")
builds=()
for entry in "${trees[@]}"; do
  name=${entry%%:*} root=${entry#*:}
  bash "$root/tools/bench/fd_gradient_latency_probe/run.sh" build "/tmp/probe_$name" \
    >"$out/probe_${name}_build.log" 2>&1 &
  builds+=($!)
done
wait "${builds[@]}"
echo "probes built after $((SECONDS - start)) s"
for k in 1 2; do
  for entry in "${trees[@]}"; do
    name=${entry%%:*}
    [ -x "/tmp/probe_$name/probe" ] && /tmp/probe_$name/probe 1 16 64 1024 16384 \
      >"$out/probe_${name}_$k.txt" 2>&1
  done
done
for entry in "${trees[@]}"; do
  name=${entry%%:*}
  cp "/tmp/probe_$name/ptxas_summary.txt" "$out/ptxas_$name.txt" 2>/dev/null
  if command -v ncu >/dev/null && [ -x "/tmp/probe_$name/probe" ]; then
    timeout 60 ncu -k regex:tangents_kernel --launch-skip 20 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section InstructionStats \
      "/tmp/probe_$name/probe" 1 >"$out/ncu_$name.txt" 2>&1
  fi
done
echo "probes timed after $((SECONDS - start)) s"
for f in "$out"/probe_*_1.txt "$out"/probe_*_2.txt; do
  echo "== $f"; grep "B=1 " "$f"
done
wait "$core" || { echo "runtime build failed"; tail -5 "$out/core_build.log"; exit 1; }
echo "runtime built after $((SECONDS - start)) s"
timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -m gpu ${PYTEST_ARGS:-\
  tests/test_tangents_gpu.py tests/test_joint_types_gpu.py tests/test_codegen_gpu.py} \
  >"$out/pytest.txt" 2>&1
echo "pytest rc=$? after $((SECONDS - start)) s"; tail -5 "$out/pytest.txt"
