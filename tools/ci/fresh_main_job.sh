#!/usr/bin/env bash
# Fresh-machine check: the README's main-job command as a new user runs it.
#
#   1. a clean clone of this repository's HEAD in a temporary folder;
#   2. a fresh HOME (no pip cache, no grid-rbd store), pip's configuration files switched
#      off (PIP_CONFIG_FILE=/dev/null) and every PIP_* variable unset: no machine-local
#      wheel folder, extra index or constraint, only the public package index;
#   3. `tools/main.sh` there (a fresh venv from requirements-core.lock, the project, a cold
#      registration of iiwa14 and the demo's agreement checks), which must exit 0;
#   4. `pip install .` of the clone into that venv (a regular, non-editable install), then
#      the demo and `grid-rbd info iiwa14` from outside the tree: the in-tree URDF must
#      come with the package.
# Prints the time of each step. Env: GRID_RBD_FRESH_KEEP=1 keeps the folder.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
say() { printf '[fresh] %s\n' "$*"; }
trap 'say "FAILED: line $LINENO: $BASH_COMMAND"' ERR
work="$(mktemp -d /tmp/grid_rbd_fresh.XXXXXX)"
cleanup() {
  local rc=$?
  [ -n "${GRID_RBD_FRESH_KEEP:-}" ] || rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
start=$SECONDS

git clone --quiet "$repo" "$work/clone"
mkdir -p "$work/home"
# What a fresh machine's shell has: no pip settings of this one, a new home.
clean_env=(env)
for var in $(compgen -e); do
  case "$var" in PIP_* | GRID_RBD_* | VIRTUAL_ENV | PYTHONPATH) clean_env+=(-u "$var") ;; esac
done
clean_env+=(HOME="$work/home" XDG_CACHE_HOME="$work/home/.cache" PIP_CONFIG_FILE=/dev/null)

t=$SECONDS
say "tools/main.sh in a clean clone (public index only, fresh venv, fresh home)"
if ! "${clean_env[@]}" "$work/clone/tools/main.sh" >"$work/main.log" 2>&1; then
  tail -40 "$work/main.log"
  say "FAILED: tools/main.sh"
  exit 1
fi
grep -E '^\[setup|^registration|agreement|  (forward_dynamics|reference)|^reference' \
  "$work/main.log" | sed 's/^/  /'
grep -q 'FAILED' "$work/main.log" && { say "FAILED: the main job reported a failure"; exit 1; }
say "main job: $((SECONDS - t)) s"

t=$SECONDS
venv="$work/clone/.venv"
say "pip install . (non-editable) and the main job from outside the tree"
"${clean_env[@]}" "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation \
  "$work/clone" >"$work/install.log" 2>&1 || { tail -40 "$work/install.log"; exit 1; }
rm -rf "$work/clone/python" "$work/clone/codegen" "$work/clone/robots"  # none from the tree
cd "$work"
"${clean_env[@]}" "$venv/bin/python" -m grid_rbd.demo --cold --batch 8 --timing-batch 64 \
  >"$work/installed.log" 2>&1 || { tail -40 "$work/installed.log"; exit 1; }
grep -E 'agreement|  forward_dynamics ' "$work/installed.log" | sed 's/^/  /'
"${clean_env[@]}" "$venv/bin/grid-rbd" info iiwa14 --cache-dir "$work/home/store" \
  >"$work/info.log" 2>&1 || { tail -20 "$work/info.log"; exit 1; }
head -3 "$work/info.log" | sed 's/^/  /'
say "installed package: $((SECONDS - t)) s; total $((SECONDS - start)) s"
