"""Benchmark the generated kernels: time per call and per item, JSON out.

For each robot, algorithm and batch size: `kernel` is the launch alone (CUDA events
around the launch on torch's current stream; on the CPU backend the launch is the whole
computation, timed with perf_counter) and `end_to_end` adds moving inputs from host numpy
arrays to the device and the result back (GPU), i.e. what a numpy caller pays.
`--variants` times every strategy variant of the artifact separately (kernel only, each
entry then names its `variant`), which is what the dispatch tables are chosen from.

    PYTHONPATH=codegen:python:tests python tools/bench/bench_kernels.py --backend cpu \\
        --robots iiwa14 --batches 1 64 1024 --out bench.json
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

from artifact_harness import build_cached, reference_case  # noqa: E402
from support import random_states  # noqa: E402

from grid_codegen.options import DEFAULT_ALGORITHMS  # noqa: E402
from grid_rbd.reference import ReferenceRobot  # noqa: E402

DEFAULT_BATCHES = (1, 64, 1024, 16384, 65536)
DEFAULT_ROBOTS = ("iiwa14", "go2", "g1")


def _repeat(fn: Any, min_seconds: float, min_reps: int) -> list[float]:
    """Wall times of `fn()` until `min_seconds` spent and `min_reps` done (one warm-up).
    On the CPU backend `kernel` is the raw C launch on preallocated arrays and
    `end_to_end` adds the numpy marshalling of `artifact_harness.State.call`."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10_000:
            break
    return times


def _summary(seconds: list[float], batch: int) -> dict[str, float]:
    median = statistics.median(seconds)
    return {"median_s": median, "min_s": min(seconds), "per_item_ns": median / batch * 1e9,
            "reps": len(seconds)}


def bench_cpu(state: Any, name: str, inputs: tuple[Any, ...], batch: int,
              min_seconds: float) -> dict[str, Any]:
    dtype = state.artifact.dtype
    arrays = [None if x is None else np.ascontiguousarray(x, dtype=dtype) for x in inputs]
    ptrs = [0 if x is None else x.ctypes.data for x in arrays]
    out = np.empty((batch, *state.artifact.algorithms[name].output_shape), dtype=dtype)

    def launch() -> None:
        state.artifact.check(state.launch_raw(name, ptrs, out.ctypes.data, batch))

    kernel = _repeat(launch, min_seconds, 3)
    e2e = _repeat(lambda: state.call(name, *inputs), min_seconds, 3)
    return {"kernel": _summary(kernel, batch), "end_to_end": _summary(e2e, batch)}


L2_BYTES = 50 * 2**20  # rotate input sets past this, so the cache does not flatter


def bench_cuda_kernel(state: Any, name: str, inputs: tuple[Any, ...], batch: int,
                      min_seconds: float, variant: str | None = None,
                      graph_launches: int = 0) -> list[float]:
    """Kernel times (seconds) of `name` on device-resident inputs, CUDA events around each
    launch (which then includes the host's launch cost), or around the replay of a graph
    of `graph_launches` launches (the GPU's time per kernel); several input sets rotate
    when one set fits in the L2."""
    import torch
    info = state.artifact.algorithms[name]
    dtype = state.artifact.dtype
    one = sum(np.asarray(x).nbytes for x in inputs if x is not None)
    sets = 1 if one >= L2_BYTES else min(8, -(-3 * L2_BYTES // max(one, 1)))
    device_sets = []
    for k in range(sets):
        rolled = [None if x is None else np.roll(np.asarray(x, dtype=dtype), k, axis=0)
                  for x in inputs]
        device_sets.append([None if x is None else torch.from_numpy(
            np.ascontiguousarray(x)).cuda() for x in rolled])
    out = torch.empty((batch, *info.output_shape), device="cuda",
                      dtype=device_sets[0][0].dtype)
    ptr_sets = [[0 if x is None else x.data_ptr() for x in ds] for ds in device_sets]
    stream = torch.cuda.current_stream().cuda_stream
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def kernel_once(k: int) -> float:
        start.record()
        state.artifact.check(state.launch_raw(name, ptr_sets[k % sets], out.data_ptr(), batch,
                                              stream=stream, variant=variant))
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) * 1e-3

    kernel_once(0)
    if graph_launches:
        # Kernel time without the host's launch cost: capture `graph_launches` launches in
        # a CUDA graph (one per input set in turn) and time its replays with events.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
            capture = torch.cuda.current_stream().cuda_stream
            for k in range(graph_launches):
                state.artifact.check(state.launch_raw(name, ptr_sets[k % sets], out.data_ptr(),
                                                      batch, stream=capture, variant=variant))
        torch.cuda.current_stream().wait_stream(side)
        graph.replay()
        kernel_times = []
        t_end = time.perf_counter() + min_seconds
        while len(kernel_times) < 10 or time.perf_counter() < t_end:
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            kernel_times.append(start.elapsed_time(stop) * 1e-3 / graph_launches)
            if len(kernel_times) >= 2_000:
                break
        return kernel_times
    kernel_times: list[float] = []
    t_end = time.perf_counter() + min_seconds
    while len(kernel_times) < 20 or time.perf_counter() < t_end:
        kernel_times.append(kernel_once(len(kernel_times)))
        if len(kernel_times) >= 10_000:
            break
    return kernel_times


def bench_cuda(state: Any, name: str, inputs: tuple[Any, ...], batch: int,
               min_seconds: float) -> dict[str, Any]:
    import torch
    kernel_times = bench_cuda_kernel(state, name, inputs, batch, min_seconds)

    def end_to_end() -> None:
        result = state.call(name, *[None if x is None else torch.from_numpy(
            np.ascontiguousarray(x, dtype=state.artifact.dtype)).cuda() for x in inputs])
        result.cpu()

    e2e = _repeat(lambda: (end_to_end(), torch.cuda.synchronize()), min_seconds, 3)
    return {"kernel": _summary(kernel_times, batch), "end_to_end": _summary(e2e, batch)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--robots", nargs="+", default=list(DEFAULT_ROBOTS))
    parser.add_argument("--algorithms", nargs="+", default=list(DEFAULT_ALGORITHMS))
    parser.add_argument("--batches", nargs="+", type=int, default=list(DEFAULT_BATCHES))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--strategy", choices=("auto", "thread", "warp", "block"),
                        default="auto")
    parser.add_argument("--variants", action="store_true",
                        help="time every variant of the artifact separately (GPU)")
    parser.add_argument("--graph", type=int, default=0, metavar="N",
                        help="with --variants: time N launches captured in a CUDA graph "
                             "(kernel time without the host's launch cost)")
    parser.add_argument("--min-seconds", type=float, default=0.2,
                        help="time spent per (robot, algorithm, batch) measurement")
    parser.add_argument("--out", type=Path, default=None, help="JSON file (default stdout)")
    args = parser.parse_args(argv)

    run = bench_cuda if args.backend == "cuda" else bench_cpu
    report: dict[str, Any] = {
        "backend": args.backend, "dtype": args.dtype, "strategy": args.strategy,
        "host": platform.node(), "machine": platform.machine(), "results": []}
    for robot in args.robots:
        extra = ({} if tuple(args.algorithms) == tuple(DEFAULT_ALGORITHMS)
                 else {"algorithms": tuple(args.algorithms)})
        artifact, compile_s = build_cached(robot, backend=args.backend, dtype=args.dtype,
                                           strategy=args.strategy,
                                           max_batch_size=max(args.batches), **extra)
        if args.backend == "cuda":
            report["device"] = artifact.query_device().name.decode()
        state = artifact.state()
        ref = ReferenceRobot(_model(robot))
        for batch in args.batches:
            s = random_states(ref.model, batch, seed=batch)
            for name in args.algorithms:
                inputs, _ = _inputs(ref, name, s)
                if args.variants and args.backend == "cuda":
                    for variant in artifact.algorithms[name].variants:
                        times = bench_cuda_kernel(state, name, inputs, batch,
                                                  args.min_seconds, variant, args.graph)
                        entry = {"robot": robot, "algorithm": name, "batch": batch,
                                 "variant": variant, "compile_s": round(compile_s, 2),
                                 "kernel": _summary(times, batch)}
                        report["results"].append(entry)
                        print(f"{robot:8s} {name:28s} B={batch:6d} {variant:6s} "
                              f"{entry['kernel']['median_s'] * 1e6:10.1f} us "
                              f"({entry['kernel']['per_item_ns']:9.2f} ns/item)",
                              file=sys.stderr, flush=True)
                    continue
                entry = {"robot": robot, "algorithm": name, "batch": batch,
                         "compile_s": round(compile_s, 2)}
                entry.update(run(state, name, inputs, batch, args.min_seconds))
                report["results"].append(entry)
                print(f"{robot:8s} {name:28s} B={batch:6d} kernel "
                      f"{entry['kernel']['median_s'] * 1e6:10.1f} us "
                      f"({entry['kernel']['per_item_ns']:9.1f} ns/item)", file=sys.stderr)
        state.close()
        if args.out:  # after every robot: a run cut short keeps what it measured
            args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    return report


def _model(robot: str) -> Any:
    from artifact_harness import load_model
    return load_model(robot)


def _inputs(ref: ReferenceRobot, name: str, s: Any) -> tuple[tuple[Any, ...], None]:
    """The artifact's inputs for `name` without evaluating the reference (cheap at large
    batches): `reference_case` minus the expected value."""
    if name in ("crba", "minv", "end_effector_pose", "end_effector_pose_gradient"):
        return (s.q,), None
    if name in ("inverse_dynamics", "inverse_dynamics_gradient"):
        return (s.q, s.qd, s.qdd, None), None
    if name in ("forward_dynamics", "aba", "forward_dynamics_gradient"):
        return (s.q, s.qd, s.u, None), None
    if name == "inverse_dynamics_regressor":
        return (s.q, s.qd, s.qdd), None
    return reference_case(ref, name, s)[0], None


if __name__ == "__main__":
    main()
