"""The peer's side of `bench_vs_gridrbd060.py`: runs in its own process, where
`import grid_rbd` is the `grid-rbd` 0.6.0 wheel from a `pip install --target` folder on
PYTHONPATH (never our project; both packages are called grid_rbd and grid_codegen).

    python3 gridrbd060_worker.py build --request REQ.json --out BUILD.json
    python3 gridrbd060_worker.py run --request REQ.json --out PEER.json --check-out PEER.npz

The request (written by the driver) names the robots (name, urdf, floating_base), the
algorithms, batches, seeds, repetitions and the peer's cache folder. `build` registers
each robot (a cold nvcc build on a fresh cache) and reports the seconds; `run` registers
(a cache hit), writes each algorithm's output on the cross-check states to the .npz, times
every (robot, algorithm, batch) through the torch handle on CUDA tensors, and times the
batch-1 host paths of issue 20. Registration uses the peer's own options for a lean build
that leaves its timed kernels unchanged: `algorithm_list` = the benchmarked algorithms,
`enable_mujoco_kernels=False` (no MuJoCo-convention twins), and JAX hidden from it (no
JAX FFI surface compiled; the torch surface is what is timed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sidebyside_common import (  # noqa: E402
    ALGORITHMS,
    comparable,
    drop_editable_finders,
    gpu_warmup,
    make_states,
    method_call,
    rotated_sets,
    set_seed,
    time_cuda,
    time_host,
)

PEER_VERSION = "0.6.0"


def import_peer() -> Any:
    """Import the peer with JAX hidden, and refuse anything but the 0.6.0 wheel from a
    folder outside this repository.

    An editable install of our project (setuptools' `__editable__` or scikit-build-core's
    `_editable_skbc_` finders) would answer `import grid_rbd` ahead of PYTHONPATH, so
    those finders are dropped from this process first."""
    drop_editable_finders()
    sys.modules["jax"] = None  # type: ignore[assignment]  # the peer then skips its JAX surface
    import grid_rbd

    where = Path(grid_rbd.__file__).resolve()
    repo = Path(__file__).resolve().parents[2]
    if repo in where.parents or getattr(grid_rbd, "__version__", "") != PEER_VERSION:
        version = getattr(grid_rbd, "__version__", "?")
        raise SystemExit(f"gridrbd060_worker: imported grid_rbd {version} from {where}; "
                         f"expected the {PEER_VERSION} wheel outside {repo} (put its "
                         "--target folder on PYTHONPATH)")
    return grid_rbd


def register(grid_rbd: Any, robot: dict[str, Any], request: dict[str, Any],
             backend: str) -> Any:
    extra = {"cuda_arch": int(request["cuda_arch"])} if request.get("cuda_arch") else {}
    return grid_rbd.register_robot(
        f"{robot['name']}_bench060", robot["urdf"], floating_base=bool(robot["floating_base"]),
        max_batch_size=int(request["max_batch"]), backend=backend,
        algorithm_list=list(request["algorithms"]), enable_mujoco_kernels=False,
        cache_dir=request["cache_dir"], **extra)


def cmd_build(request: dict[str, Any], out: Path) -> int:
    grid_rbd = import_peer()
    report: dict[str, Any] = {"peer_version": grid_rbd.__version__, "builds": []}
    status = 0
    for robot in request["robots"]:
        t0 = time.perf_counter()
        try:
            register(grid_rbd, robot, request, "numpy" if request.get("no_torch") else "torch")
            report["builds"].append({"robot": robot["name"], "seconds": time.perf_counter() - t0,
                                     "jobs": os.environ.get("GRID_RBD_BUILD_JOBS")})
        except Exception as exc:  # a failed build is reported, the other robots still build
            status = 1
            report["builds"].append({"robot": robot["name"], "error": repr(exc)})
            traceback.print_exc()
        print(f"peer build {robot['name']}: {report['builds'][-1]}", file=sys.stderr)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return status


def _device_sets(torch: Any, robot: dict[str, Any], ri: int, batch: int, nq: int, nv: int,
                 request: dict[str, Any]) -> list[dict[str, Any]]:
    n = rotated_sets(batch, 4 * (nq + 4 * nv), int(request["l2_bytes"]))
    return [{k: torch.from_numpy(v).to(request["device"]) for k, v in make_states(
        nq, nv, bool(robot["floating_base"]), batch,
        set_seed(int(request["seed"]), ri, batch, i)).items()} for i in range(n)]


def _latency(grid_rbd: Any, torch: Any, robot: dict[str, Any], ri: int, th: Any,
             request: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 20's batch-1 rows: the numpy handle on host arrays (end to end, it waits), and
    the torch handle on CUDA tensors (CUDA events around the call; and wall time with a
    synchronize after each call)."""
    hn = register(grid_rbd, robot, request, "numpy")
    nq, nv = hn.nq, hn.nv
    host = [make_states(nq, nv, bool(robot["floating_base"]), 1,
                        set_seed(int(request["seed"]), ri, 1, i)) for i in range(16)]
    dev = [{k: torch.from_numpy(v).to(request["device"]) for k, v in s.items()} for s in host]
    on_gpu = request["device"] == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    rows = []
    for alg in ("inverse_dynamics", "forward_dynamics_gradient"):
        kw = {"min_reps": 200, "min_seconds": 0.3}
        timings = {
            "numpy_host_arrays": time_host(method_call(hn, alg), host, 1, **kw),
            "torch_eager_cuda_events": (time_cuda if on_gpu else time_host)(
                method_call(th, alg), dev, 1, **kw),
            "torch_eager_wall_synchronized": time_host(method_call(th, alg, sync), dev, 1, **kw),
        }
        for surface, t in timings.items():
            rows.append({"robot": robot["name"], "surface": surface, "algorithm": alg,
                         "batch": 1, "peer_us_per_call": t["us_per_call"],
                         "peer_min_us_per_call": t["min_us_per_call"], "peer_reps": t["reps"]})
    return rows


def cmd_run(request: dict[str, Any], out: Path, check_out: Path) -> int:
    grid_rbd = import_peer()
    import torch

    report: dict[str, Any] = {
        "peer_version": grid_rbd.__version__, "peer_path": str(Path(grid_rbd.__file__).parent),
        "torch": torch.__version__, "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name() if request["device"] == "cuda" else None,
        "register_s": {}, "dims": {}, "records": [],
        "latency": [], "errors": []}
    checks: dict[str, np.ndarray] = {}
    gpu_warmup(request["device"])
    for ri, robot in enumerate(request["robots"]):
        name = robot["name"]
        t0 = time.perf_counter()
        try:
            th = register(grid_rbd, robot, request, "torch")
        except Exception as exc:  # one robot failing leaves the others' numbers
            report["errors"].append({"robot": name, "phase": "register", "error": repr(exc)})
            traceback.print_exc()
            continue
        report["register_s"][name] = time.perf_counter() - t0
        nq, nv = th.nq, th.nv
        report["dims"][name] = {"nq": nq, "nv": nv, "num_ees": th.num_ees}
        cs = make_states(nq, nv, bool(robot["floating_base"]), int(request["check_batch"]),
                         int(request["check_seed"]) + ri)
        ct = {k: torch.from_numpy(v).to(request["device"]) for k, v in cs.items()}
        for alg in request["algorithms"]:
            try:
                result = getattr(th, alg)(*[ct[n] for n in ALGORITHMS[alg]])
                checks[f"{name}/{alg}"] = comparable(alg, result)
            except Exception as exc:
                report["errors"].append({"robot": name, "algorithm": alg, "phase": "check",
                                         "error": repr(exc)})
        for batch in request["batches"]:
            sets = _device_sets(torch, robot, ri, int(batch), nq, nv, request)
            timer = time_cuda if request["device"] == "cuda" else time_host
            for alg in request["algorithms"]:
                try:
                    t = timer(method_call(th, alg), sets, int(batch),
                              int(request["min_reps"]), float(request["min_seconds"]))
                except Exception as exc:
                    report["errors"].append({"robot": name, "algorithm": alg, "batch": batch,
                                             "phase": "timing", "error": repr(exc)})
                    continue
                report["records"].append({"robot": name, "algorithm": alg, "batch": batch,
                                          "n_sets": len(sets), **t})
                print(f"peer {name:7s} {alg:27s} B={batch:6d} {t['ns_per_item']:11.2f} ns/item "
                      f"{t['us_per_call']:10.1f} us/call", file=sys.stderr)
            del sets
            if request["device"] == "cuda":
                torch.cuda.empty_cache()
        if name in request.get("latency_robots", []):
            try:
                report["latency"] += _latency(grid_rbd, torch, robot, ri, th, request)
            except Exception as exc:
                report["errors"].append({"robot": name, "phase": "latency", "error": repr(exc)})
        np.savez(check_out, **checks)  # checkpoints per robot
        out.write_text(json.dumps(report, indent=2) + "\n")
    np.savez(check_out, **checks)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("build", "run"))
    parser.add_argument("--request", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check-out", type=Path)
    args = parser.parse_args(argv)
    request = json.loads(args.request.read_text())
    if args.command == "build":
        return cmd_build(request, args.out)
    if args.check_out is None:
        parser.error("run needs --check-out")
    return cmd_run(request, args.out, args.check_out)


if __name__ == "__main__":
    sys.exit(main())
