#!/usr/bin/env bash
# `bazel test` of robot packages on a GPU machine without Bazel, Java or a network (the lent
# H200): unpacks the kit of tools/bazel/make_gpu_kit.sh, then builds and tests with the
# machine's CUDA toolkit (--config=local_cuda), its Python (GRID_RBD_VENV, default
# /opt/torch/.venv) and /usr/bin/gcc. Results to $1 (bazel_test.log and each test.log).
#   tools/bazel/gpu_bazel_test.sh OUT [targets...]     (default //robots/iiwa14:all)
set -uo pipefail
out="$(mkdir -p "${1:?usage: gpu_bazel_test.sh OUT [targets]}" && cd "$1" && pwd)"
shift
targets=("${@:-//robots/iiwa14:all}")
kit="${GRID_BAZEL_KIT:-.bazelkit/bazelkit.tar.xz}"
tar -xJf "$kit" -C / || { echo "cannot unpack $kit"; exit 3; }
mkdir -p /etc/bazel
printf 'startup --install_base=/usr/share/bazel\nstartup --trust_install_base\n' \
  >/etc/bazel/bazelrc  # what Debian's package installs beside its client
export LD_LIBRARY_PATH=/opt/bazelkit/lib
bazel=(bazel-4 --server_javabase=/opt/bazelkit/jre "--output_user_root=${GRID_BAZEL_ROOT:-/tmp/bazel_root}")
flags=(--config=local_cuda "--repo_env=GRID_RBD_VENV=${GRID_RBD_VENV:-/opt/torch/.venv}"
       --test_output=errors)
[ -x /usr/bin/gcc ] && flags+=(--repo_env=CC=/usr/bin/gcc)
python="${GRID_RBD_VENV:-/opt/torch/.venv}/bin/python3"
if ! "$python" -c "import pinocchio" 2>/dev/null; then
  echo "no pinocchio in $python: the Pinocchio oracle tests (tag pinocchio) are left out"
  flags+=(--test_tag_filters=-pinocchio)
fi
start=$SECONDS
"${bazel[@]}" test "${flags[@]}" "${targets[@]}" >"$out/bazel_test.log" 2>&1
status=$?
echo "bazel test ${targets[*]}: exit $status after $((SECONDS - start)) s (cold)"
start=$SECONDS
"${bazel[@]}" test "${flags[@]}" "${targets[@]}" >"$out/bazel_test_warm.log" 2>&1
echo "warm (nothing changed): exit $? after $((SECONDS - start)) s"
grep -E "PASSED|FAILED|SKIPPED|NO STATUS|Executed" "$out/bazel_test.log"
logs="$("${bazel[@]}" info bazel-testlogs 2>/dev/null)"
find "$logs" -name test.log | while read -r log; do
  name="$(basename "$(dirname "$log")")"
  cp "$log" "$out/$name.log"
  echo "$name: $(grep -E '(passed|failed|skipped|error)' "$log" | tail -1)"
done
exit $status
