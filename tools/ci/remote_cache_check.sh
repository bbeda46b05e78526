#!/usr/bin/env bash
# Remote-cache check: prove that the robot builds are hermetic enough for an HTTP cache.
#
#   1. nginx (Debian's nginx-extras, WebDAV PUT) on 127.0.0.1:<free port>, its root a
#      fresh folder; a PUT/GET probe first, since Bazel carries on silently when a cache
#      answers PUT with an error.
#   2. cold:   a fresh output base builds the targets with --remote_cache (uploads all);
#      warm:   the same again, nothing changed (nothing runs);
#      then that output base is thrown away (bazel clean --expunge).
#   3. remote: a second fresh output base builds with --execution_log_json_file; fails
#      unless every code-generation and compile spawn (GridGenerate, GridCompileCpu,
#      GridCompileCuda) was a remote cache hit, and there were as many as the cold build
#      ran (which must cover every generate and CPU compile target).
#   4. prints the three build times and action counts; stops nginx.
#
# Env:
#   GRID_RBD_CACHE_CHECK_WORKSPACE  the workspace to build in (default: this repository;
#       tools/ci/consumer_check.sh points it at a workspace that pulls grid-rbd in)
#   GRID_RBD_CACHE_CHECK_TARGETS  target patterns (default //robots/...)
#   GRID_RBD_CACHE_CHECK_FLAGS    more bazel build flags, e.g. --config=cuda (CUDA targets
#       too on a machine without a GPU, where they are skipped by default)
#   GRID_RBD_CACHE_CHECK_JOBS     Bazel --jobs (default: Bazel's, one per core)
#   GRID_RBD_CACHE_CHECK_REUSE_OUTPUT_BASE=1  do step 3 in the workspace's default
#       output base (expunged first) so a later `bazel test //...` (tools/test.sh)
#       finds the robots built; .ci/run sets it in its fresh clone. Without it every
#       output base is a temporary one and yours is untouched.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
workspace="$(cd "${GRID_RBD_CACHE_CHECK_WORKSPACE:-$repo}" && pwd)"
cd "$workspace"
read -r -a targets <<<"${GRID_RBD_CACHE_CHECK_TARGETS:-//robots/...}"
read -r -a extra_flags <<<"${GRID_RBD_CACHE_CHECK_FLAGS:-}"
mnemonics=(GridGenerate GridCompileCpu GridCompileCuda)
say() { printf '[cache-check] %s\n' "$*"; }
trap 'say "FAILED: line $LINENO: $BASH_COMMAND"' ERR

# --- nginx ------------------------------------------------------------------------------
nginx_bin="$(command -v nginx || true)"
[ -n "$nginx_bin" ] || [ ! -x /usr/sbin/nginx ] || nginx_bin=/usr/sbin/nginx
if [ -z "$nginx_bin" ] || ! "$nginx_bin" -V 2>&1 | grep -q http_dav_module; then
  say "installing nginx-extras (apt)"
  "$repo/tools/ci/apt_get.sh" update -qq
  "$repo/tools/ci/apt_get.sh" install -y -qq --no-install-recommends nginx-extras
  nginx_bin=/usr/sbin/nginx
fi

work="$(mktemp -d /tmp/grid_rbd_cache_check.XXXXXX)"
chmod 755 "$work"
ngx="$work/nginx"
mkdir -p "$ngx/cache" "$ngx/tmp"
user_line=""
if [ "$(id -u)" -eq 0 ]; then
  # The master runs as root; its workers (the ones that write) run as nobody.
  user_line="user nobody nogroup;"
  chown -R nobody:nogroup "$ngx/cache" "$ngx/tmp"
fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
sed -e "s|@DIR@|$ngx|g" -e "s|@PORT@|$port|g" -e "s|@USER@|$user_line|" \
  "$repo/tools/ci/nginx.conf.in" >"$ngx/nginx.conf"
cache="http://127.0.0.1:$port"

output_bases=()
cleanup() {
  local rc=$?
  for ob in "${output_bases[@]}"; do
    bazel --output_base="$ob" shutdown >/dev/null 2>&1 || true
  done
  "$nginx_bin" -p "$ngx" -c "$ngx/nginx.conf" -s quit 2>/dev/null || true
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

"$nginx_bin" -p "$ngx" -c "$ngx/nginx.conf" -t -q
"$nginx_bin" -p "$ngx" -c "$ngx/nginx.conf"
python3 - "$cache" <<'PY'
import sys, time, urllib.request
url = sys.argv[1] + "/cas/grid-rbd-probe"
for attempt in range(50):
    try:
        urllib.request.urlopen(urllib.request.Request(url, b"probe", method="PUT"), timeout=5)
        break
    except OSError as err:
        if attempt == 49:
            sys.exit(f"the cache at {sys.argv[1]} refuses PUT: {err}")
        time.sleep(0.1)
got = urllib.request.urlopen(url, timeout=5).read()
if got != b"probe":
    sys.exit(f"the cache at {sys.argv[1]} returned {got!r} for what was PUT")
PY
rm -f "$ngx/cache/cas/grid-rbd-probe"
say "nginx $("$nginx_bin" -v 2>&1 | sed 's|.*/||') serving $cache (WebDAV PUT, root $ngx/cache)"

# --- Bazel --------------------------------------------------------------------------------
common=(--remote_cache="$cache" --disk_cache= --experimental_convenience_symlinks=ignore
        "${extra_flags[@]}")
[ -z "${GRID_RBD_CACHE_CHECK_JOBS:-}" ] || common+=(--jobs="$GRID_RBD_CACHE_CHECK_JOBS")
# --config=ci is this repository's .bazelrc's; another workspace need not define it.
[ "${CI:-}" != true ] || [ "$workspace" != "$repo" ] || common+=(--config=ci)

declare -A seconds actions
timed_build() {  # timed_build NAME OUTPUT_BASE [bazel build args...]
  local name=$1 ob=$2 log="$work/$1.log" start=$SECONDS
  shift 2
  say "$name: bazel build ${targets[*]}"
  if ! bazel --output_base="$ob" build "${common[@]}" "$@" -- "${targets[@]}" >"$log" 2>&1; then
    tail -40 "$log"
    say "FAILED: the $name build"
    return 1
  fi
  seconds[$name]=$((SECONDS - start))
  # "INFO: 19 processes: 9 remote cache hit, 10 internal." (the action count line;
  # --config=ci prefixes a timestamp)
  actions[$name]="$(grep -E 'INFO: [0-9]+ process(es)?:' "$log" | tail -1 | sed 's/^.*INFO: //' || true)"
  say "$name: ${seconds[$name]} s; ${actions[$name]}"
}

fetch() {  # fetch OUTPUT_BASE: repositories and analysis, timed apart from the build
  local start=$SECONDS
  bazel --output_base="$1" build --nobuild "${common[@]}" -- "${targets[@]}" >"$work/fetch.log" 2>&1 ||
    { tail -40 "$work/fetch.log"; return 1; }
  say "fetch + analysis (repository rules: venv, URDFs, the CUDA wheels' pip install): $((SECONDS - start)) s"
}

first="$work/output_base_cold"
output_bases+=("$first")
fetch "$first"
query="deps(${targets[*]})"
query="${query// -/ - }"
# Generate and CPU compile targets are built everywhere; CUDA ones only where
# --//cuda:enabled is on, so their number comes from what the cold build ran.
cpu_targets="$(bazel --output_base="$first" query \
  "kind('grid_generated_sources|grid_cpu_library', $query)" 2>/dev/null | wc -l)"
say "$cpu_targets code-generation/CPU compile targets"

timed_build cold "$first" --execution_log_json_file="$work/exec_cold.json" \
  --profile="$work/cold.profile.gz"
python3 "$repo/tools/ci/exec_log_summary.py" "$work/exec_cold.json" \
  --profile "$work/cold.profile.gz"
cold_cpu="$(python3 "$repo/tools/ci/exec_log_summary.py" "$work/exec_cold.json" \
  --count GridGenerate GridCompileCpu)"
expected="$(python3 "$repo/tools/ci/exec_log_summary.py" "$work/exec_cold.json" \
  --count "${mnemonics[@]}")"
if [ "$cold_cpu" -ne "$cpu_targets" ]; then
  say "FAILED: the cold build ran $cold_cpu generate/CPU compile actions for $cpu_targets targets"
  exit 1
fi
say "the cold build ran $expected generate/compile actions ($((expected - cold_cpu)) CUDA)"
timed_build warm "$first"
blobs="$(find "$ngx/cache" -type f | wc -l)"
say "the cache holds $blobs files ($(du -sh "$ngx/cache" | cut -f1))"
[ "$blobs" -gt 0 ] || { say "FAILED: nothing was uploaded (see $ngx/error.log)"; exit 1; }

say "throwing the output base away (bazel clean --expunge)"
bazel --output_base="$first" clean --expunge >/dev/null 2>&1

if [ "${GRID_RBD_CACHE_CHECK_REUSE_OUTPUT_BASE:-}" = 1 ]; then
  second="$(bazel info output_base 2>/dev/null)"
  bazel clean --expunge >/dev/null 2>&1
else
  second="$work/output_base_remote"
fi
output_bases+=("$second")
fetch "$second"
timed_build remote "$second" --execution_log_json_file="$work/exec.json" \
  --profile="$work/remote.profile.gz"
python3 "$repo/tools/ci/exec_log_summary.py" "$work/exec.json" \
  --profile "$work/remote.profile.gz" --require-hits "${mnemonics[@]}" --expect "$expected"

say "summary for ${targets[*]} (targets: $expected generate/compile):"
for name in cold warm remote; do
  printf '[cache-check]   %-6s %5d s   %s\n' "$name" "${seconds[$name]}" "${actions[$name]}"
done
