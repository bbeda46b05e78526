#!/usr/bin/env bash
# Consumer check: grid-rbd used from another organisation's Bazel workspace.
#
# Makes a workspace outside this repository (a temporary folder) that
#   - pulls grid-rbd in with `local_repository(name = "grid_rbd", path = <this repo>)`
#     and calls `grid_rbd_workspace()` from @grid_rbd//:workspace.bzl once (no venv of
#     ours: @grid_python is built from the lock files);
#   - calls `grid_robot` from @grid_rbd//:defs.bzl for a robot of its own (a URDF in the
#     consumer's tree);
#   - has a py_test of its own, which must run with the consumer's Python, not ours (no
#     Python toolchain of grid-rbd captures it);
# then runs tools/ci/remote_cache_check.sh on it (cold, warm, thrown away, every generate
# and compile action a remote hit; the last build in the workspace's own output base), and
# `bazel test //...` there (on this machine: CPU targets only, CUDA skipped), which finds
# the robot built and must pass.
#
# Env: GRID_RBD_CONSUMER_DIR keep the workspace there instead of a temporary folder.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
say() { printf '[consumer] %s\n' "$*"; }
trap 'say "FAILED: line $LINENO: $BASH_COMMAND"' ERR
start=$SECONDS

if [ -n "${GRID_RBD_CONSUMER_DIR:-}" ]; then
  work="$GRID_RBD_CONSUMER_DIR"
  mkdir -p "$work"
else
  work="$(mktemp -d /tmp/grid_rbd_consumer.XXXXXX)"
fi
ws="$work/acme"
ob="$work/output_base"
cleanup() {
  local rc=$?
  bazel --output_base="$ob" shutdown >/dev/null 2>&1 || true
  if [ -z "${GRID_RBD_CONSUMER_DIR:-}" ]; then
    chmod -R u+w "$work" 2>/dev/null || true
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT

rm -rf "$ws"
mkdir -p "$ws/arms"
cp "$repo/robots/iiwa14/iiwa14.urdf" "$ws/arms/arm.urdf"
cat >"$ws/WORKSPACE" <<EOF
workspace(name = "acme")

local_repository(
    name = "grid_rbd",
    path = "$repo",
)

load("@grid_rbd//:workspace.bzl", "grid_rbd_workspace")

grid_rbd_workspace()
EOF
printf '%s\n' bazel-acme bazel-bin bazel-out bazel-testlogs >"$ws/.bazelignore"
cat >"$ws/.bazelrc" <<EOF
startup --output_base=$ob
build --nosandbox_debug
build --experimental_repository_disable_download
build --incompatible_strict_action_env
test --test_output=errors
EOF
cat >"$ws/arms/BUILD.bazel" <<'EOF'
load("@grid_rbd//:defs.bzl", "grid_robot")

grid_robot(
    name = "arm",
    urdf = "arm.urdf",
    algorithms = ["inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient"],
)
EOF
# The organisation's own Python: a toolchain of its own, registered in its WORKSPACE, and
# a py_test that must run with it, not with grid-rbd's venv (grid-rbd registers no Python
# toolchain that could capture it).
cat >>"$ws/WORKSPACE" <<'EOF'

register_toolchains("//:org_python_toolchain")
EOF
org_python="$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')"
cat >"$ws/BUILD.bazel" <<EOF
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

py_runtime(
    name = "org_python3",
    interpreter_path = "$org_python",
    python_version = "PY3",
    stub_shebang = "#!$org_python",
)

py_runtime_pair(
    name = "org_python_pair",
    py3_runtime = ":org_python3",
)

toolchain(
    name = "org_python_toolchain",
    toolchain = ":org_python_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)

py_test(
    name = "own_python_test",
    srcs = ["own_python_test.py"],
    python_version = "PY3",
)
EOF
cat >"$ws/own_python_test.py" <<EOF
import os
import sys

assert os.path.realpath(sys.executable) == "$org_python", (
    f"the workspace's own py_test ran with {sys.executable}, not its toolchain's "
    "$org_python")
print("own py_test ran with", sys.executable)
EOF
say "workspace $ws: local_repository(grid_rbd) + grid_rbd_workspace(), grid_robot(arm)"

cd "$ws"
GRID_RBD_CACHE_CHECK_WORKSPACE="$ws" GRID_RBD_CACHE_CHECK_TARGETS="//..." \
  GRID_RBD_CACHE_CHECK_REUSE_OUTPUT_BASE=1 "$repo/tools/ci/remote_cache_check.sh"

t=$SECONDS
log="$work/test.log"
if ! bazel test //... >"$log" 2>&1; then
  tail -60 "$log"
  say "FAILED: bazel test //... in the consumer workspace"
  exit 1
fi
grep -E '(PASSED|SKIPPED|FAILED|NO STATUS)|Executed|INFO: Build completed' "$log" | sed 's/^/  /'
passed="$(grep -cE '^//\S+ .*PASSED' "$log" || true)"
[ "$passed" -ge 2 ] || { say "FAILED: expected the robot and the own py_test to pass"; exit 1; }
grep -qE '^//arms:arm_cpu_test .*PASSED' "$log" || { say "FAILED: //arms:arm_cpu_test did not pass"; exit 1; }
say "bazel test //...: $passed passed in $((SECONDS - t)) s"
say "done in $((SECONDS - start)) s"
