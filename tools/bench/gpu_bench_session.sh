#!/usr/bin/env bash
# The side-by-side GPU benchmark in one command on the GPU machine (< 10 minutes):
#   1. install the device kit (.devkit/, from tools/bench/make_devkit.sh) into /tmp: the
#      grid-rbd 0.6.0 wheel and its missing pure-Python packages, a `pip --target` folder
#      that only the peer's process puts on PYTHONPATH;
#   2. build, in parallel: the peer's three robots (cold nvcc builds, one process each),
#      our runtime (tools/build_core.sh, in-tree, nothing installed) and then our three
#      robots; compile seconds are recorded;
#   3. run tools/bench/bench_vs_gridrbd060.py (cross-check, then timings; both sides),
#      and write the JSON, the plot and the logs to the results folder; print the table.
#   tools/bench/gpu_bench_session.sh [RESULTS]     (default $OUT, else ./gpu_bench_out)
# Env: STRATEGY (passed to our register_robot as strategy=), WITH_LATENCY=1 (then also run
# tools/bench/bench_latency.py when a minute is left), ROBOTS (default "g1 go2 iiwa14":
# the robots built and benchmarked), ALGORITHMS (default: the script's nine; e.g. "crba
# fk_batched idsva_so fdsva_so": built and run on both sides), BENCH_ARGS (more options
# for the run, e.g.
# "--batches 1 1024"), SESSION_LIMIT_S (default 570: the run is cut to
# fit), BUILD_TIMEOUT_S (default 330: one robot's build), PEER_WHEELS (default
# .devkit/wheels), GRID_RBD_ROBOT_DATA (default .devkit/robots).
set -uo pipefail
t_start=$SECONDS
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-${OUT:-gpu_bench_out}}" && cd "${1:-${OUT:-gpu_bench_out}}" && pwd)"
cd "$repo"
limit="${SESSION_LIMIT_S:-570}"
work=/tmp/bench_vs_gridrbd060
site=/tmp/gridrbd060_site
date="$(date +%F)"
mkdir -p "$work"
exec > >(tee -a "$out/session.log") 2>&1
stamp() { echo "[gpu_bench $((SECONDS - t_start)) s] $*"; }

export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/codegen:$repo/python:$repo/tests"
export GRID_RBD_ROBOT_DATA="${GRID_RBD_ROBOT_DATA:-$repo/.devkit/robots}"
strategy=()
[ -n "${STRATEGY:-}" ] && strategy=(--strategy "$STRATEGY")
[ -n "${ALGORITHMS:-}" ] && read -r -a algorithms <<<"$ALGORITHMS" \
  && strategy+=(--algorithms "${algorithms[@]}")  # (the options both build and run take)
read -r -a robots <<<"${ROBOTS:-g1 go2 iiwa14}"
peer_jobs() { case "$1" in g1) echo 6 ;; *) echo 4 ;; esac; }

stamp "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
nvcc --version | tail -1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
nproc

stamp "install the kit into $site"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
  "${PEER_WHEELS:-.devkit/wheels}"/*.whl || { echo "kit install failed"; exit 1; }

stamp "builds: the peer's robots, our runtime, then our robots (in parallel)"
build() {  # side robot jobs
  timeout "${BUILD_TIMEOUT_S:-330}" python3 tools/bench/bench_vs_gridrbd060.py build --side "$1" --robots "$2" \
    --jobs "$3" "${strategy[@]}" --out "$work/build_$1_$2.json" >"$work/build_$1_$2.log" 2>&1
  echo "[gpu_bench $((SECONDS - t_start)) s] build $1 $2: exit $?"
}
rm -f "$work"/build_*.json
pids=()
for r in "${robots[@]}"; do build peer "$r" "$(peer_jobs "$r")" & pids+=($!); done
tools/build_core.sh python3 >"$work/core_build.log" 2>&1 || { tail -20 "$work/core_build.log"; exit 1; }
stamp "core built"
for r in "${robots[@]}"; do build ours "$r" 1 & pids+=($!); done
wait "${pids[@]}"
stamp "builds done"
{ for f in "$work"/build_*.log "$work/core_build.log"; do echo "=== $f"; cat "$f"; done
  for f in "$work"/peer_cache/store/*/robot.build.log; do echo "=== $f"; cat "$f"; done
} >"$out/builds.log" 2>&1

left=$((limit - (SECONDS - t_start)))
[ "$left" -ge 120 ] || left=120  # the builds overran: still give the run two minutes
stamp "benchmark (${left} s left)"
# The peer's half gets at most half of what is left; the run itself stops at `left`.
# shellcheck disable=SC2086
timeout "$left" python3 tools/bench/bench_vs_gridrbd060.py run "${strategy[@]}" \
  --robots $(printf '%s\n' "${robots[@]}" | sort -r | tr '\n' ' ') \
  --builds "$work"/build_*.json --peer-timeout $((left / 2)) \
  --out "$out/${date}_h200_vs_gridrbd060.json" --plot "$out/bench_h200_vs_gridrbd060.png" \
  ${BENCH_ARGS:-} 2>"$out/bench.log"
echo "bench exit $?"
cp "$work/peer_run.json" "$out/peer_run.json" 2>/dev/null
tail -n 5 "$out/bench.log"
left=$((limit - (SECONDS - t_start)))
if [ -n "${WITH_LATENCY:-}" ] && [ -f tools/bench/bench_latency.py ] && [ "$left" -ge 60 ]; then
  stamp "our batch-1 latency table (tools/bench/bench_latency.py, ${left} s left)"
  XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "$left" python3 tools/bench/bench_latency.py \
    --device cuda --cache-dir "$work/ours_store" --out "$out/latency.json" \
    --plot "$out/latency.png" >>"$out/bench.log" 2>&1
  echo "latency exit $?"
fi
stamp "done; results in $out"
