"""A build profile per item: every algorithm of it ("centroidal" by default, or
`--profile second_order` / `kinematics`), per robot at the issue's batch (centroidal:
iiwa14 and go2 at 65,536, g1 at 16,384; second order: 1,024; kinematics: 65,536, with
`frame_jacobian` in each reference frame; `--batch` to change), beside the output-write
bound (the time to fill a buffer of the same size), on the CPU (numpy handle, `out=`
buffers, all cores or `--threads`) or the GPU (torch handle on CUDA tensors, `out=`).

    .venv/bin/python tools/bench/bench_centroidal.py --device cpu --out RESULT.json
    .venv/bin/python tools/bench/bench_centroidal.py --profile second_order \
        --robots iiwa14,go2 --out RESULT.json
    .venv/bin/python tools/bench/bench_centroidal.py --device cuda \
        --algorithms inverse_dynamics_regressor --robots g1 --out RESULT.json

Each figure is the median over `--reps` calls after one warm-up; the bound is the median
fill of the output buffer (`fill(0)` / `zero_()`), so `ratio = time / bound` says how far
a kernel is from writing its output at the machine's store bandwidth (on the CPU the
fill runs on one thread, the kernels on all of them: a ratio below 1 is possible there).
Each call waits for the device, so a GPU figure includes the host's per-call work; the
GPU rows also give the `queued` figures: `--reps` calls back to back and one wait (the
median of 3 such runs), for the method and the fill alike (a loop that does not wait per
call), and `events`: CUDA events recorded around one call, as the side-by-side script
times.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from bench_latency import time_events  # noqa: E402
from sidebyside_common import use_tree, write_rows  # noqa: E402

use_tree(REPO)

import grid_rbd  # noqa: E402
from grid_codegen.registry import PROFILES, algorithm  # noqa: E402

BATCHES = {"centroidal": {"iiwa14": 65536, "go2": 65536, "g1": 16384},
           "second_order": {"iiwa14": 1024, "go2": 1024, "g1": 1024},
           "kinematics": {"iiwa14": 65536, "go2": 65536, "g1": 65536}}
FRAME_REFERENCES = ("LOCAL_WORLD_ALIGNED", "WORLD", "LOCAL")
"""`--profile kinematics` also times `frame_jacobian` of the first end effector in each."""


def _urdf(robot: str) -> tuple[Path, bool]:
    sys.path.insert(0, str(REPO / "tests"))
    from support import ROBOTS
    return ROBOTS[robot].path, ROBOTS[robot].floating_base


def _states(handle: Any, batch: int, dtype: np.dtype, floating: bool
            ) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, (batch, handle.nq))
    if floating:
        quat = rng.standard_normal((batch, 4))
        q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    states = {"q": q.astype(dtype),
              "qd": rng.uniform(-2, 2, (batch, handle.nv)).astype(dtype),
              "qdd": rng.uniform(-5, 5, (batch, handle.nv)).astype(dtype),
              "u": rng.uniform(-5, 5, (batch, handle.nv)).astype(dtype)}
    if "frame_jacobian_indexed" in handle.algorithms:
        # its selector: the first end effector, LOCAL_WORLD_ALIGNED (code 2)
        frame = handle._frame_table().resolve(handle.ee_names[0]).index
        states["frame"] = np.tile(np.array([frame, 2], dtype), (batch, 1))
    return states


def _median_seconds(fn, reps: int, sync=None) -> float:
    fn()
    if sync:
        sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _pipelined_seconds(fn: Any, calls: int, reps: int, sync: Any = None) -> float:
    """Median over `reps` of (`calls` calls back to back, then one wait) / `calls`."""
    fn()
    if sync:
        sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(calls):
            result = fn()
        if sync:
            sync()
        del result
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def _device_kernels(fn: Any, calls: int) -> list[dict]:
    """The CUDA kernels `calls` calls of `fn` launched, per call: name, count and device
    microseconds (torch.profiler over CUPTI, which sees the runtime's own launches)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = []
    for event in prof.key_averages():  # (kernels only: the CPU activity is off)
        total = next((getattr(event, a) for a in ("self_device_time_total",
                                                  "self_cuda_time_total", "device_time_total")
                      if hasattr(event, a)), 0.0)
        if total:
            kernels.append({"name": event.key[:160], "per_call": event.count / calls,
                            "us_per_call": total / calls})
    return sorted(kernels, key=lambda k: -k["us_per_call"])


def exit_after_trace(traced: bool) -> None:
    """Leave without the interpreter's teardown once the results are written when the
    profiler ran: torch's CUPTI teardown frees activity buffers CUPTI still owns and the
    process then aborts at exit with "double free or corruption" (pytorch/pytorch#195207;
    seen on 2026-12-02, 12-05 and 12-06 after --trace runs only, never without)."""
    if traced:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def bench_robot(robot: str, device: str, dtype: str, reps: int, store: str,
                profile: str = "centroidal", batch: int | None = None,
                algorithms: tuple[str, ...] = (), trace: bool = False,
                variant: str = "") -> list[dict]:
    """`algorithms`: a subset of the profile to build and time (default: all of it);
    `trace` (CUDA): also the kernels each call launches with their device time;
    `variant`: launch every algorithm that has it with that strategy variant."""
    path, floating = _urdf(robot)
    backend = "torch" if device == "cuda" else "numpy"
    handle = grid_rbd.register_robot(f"{robot}_{profile}_bench", urdf_path=str(path),
                                     floating_base=floating, dtype=dtype, device=device,
                                     algorithm_list=list(algorithms) or [profile],
                                     backend=backend,
                                     cache_dir=store)
    batch = batch or BATCHES[profile][robot]
    npdtype = np.dtype(dtype)
    states = _states(handle, batch, npdtype, floating)
    rows = []
    if device == "cuda":
        import torch
        states = {k: torch.from_numpy(v).cuda() for k, v in states.items()}
        sync = torch.cuda.synchronize
    else:
        sync = None
    for name in algorithms or PROFILES[profile]:
        entry = algorithm(name)
        size = entry.output_size(handle._dims)
        inputs = [states.get(p.name) for p in entry.inputs]  # f_ext: None
        out, fill = _output_and_fill((batch, size), dtype, device)
        if variant and variant not in handle.variants(name):
            print(f"{robot:7s} {name:28s} has no variant {variant!r} "
                  f"(it has {', '.join(handle.variants(name))})", flush=True)
            continue
        handle.set_variant_for(name, variant)
        method = getattr(handle, name)
        row = {"robot": robot, "profile": profile, "algorithm": name, "batch": batch,
               "dtype": dtype, "variant": variant or "dispatch", "device": device,
               "bytes_per_item": size * npdtype.itemsize}
        rows.append(_timed_row(row, f"{robot:7s} {name:28s}",
                               lambda m=method, i=inputs, o=out: m(*i, out=o), fill,
                               reps, sync, trace))
    if profile == "kinematics" and not algorithms and not variant:
        rows += _bench_frame_jacobian(handle, robot, states["q"], batch, dtype, device,
                                      reps, sync, trace)
    handle.close()
    return rows


def _output_and_fill(shape: tuple[int, ...], dtype: str, device: str) -> tuple[Any, Any]:
    """An output buffer on `device` and the call that fills it with zeros (the bound)."""
    if device == "cuda":
        import torch
        out = torch.empty(shape, dtype=getattr(torch, dtype), device="cuda")
        return out, out.zero_
    out = np.empty(shape, np.dtype(dtype))
    return out, lambda: out.fill(0)


def _timed_row(row: dict, label: str, call: Any, fill: Any, reps: int, sync: Any,
               trace: bool) -> dict:
    """`row` with `call`'s figures per item beside `fill`'s (the write bound): waited
    for, and on CUDA queued, by events and (`trace`) its kernels; printed on one line."""
    batch = row["batch"]
    seconds = _median_seconds(call, reps, sync)
    bound = _median_seconds(fill, reps, sync)
    row.update({"ns_per_item": seconds / batch * 1e9,
                "write_bound_ns_per_item": bound / batch * 1e9,
                "ratio_to_write_bound": seconds / bound})
    text = (f"{label} {seconds / batch * 1e9:10.1f} ns/item  "
            f"(write bound {bound / batch * 1e9:7.1f}, x{seconds / bound:6.1f})")
    if row["device"] == "cuda":
        events = time_events(call, reps, warmup=1) * 1e-6
        queued = _pipelined_seconds(call, reps, 3, sync)
        queued_bound = _pipelined_seconds(fill, reps, 3, sync)
        row.update({"queued_ns_per_item": queued / batch * 1e9,
                    "queued_write_bound_ns_per_item": queued_bound / batch * 1e9,
                    "queued_ratio_to_write_bound": queued / queued_bound,
                    "events_ns_per_item": events / batch * 1e9})
        text += (f"; queued {queued / batch * 1e9:7.1f} (bound "
                 f"{queued_bound / batch * 1e9:7.1f}, x{queued / queued_bound:5.2f}); "
                 f"events {events / batch * 1e9:7.2f}")
        if trace:
            row["device_kernels"] = _device_kernels(call, reps)
            text += "".join(f"\n    {k['us_per_call']:9.1f} us  {k['name'][:90]}"
                            for k in row["device_kernels"])
    print(text, flush=True)
    return row


def _bench_frame_jacobian(handle: Any, robot: str, q: Any, batch: int, dtype: str,
                          device: str, reps: int, sync: Any, trace: bool = False
                          ) -> list[dict]:
    """`frame_jacobian(q, ee, reference)` (no `out=`: a new `(B, 6, nv)` array per call)
    beside the fill of an array of that size."""
    frame = handle.ee_names[0]
    _, fill = _output_and_fill((batch, 6, handle.nv), dtype, device)
    rows = []
    for reference in FRAME_REFERENCES:
        row = {"robot": robot, "profile": "kinematics", "algorithm": "frame_jacobian",
               "reference_frame": reference, "frame": frame, "batch": batch, "dtype": dtype,
               "variant": "dispatch", "device": device,
               "bytes_per_item": 6 * handle.nv * np.dtype(dtype).itemsize}
        rows.append(_timed_row(row, f"{robot:7s} frame_jacobian {reference:19s}",
                               lambda r=reference: handle.frame_jacobian(q, frame, r),
                               fill, reps, sync, trace))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--profile", choices=tuple(BATCHES), default="centroidal")
    parser.add_argument("--batch", type=int, help="one batch for every robot")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--robots", default="iiwa14,go2,g1")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU: host threads (GRID_RBD_NUM_THREADS); 0 = all cores")
    parser.add_argument("--algorithms", default="",
                        help="comma-separated subset of the profile (default: all of it)")
    parser.add_argument("--store", help="store folder (default: a fresh temporary one)")
    parser.add_argument("--trace", action="store_true",
                        help="CUDA: the kernels each call launches, with their device time")
    parser.add_argument("--variant", default="",
                        help="a strategy variant to force (default: the artifact's dispatch)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.threads:
        os.environ["GRID_RBD_NUM_THREADS"] = str(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    store = args.store or tempfile.mkdtemp(prefix=f"grid_{args.profile}_bench_")
    rows = []
    for robot in args.robots.split(","):
        rows += bench_robot(robot, args.device, args.dtype, args.reps, store, args.profile,
                            args.batch, tuple(a for a in args.algorithms.split(",") if a),
                            args.trace, args.variant)
    write_rows(args.out, rows, threads=args.threads or os.cpu_count())
    exit_after_trace(args.trace)


if __name__ == "__main__":
    main()
