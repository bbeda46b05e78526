"""Per-call overhead of the numpy, torch and JAX paths against the raw kernel, and a
captured-graph replay against an eager torch call. JSON out.

For one robot (default iiwa14, float32) and each batch size, the median wall time per
call of:
  kernel        the launch alone on preallocated device buffers (CUDA events over a loop
                of launches on the GPU; perf_counter on the CPU backend)
  launch_py     `_core.Artifact.launch` called from Python on those buffers (the floor of
                any Python-level path)
  numpy         `RobotHandle.forward_dynamics` on host arrays (copies in and out, waits)
  torch         `TorchRobotHandle.forward_dynamics` on device tensors (custom op)
  torch_replay  `GraphCallable.replay()` of a captured forward_dynamics
  jax_jit       a jitted `JaxRobotHandle.forward_dynamics` on device arrays
  torch_fwd_bwd / jax_grad   a forward plus the analytic backward
Throughput calls are timed as a loop with one wait at the end; `latency` variants wait
after every call.

    PYTHONPATH=codegen:python python tools/bench/bench_frameworks.py --device cpu \\
        --batches 1 1024 --out frameworks.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
for sub in ("codegen", "python", "tests"):
    if str(REPO / sub) not in sys.path:
        sys.path.insert(0, str(REPO / sub))

import grid_rbd  # noqa: E402

METHOD = "forward_dynamics"


def _median_per_call(fn: Any, sync: Any, calls: int, rounds: int = 7) -> float:
    """Median over `rounds` of (time of `calls` calls of fn + one sync) / calls."""
    fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def _calls_for(batch: int) -> int:
    return 200 if batch <= 1024 else 50


def bench_torch(h: Any, batch: int, rng: np.random.Generator) -> dict[str, float]:
    import torch

    dev = h.torch_device
    q = torch.as_tensor(rng.normal(size=(batch, h.nq)), dtype=h.dtype, device=dev)
    qd = torch.as_tensor(rng.normal(size=(batch, h.nv)), dtype=h.dtype, device=dev)
    u = torch.as_tensor(rng.normal(size=(batch, h.nv)), dtype=h.dtype, device=dev)
    out = torch.empty(batch, h.nv, dtype=h.dtype, device=dev)
    artifact, alg = h.numpy._artifact, h._ids[METHOD]
    ptrs = [q.data_ptr(), qd.data_ptr(), u.data_ptr(), 0]
    on_gpu = dev.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    calls = _calls_for(batch)

    def stream() -> int:
        return int(torch.cuda.current_stream().cuda_stream) if on_gpu else 0

    def launch() -> None:
        artifact.launch(0, alg, ptrs, out.data_ptr(), batch, -9.81, stream())

    result: dict[str, float] = {}
    if on_gpu:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        launch()
        start.record()
        for _ in range(calls):
            launch()
        end.record()
        end.synchronize()
        result["kernel"] = start.elapsed_time(end) / 1e3 / calls
    result["launch_py"] = _median_per_call(launch, sync, calls)
    if not on_gpu:
        result["kernel"] = result["launch_py"]
    result["torch"] = _median_per_call(lambda: h.forward_dynamics(q, qd, u), sync, calls)
    result["torch_latency"] = _median_per_call(
        lambda: (h.forward_dynamics(q, qd, u), sync()), lambda: None, calls)
    graph = h.capture(METHOD, q, qd, u)
    result["torch_replay"] = _median_per_call(graph.replay, sync, calls)
    qg = q.clone().requires_grad_()

    def fwd_bwd() -> None:
        h.forward_dynamics(qg, qd, u).sum().backward()

    result["torch_fwd_bwd"] = _median_per_call(fwd_bwd, sync, max(calls // 4, 10))
    q_np, qd_np, u_np = (t.cpu().numpy() for t in (q, qd, u))
    result["numpy"] = _median_per_call(lambda: h.numpy.forward_dynamics(q_np, qd_np, u_np),
                                       lambda: None, calls)
    return result


def bench_jax(hj: Any, batch: int, rng: np.random.Generator) -> dict[str, float]:
    import jax
    import jax.numpy as jnp

    dtype = hj.np_dtype
    q = jnp.asarray(rng.normal(size=(batch, hj.nq)).astype(dtype))
    qd = jnp.asarray(rng.normal(size=(batch, hj.nv)).astype(dtype))
    u = jnp.asarray(rng.normal(size=(batch, hj.nv)).astype(dtype))
    fd = jax.jit(hj.forward_dynamics)
    grad = jax.jit(jax.grad(lambda q, qd, u: hj.forward_dynamics(q, qd, u).sum()))
    calls = _calls_for(batch)
    last: list[Any] = [None]

    def call(fn: Any) -> Any:
        def run() -> None:
            last[0] = fn(q, qd, u)
        return run

    def sync() -> None:
        jax.block_until_ready(last[0])

    return {
        "jax_jit": _median_per_call(call(fd), sync, calls),
        "jax_jit_latency": _median_per_call(
            lambda: jax.block_until_ready(fd(q, qd, u)), lambda: None, calls),
        "jax_grad": _median_per_call(call(grad), sync, max(calls // 4, 10)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robot", default="iiwa14")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16384])
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    from support import ROBOTS

    spec = ROBOTS[args.robot]
    kw = dict(urdf_path=spec.path, floating_base=spec.floating_base, dtype=args.dtype,
              device=args.device, max_batch_size=max(args.batches), cache_dir=args.cache_dir)
    ht = grid_rbd.register_robot(f"{args.robot}-bench", backend="torch", **kw)
    hj = None
    if not args.no_jax:
        try:
            hj = grid_rbd.register_robot(f"{args.robot}-bench", backend="jax", **kw)
        except ImportError as exc:
            print(f"jax path skipped: {exc}", file=sys.stderr)
    rng = np.random.default_rng(0)
    rows = []
    for batch in args.batches:
        row: dict[str, Any] = {"batch": batch, **bench_torch(ht, batch, rng)}
        if hj is not None:
            row.update(bench_jax(hj, batch, rng))
        rows.append(row)
        cells = "  ".join(f"{k} {v * 1e6:9.2f} us" for k, v in row.items() if k != "batch")
        print(f"B={batch:6d}  {cells}", file=sys.stderr)
    import torch

    report = {
        "what": f"{METHOD} per-call seconds, median; see tools/bench/bench_frameworks.py",
        "robot": args.robot, "dtype": args.dtype, "device": ht.device,
        "strategy": ht.numpy._info.get("strategy"),
        "gpu": torch.cuda.get_device_name() if ht.device == "cuda" else None,
        "torch": torch.__version__, "python": platform.python_version(),
        "results": rows,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
