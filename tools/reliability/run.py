#!/usr/bin/env python3
"""The reliability suite for as long as you like: `tools/reliability/run.py --minutes 10`.

Alternates the URDF fuzzer (fresh seeds) with the store cases (kills at every named phase
and at random moments, concurrent registrations, rebuilds under readers, damaged entries,
hostile pointers, manifest keys and manifests, linked lock files), each in a fresh
temporary store, until the time is up; then prints one JSON summary: cases run, outcomes
by kind, crashes (a case that raised anything but its expected outcome, with the details
to reproduce it). Exit status 1 when anything crashed. Run it niced on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability import fuzz, harness, store_cases  # noqa: E402

KINDS = ["phase", "phase", "random kill", "random kill", "concurrent", "readers", "damage",
         "damage", "pointers", "manifest keys", "manifests", "lock"]


def _store_case(kind: str, rng: random.Random, work: Path, compiler: harness.Compiler,
                template: Path) -> dict:
    if kind == "phase":
        if rng.random() < 0.5:
            return store_cases.kill_case(work, compiler, rng.choice(store_cases.BUILD_PHASES))
        phase, swap = rng.choice(store_cases.REBUILD_PHASES)
        return store_cases.kill_case(work, compiler, phase, True, swap, template)
    if kind == "random kill":
        return store_cases.kill_at_random(work, compiler, rng.uniform(0.0, 2.5),
                                          rng.random() < 0.5, template)
    if kind == "concurrent":
        return store_cases.concurrent_registrations(work, harness.make_compiler(work / "bin"),
                                                    rng.randint(2, 4))
    if kind == "readers":
        return store_cases.rebuild_under_readers(work, compiler, rng.randint(1, 3),
                                                 rng.random() < 0.5)
    if kind == "damage":
        return store_cases.damaged_entry(work, rng.choice(sorted(store_cases.DAMAGE)))
    if kind == "pointers":
        return store_cases.hostile_pointers(work)
    if kind == "manifest keys":
        return store_cases.hostile_manifest_keys(work, rng.sample(store_cases.HOSTILE_KEYS, 3))
    if kind == "manifests":
        return store_cases.damaged_manifests(work)
    return store_cases.symlinked_lock(work, rng.choice(["build", "manifest"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--store-share", type=float, default=0.5,
                        help="fraction of the time spent on store cases (default 0.5)")
    parser.add_argument("--out", type=Path, help="also write the summary here")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    deadline = time.monotonic() + 60 * args.minutes
    fuzzed = fuzz.Summary()
    store_outcomes: Counter = Counter()
    store_crashes: list[dict] = []
    store_cases_run = 0
    store_seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="grid-rbd-reliability-") as tmp:
        root = Path(tmp)
        compiler = harness.make_compiler(root / "bin")
        os.environ.update(GRID_RBD_CXX=str(compiler.path), GRID_RBD_PROGRESS="off")
        os.environ.pop("GRID_RBD_CXXFLAGS", None)
        template = root / "template"
        harness.ensure(template)
        import logging

        logging.getLogger("grid_rbd.store").setLevel(logging.ERROR)  # expected reports
        k = 0
        while time.monotonic() < deadline:
            k += 1
            spent = fuzzed.seconds + store_seconds
            if store_seconds > args.store_share * spent:  # keep the time shares
                left = deadline - time.monotonic()
                fuzz.fuzz(rng.randrange(2**31), seconds=max(1.0, min(10.0, left)),
                          summary=fuzzed)
                continue
            work = Path(tempfile.mkdtemp(dir=root, prefix=f"case{k}-"))
            start = time.monotonic()
            kind = rng.choice(KINDS)
            try:
                _store_case(kind, rng, work, compiler, template)
                store_outcomes[f"{kind}: passed"] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                store_outcomes[f"{kind}: crash"] += 1
                store_crashes.append({"seed": args.seed, "case": k, "kind": kind,
                                      "error": f"{type(exc).__name__}: {exc}"[:600],
                                      "where": traceback.format_exc(limit=-4)[-1200:]})
            store_seconds += time.monotonic() - start
            store_cases_run += 1
            shutil.rmtree(work, ignore_errors=True)
    fuzz_report = fuzzed.as_dict()
    summary = {
        "seed": args.seed, "minutes": args.minutes,
        "cases": fuzz_report["cases"] + store_cases_run,
        "crashes": fuzz_report["crashes"] + len(store_crashes),
        "outcomes": {**{f"urdf {k}": v for k, v in fuzz_report["outcomes"].items()},
                     **dict(store_outcomes)},
        "fuzz": fuzz_report,
        "store": {"cases": store_cases_run, "outcomes": dict(store_outcomes),
                  "crashes": len(store_crashes), "crash_details": store_crashes[:20],
                  "seconds": round(store_seconds, 1)},
    }
    text = json.dumps(summary, indent=1, sort_keys=True)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if summary["crashes"] else 0


if __name__ == "__main__":
    sys.exit(main())
