"""Our CPU backend against Pinocchio's own C++, per item over a batch of states, one core
and all cores. JSON + plot.

Pinocchio: `pinocchio_harness/pin_bench` (header-only Pinocchio at -O3 -march=native with
OpenMP, one `Data` per thread; see its build.sh), timing rnea, aba,
computeRNEADerivatives and computeABADerivatives on the same states. Ours: the public
numpy API, `grid_rbd.register_robot(..., device="cpu")` in a subprocess per (dtype,
threads), with `GRID_RBD_NUM_THREADS` and `OMP_NUM_THREADS` set to the thread count (the
CPU backend is OpenMP-parallel, so OMP_NUM_THREADS is the knob it honours today), calling
`inverse_dynamics`, `aba`, `inverse_dynamics_gradient` and `forward_dynamics_gradient`
with `out=` buffers (Pinocchio's harness stores into per-item arrays too). Both: the
median over >= 20 passes of the whole batch (after a warm-up pass), per item, in process
CPU time on one thread (what the core spent, whatever else a shared machine runs) and in
wall time on several (both are recorded). Before that, both compute on the first
`--check-items` states and are compared.

    .venv/bin/python tools/bench/bench_cpu_vs_pinocchio.py --out RESULT.json --plot docs/X.png
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from sidebyside_common import use_tree  # noqa: E402

use_tree(REPO)  # benchmark the checkout this script is in, whatever is installed

from sidebyside_common import (  # noqa: E402
    FLOAT32_EPS,
    make_states,
    relative_error,
    summary,
)

# Our method -> (its inputs, Pinocchio's algorithm, where the harness dump holds it).
PAIRS: dict[str, tuple[tuple[str, ...], str]] = {
    "inverse_dynamics": (("q", "qd", "qdd"), "rnea"),
    "aba": (("q", "qd", "u"), "aba"),
    "inverse_dynamics_gradient": (("q", "qd", "qdd"), "computeRNEADerivatives"),
    "forward_dynamics_gradient": (("q", "qd", "u"), "computeABADerivatives"),
}
DEFAULT_HARNESS = REPO / "build/pin_bench/pin_bench"


def _split_dump(raw: np.ndarray, k: int, nv: int) -> dict[str, np.ndarray]:
    per = raw.reshape(k, -1)
    g = nv * 2 * nv
    return {"inverse_dynamics": per[:, :nv], "aba": per[:, nv:2 * nv],
            "inverse_dynamics_gradient": per[:, 2 * nv:2 * nv + g].reshape(k, nv, 2 * nv),
            "forward_dynamics_gradient": per[:, 2 * nv + g:].reshape(k, nv, 2 * nv)}


def prepare(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per robot: the Pinocchio model as text, the states (float64, in raw rows for
    Pinocchio and as .npz for ours, which casts them to its dtype) and cond(M) on the
    checked states."""
    import pinocchio as pin
    from support import ROBOTS, pinocchio_model

    robots = []
    for ri, name in enumerate(args.robots):
        spec = ROBOTS[name]
        model = pinocchio_model(spec)
        folder = args.work / name
        folder.mkdir(parents=True, exist_ok=True)
        model.saveToText(str(folder / "model.txt"))
        s = {k: v.astype(np.float64) for k, v in make_states(
            model.nq, model.nv, spec.floating_base, args.batch, args.seed + ri).items()}
        if spec.floating_base:  # unit to float64 rounding, as Pinocchio assumes
            s["q"][:, 3:7] /= np.linalg.norm(s["q"][:, 3:7], axis=1, keepdims=True)
        rows = np.concatenate([s["q"], s["qd"], s["qdd"], s["u"]], axis=1)
        np.ascontiguousarray(rows).tofile(folder / "states.bin")
        np.savez(folder / "states.npz", **s)
        data = model.createData()
        k = min(args.check_items, args.batch)
        cond = 0.0
        for i in range(k):
            m = pin.crba(model, data, s["q"][i].astype(np.float64))  # upper triangle
            cond = max(cond, float(np.linalg.cond(np.triu(m) + np.triu(m, 1).T)))
        robots.append({"name": name, "urdf": str(spec.path), "floating_base": spec.floating_base,
                       "nq": model.nq, "nv": model.nv, "folder": str(folder), "cond_M": cond})
    return robots


def run_pinocchio(args: argparse.Namespace, robot: dict[str, Any], threads: int,
                  dump: bool) -> dict[str, Any]:
    folder = Path(robot["folder"])
    cmd = [str(args.harness), "--model", str(folder / "model.txt"), "--states",
           str(folder / "states.bin"), "--threads", str(threads), "--min-reps",
           str(args.min_reps), "--min-seconds", str(args.min_seconds)]
    if dump:
        cmd += ["--dump", str(folder / "pin_dump.bin"), "--dump-items", str(args.check_items)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run_ours(args: argparse.Namespace, robots: list[dict[str, Any]], dtype: str,
             threads: int) -> dict[str, Any]:
    spec = args.work / f"ours_{dtype}_{threads}.json"
    spec.write_text(json.dumps({"robots": robots, "dtype": dtype, "threads": threads,
                                "cache_dir": str(args.work / "ours_store"),
                                "min_reps": args.min_reps, "min_seconds": args.min_seconds,
                                "check_items": args.check_items}))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), GRID_RBD_NUM_THREADS=str(threads))
    out = args.work / f"ours_{dtype}_{threads}_out.json"
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "worker", "--spec",
                    str(spec), "--out", str(out)], env=env, check=True)
    return json.loads(out.read_text())


def worker(spec_path: Path, out: Path) -> int:
    """Ours, in this process (its thread count fixed by the environment at start)."""
    import grid_rbd

    spec = json.loads(spec_path.read_text())
    dtype = np.dtype(spec["dtype"])
    report: dict[str, Any] = {"register_s": {}, "timings": {}, "check": {},
                              "env_threads": os.environ.get("OMP_NUM_THREADS")}
    for robot in spec["robots"]:
        t0 = time.perf_counter()
        h = grid_rbd.register_robot(f"{robot['name']}-vs-pin", urdf_path=robot["urdf"],
                                    floating_base=robot["floating_base"], device="cpu",
                                    dtype=spec["dtype"], max_batch_size=4096,
                                    cache_dir=spec["cache_dir"])
        report["register_s"][robot["name"]] = time.perf_counter() - t0
        s = {k: np.ascontiguousarray(v, dtype=dtype)
             for k, v in np.load(Path(robot["folder"]) / "states.npz").items()}
        batch = len(s["q"])
        for alg, (names, _) in PAIRS.items():
            fn = getattr(h, alg)
            inputs = [s[n] for n in names]
            buf = np.empty_like(fn(*inputs))
            fn(*inputs, out=buf)  # warm-up pass
            wall: list[float] = []
            cpu: list[float] = []
            deadline = time.perf_counter() + spec["min_seconds"]
            while len(wall) < spec["min_reps"] or time.perf_counter() < deadline:
                c0, t0 = time.process_time(), time.perf_counter()
                fn(*inputs, out=buf)
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            report["timings"][f"{robot['name']}/{alg}"] = {
                "wall": summary(wall, batch), "cpu": summary(cpu, batch)}
            k = spec["check_items"]
            report["check"][f"{robot['name']}/{alg}"] = fn(*[x[:k] for x in inputs]).tolist()
    out.write_text(json.dumps(report) + "\n")
    return 0


def _record(robot: str, alg: str, pin_alg: str, batch: int, threads: int, dtype: str,
            ours: dict[str, Any], pin: dict[str, Any]) -> dict[str, Any]:
    """One comparison. On one thread the headline figures are process CPU time (what the
    core spent, robust to other load on a shared machine); on several, wall time."""
    timer = "cpu" if threads == 1 else "wall"
    o = ours[timer]
    p_ns = pin["cpu_ns_per_item"] if timer == "cpu" else pin["ns_per_item"]
    return {
        "robot": robot, "algorithm": alg, "pinocchio_algorithm": pin_alg, "batch": batch,
        "threads": threads, "dtype": dtype, "timer": timer,
        "ours_ns_per_item": o["ns_per_item"], "pinocchio_ns_per_item": p_ns,
        "speedup_vs_pinocchio": p_ns / o["ns_per_item"],
        "ours_wall_ns_per_item": ours["wall"]["ns_per_item"],
        "pinocchio_wall_ns_per_item": pin["ns_per_item"],
        "ours_min_wall_ns_per_item": ours["wall"]["min_us_per_call"] * 1e3 / batch,
        "pinocchio_min_wall_ns_per_item": pin["min_ns_per_item"],
        "ours_cpu_ns_per_item": ours["cpu"]["ns_per_item"],
        "pinocchio_cpu_ns_per_item": pin["cpu_ns_per_item"],
        "ours_reps": o["reps"], "pinocchio_reps": pin["reps"]}


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", default="run", choices=("run", "worker"))
    parser.add_argument("--spec", type=Path, help="worker: its job")
    parser.add_argument("--robots", nargs="+", default=["iiwa14", "go2", "g1"])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--threads", type=int, nargs="+", default=None,
                        help="thread counts (default: 1 and every core)")
    parser.add_argument("--dtypes", nargs="+", default=["float64", "float32"])
    parser.add_argument("--harness", type=Path, default=DEFAULT_HARNESS)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_cpu_vs_pinocchio"))
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--check-items", type=int, default=8)
    parser.add_argument("--min-reps", type=int, default=20)
    parser.add_argument("--min-seconds", type=float, default=0.2)
    parser.add_argument("--note", default="", help="free text kept in the JSON (e.g. the "
                        "commit of a snapshot being measured)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    if args.command == "worker":
        if args.spec is None or args.out is None:
            parser.error("worker needs --spec and --out")
        return worker(args.spec, args.out)
    if args.out is None:
        args.out = REPO / "tools/bench/results" / \
            f"{datetime.date.today().isoformat()}_cpu_vs_pinocchio.json"
    threads = args.threads or sorted({1, os.cpu_count() or 1})
    load_before = os.getloadavg()
    if not args.harness.exists():
        subprocess.run([str(HERE / "pinocchio_harness/build.sh"), sys.executable,
                        str(args.harness)], check=True)
    args.work.mkdir(parents=True, exist_ok=True)
    robots = prepare(args)
    pin_runs = {(r["name"], t): run_pinocchio(args, r, t, dump=(t == threads[0]))
                for r in robots for t in threads}
    ours_runs = {(d, t): run_ours(args, robots, d, t) for d in args.dtypes for t in threads}

    records, checks = [], []
    for r in robots:
        dump = _split_dump(np.fromfile(Path(r["folder"]) / "pin_dump.bin"),
                           min(args.check_items, args.batch), r["nv"])
        for alg, (_, pin_alg) in PAIRS.items():
            for dtype in args.dtypes:
                ours = np.asarray(ours_runs[(dtype, threads[0])]["check"][f"{r['name']}/{alg}"])
                rel = relative_error(ours, dump[alg])
                tol = 1e-9 if dtype == "float64" else max(1e-4, 10 * FLOAT32_EPS * r["cond_M"])
                checks.append({"robot": r["name"], "algorithm": alg, "dtype": dtype,
                               "rel_ours_vs_pinocchio": rel, "tolerance": tol,
                               "agree": bool(rel <= tol)})
                for t in threads:
                    o = ours_runs[(dtype, t)]["timings"][f"{r['name']}/{alg}"]
                    p = pin_runs[(r["name"], t)]["results"][pin_alg]
                    records.append(_record(r["name"], alg, pin_alg, args.batch, t, dtype, o, p))
    first = next(iter(pin_runs.values()))
    flags = Path(str(args.harness) + ".flags")
    result = {
        "kind": "cpu_vs_pinocchio", "date": datetime.date.today().isoformat(),
        "note": args.note, "git_commit": _git_commit(),
        "what": "ns per item over a batch (median of >= 20 passes; one thread: process CPU "
                "time, several: wall time), see docs/benchmarks.md",
        "machine": {"cpu": _cpu_name(), "cpu_count": os.cpu_count(),
                    "python": platform.python_version(), "host": platform.node(),
                    "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
        "pinocchio": first["pinocchio"], "eigen": first["eigen"],
        "pinocchio_build": flags.read_text().strip() if flags.exists() else None,
        "threads_knob": "GRID_RBD_NUM_THREADS and OMP_NUM_THREADS (our CPU backend is OpenMP; "
                        "it honours OMP_NUM_THREADS)",
        "robots": [{k: r[k] for k in ("name", "floating_base", "nq", "nv", "cond_M")}
                   for r in robots],
        "algorithms": list(PAIRS), "dtypes": args.dtypes, "batch": args.batch,
        "threads": threads, "seed": args.seed,
        "compile_s": {d: ours_runs[(d, threads[0])]["register_s"] for d in args.dtypes},
        "cross_check": checks, "records": records}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from plot_bench import plot_file

        plot_file(args.out, args.plot)
    for rec in records:
        print(f"{rec['robot']:7s} {rec['algorithm']:27s} {rec['dtype']} {rec['threads']:2d} thr "
              f"({rec['timer']:4s}) "
              f"ours {rec['ours_ns_per_item']:10.1f}  pinocchio "
              f"{rec['pinocchio_ns_per_item']:10.1f} ns/item  {rec['speedup_vs_pinocchio']:5.2f}x")
    for c in checks:
        if not c["agree"]:
            print(f"cross-check {c['robot']} {c['algorithm']} {c['dtype']}: "
                  f"{c['rel_ours_vs_pinocchio']:.3g} > {c['tolerance']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
