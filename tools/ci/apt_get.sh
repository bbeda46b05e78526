#!/usr/bin/env bash
# apt-get that waits while another process holds apt's locks, instead of failing at once.
#
#   tools/ci/apt_get.sh update -qq
#   tools/ci/apt_get.sh install -y -qq --no-install-recommends PKG...
#
# DPkg::Lock::Timeout makes apt-get wait for the dpkg frontend lock, but not for the
# package lists' lock (`apt-get update` fails at once while unattended-upgrades or a second
# setup runs). So: run it; when it failed on a lock ("Could not get lock", "Unable to
# lock"), wait and run it again, up to GRID_RBD_APT_WAIT_S seconds (default 900) in all;
# any other failure is returned as it is. As root, or through sudo. Tests set
# GRID_RBD_APT_GET (the apt-get to run) and GRID_RBD_APT_POLL_S (seconds between tries,
# default 5).
set -uo pipefail

limit="${GRID_RBD_APT_WAIT_S:-900}"
poll="${GRID_RBD_APT_POLL_S:-5}"
apt=("${GRID_RBD_APT_GET:-apt-get}")
[ "$(id -u)" -eq 0 ] || [ -n "${GRID_RBD_APT_GET:-}" ] || apt=(sudo apt-get)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
start=$SECONDS
said=0
while :; do
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" -o DPkg::Lock::Timeout="$limit" "$@" >"$log" 2>&1
  rc=$?
  ((rc == 0)) && exit 0
  if grep -qE 'Could not get lock|Unable to lock|Unable to acquire' "$log" &&
     ((SECONDS - start < limit)); then
    if ((!said)); then
      echo "  another apt holds its lock; waiting for it (up to ${limit}s)" >&2
      said=1
    fi
    sleep "$poll"
    continue
  fi
  tail -20 "$log" >&2
  exit "$rc"
done
