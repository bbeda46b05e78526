#!/usr/bin/env bash
# The main job: `python -m grid_rbd.demo` in the project venv, after `tools/setup.sh core`
# (numpy and the compiled extension grid_rbd._core only: no apt package, no framework).
# Arguments go to the demo (--cold, --device cpu|cuda, --dtype float64, ...). Setup's
# progress goes to stderr so stdout is the demo's alone.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRID_RBD_VENV:-$repo/.venv}"

"$repo/tools/setup.sh" core >&2
cd "$repo"
exec "$venv/bin/python" -m grid_rbd.demo "$@"
