"""Side by side on one GPU: this project through its public API against the `grid-rbd`
0.6.0 wheel (the seed system, an earlier system of this design), JSON + plot.

Ours runs in this process: `grid_rbd.register_robot(name, urdf_path=..., backend="torch",
device="cuda")`, float32, GPU-resident inputs. The peer runs in its own process
(`gridrbd060_worker.py`, PYTHONPATH = the wheel's `pip install --target` folder only), never
imported here. Both time one public call at a time with CUDA events (warm-up first, the
median of >= 20 calls, several random input sets rotated so that one lap moves at least
3x the L2), for iiwa14, go2 and g1 (floating base), at batches 1, 1024, 16384 and 65536,
every algorithm both have. Before timing, both compute every algorithm on the same
random states and their outputs are compared (and each against our float64 reference).

    # cold builds, one robot per process so they run in parallel (compile seconds out):
    python3 tools/bench/bench_vs_gridrbd060.py build --side peer --robots g1 --out b.json
    python3 tools/bench/bench_vs_gridrbd060.py build --side ours --robots g1 --out c.json
    # the benchmark (registrations are then cache hits):
    python3 tools/bench/bench_vs_gridrbd060.py run --builds b.json c.json \\
        --out tools/bench/results/DATE_h200_vs_gridrbd060.json --plot docs/x.png

`--strategy S` is passed to our register_robot when given. `--device cpu` is a dry run of
the plumbing on a machine without a GPU (ours on the CPU backend; no peer unless its
worker is given a CPU stand-in), not a benchmark.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
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
    ALGORITHMS,
    CORE_ALGORITHMS,
    DEFAULT_BATCHES,
    comparable,
    cross_check_tolerance,
    gpu_warmup,
    make_states,
    method_call,
    relative_error,
    rotated_sets,
    set_seed,
    time_cuda,
    time_host,
)

DEFAULT_ROBOTS = ("iiwa14", "go2", "g1")
DEFAULT_WORK = Path("/tmp/bench_vs_gridrbd060")
H200_L2_BYTES = 60 * 2**20


def robot_specs(names: list[str]) -> list[dict[str, Any]]:
    """name, URDF path and floating base of each robot (the test suite's robot set;
    example-robot-data's URDFs, or $GRID_RBD_ROBOT_DATA)."""
    from support import ROBOTS

    return [{"name": n, "urdf": str(ROBOTS[n].path), "floating_base": ROBOTS[n].floating_base}
            for n in names]


def register_ours(robot: dict[str, Any], args: argparse.Namespace, backend: str) -> Any:
    import grid_rbd

    where = Path(grid_rbd.__file__).resolve()
    if REPO not in where.parents:
        raise SystemExit(f"imported grid_rbd from {where}, not from this repository {REPO}")
    kwargs: dict[str, Any] = {
        "urdf_path": robot["urdf"], "floating_base": robot["floating_base"], "backend": backend,
        "device": args.device, "max_batch_size": max(args.batches), "dtype": "float32",
        "cache_dir": str(args.work / "ours_store")}
    if args.strategy:
        kwargs["strategy"] = args.strategy
    extra = [a for a in args.algorithms if a not in CORE_ALGORITHMS]
    if extra:  # fk_batched and the second-order kernels are outside the default build
        kwargs["algorithm_list"] = ["core", *extra]
    return grid_rbd.register_robot(f"{robot['name']}-vs060", **kwargs)


def peer_env(args: argparse.Namespace) -> dict[str, str]:
    """The peer's environment: its --target folder alone on PYTHONPATH (none of ours)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_RBD_")}
    env.update(PYTHONPATH=str(args.peer_site), PYTHONUNBUFFERED="1", PYTHONNOUSERSITE="1")
    if args.jobs:
        env["GRID_RBD_BUILD_JOBS"] = str(args.jobs)
    return env


def peer_request(args: argparse.Namespace, robots: list[dict[str, Any]]) -> dict[str, Any]:
    return {"robots": robots, "algorithms": args.algorithms, "batches": args.batches,
            "max_batch": max(args.batches), "cache_dir": str(args.work / "peer_cache"),
            "seed": args.seed, "check_seed": args.seed + 17, "check_batch": args.check_batch,
            "min_reps": args.min_reps, "min_seconds": args.min_seconds,
            "l2_bytes": args.l2_bytes, "latency_robots": args.latency_robots,
            "no_torch": args.peer_no_torch, "device": args.device,
            "cuda_arch": args.peer_cuda_arch}


def run_peer(args: argparse.Namespace, command: str, robots: list[dict[str, Any]],
             out: Path, check_out: Path | None = None) -> int:
    args.work.mkdir(parents=True, exist_ok=True)
    request = args.work / f"peer_request_{command}_{'_'.join(r['name'] for r in robots)}.json"
    request.write_text(json.dumps(peer_request(args, robots), indent=2))
    cmd = [args.peer_python, str(HERE / "gridrbd060_worker.py"), command,
           "--request", str(request), "--out", str(out)]
    if check_out is not None:
        cmd += ["--check-out", str(check_out)]
    try:
        return subprocess.run(cmd, env=peer_env(args), timeout=args.peer_timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"peer {command} passed its {args.peer_timeout} s limit", file=sys.stderr)
        return 124


def cmd_build(args: argparse.Namespace) -> int:
    robots = robot_specs(args.robots)
    if args.side == "peer":
        return run_peer(args, "build", robots, args.out)
    report: dict[str, Any] = {"side": "ours", "builds": []}
    status = 0
    for robot in robots:
        t0 = time.perf_counter()
        try:
            register_ours(robot, args, "numpy")
            report["builds"].append({"robot": robot["name"], "seconds": time.perf_counter() - t0})
        except Exception as exc:
            status = 1
            report["builds"].append({"robot": robot["name"], "error": repr(exc)})
        print(f"ours build {robot['name']}: {report['builds'][-1]}", file=sys.stderr)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return status


# -- our side -------------------------------------------------------------------------

def _to_device(states: dict[str, np.ndarray], device: str) -> dict[str, Any]:
    import torch

    return {k: torch.from_numpy(v).to(device) for k, v in states.items()}


def _timer(args: argparse.Namespace) -> Any:
    return time_cuda if args.device == "cuda" else time_host


def cross_check(args: argparse.Namespace, robot: dict[str, Any], ri: int, h: Any,
                peer: dict[str, np.ndarray], report: dict[str, Any]) -> None:
    """Ours and the peer on the same states, and each against the float64 reference on
    the first `--ref-items` of them."""
    from grid_rbd import reference

    s = make_states(h.nq, h.nv, robot["floating_base"], args.check_batch, args.seed + 17 + ri)
    dev = _to_device(s, args.device)
    ref = reference.load(robot["urdf"], floating_base=robot["floating_base"])
    k = min(args.ref_items, args.check_batch)
    s64 = {n: v[:k].astype(np.float64) for n, v in s.items()}
    cond_m = float(np.linalg.cond(ref.crba(s64["q"])).max())
    for alg in args.algorithms:
        entry: dict[str, Any] = {"robot": robot["name"], "algorithm": alg,
                                 "batch": args.check_batch, "ref_items": k, "cond_M": cond_m}
        try:
            ours = comparable(alg, getattr(h, alg)(*[dev[n] for n in ALGORITHMS[alg]]))
        except Exception as exc:
            entry["error"] = repr(exc)
            report["cross_check"].append(entry)
            continue
        entry["shape_ours"] = list(ours.shape)
        expected = None
        if hasattr(ref, alg):  # (the reference has no fk_batched: ours against the peer)
            expected = comparable(alg, getattr(ref, alg)(*[s64[n] for n in ALGORITHMS[alg]]))
            entry["rel_ours_vs_ref"] = relative_error(ours[:k].reshape(expected.shape),
                                                      expected) \
                if ours[:k].size == expected.size else math.inf
        other = peer.get(f"{robot['name']}/{alg}")
        if other is not None:
            entry["shape_peer"] = list(other.shape)
            if other.shape != ours.shape and other.size == ours.size:
                other = other.reshape(ours.shape)  # same numbers, another view of them
            entry["rel_ours_vs_peer"] = relative_error(ours, other)
            if expected is not None:
                entry["rel_peer_vs_ref"] = relative_error(other[:k].reshape(expected.shape),
                                                          expected) \
                    if other[:k].size == expected.size else math.inf
            entry["tolerance"] = cross_check_tolerance(alg, cond_m)
            entry["agree"] = bool(entry["rel_ours_vs_peer"] <= entry["tolerance"])
        report["cross_check"].append(entry)


def time_ours(args: argparse.Namespace, robot: dict[str, Any], ri: int, h: Any,
              report: dict[str, Any]) -> None:
    import torch

    timer = _timer(args)
    for batch in args.batches:
        n = rotated_sets(batch, 4 * (h.nq + 4 * h.nv), args.l2_bytes)
        sets = [_to_device(make_states(h.nq, h.nv, robot["floating_base"], batch,
                                       set_seed(args.seed, ri, batch, i)), args.device)
                for i in range(n)]
        for alg in args.algorithms:
            try:
                t = timer(method_call(h, alg), sets, batch,
                          args.min_reps, args.min_seconds)
            except Exception as exc:
                report["errors"].append({"side": "ours", "robot": robot["name"],
                                         "algorithm": alg, "batch": batch, "error": repr(exc)})
                continue
            report["ours"].append({"robot": robot["name"], "algorithm": alg, "batch": batch,
                                   "n_sets": n, **t})
            print(f"ours {robot['name']:7s} {alg:27s} B={batch:6d} {t['ns_per_item']:11.2f} "
                  f"ns/item {t['us_per_call']:10.1f} us/call", file=sys.stderr)
        del sets
        if args.device == "cuda":
            torch.cuda.empty_cache()


def latency_ours(args: argparse.Namespace, robot: dict[str, Any], ri: int, ht: Any
                 ) -> list[dict[str, Any]]:
    """Our side of issue 20's batch-1 rows, measured like the peer's (see the worker)."""
    import torch

    hn = register_ours(robot, args, "numpy")
    host = [make_states(hn.nq, hn.nv, robot["floating_base"], 1,
                        set_seed(args.seed, ri, 1, i)) for i in range(16)]
    dev = [_to_device(s, args.device) for s in host]
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    rows = []
    for alg in ("inverse_dynamics", "forward_dynamics_gradient"):
        kw = {"min_reps": 200, "min_seconds": 0.3}
        timings = {
            "numpy_host_arrays": time_host(method_call(hn, alg), host, 1, **kw),
            "torch_eager_cuda_events": _timer(args)(method_call(ht, alg), dev, 1, **kw),
            "torch_eager_wall_synchronized": time_host(method_call(ht, alg, sync), dev, 1, **kw),
        }
        rows += [{"robot": robot["name"], "surface": surface, "algorithm": alg, "batch": 1,
                  "ours_us_per_call": t["us_per_call"],
                  "ours_min_us_per_call": t["min_us_per_call"], "ours_reps": t["reps"]}
                 for surface, t in timings.items()]
    return rows


# -- the whole run ----------------------------------------------------------------------

def _merge(report: dict[str, Any], peer: dict[str, Any]) -> list[dict[str, Any]]:
    theirs = {(r["robot"], r["algorithm"], r["batch"]): r for r in peer.get("records", [])}
    records = []
    for r in report["ours"]:
        p = theirs.get((r["robot"], r["algorithm"], r["batch"]))
        rec = {"robot": r["robot"], "algorithm": r["algorithm"], "batch": r["batch"],
               "ours_ns_per_item": r["ns_per_item"],
               "peer_ns_per_item": p["ns_per_item"] if p else None,
               "ours_us_per_call": r["us_per_call"],
               "peer_us_per_call": p["us_per_call"] if p else None,
               "speedup_vs_peer": p["ns_per_item"] / r["ns_per_item"] if p else None,
               "ours_reps": r["reps"], "peer_reps": p["reps"] if p else None,
               "n_sets": r["n_sets"]}
        records.append(rec)
    return records


def _merge_latency(ours: list[dict[str, Any]], peer: list[dict[str, Any]]
                   ) -> list[dict[str, Any]]:
    rows: dict[tuple, dict[str, Any]] = {}
    for r in peer + ours:
        key = (r["robot"], r["surface"], r["algorithm"], r["batch"])
        rows.setdefault(key, {"robot": key[0], "surface": key[1], "algorithm": key[2],
                              "batch": key[3]}).update(r)
    return list(rows.values())


def _builds(paths: list[Path]) -> dict[str, Any]:
    out: dict[str, Any] = {"ours": {}, "peer": {}, "errors": []}
    for path in paths:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            out["errors"].append(f"{path}: {exc!r}")
            continue
        side = "peer" if "peer_version" in data else "ours"
        for b in data.get("builds", []):
            out[side][b["robot"]] = b
    return out


def _machine(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "host": platform.node(), "cpu_count": os.cpu_count()}
    if args.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=torch.cuda.get_device_name(), sm=f"{props.major}.{props.minor}",
                    multiprocessors=props.multi_processor_count)
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        info["git_commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                            capture_output=True, text=True,
                                            timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        info["git_commit"] = None
    return info


def _finite(value: Any) -> Any:
    """The JSON-safe copy of `value`: a non-finite float becomes None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _torch_extension() -> str:
    """Whether our torch calls went through the torch extension (docs/torch.md)."""
    try:
        from grid_rbd.torch import _native
    except ImportError:
        return "torch not installed"
    module = _native._STATE.get("module")
    return "in use" if module is not None else f"not in use: {_native.why_not() or 'not loaded'}"


def _result(args: argparse.Namespace, robots: list[dict[str, Any]], peer: dict[str, Any],
            peer_status: int | None, report: dict[str, Any], latency: list[dict[str, Any]],
            machine: dict[str, Any]) -> dict[str, Any]:
    import grid_rbd

    return _finite({
        "kind": "gpu_vs_gridrbd060",
        "date": datetime.date.today().isoformat(),
        "what": "ns per item (median of one public call at a time, CUDA events), float32; "
                "see docs/benchmarks.md",
        "machine": machine, "device": args.device, "strategy": args.strategy,
        "ours_version": grid_rbd.__version__, "peer_version": peer.get("peer_version"),
        "ours_torch_extension": _torch_extension(),
        "peer_torch": peer.get("torch"), "peer_status": peer_status,
        "complete": report.get("complete", False),
        "robots": robots, "algorithms": args.algorithms, "batches": args.batches,
        "method": {"min_reps": args.min_reps, "min_seconds": args.min_seconds,
                   "l2_bytes": args.l2_bytes, "seed": args.seed,
                   "check_batch": args.check_batch, "ref_items": args.ref_items,
                   "peer_options": "algorithm_list=benchmarked, enable_mujoco_kernels=False, "
                                   "JAX hidden (no JAX FFI surface built)"},
        "compile_s": _builds(args.builds),
        "register_s": {"ours": report["register_s"], "peer": peer.get("register_s", {})},
        "dims": peer.get("dims", {}),
        "cross_check": report["cross_check"],
        "records": _merge(report, peer),
        "latency": _merge_latency(latency, peer.get("latency", [])),
        "errors": report["errors"] + [dict(e, side="peer") for e in peer.get("errors", [])],
    })


def cmd_run(args: argparse.Namespace) -> int:
    robots = robot_specs(args.robots)
    args.work.mkdir(parents=True, exist_ok=True)
    peer: dict[str, Any] = {}
    checks: dict[str, np.ndarray] = {}
    peer_status = None
    if not args.skip_peer:
        peer_json, peer_npz = args.work / "peer_run.json", args.work / "peer_check.npz"
        peer_json.unlink(missing_ok=True)
        peer_npz.unlink(missing_ok=True)
        peer_status = run_peer(args, "run", robots, peer_json, peer_npz)
        if peer_json.exists():
            peer = json.loads(peer_json.read_text())
        if peer_npz.exists():
            checks = dict(np.load(peer_npz))
    report: dict[str, Any] = {"ours": [], "cross_check": [], "errors": [], "register_s": {}}
    latency: list[dict[str, Any]] = []
    machine = _machine(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    gpu_warmup(args.device)
    for ri, robot in enumerate(robots):
        t0 = time.perf_counter()
        try:
            h = register_ours(robot, args, "torch")
        except Exception as exc:  # one robot failing leaves the others' numbers
            report["errors"].append({"side": "ours", "robot": robot["name"], "phase": "register",
                                     "error": repr(exc)})
            continue
        report["register_s"][robot["name"]] = time.perf_counter() - t0
        cross_check(args, robot, ri, h, checks, report)
        time_ours(args, robot, ri, h, report)
        if robot["name"] in args.latency_robots:
            latency += latency_ours(args, robot, ri, h)
        partial = _result(args, robots, peer, peer_status, report, latency, machine)
        args.out.write_text(json.dumps(partial, indent=2) + "\n")  # a checkpoint per robot
    report["complete"] = True
    result = _result(args, robots, peer, peer_status, report, latency, machine)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        from plot_bench import plot_file

        plot_file(args.out, args.plot)
    print_table(result)
    return 0


def print_table(result: dict[str, Any]) -> None:
    """The short table: per robot and algorithm, our ns/item at each batch and the
    speed-up over the peer (peer time / ours); then cross-check disagreements and the
    batch-1 host paths."""
    by_key = {(r["robot"], r["algorithm"], r["batch"]): r for r in result["records"]}
    batches = result["batches"]
    print(f"{'robot':7s} {'algorithm':27s} " + " ".join(f"{'B=' + str(b):>18s}" for b in batches)
          + "   (ours ns/item, speed-up over 0.6.0)")
    for robot in [r["name"] for r in result["robots"]]:
        for alg in result["algorithms"]:
            cells = []
            for b in batches:
                r = by_key.get((robot, alg, b))
                if r is None:
                    cells.append(f"{'-':>18s}")
                    continue
                up = "" if r["speedup_vs_peer"] is None else f"{r['speedup_vs_peer']:5.2f}x"
                cells.append(f"{r['ours_ns_per_item']:10.2f} {up:>7s}")
            print(f"{robot:7s} {alg:27s} " + " ".join(cells))
    checked = [c for c in result["cross_check"] if "agree" in c]
    bad = [c for c in result["cross_check"] if not c.get("agree", True) or "error" in c]
    print(f"cross-check: {sum(c['agree'] for c in checked)} of {len(checked)} agree")
    for c in bad:
        print(f"cross-check {c['robot']} {c['algorithm']}: ours~peer "
              f"{c.get('rel_ours_vs_peer')} (tol {c.get('tolerance')}), ours~ref "
              f"{c.get('rel_ours_vs_ref')}, peer~ref {c.get('rel_peer_vs_ref')} "
              f"{c.get('error', '')}")
    for r in result["latency"]:
        ours, peer = r.get("ours_us_per_call"), r.get("peer_us_per_call")
        print(f"B=1 {r['robot']} {r['surface']:30s} {r['algorithm']:26s} ours "
              f"{'-' if ours is None else f'{ours:8.1f}'} us  peer "
              f"{'-' if peer is None else f'{peer:8.1f}'} us")
    if result["errors"]:
        print(f"{len(result['errors'])} errors, first: {result['errors'][0]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("build", "run"))
    parser.add_argument("--side", choices=("ours", "peer"), help="build: which system")
    parser.add_argument("--robots", nargs="+", default=list(DEFAULT_ROBOTS))
    parser.add_argument("--algorithms", nargs="+", default=list(CORE_ALGORITHMS),
                        choices=list(ALGORITHMS),
                        help="default: the kernels issue's nine; also fk_batched, "
                             "idsva_so, fdsva_so")
    parser.add_argument("--batches", nargs="+", type=int, default=list(DEFAULT_BATCHES))
    parser.add_argument("--strategy", default=None, help="passed to our register_robot")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a dry run of the plumbing, not a benchmark")
    parser.add_argument("--peer-site", type=Path, default=Path("/tmp/gridrbd060_site"),
                        help="the grid-rbd 0.6.0 wheel's pip --target folder")
    parser.add_argument("--peer-python", default=sys.executable)
    parser.add_argument("--peer-timeout", type=int, default=420)
    parser.add_argument("--peer-no-torch", action="store_true",
                        help="build the peer without its torch surface (compile-time study)")
    parser.add_argument("--peer-cuda-arch", type=int, default=None,
                        help="the peer's cuda_arch= (default: its nvidia-smi detection); "
                             "90 builds for the H200 on a machine without a GPU")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument("--jobs", type=int, default=0, help="the peer's GRID_RBD_BUILD_JOBS")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="stores, caches and the peer's intermediate files")
    parser.add_argument("--builds", type=Path, nargs="*", default=[],
                        help="run: build reports whose compile seconds go into the JSON")
    parser.add_argument("--latency-robots", nargs="*", default=["iiwa14"])
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--check-batch", type=int, default=64)
    parser.add_argument("--ref-items", type=int, default=8)
    parser.add_argument("--min-reps", type=int, default=20)
    parser.add_argument("--min-seconds", type=float, default=0.1)
    parser.add_argument("--l2-bytes", type=int, default=H200_L2_BYTES)
    parser.add_argument("--out", type=Path, help="build: report; run: the results JSON")
    parser.add_argument("--plot", type=Path, help="run: the PNG to draw")
    args = parser.parse_args(argv)
    if args.out is None and args.command == "build":
        parser.error("build needs --out")
    if args.out is None:
        args.out = REPO / "tools/bench/results" / \
            f"{datetime.date.today().isoformat()}_h200_vs_gridrbd060.json"
    if args.command == "build":
        if args.side is None:
            parser.error("build needs --side ours|peer")
        return cmd_build(args)
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
