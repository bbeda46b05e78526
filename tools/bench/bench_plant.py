"""The plant layer per item: `plant_step_gradient` (euler and semi-implicit euler) beside
the forward-dynamics gradient it is built on, per robot (iiwa14 and go2 at 65,536, g1 at
16,384, and batch 1 for the latency), on the GPU (torch handle on CUDA tensors) or the
CPU (numpy handle): the fused kernel of the plant profile (a fixed base or a free-flyer
root); and `plant_step_hessian` (numpy handle, fixed base) when `--hessian` is given.

    .venv/bin/python tools/bench/bench_plant.py --device cuda --robots iiwa14 \\
        --batches 65536,1 --trace --out RESULT.json

Rows, one per (robot, batch, method):

* `plant_step_gradient[<integrator>]`, path "handle": what a user calls, the handle
  method on `x = [q, qd]` and a Python float `dt`;
* `plant_step_gradient_<integrator>`, path "kernel": the fused kernel method itself on
  the same `x` and a prepared `(B, 1)` column of `dt` (what the handle launches; the
  difference is the handle's own work per call);
* `plant_step_gradient[<integrator>] (composed)`, path "composed" (with the fused kernel
  built): the route the handle takes without it, FD, its gradient and M^-1 over the chart
  (the handle's own private steps, for the comparison);
* `forward_dynamics_gradient`, path "kernel": the FD gradient on prepared `q`, `qd`, `u`
  (the issue's yardstick: the step gradient within 1.5x of it for iiwa14 at 65,536);
* with `--variants`, path "variant": the FD gradient and each fused kernel in every variant
  it has (thread, warp, block, tangents), each set explicitly on a context of its own
  (`variant` names it; `ratio` over the dispatched FD gradient's call).

Each row has `ns_per_item` and `us_per_call`, the median over `--reps` calls of one call
followed by a wait for its result (on CUDA a synchronise: host work and launch included),
and `pipelined_ns_per_item`, the median over `--reps` runs of `--calls` calls back to back
with one wait at the end (host work overlapped with the device's where it is shorter),
`ratio` and `pipelined_ratio` over the FD gradient's. `--trace` (CUDA) adds
`device_kernels`: every kernel one call launched with its device time (torch.profiler),
`device_us_per_call`, their sum, and `device_ratio` over the FD gradient's; rows also
carry the dispatch the registration recorded and the context's launch overrides for the
kernel.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_centroidal import (  # noqa: E402
    _device_kernels,
    _median_seconds,
    _pipelined_seconds,
    _states,
    _urdf,
    exit_after_trace,
)
from sidebyside_common import write_rows  # noqa: E402

import grid_rbd  # noqa: E402

BATCHES = {"iiwa14": 65536, "go2": 65536, "g1": 16384}
INTEGRATORS = ("euler", "semi_implicit_euler")
COMPOSED_NEEDS = {"forward_dynamics", "forward_dynamics_gradient", "minv"}
"""What the composed route's rows need built (`--algorithms`; left out without them)."""
DT = 0.01


def _launch_info(handle: Any, algorithm: str) -> dict:
    base = handle.numpy if hasattr(handle, "numpy") else handle
    return {"dispatch": (base._meta.get("dispatch") or {}).get(algorithm),
            "variants": list(base.variants(algorithm)),
            "launch_overrides": base.launch_overrides.get(algorithm)}


def _time_row(fn: Any, batch: int, args: argparse.Namespace, sync: Any,
              trace: bool) -> dict:
    call = _median_seconds(fn, args.reps, sync)
    piped = _pipelined_seconds(fn, args.calls, args.reps, sync)
    row = {"us_per_call": call * 1e6, "ns_per_item": call / batch * 1e9,
           "pipelined_ns_per_item": piped / batch * 1e9, "_seconds": (call, piped)}
    if trace:
        try:
            kernels = _device_kernels(fn, args.calls)
        except Exception as exc:  # (a profiler without CUPTI: keep the timings)
            row["device_kernels_error"] = f"{type(exc).__name__}: {exc}"
        else:
            row["device_kernels"] = kernels
            row["device_us_per_call"] = sum(k["us_per_call"] for k in kernels)
    return row


def _composed(handle: Any, x: Any, u: Any, dt: float, integrator: str) -> Any:
    """plant_step_gradient's composed route (what the handle runs without the fused
    kernel), called through the handle's private steps."""
    q, qd, _ = handle._split_state(x)
    return handle._stepper(q, -9.81).step(q, qd, u, dt, integrator, True)[1]


def bench_step_gradients(robot: str, handle: Any, batch: int, floating: bool,
                         args: argparse.Namespace) -> list[dict]:
    dtype = np.dtype(args.dtype)
    s = _states(handle, batch, dtype, floating)
    x = np.concatenate([s["q"], s["qd"]], axis=1)
    column = np.full((batch, 1), DT, dtype=dtype)
    sync = None
    if args.device == "cuda":
        import torch
        s = {k: torch.from_numpy(v).cuda() for k, v in s.items()}
        x, column = torch.from_numpy(x).cuda(), torch.from_numpy(column).cuda()
        sync = torch.cuda.synchronize
    trace = args.trace and args.device == "cuda"
    common = {"robot": robot, "batch": batch, "dtype": args.dtype, "device": args.device,
              "strategy": args.strategy}
    fd = _time_row(lambda: handle.forward_dynamics_gradient(s["q"], s["qd"], s["u"]),
                   batch, args, sync, trace)
    fd_call, fd_piped = fd.pop("_seconds")
    rows = [{**common, "method": "forward_dynamics_gradient", "path": "kernel", **fd,
             **_launch_info(handle, "forward_dynamics_gradient")}]
    for integrator in INTEGRATORS:
        kernel = f"plant_step_gradient_{integrator}"
        timed = [(f"plant_step_gradient[{integrator}]",
                  "handle" if kernel in handle.algorithms else "composed",
                  lambda i=integrator: handle.plant_step_gradient(x, s["u"], DT, i))]
        if kernel in handle.algorithms:
            timed.append((kernel, "kernel",
                          lambda k=kernel: getattr(handle, k)(x, s["u"], column)))
            if COMPOSED_NEEDS <= set(handle.algorithms):
                timed.append((f"plant_step_gradient[{integrator}] (composed)", "composed",
                              lambda i=integrator: _composed(handle, x, s["u"], DT, i)))
        for method, path, fn in timed:
            row = _time_row(fn, batch, args, sync, trace)
            call, piped = row.pop("_seconds")
            row.update(ratio=call / fd_call, pipelined_ratio=piped / fd_piped)
            if "device_us_per_call" in row and fd.get("device_us_per_call"):
                row["device_ratio"] = row["device_us_per_call"] / fd["device_us_per_call"]
            rows.append({**common, "method": method, "path": path, **row,
                         **(_launch_info(handle, kernel) if path != "composed" else {})})
            print(f"{robot:7s} B={batch:<6d} {method:44s} {path:8s} "
                  f"{row['ns_per_item']:10.2f} ns/item ({row['pipelined_ns_per_item']:9.2f} "
                  f"pipelined; FD gradient {fd['ns_per_item']:9.2f}, "
                  f"x{row['ratio']:5.2f}"
                  + (f"; device x{row['device_ratio']:5.2f}" if "device_ratio" in row else "")
                  + ")", flush=True)
    if args.variants:
        rows += _variant_rows(handle, common, s, x, column, batch, args, sync, trace, fd)
    return rows


def _variant_rows(handle: Any, common: dict, s: dict, x: Any, column: Any, batch: int,
                  args: argparse.Namespace, sync: Any, trace: bool, fd: dict) -> list[dict]:
    """`--variants`: the FD gradient and each fused kernel in every variant it has, each
    chosen explicitly on a context of its own (path "variant")."""
    rows = []
    calls = {"forward_dynamics_gradient": lambda c: c.forward_dynamics_gradient(
        s["q"], s["qd"], s["u"])}
    for integrator in INTEGRATORS:
        kernel = f"plant_step_gradient_{integrator}"
        if kernel in handle.algorithms:
            calls[kernel] = lambda c, k=kernel: getattr(c, k)(x, s["u"], column)
    for kernel, call in calls.items():
        for variant in handle.variants(kernel):
            ctx = handle.context()
            try:
                ctx.set_variant_for(kernel, variant)
                row = _time_row(lambda c=ctx, f=call: f(c), batch, args, sync, trace)
            finally:
                ctx.close()
            call_s, _ = row.pop("_seconds")
            row["ratio"] = call_s / fd["us_per_call"] * 1e6
            if "device_us_per_call" in row and fd.get("device_us_per_call"):
                row["device_ratio"] = row["device_us_per_call"] / fd["device_us_per_call"]
            rows.append({**common, "method": kernel, "path": "variant", "variant": variant,
                         **row})
            print(f"{common['robot']:7s} B={batch:<6d} {kernel:44s} {variant:9s} "
                  f"{row['ns_per_item']:10.2f} ns/item"
                  + (f"; device {row['device_us_per_call']:9.1f} us, x{row['device_ratio']:5.2f}"
                     if "device_ratio" in row else ""), flush=True)
    return rows


def bench_hessian(robot: str, name: str, args: argparse.Namespace) -> dict:
    path, floating = _urdf(robot)
    numpy_handle = grid_rbd.get_robot(name, cache_dir=args.store)
    small = min(BATCHES[robot], 4096)
    s = _states(numpy_handle, small, np.dtype(args.dtype), floating)
    x = np.concatenate([s["q"], s["qd"]], axis=1)
    seconds = _median_seconds(
        lambda: numpy_handle.plant_step_hessian(x, s["u"], DT, "semi_implicit_euler"),
        max(1, args.reps // 2))
    print(f"{robot:7s} plant_step_hessian (numpy handle, B={small}) "
          f"{seconds / small * 1e9:9.1f} ns/item", flush=True)
    return {"robot": robot, "batch": small, "dtype": args.dtype, "device": args.device,
            "method": "plant_step_hessian[semi_implicit_euler] (numpy handle)",
            "ns_per_item": seconds / small * 1e9}


def bench_robot(robot: str, args: argparse.Namespace) -> list[dict]:
    path, floating = _urdf(robot)
    backend = "torch" if args.device == "cuda" else "numpy"
    # The fused step gradients (the plant profile), fixed base or free-flyer root.
    profiles = [*args.algorithms.split(","), "plant"] \
        + (["second_order"] if args.hessian and not floating else [])
    name = f"{robot}_plant_bench_{args.strategy}"
    handle = grid_rbd.register_robot(name, urdf_path=str(path), floating_base=floating,
                                     dtype=args.dtype, device=args.device,
                                     algorithm_list=profiles, backend=backend,
                                     cache_dir=args.store, strategy=args.strategy)
    batches = [int(b) for b in args.batches.split(",")] if args.batches \
        else [BATCHES[robot], 1]
    rows = []
    for batch in batches:
        rows += bench_step_gradients(robot, handle, batch, floating, args)
    if args.hessian and not floating:
        rows.append(bench_hessian(robot, name, args))
    handle.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--robots", default="iiwa14,go2,g1")
    parser.add_argument("--batches", help="comma-separated batches for every robot "
                        "(default: the robot's large batch, then 1)")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20,
                        help="calls per pipelined run (and per --trace profile)")
    parser.add_argument("--strategy", default="auto", choices=("auto", "thread", "warp", "block"),
                        help="register_robot's strategy=")
    parser.add_argument("--algorithms", default="core",
                        help="what the registration builds besides the plant profile "
                        "(default: the core profile; the composed rows need "
                        "forward_dynamics, forward_dynamics_gradient and minv and are "
                        "left out without them)")
    parser.add_argument("--trace", action="store_true",
                        help="CUDA: list the kernels of each call with their device time")
    parser.add_argument("--variants", action="store_true",
                        help="also time the FD gradient and each fused kernel in every "
                        "variant it has, chosen explicitly (rows with path 'variant')")
    parser.add_argument("--hessian", action="store_true",
                        help="also plant_step_hessian (builds the second-order profile)")
    parser.add_argument("--store", help="store folder (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.store = args.store or tempfile.mkdtemp(prefix="grid_plant_bench_")
    rows = []
    for robot in args.robots.split(","):
        rows += bench_robot(robot, args)
    write_rows(args.out, rows, command=" ".join(sys.argv))
    exit_after_trace(args.trace)


if __name__ == "__main__":
    main()
