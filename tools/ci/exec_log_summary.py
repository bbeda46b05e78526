"""Summarise a Bazel build's execution log (and profile); check remote cache hits.

    python3 exec_log_summary.py LOG [--require-hits MNEMONIC ...] [--expect N]
                                    [--profile PROFILE.gz]
    python3 exec_log_summary.py LOG --count MNEMONIC ...    # prints one number

LOG is Bazel's `--execution_log_json_file`: in Bazel 4.2 a stream of JSON objects, one
per spawn, with `mnemonic`, `progressMessage`, `remoteCacheHit`, `remotable`,
`cacheable` and `runner` (no wall time). Prints the spawns per mnemonic and how many
were remote cache hits. With --require-hits, exits 1 unless every spawn of those
mnemonics was a remote cache hit and (with --expect) there were exactly N of them: an
empty or truncated log must not pass. --profile (Bazel's `--profile`, a gzipped JSON
trace) lists how long each grid-rbd action took.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter

# Progress messages of the grid_robot actions (tools/bazel/grid_robot.bzl).
_ACTION_PREFIXES = ("Generating grid-rbd sources of ", "Compiling //", "Compiling @")


def spawns(text: str) -> list[dict]:
    decoder, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return out
        obj, i = decoder.raw_decode(text, i)
        out.append(obj)


def action_times(profile: str) -> list[tuple[float, str]]:
    """(seconds, progress message) of each grid-rbd action in a Bazel JSON profile."""
    with gzip.open(profile, "rt", encoding="utf-8") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return sorted(((e.get("dur", 0) / 1e6, e["name"]) for e in events
                   if e.get("cat") == "action processing"
                   and str(e.get("name", "")).startswith(_ACTION_PREFIXES)), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("log")
    parser.add_argument("--require-hits", nargs="*", default=[], metavar="MNEMONIC")
    parser.add_argument("--expect", type=int, help="number of spawns of those mnemonics")
    parser.add_argument("--profile", help="Bazel --profile output: list action times")
    parser.add_argument("--count", nargs="+", metavar="MNEMONIC",
                        help="print only how many spawns had these mnemonics")
    args = parser.parse_args()
    with open(args.log, encoding="utf-8") as f:
        log = spawns(f.read())
    if args.count:
        print(sum(s.get("mnemonic") in args.count for s in log))
        return 0
    total, hits = Counter(), Counter()
    for s in log:
        total[s.get("mnemonic", "?")] += 1
        hits[s.get("mnemonic", "?")] += bool(s.get("remoteCacheHit"))
    print(f"  execution log: {len(log)} spawns, {sum(hits.values())} remote cache hits")
    for mnemonic in sorted(total):
        print(f"    {mnemonic:<22} {total[mnemonic]:4d} spawns, {hits[mnemonic]:4d} hits")
    if args.profile:
        for seconds, name in action_times(args.profile):
            print(f"    {seconds:7.1f} s  {name}")
    if not args.require_hits:
        return 0
    checked = [s for s in log if s.get("mnemonic") in args.require_hits]
    misses = [s for s in checked if not s.get("remoteCacheHit")]
    for s in misses:
        print(f"  MISS: {s.get('progressMessage') or s.get('mnemonic')} ran "
              f"({s.get('runner', '?')}); remotable={s.get('remotable')} "
              f"cacheable={s.get('cacheable')}")
    if args.expect is not None and len(checked) != args.expect:
        print(f"  FAIL: {len(checked)} spawns of {', '.join(args.require_hits)}; "
              f"expected {args.expect}")
        return 1
    if not checked:
        print(f"  FAIL: no spawn of {', '.join(args.require_hits)} in the log")
        return 1
    if misses:
        print(f"  FAIL: {len(misses)} of {len(checked)} code-generation/compile actions "
              "were not remote cache hits")
        return 1
    print(f"  OK: all {len(checked)} code-generation/compile actions were remote cache hits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
