"""The batch-1 latency table of issue 20: every public surface as a caller meets it, the
kernel alone beside it. JSON (records {surface, algorithm, batch, us_per_call}) + PNG.

Rows (iiwa14 float32 by default, batch 1 unless said):
  kernel              the launch alone on preallocated buffers (CPU: timed in C++ around
                      the runtime's launch; GPU: CUDA events around a loop of launches)
  numpy               RobotHandle on host arrays, end to end (copies in and out, waits)
  numpy_overhead      numpy minus kernel: the host path's own cost
  torch_eager         TorchRobotHandle on device tensors (GPU: CUDA events around the call)
  torch_eager_python  the same calls through the Python path (the torch extension off)
  torch_graph_replay  GraphCallable.replay() of a captured forward_dynamics(_gradient)
  jax_jit / jax_jit_wait   a jitted JaxRobotHandle call, waiting once per loop / per call
  torch_fwd_bwd       forward_dynamics forward + analytic backward, B=1 and B=16384
  torch_fwd_bwd_python  the same at B=1 through the Python path (its autograd.Function)
  jax_grad            jax.grad of forward_dynamics, jitted, waiting per call
  floor_*             the same timers around the frameworks' own trivial work (torch
                      `x.add_(1)`, `(x * 2).sum().backward()`; a jitted `(x * 2).sum()`):
                      what no call on this machine can go under by that timer

Every figure is the median of at least `--reps` calls after a warm-up. On the GPU the
timers follow tools/bench/sidebyside_common.py (CUDA events around one call, the device
idle before each), so these rows compare with the side-by-side script's.

    python tools/bench/bench_latency.py --device cpu --out lat.json --plot lat.png
    python tools/bench/bench_latency.py --device cuda --out lat.json --plot lat.png

Frameworks that are not installed are skipped with a note in the JSON (`skipped`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from sidebyside_common import make_states, use_tree  # noqa: E402

use_tree(REPO)  # benchmark the checkout this script is in, whatever is installed

import grid_rbd  # noqa: E402

BIG_BATCH = 16384
ID, FD, FD_GRAD = "inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient"
INPUTS = {ID: ("q", "qd", "qdd"), FD: ("q", "qd", "u"), FD_GRAD: ("q", "qd", "u")}


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def time_wall(call: Callable[[], Any], reps: int, warmup: int = 20) -> float:
    """Median wall time of one call (the call waits for its own results)."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    return median_us(samples)


def time_loop(call: Callable[[], Any], wait: Callable[[Any], Any], reps: int,
              loops: int = 7) -> float:
    """Median over `loops` of (reps calls, one wait at the end) / reps: the per-call cost
    of a caller that does not wait after every call."""
    wait(call())
    samples = []
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(reps - 1):
            call()
        wait(call())
        samples.append((time.perf_counter() - t0) / reps)
    return median_us(samples)


def time_events(call: Callable[[], Any], reps: int, warmup: int = 20) -> float:
    """CUDA events around one call at a time on the current stream, the device idle
    before each: the GPU time from the call's start to its last work, host path
    included."""
    import torch

    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return median_us(samples)


class Table:
    """The records, and the rows that could not be measured."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.skipped: list[str] = []

    def add(self, surface: str, algorithm: str, batch: int, us: float) -> None:
        self.records.append({"surface": surface, "algorithm": algorithm, "batch": batch,
                             "us_per_call": round(float(us), 3)})
        print(f"{surface:20s} {algorithm:26s} B={batch:<6d} {us:10.2f} us", file=sys.stderr)

    def value(self, surface: str, algorithm: str, batch: int) -> float | None:
        return next((r["us_per_call"] for r in self.records if (r["surface"], r["algorithm"],
                     r["batch"]) == (surface, algorithm, batch)), None)


def kernel_loop(h: Any, algorithm: str, arrays: dict[str, Any]) -> Callable[[int], float]:
    """`time(n)`: seconds per launch over n launches of the kernel alone on buffers of the
    artifact's memory space (CPU: timed in C++ around the runtime's launch, no Python per
    launch; GPU: CUDA events around the n launches)."""
    artifact, info = h._artifact, h._info["algorithms"][algorithm]

    def address(x: Any) -> int:
        return x.data_ptr() if hasattr(x, "data_ptr") else x.ctypes.data

    given = INPUTS[algorithm]
    pointers = [address(arrays[n]) if n in given else 0 for n, _, _ in info["inputs"]]
    out = address(arrays["_out_" + algorithm])
    if h.device != "cuda":
        return lambda n: artifact.launch_repeatedly(0, info["id"], pointers, out, 1, -9.81,
                                                    0, n)
    import torch

    def on_gpu(n: int) -> float:
        stream = torch.cuda.current_stream().cuda_stream
        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        torch.cuda.synchronize()
        start.record()
        for _ in range(n):
            artifact.launch(0, info["id"], pointers, out, 1, -9.81, stream, 0, 0, 0)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / n

    return on_gpu


def bench_numpy(h: Any, states: dict[str, np.ndarray], table: Table, reps: int) -> None:
    for algorithm in (ID, FD_GRAD, FD):
        fn, args = getattr(h, algorithm), [states[n] for n in INPUTS[algorithm]]
        table.add("numpy", algorithm, 1, time_wall(lambda fn=fn, a=args: fn(*a), reps))


def bench_kernels(h: Any, states: dict[str, np.ndarray], table: Table, reps: int,
                  rounds: int = 9) -> None:
    """The kernel alone, and the numpy call's cost above it: kernel and numpy loops
    interleaved round by round (so a drift of the machine hits both), the median of the
    per-round differences."""
    if h.device == "cuda":
        import torch

        arrays: dict[str, Any] = {k: torch.as_tensor(v, device="cuda") for k, v in states.items()}
        empty = lambda shape: torch.empty(shape, dtype=torch.float32, device="cuda")  # noqa: E731
    else:
        arrays = dict(states)
        empty = lambda shape: np.empty(shape, np.float32)  # noqa: E731
    n = max(10, reps // 4)
    for algorithm in (ID, FD_GRAD, FD):
        shape = h._info["algorithms"][algorithm]["output_shape"]
        arrays["_out_" + algorithm] = empty((1, *shape))
        kernel = kernel_loop(h, algorithm, arrays)
        fn, args = getattr(h, algorithm), [states[name] for name in INPUTS[algorithm]]
        kernel(n)
        kernels, overheads = [], []
        for _ in range(rounds):
            k = kernel(n)
            t0 = time.perf_counter()
            for _ in range(n):
                fn(*args)
            overheads.append((time.perf_counter() - t0) / n - k)
            kernels.append(k)
        table.add("kernel", algorithm, 1, median_us(kernels))
        table.add("numpy_overhead", algorithm, 1, median_us(overheads))


def bench_torch(h: Any, states: dict[str, np.ndarray], table: Table, reps: int,
                big_batch: int, big_states: dict[str, np.ndarray] | None) -> None:
    import torch

    th = grid_rbd.torch.TorchRobotHandle(h)
    dev = th.torch_device
    t = {k: torch.as_tensor(v, device=dev) for k, v in states.items()}
    on_gpu = dev.type == "cuda"
    timer = time_events if on_gpu else time_wall
    for algorithm in (ID, FD_GRAD, FD):
        fn, args = getattr(th, algorithm), [t[n] for n in INPUTS[algorithm]]
        table.add("torch_eager", algorithm, 1, timer(lambda fn=fn, a=args: fn(*a), reps))
    # The same calls through Python (the torch extension declining every call), beside.
    python_path = grid_rbd.torch.TorchRobotHandle(h)
    python_path._fast = {name: lambda args, kwargs: None for name in python_path._fast}
    for algorithm in (ID, FD_GRAD, FD):
        fn, args = getattr(python_path, algorithm), [t[n] for n in INPUTS[algorithm]]
        table.add("torch_eager_python", algorithm, 1,
                  timer(lambda fn=fn, a=args: fn(*a), reps))
    for algorithm in (FD, FD_GRAD):
        graph = th.capture(algorithm, t["q"], t["qd"], t["u"])
        table.add("torch_graph_replay", algorithm, 1, timer(graph.replay, reps))
    x = torch.zeros(1, 7, device=dev, requires_grad=True)
    with torch.no_grad():
        table.add("floor_torch_op", "add_", 1, timer(lambda: x.add_(1.0), reps))
    table.add("floor_torch_backward", "sum", 1,
              timer(lambda: (x * 2.0).sum().backward(), reps, warmup=3))

    def fwd_bwd_at(batch: int, source: dict[str, np.ndarray], n: int, handle: Any = th,
                   surface: str = "torch_fwd_bwd") -> None:
        q, qd, u = (torch.as_tensor(source[k], device=dev).requires_grad_()
                    for k in ("q", "qd", "u"))

        def step() -> None:
            handle.forward_dynamics(q, qd, u).sum().backward()

        table.add(surface, FD, batch, timer(step, n, warmup=3))

    fwd_bwd_at(1, states, reps)
    fwd_bwd_at(1, states, reps, python_path, "torch_fwd_bwd_python")
    if big_states is not None:
        fwd_bwd_at(big_batch, big_states, max(3, reps // 50))


def bench_jax(h: Any, states: dict[str, np.ndarray], table: Table, reps: int) -> None:
    import jax

    jh = grid_rbd.jax.JaxRobotHandle(h)
    device = jax.devices("gpu" if h.device == "cuda" else "cpu")[0]
    q, qd, u = (jax.device_put(states[k], device) for k in ("q", "qd", "u"))
    fd = jax.jit(jh.forward_dynamics)
    table.add("jax_jit", FD, 1, time_loop(lambda: fd(q, qd, u), jax.block_until_ready, reps))
    table.add("jax_jit_wait", FD, 1,
              time_wall(lambda: jax.block_until_ready(fd(q, qd, u)), reps))
    trivial = jax.jit(lambda a: (a * 2.0).sum())
    table.add("floor_jax_jit", "sum", 1,
              time_loop(lambda: trivial(q), jax.block_until_ready, reps))
    table.add("floor_jax_jit_wait", "sum", 1,
              time_wall(lambda: jax.block_until_ready(trivial(q)), reps))
    grad = jax.jit(jax.grad(lambda q, qd, u: jh.forward_dynamics(q, qd, u).sum(),
                            argnums=(0, 1, 2)))
    table.add("jax_grad", FD, 1,
              time_wall(lambda: jax.block_until_ready(grad(q, qd, u)), reps))


def plot(records: list[dict[str, Any]], meta: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['surface']} {r['algorithm']} B={r['batch']}" for r in records]
    values = [max(r["us_per_call"], 1e-3) for r in records]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(records) + 1.5))
    colors = ["tab:gray" if r["surface"] == "kernel" else "tab:orange"
              if r["surface"] == "numpy_overhead" else "tab:blue" for r in records]
    ax.barh(range(len(records)), values, color=colors)
    ax.set_yticks(range(len(records)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(left=min(values) / 2)
    ax.set_xlabel("microseconds per call (median)")
    ax.set_title(f"grid-rbd call latency: {meta['robot']} {meta['dtype']} on "
                 f"{meta['device_name']}", fontsize=10)
    for k, v in enumerate(values):
        ax.text(v, k, f" {v:.1f}", va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--robot", default="iiwa14", help="a robot of tests/support.py")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--reps", type=int, default=200, help="timed calls per row")
    parser.add_argument("--big-batch", type=int, default=BIG_BATCH,
                        help="the large batch of torch_fwd_bwd (0: skip it)")
    parser.add_argument("--surfaces", default="numpy,torch,jax",
                        help="comma-separated subset of numpy,torch,jax")
    parser.add_argument("--cache-dir", help="the store (default: the usual one)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file")
    parser.add_argument("--plot", type=Path, help="a PNG of the table")
    args = parser.parse_args(argv)

    from support import ROBOTS

    spec = ROBOTS[args.robot]
    max_batch = max(args.big_batch, 1)
    h = grid_rbd.register_robot(f"{args.robot}-latency", urdf_path=spec.path,
                                floating_base=spec.floating_base, dtype=args.dtype,
                                max_batch_size=max_batch, device=args.device,
                                algorithm_list=[ID, FD, FD_GRAD, "forward_dynamics_vjp",
                                                "inverse_dynamics_vjp"],
                                cache_dir=args.cache_dir)
    cast = (lambda d: {k: v.astype(args.dtype) for k, v in d.items()})  # noqa: E731
    states = cast(make_states(h.nq, h.nv, spec.floating_base, 1, seed=20))
    big = cast(make_states(h.nq, h.nv, spec.floating_base, args.big_batch, seed=21)) \
        if args.big_batch > 1 else None
    surfaces = set(args.surfaces.split(","))
    table = Table()
    if "numpy" in surfaces:
        bench_numpy(h, states, table, args.reps)
        try:
            bench_kernels(h, states, table, args.reps)
        except ImportError as exc:  # a GPU kernel timing needs torch's CUDA buffers
            table.skipped.append(f"kernel: {exc}")
    for name in ("torch", "jax"):
        if name not in surfaces:
            continue
        try:
            __import__(f"grid_rbd.{name}")
        except ImportError as exc:
            table.skipped.append(f"{name}: {exc}")
            continue
        if name == "torch":
            bench_torch(h, states, table, args.reps, args.big_batch, big)
        else:
            bench_jax(h, states, table, args.reps)
    profile = h.device_profile
    meta = {"what": "per-call latency, median microseconds; see tools/bench/bench_latency.py",
            "date": datetime.date.today().isoformat(), "robot": args.robot,
            "dtype": args.dtype, "device": h.device, "device_name": profile["name"],
            "strategy": h._info["strategy"], "python": platform.python_version(),
            "host": platform.processor() or platform.machine(), "reps": args.reps}
    args.out.write_text(json.dumps({"meta": meta, "records": table.records,
                                    "skipped": table.skipped}, indent=2) + "\n")
    if args.plot is not None:
        plot(table.records, meta, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
