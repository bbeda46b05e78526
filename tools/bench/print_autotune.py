"""Print the autotune tables of every artifact in a store: per algorithm, each variant's
measured microseconds per call at each batch, and the dispatch that was recorded.
    python tools/bench/print_autotune.py STORE_DIR [ALGORITHM ...]"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    root, wanted = Path(argv[1]), set(argv[2:])
    for meta_path in sorted(root.rglob("meta.json")):
        meta = json.loads(meta_path.read_text())
        tune = (meta.get("autotune") or {}).get("seconds_per_call") or {}
        print(f"== {meta_path.parent.name}")
        for algorithm, variants in sorted(tune.items()):
            if wanted and algorithm not in wanted:
                continue
            for variant, by_batch in sorted(variants.items()):
                cells = "  ".join(f"B={b}: {s * 1e6:.1f} us"
                                  for b, s in sorted(by_batch.items(), key=lambda x: int(x[0])))
                print(f"  {algorithm:32s} {variant:10s} {cells}")
        for algorithm, table in sorted((meta.get("dispatch") or {}).items()):
            if not wanted or algorithm in wanted:
                print(f"  dispatch {algorithm}: {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
