#!/usr/bin/env bash
# Builds grid_rbd._core in-tree (python/grid_rbd/_core.*.so, git-ignored) for use with
# PYTHONPATH=codegen:python, without installing anything. Incremental: re-run after
# editing runtime/. Needs cmake, a C++17 compiler and pybind11 in the Python it uses.
#   tools/build_core.sh [python]      (default: $GRID_RBD_PYTHON, else python3)
# Env: GRID_RBD_WERROR=ON to fail on warnings; BUILD_DIR (default build/core).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:-${GRID_RBD_PYTHON:-python3}}"
build="${BUILD_DIR:-$repo/build/core}"
generator=()
[ -f "$build/CMakeCache.txt" ] || { command -v ninja >/dev/null && generator=(-G Ninja); }

t0=$SECONDS
cmake -S "$repo" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGRID_RBD_WERROR="${GRID_RBD_WERROR:-OFF}" \
  -DPython_EXECUTABLE="$(command -v "$python")" \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$build" --parallel "$(nproc)"
echo "[build_core] $(ls "$repo"/python/grid_rbd/_core*.so) in $((SECONDS - t0))s"
