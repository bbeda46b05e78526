#!/usr/bin/env bash
# Runs the grid-rbd demo (python -m grid_rbd.demo) in the project venv, after
# tools/setup.sh. Arguments go to the demo. Setup's progress goes to stderr so
# stdout is the demo's alone.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRID_RBD_VENV:-$repo/.venv}"

"$repo/tools/setup.sh" >&2
cd "$repo"
exec "$venv/bin/python" -m grid_rbd.demo "$@"
