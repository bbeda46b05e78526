#!/usr/bin/env bash
# Builds pin_bench (Pinocchio's C++ timed on a batch of states) against the headers of the
# `pin` wheel in a Python environment, header-only at -O3 -march=native with OpenMP.
#   tools/bench/pinocchio_harness/build.sh [python] [output]
# python: the interpreter whose site-packages hold the pin wheel's cmeel.prefix
#   (default: .venv/bin/python of the repository). output: default build/pin_bench/pin_bench.
# Eigen 3.4 headers: $EIGEN_INCLUDE_DIR, else the cmeel prefix, else /usr/include/eigen3
#   (Debian: apt-get install libeigen3-dev). CXX (default g++), PIN_BENCH_CXXFLAGS (default
#   "-O3 -march=native") override the compiler and its optimisation flags.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
python="${1:-$repo/.venv/bin/python}"
output="${2:-$repo/build/pin_bench/pin_bench}"
prefix="$("$python" -c 'import sysconfig, pathlib
for k in ("purelib", "platlib"):
    p = pathlib.Path(sysconfig.get_paths()[k]) / "cmeel.prefix"
    if (p / "include/pinocchio").is_dir():
        print(p); break')"
[ -n "$prefix" ] || { echo "build.sh: no pin wheel (cmeel.prefix/include/pinocchio) in $python" >&2; exit 1; }

eigen="${EIGEN_INCLUDE_DIR:-}"
for candidate in "$prefix/include/eigen3" /usr/include/eigen3; do
  [ -n "$eigen" ] && break
  [ -f "$candidate/Eigen/Core" ] && eigen="$candidate"
done
[ -n "$eigen" ] && [ -f "$eigen/Eigen/Core" ] || {
  echo "build.sh: no Eigen headers; set EIGEN_INCLUDE_DIR or apt-get install libeigen3-dev" >&2
  exit 1; }

cxx="${CXX:-g++}"
read -r -a opt <<<"${PIN_BENCH_CXXFLAGS:--O3 -march=native}"
mkdir -p "$(dirname "$output")"
# The defines are the ones the pinocchio headers target exports (its CMake config).
cmd=("$cxx" -std=c++17 "${opt[@]}" -DNDEBUG -fopenmp -Wno-deprecated-declarations
  -DBOOST_MPL_LIMIT_LIST_SIZE=30 -DBOOST_MPL_LIMIT_VECTOR_SIZE=30
  -DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS -DBOOST_FUSION_INVOKE_MAX_ARITY=12
  -I"$prefix/include" -isystem "$eigen" "$here/pin_bench.cpp" -o "$output"
  -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lboost_serialization)
t0=$SECONDS
"${cmd[@]}"
echo "${cmd[*]}" >"$output.flags"
echo "[pin_bench] $output in $((SECONDS - t0)) s (Eigen $eigen)"
