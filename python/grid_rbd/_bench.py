"""`grid-rbd bench`: a quick local benchmark of a robot handle, its table and its plot.

Each algorithm is timed at each batch size as a user calls it (`handle.<algorithm>(...,
out=buffer)`, inputs and output allocated once): one untimed warm-up, then repeated calls
for `seconds`, at least 5 and at most 1000; the median is reported per call and per item.
Inputs are random states of the robot's widths (a unit quaternion on a floating base).
This is a quick look at one machine; the project's benchmarks are tools/bench/.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from grid_rbd._methods import BY_NAME, Dims

_MIN_REPS, _MAX_REPS = 5, 1000


def _inputs(handle: Any, algorithm: str, batch: int, rng: np.random.Generator
            ) -> tuple[np.ndarray, ...]:
    """The required inputs of `algorithm`, (batch, width) in the handle's dtype."""
    dims = Dims(handle.nq, handle.nv, handle.nb, handle.num_ees)
    arrays = []
    for spec in BY_NAME[algorithm].inputs:
        if not spec.required:
            continue
        width = spec.width(dims)
        scale = {"q": math.pi, "qd": 5.0}.get(spec.name, 20.0)
        x = rng.uniform(-scale, scale, (batch, width))
        if spec.name == "q" and handle.nq == handle.nv + 1:  # [p, quat xyzw, joints]
            quat = x[:, 3:7]
            x[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        arrays.append(np.ascontiguousarray(x, dtype=handle.dtype))
    return tuple(arrays)


def _median_seconds(fn: Any, seconds: float) -> tuple[float, int]:
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < _MIN_REPS or (time.perf_counter() - start < seconds
                                     and len(times) < _MAX_REPS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), len(times)


def run_bench(handle: Any, algorithms: list[str], batches: list[int], seconds: float,
              seed: int = 0) -> list[dict[str, Any]]:
    """One row per (algorithm, batch): seconds per call, ns per item, repetitions."""
    rng = np.random.default_rng(seed)
    dims = Dims(handle.nq, handle.nv, handle.nb, handle.num_ees)
    rows = []
    for algorithm in algorithms:
        method = getattr(handle, algorithm)
        per_item = math.prod(d(dims) for d in BY_NAME[algorithm].output)
        for batch in batches:
            args = _inputs(handle, algorithm, batch, rng)
            out = handle.pinned_empty((batch, per_item))
            t, reps = _median_seconds(lambda m=method, a=args, o=out: m(*a, out=o), seconds)
            rows.append({"algorithm": algorithm, "batch": batch, "seconds_per_call": t,
                         "ns_per_item": t / batch * 1e9, "reps": reps,
                         "device": handle.device, "dtype": str(handle.dtype)})
    return rows


def print_table(rows: list[dict[str, Any]], handle: Any) -> None:
    batches = sorted({r["batch"] for r in rows})
    algorithms = list(dict.fromkeys(r["algorithm"] for r in rows))
    by = {(r["algorithm"], r["batch"]): r for r in rows}
    print(f"{handle.name}: {handle.device}, {handle.dtype}; median of warm calls, "
          "microseconds per call / nanoseconds per item")
    head = "".join(f"  {'B=' + str(b):>22}" for b in batches)
    print(f"{'algorithm':<28}{head}")
    for a in algorithms:
        cells = "".join(f"  {by[a, b]['seconds_per_call'] * 1e6:>10.1f} / "
                        f"{by[a, b]['ns_per_item']:>9.1f}" for b in batches)
        print(f"{a:<28}{cells}")


def plot_results(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """ns/item against batch, one line per algorithm, log-log, as a PNG. Raises
    ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        mine = sorted((r for r in rows if r["algorithm"] == algorithm), key=lambda r: r["batch"])
        ax.plot([r["batch"] for r in mine], [r["ns_per_item"] for r in mine], marker="o",
                label=algorithm)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("ns per item (median)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
