"""Stall samples of an Nsight Compute SASS page (run.sh writes sass_VARIANT.csv; gzipped
or not) by opcode and by stall reason, then the 15 instructions with the most samples.

    python sass_stalls.py sass_fd.c32w4.csv.gz [more.csv ...]
"""

from __future__ import annotations

import collections
import csv
import gzip
import sys


def _number(text: str) -> float:
    try:
        return float((text or "0").replace(",", ""))
    except ValueError:
        return 0.0


def summarize(path: str) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    rows = list(csv.reader(lines[start:]))
    header, data = rows[0], rows[1:]
    col = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    by_op: collections.Counter = collections.Counter()
    by_stall: collections.Counter = collections.Counter()
    instructions = []
    for r in data:
        if len(r) < len(header) or not r[col["Source"]].strip():
            continue
        source = r[col["Source"]].strip()
        words = source.split()
        op = (words[1] if words[0].startswith("@") else words[0]).split(".")[0]
        samples = _number(r[col["Warp Stall Sampling (All Samples)"]])
        by_op[op] += samples
        instructions.append((r[col["Address"]], source, samples))
        for s in stalls:
            by_stall[s] += _number(r[col[s]])
    total = sum(by_op.values()) or 1.0
    print(f"{path}: {len(instructions)} instructions, {total:.0f} samples")
    print("  by opcode (%):", ", ".join(f"{k} {v / total * 100:.1f}"
                                       for k, v in by_op.most_common(14)))
    print("  by stall (%): ", ", ".join(f"{k[6:]} {v / total * 100:.1f}"
                                       for k, v in by_stall.most_common(8)))
    for address, source, samples in sorted(instructions, key=lambda x: -x[2])[:15]:
        print(f"    {address} {source[:70]:70s} {samples / total * 100:5.2f}")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        summarize(name)
