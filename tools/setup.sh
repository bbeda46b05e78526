#!/usr/bin/env bash
# Fresh-machine setup for grid-rbd; safe to run again (it skips finished work).
#   1. Debian packages: bazel-bootstrap (Bazel 4.2.3), a python3 with venv.
#   2. <repo>/.venv from requirements.lock (hash-checked), then the project
#      itself installed editable (when pyproject.toml exists).
# The venv is stamped with the hashes it was built from; a changed lock or
# Python rebuilds it from scratch, a changed pyproject.toml reinstalls the project.
# Env: GRID_RBD_VENV (venv path), GRID_RBD_PYTHON (interpreter to build it with).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRID_RBD_VENV:-$repo/.venv}"
python="${GRID_RBD_PYTHON:-python3}"
lock="$repo/requirements.lock"
stamp="$venv/.grid_rbd_stamp"

t0=$SECONDS
phase_start=$SECONDS
phase() {  # phase NAME: announce a phase; prints how long the previous one took
  printf '[setup +%ds] %s\n' "$((SECONDS - t0))" "$*"
  phase_start=$SECONDS
}
done_phase() { printf '[setup +%ds]   done in %ds\n' "$((SECONDS - t0))" "$((SECONDS - phase_start))"; }

# --- 1. system packages ---------------------------------------------------------
phase "system packages"
missing=()
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed'; }
installed bazel-bootstrap || missing+=(bazel-bootstrap)
command -v "$python" >/dev/null || { python=/usr/bin/python3; missing+=(python3); }
# Debian's python3 ships venv/ensurepip separately.
if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  python=/usr/bin/python3
  missing+=(python3-venv)
fi
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "  installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  done_phase
else
  echo "  already installed"
fi

# --- 2. Python venv -------------------------------------------------------------
phase "python venv at $venv"
py_version="$("$python" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))')"
lock_key="lock=$(sha256sum "$lock" | cut -d' ' -f1) python=$py_version"
project_key="project=none"
[ -f "$repo/pyproject.toml" ] && project_key="project=$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1)"

if [ -f "$stamp" ] && grep -qxF "$lock_key" "$stamp"; then
  echo "  requirements: up to date ($(head -c 20 <<<"$lock_key")...)"
else
  echo "  requirements: installing from requirements.lock with $python ($py_version)"
  rm -f "$stamp"
  "$python" -m venv --clear "$venv"
  "$venv/bin/python" -m pip install -q --require-hashes -r "$lock"
  printf '%s\n' "$lock_key" >"$stamp"
  done_phase
fi

if grep -qxF "$project_key" "$stamp"; then
  echo "  project: up to date"
elif [ -f "$repo/pyproject.toml" ]; then
  phase "project: pip install --no-deps --no-build-isolation -e ."
  "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$repo"
  done_phase
else
  echo "  project: no pyproject.toml yet, nothing to install"
fi
# Keep the lock line, replace the project line.
printf '%s\n%s\n' "$lock_key" "$project_key" >"$stamp"

phase "ready: $venv/bin/python ($py_version), bazel-bootstrap $(dpkg-query -W -f='${Version}' bazel-bootstrap)"
