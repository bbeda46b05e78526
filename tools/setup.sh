#!/usr/bin/env bash
# Fresh-machine setup for grid-rbd; safe to run again (it skips finished work).
#
#   tools/setup.sh core    what the main job needs (tools/main.sh): <repo>/.venv with
#                          requirements-core.lock (numpy and the build tools of
#                          grid_rbd._core) and the project installed editable. Installs
#                          no system package: it needs a python3 with venv and a C++17
#                          compiler, and says so when either is missing.
#   tools/setup.sh [test]  what the tests need (tools/test.sh, CI), on top of the core:
#                          Debian's bazel-bootstrap (Bazel 4.2.3) with bazel-rules-cc,
#                          bazel-skylib and bazel-platforms through apt (waiting for the
#                          dpkg lock when another apt holds it), then
#                          requirements-test.lock and requirements-frameworks.lock (torch,
#                          jax), and requirements-frameworks-cuda.lock only when the torch
#                          pip chose is a CUDA build.
#
# Every lock is hash-checked. The venv is stamped with the digest of each lock it was
# installed from; a changed lock is installed over the venv (pip moves only the pins that
# changed), a changed Python rebuilds it, a changed pyproject.toml reinstalls the project.
# Env: GRID_RBD_VENV (venv path), GRID_RBD_PYTHON (interpreter to build it with),
#      GRID_RBD_APT_WAIT_S (how long to wait for apt's locks, default 900; tools/ci/apt_get.sh).
set -euo pipefail

profile="${1:-test}"
case "$profile" in
  core | test) ;;
  -h | --help) sed -n '2,/^set -e/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "tools/setup.sh: unknown profile '$profile' (expected core or test)" >&2; exit 2 ;;
esac

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GRID_RBD_VENV:-$repo/.venv}"
python="${GRID_RBD_PYTHON:-python3}"
stamp="$venv/.grid_rbd_stamp"

t0=$SECONDS
phase_start=$SECONDS
phase() {  # phase NAME: announce a phase
  printf '[setup +%ds] %s\n' "$((SECONDS - t0))" "$*"
  phase_start=$SECONDS
}
done_phase() { printf '[setup +%ds]   done in %ds\n' "$((SECONDS - t0))" "$((SECONDS - phase_start))"; }
die() { printf 'tools/setup.sh: %s\n' "$*" >&2; exit 1; }

# apt-get that waits while another process holds the dpkg or package-list lock.
apt_get() { "$repo/tools/ci/apt_get.sh" "$@"; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed'; }

# --- 1. system packages (test profile only) -------------------------------------------
if [ "$profile" = test ]; then
  phase "system packages"
  missing=()
  for pkg in bazel-bootstrap bazel-rules-cc bazel-skylib bazel-platforms; do
    installed "$pkg" || missing+=("$pkg")
  done
  command -v "$python" >/dev/null || { python=/usr/bin/python3; missing+=(python3); }
  # Debian's python3 ships venv/ensurepip separately.
  if ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
    python=/usr/bin/python3
    missing+=(python3-venv)
  fi
  if ((${#missing[@]})); then
    echo "  installing: ${missing[*]}"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "${missing[@]}"
    done_phase
  else
    echo "  already installed"
  fi
  # .bazelversion pins 4.2.3. Debian's /usr/bin/bazel wrapper honours it by running
  # /usr/bin/bazel-<version>, but the package names its binary bazel-4: give it the full
  # name too (as Bazel's own apt packages do), once the package is that version.
  want="$(cat "$repo/.bazelversion")"
  have="$(dpkg-query -W -f='${Version}' bazel-bootstrap)"
  if [ ! -e "/usr/bin/bazel-$want" ] && [ -x /usr/bin/bazel-4 ] && [ "${have%%+*}" = "$want" ]
  then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" ln -s bazel-4 "/usr/bin/bazel-$want"
    echo "  linked /usr/bin/bazel-$want -> bazel-4 (for .bazelversion)"
  fi
else
  command -v "$python" >/dev/null ||
    die "no $python on PATH: install Python 3.10 or later (or set GRID_RBD_PYTHON)"
  "$python" -c 'import ensurepip, venv' 2>/dev/null ||
    die "$python has no venv module: install it (Debian/Ubuntu: apt install python3-venv)"
  cxx=""
  for c in "${CXX:-}" c++ g++ clang++; do
    [ -n "$c" ] && command -v "$c" >/dev/null && { cxx="$c"; break; }
  done
  [ -n "$cxx" ] || die "no C++ compiler (\$CXX, c++, g++, clang++): install one, e.g. apt install g++"
fi

# --- 2. Python venv -------------------------------------------------------------------
phase "python venv at $venv ($profile)"
py_version="$("$python" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))')"
digest() { sha256sum "$1" | cut -d' ' -f1; }
has() { [ -f "$stamp" ] && grep -qxF "$1" "$stamp"; }
stamp_set() {  # stamp_set KEY=VALUE: replace that key's line
  local key="${1%%=*}"
  { grep -v "^$key=" "$stamp" 2>/dev/null || true; printf '%s\n' "$1"; } >"$stamp.new"
  mv "$stamp.new" "$stamp"
}

venv_version="$("$venv/bin/python" -c 'import sys; print(".".join(map(str, sys.version_info[:3])))' 2>/dev/null || true)"
if [ "$venv_version" != "$py_version" ]; then
  echo "  new venv with $python ($py_version)"
  "$python" -m venv --clear "$venv"
  : >"$stamp"
fi
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes)

install_lock() {  # install_lock NAME [pip args]: requirements-NAME.lock, once per digest
  local name=$1 lock="$repo/requirements-$1.lock" key
  shift
  key="$name=$(digest "$lock")"
  if has "$key"; then
    echo "  $name: up to date"
    return
  fi
  phase "$name: pip install -r requirements-$name.lock"
  "${pip[@]}" "$@" -r "$lock"
  stamp_set "$key"
  done_phase
}

install_lock core
if [ "$profile" = test ]; then
  install_lock test
  frameworks_key="frameworks=$(digest "$repo/requirements-frameworks.lock")"
  if ! has "$frameworks_key"; then
    # A local torch wheel first (a machine's wheel folder, e.g. a CPU build): pip ranks an
    # index's hash-matching link above a local file without one, so it would otherwise
    # fetch the index's default build even where a local wheel meets the pin.
    torch_pin="$(mktemp)"
    awk '/^torch==/ {p = 1; print; next} p && /^[^ ]/ {p = 0} p' \
      "$repo/requirements-frameworks.lock" >"$torch_pin"
    if "${pip[@]}" --no-index --no-deps -r "$torch_pin" >/dev/null 2>&1; then
      echo "  torch: a local wheel ($("$venv/bin/python" -m pip show torch 2>/dev/null |
        sed -n 's/^Version: //p'))"
    fi
    rm -f "$torch_pin"
  fi
  # --no-deps: the lock is complete for the torch it holds, and the CUDA libraries of
  # torch's default build are in their own lock, installed next if that is the build.
  install_lock frameworks --no-deps
  if "$venv/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(not any(r.startswith("nvidia-") for r in m.requires("torch") or ()))'; then
    install_lock frameworks-cuda --no-deps
  fi
  "$venv/bin/python" -m pip check -q >/dev/null 2>&1 ||
    { "$venv/bin/python" -m pip check >&2; die "the venv's packages do not fit together"; }
fi

project_key="project=$(digest "$repo/pyproject.toml")"
if has "$project_key" && compgen -G "$repo/python/grid_rbd/_core*.so" >/dev/null; then
  echo "  project: up to date"
else
  phase "project: pip install --no-deps --no-build-isolation -e ."
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
    --no-build-isolation -e "$repo"
  stamp_set "$project_key"
  done_phase
fi

bazel_note=""
[ "$profile" = core ] || bazel_note=", bazel-bootstrap $(dpkg-query -W -f='${Version}' bazel-bootstrap)"
phase "ready: $venv/bin/python ($py_version)$bazel_note"
