# Sourced by the GPU session scripts (gpu_session.sh, gpu_frameworks.sh) with the results
# folder as $1: sets `repo` and `out` (created), enters the repository, exports the
# import path and the test build folder, and writes the machine's identity to gpu.txt.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-gpu_results}" && cd "${1:-gpu_results}" && pwd)"
cd "$repo"
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/codegen:$repo/python:$repo/tests"
export GRID_RBD_TEST_BUILD_DIR="${GRID_RBD_TEST_BUILD_DIR:-/tmp/grid_rbd_builds}"
{ nvcc --version | tail -2; nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader; python3 -c 'import torch; print("torch", torch.__version__)'
  python3 -c 'import jax; print("jax", jax.__version__, jax.devices())'; } \
  >"$out/gpu.txt" 2>&1
