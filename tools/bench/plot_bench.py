"""Plots of the side-by-side benchmark JSON files (matplotlib, no display needed).

    python tools/bench/plot_bench.py RESULT.json --out docs/PLOT.png [--markdown]

`kind` in the JSON picks the figure:
  gpu_vs_gridrbd060  (bench_vs_gridrbd060.py) one panel per algorithm, ns/item against
                     batch on log axes, a colour per robot, ours solid, the peer dashed.
  cpu_vs_pinocchio   (bench_cpu_vs_pinocchio.py) one panel per algorithm, ns/item per
                     robot as bars: Pinocchio's C++ and ours (per dtype), one core and all.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(n: int) -> tuple[int, int]:
    cols = 2 if n == 4 else min(3, n)
    return math.ceil(n / cols), cols


def plot_gpu(result: dict[str, Any], out: Path) -> None:
    plt = _pyplot()
    algorithms = list(result["algorithms"])
    robots = [r["name"] for r in result["robots"]]
    rows, cols = _grid(len(algorithms))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False)
    for k, alg in enumerate(algorithms):
        ax = axes[k // cols][k % cols]
        for i, robot in enumerate(robots):
            recs = sorted((r for r in result["records"]
                           if r["algorithm"] == alg and r["robot"] == robot),
                          key=lambda r: r["batch"])
            colour = COLOURS[i % len(COLOURS)]
            for key, style, marker, label in (("ours_ns_per_item", "-", "o", "ours"),
                                              ("peer_ns_per_item", "--", "x", "grid-rbd 0.6.0")):
                pts = [(r["batch"], r[key]) for r in recs if r.get(key)]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=marker,
                            color=colour,
                            label=f"{robot}, {label}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(result["batches"], [f"{b:,}" for b in result["batches"]], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(alg, fontsize=10)
        ax.set_xlabel("batch")
        ax.set_ylabel("ns per item")
        ax.grid(True, which="both", alpha=0.3)
    for k in range(len(algorithms), rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8)
    machine = result.get("machine", {})
    fig.suptitle(f"grid-rbd (ours, solid) vs grid-rbd 0.6.0 (dashed), float32, torch on "
                 f"{machine.get('gpu', result.get('device'))}, {result.get('date')}")
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot_cpu(result: dict[str, Any], out: Path) -> None:
    plt = _pyplot()
    algorithms = list(result["algorithms"])
    robots = [r["name"] for r in result["robots"]]
    # One bar series per (system, dtype, threads), in a fixed order.
    series: list[tuple[str, str, int]] = []
    for threads in sorted({r["threads"] for r in result["records"]}):
        series.append(("pinocchio", "float64", threads))
        for dtype in result.get("dtypes", ["float64"]):
            series.append(("ours", dtype, threads))
    rows, cols = _grid(len(algorithms))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
    width = 0.8 / max(1, len(series))
    for k, alg in enumerate(algorithms):
        ax = axes[k // cols][k % cols]
        for j, (system, dtype, threads) in enumerate(series):
            heights = []
            for robot in robots:
                rec = next((r for r in result["records"] if r["algorithm"] == alg
                            and r["robot"] == robot and r["threads"] == threads
                            and (system == "pinocchio" or r["dtype"] == dtype)), None)
                key = "pinocchio_ns_per_item" if system == "pinocchio" else "ours_ns_per_item"
                heights.append(rec[key] if rec and rec.get(key) else float("nan"))
            xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(robots))]
            label = f"{'Pinocchio C++' if system == 'pinocchio' else 'ours ' + dtype}, " \
                    f"{threads} core{'s' if threads > 1 else ''}"
            ax.bar(xs, heights, width, label=label, color=COLOURS[j % len(COLOURS)],
                   hatch="//" if system == "pinocchio" else None, alpha=0.9)
        ax.set_xticks(range(len(robots)), robots)
        ax.set_yscale("log")
        ax.set_title(alg, fontsize=10)
        ax.set_ylabel("ns per item")
        ax.grid(True, axis="y", which="both", alpha=0.3)
    for k in range(len(algorithms), rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8)
    machine = result.get("machine", {})
    load = machine.get("loadavg_before")
    fig.suptitle(f"CPU backend vs Pinocchio {result.get('pinocchio', '')} C++, B="
                 f"{result.get('batch')}, {machine.get('cpu', '')} ({machine.get('cpu_count')} "
                 f"cores{f', load average {load[0]:.1f}' if load else ''}), "
                 f"{result.get('date')}\none thread: process CPU time; several: wall time",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _ns(value: float) -> str:
    """A time in ns for a table: whole ns with separators from 100 up, else 3 digits."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def markdown_gpu(result: dict[str, Any]) -> str:
    """Ours ns/item and the speed-up over the peer (peer time / ours) per robot,
    algorithm and batch."""
    batches = result["batches"]
    lines = ["| robot | algorithm | " + " | ".join(f"B={b:,}" for b in batches) + " |",
             "|---|---|" + "---|" * len(batches)]
    by_key = {(r["robot"], r["algorithm"], r["batch"]): r for r in result["records"]}
    for robot in [r["name"] for r in result["robots"]]:
        for alg in result["algorithms"]:
            cells = []
            for b in batches:
                r = by_key.get((robot, alg, b))
                if r is None:
                    cells.append("-")
                elif r.get("speedup_vs_peer") is None:
                    cells.append(_ns(r["ours_ns_per_item"]))
                else:
                    cells.append(f"{_ns(r['ours_ns_per_item'])} ({r['speedup_vs_peer']:.2f}x)")
            lines.append(f"| {robot} | {alg} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown_cpu(result: dict[str, Any]) -> str:
    """Pinocchio's and our ns/item (per dtype) and the speed-up, per robot, algorithm and
    thread count."""
    dtypes = result.get("dtypes", ["float64"])
    lines = ["| robot | algorithm | threads | Pinocchio | " +
             " | ".join(f"ours {d} (speed-up)" for d in dtypes) + " |",
             "|---|---|---|---|" + "---|" * len(dtypes)]
    for robot in [r["name"] for r in result["robots"]]:
        for alg in result["algorithms"]:
            for t in sorted({r["threads"] for r in result["records"]}):
                recs = {r["dtype"]: r for r in result["records"] if r["robot"] == robot
                        and r["algorithm"] == alg and r["threads"] == t}
                if not recs:
                    continue
                pin = next(iter(recs.values()))["pinocchio_ns_per_item"]
                cells = ["-" if d not in recs else f"{_ns(recs[d]['ours_ns_per_item'])} "
                         f"({recs[d]['speedup_vs_pinocchio']:.2f}x)" for d in dtypes]
                lines.append(f"| {robot} | {alg} | {t} | {_ns(pin)} | " + " | ".join(cells)
                             + " |")
    return "\n".join(lines)


PLOTS = {"gpu_vs_gridrbd060": plot_gpu, "cpu_vs_pinocchio": plot_cpu}
TABLES = {"gpu_vs_gridrbd060": markdown_gpu, "cpu_vs_pinocchio": markdown_cpu}


def plot_file(json_path: Path, out: Path) -> None:
    """Draw the figure of the JSON file's `kind` into `out` (PNG)."""
    result = json.loads(Path(json_path).read_text())
    kind = result.get("kind")
    if kind not in PLOTS:
        raise ValueError(f"{json_path}: kind {kind!r} is not one of {sorted(PLOTS)}")
    PLOTS[kind](result, Path(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--out", type=Path, help="the PNG to write")
    parser.add_argument("--markdown", action="store_true", help="print the results table")
    args = parser.parse_args(argv)
    if args.out is None and not args.markdown:
        parser.error("give --out PNG and/or --markdown")
    if args.out is not None:
        plot_file(args.result, args.out)
        print(args.out)
    if args.markdown:
        result = json.loads(args.result.read_text())
        if result.get("kind") not in TABLES:
            parser.error(f"{args.result}: kind {result.get('kind')!r} has no table")
        print(TABLES[result["kind"]](result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
