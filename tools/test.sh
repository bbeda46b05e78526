#!/usr/bin/env bash
# The project's test command (what CI runs):
#   1. tools/setup.sh test (apt packages, .venv with the core, test and framework locks),
#   2. every Bazel test, `bazel test //...`, with a disk cache shared across
#      clones (GRID_RBD_BAZEL_CACHE, default ~/.cache/grid-rbd-bazel),
#   3. the pytest suite in the venv, last, so the output ends with its summary.
# Extra arguments go to pytest. Exits non-zero if any step fails; a Bazel
# failure still lets pytest run, so one CI log shows both.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRID_RBD_VENV:-$repo/.venv}"
cd "$repo"

"$repo/tools/setup.sh" test

bazel_args=(--disk_cache="${GRID_RBD_BAZEL_CACHE:-$HOME/.cache/grid-rbd-bazel}")
[ "${CI:-}" = true ] && bazel_args+=(--config=ci)
t=$SECONDS
echo "[test] bazel test //..."
bazel_rc=0
bazel test "${bazel_args[@]}" //... || bazel_rc=$?
echo "[test] bazel test //... exit $bazel_rc after $((SECONDS - t))s"

echo "[test] pytest tests"
pytest_rc=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@" || pytest_rc=$?
if ((bazel_rc)); then
  echo "[test] FAILED: bazel test //... exited $bazel_rc" >&2
  exit "$bazel_rc"
fi
exit "$pytest_rc"
