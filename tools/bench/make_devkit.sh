#!/usr/bin/env bash
# Fills .devkit/ (git-ignored through .git/info/exclude) with what the GPU machine needs for
# tools/bench/gpu_bench_session.sh and lacks: the grid-rbd 0.6.0 wheel (the peer), the
# pure-Python packages it needs that the machine's image does not have (as cp312-compatible
# wheels), and the URDFs (no meshes) of the example-robot-data robots benchmarked.
#   tools/bench/make_devkit.sh [PEER_WHEEL]
# PEER_WHEEL: default $GRID_RBD_PEER_WHEEL, else /tmp/peer/grid_rbd-0.6.0-*.whl.
# The image already holds numpy, scipy, sympy, lxml, typing-extensions, torch and
# matplotlib; the four wheels fetched here are pinned to the versions the peer was tried
# with. Needs pip (for `pip download`) and the project venv (for example-robot-data).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
kit="$repo/.devkit"
wheel="${1:-${GRID_RBD_PEER_WHEEL:-$(ls /tmp/peer/grid_rbd-0.6.0-*.whl 2>/dev/null | head -1)}}"
[ -f "$wheel" ] || { echo "make_devkit.sh: no grid-rbd 0.6.0 wheel (pass its path)" >&2; exit 1; }
grep -qx "/.devkit/" "$repo/.git/info/exclude" 2>/dev/null || {
  mkdir -p "$repo/.git/info"; echo "/.devkit/" >>"$repo/.git/info/exclude"; }

rm -rf "$kit/wheels" "$kit/robots"
mkdir -p "$kit/wheels" "$kit/robots"
cp "$wheel" "$kit/wheels/"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform any -d "$kit/wheels" \
  beautifulsoup4==4.15.0 soupsieve==4.1.3 trimesh==5.2.0 platformdirs==4.14.9

erd="$("$repo/.venv/bin/python" -c 'import sysconfig, pathlib
print(pathlib.Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots")')"
# Every example-robot-data robot of the test set (tests/support.py), for the GPU tests too.
for urdf in $("$repo/.venv/bin/python" -c 'import sys; sys.path.insert(0, "'"$repo"'/tests")
from support import ROBOTS
print(" ".join(r.relative_path for r in ROBOTS.values() if r.relative_path))'); do
  mkdir -p "$kit/robots/$(dirname "$urdf")"
  cp "$erd/$urdf" "$kit/robots/$urdf"
done
(cd "$kit" && find wheels robots -type f | sort | xargs sha256sum >MANIFEST.sha256)
du -sh "$kit"
cat "$kit/MANIFEST.sha256"
