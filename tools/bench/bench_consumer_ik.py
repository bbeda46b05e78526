"""Benchmark of the consumer path: the batched DLS IK example (examples/consumer_ik) for
iiwa14, built with grid_rbd.build_artifact, timed per solve batch, plus the warm
build_artifact times. Writes JSON.

    python tools/bench/bench_consumer_ik.py --backend cpu --out ik_cpu.json
    python tools/bench/bench_consumer_ik.py --backend cuda --out ik_h200.json

Figures: `solves_per_s` of one `ik_solve` call on host arrays (the GPU build copies in and
out), `device_solves_per_s` of `ik_solve_device` on device-resident arrays (GPU with torch
only: the kernel alone), each the median of `--reps` calls after a warm-up; the build
times: cold (fresh cache), a key hit (median of 5 calls) and an object-cache hit after
editing one of the two units (that unit recompiled, the other reused, then linked).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "consumer_ik"))
import ik_iiwa14 as ik  # noqa: E402


def _timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def build_times(cache: Path, backend: str) -> tuple[dict, object]:
    start = time.perf_counter()
    art = ik.build(cache, backend)
    cold = time.perf_counter() - start
    hits = _timed(lambda: ik.build(cache, backend), 5)
    src = Path(tempfile.mkdtemp(prefix="bench_consumer_src_"))
    for path in (*ik.SOURCES, *ik.HEADERS):
        shutil.copy(path, src / path.name)
    # Same content in another folder: both objects from the cache, relinked under a name.
    copied = tuple(src / p.name for p in ik.SOURCES)
    ik.build(cache, backend, copied, name="edited")
    api = src / "ik_api.cu"
    api.write_text(api.read_text() + "\n// an edit: this unit alone recompiles\n")
    start = time.perf_counter()
    edited = ik.build(cache, backend, copied, name="edited")
    one_unit = time.perf_counter() - start
    shutil.rmtree(src, ignore_errors=True)
    return {"cold_s": round(cold, 3), "cold_compiled": art.compiled,
            "key_hit_ms": round(1e3 * statistics.median(hits), 2),
            "object_cache_hit_s": round(one_unit, 3),
            "object_cache_recompiled": list(edited.compiled_units)}, art


def device_solves(solver: ik.IKSolver, targets: np.ndarray, seeds: np.ndarray,
                  reps: int) -> float | None:
    """Solves per second of the kernel alone on device-resident arrays (torch)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    dev = torch.device("cuda")
    t = torch.as_tensor(targets, dtype=torch.float32, device=dev).contiguous()
    s = torch.as_tensor(seeds, dtype=torch.float32, device=dev).contiguous()
    q = torch.empty_like(s)
    err = torch.empty((len(t), 2), dtype=torch.float32, device=dev)
    iters = torch.empty(len(t), dtype=torch.int32, device=dev)
    fn = solver.lib.ik_solve_device
    P, I, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
    fn.argtypes = [P, P, P, P, P, I, I, F, F, F, P]

    def call() -> None:
        rc = fn(t.data_ptr(), s.data_ptr(), q.data_ptr(), err.data_ptr(), iters.data_ptr(),
                len(t), ik.MAX_ITERS, ik.DAMPING, ik.TOL_POS, ik.TOL_ROT, None)
        if rc != 0:
            raise RuntimeError(f"ik_solve_device returned {rc}")
        torch.cuda.synchronize()

    call()
    return len(t) / statistics.median(_timed(call, reps))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cache-dir", default=None, help="default: a fresh temporary one")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_consumer_"))
    cache = Path(args.cache_dir) if args.cache_dir else tmp / "cache"
    try:
        builds, art = build_times(cache, args.backend)
        solver = ik.IKSolver(art.path)
        _, targets, seeds = ik.make_problem(args.batch, seed=0)
        res = solver.solve(targets, seeds)  # warm-up, and the accuracy figures
        pos, rot = ik.pose_errors(res["q"], targets)
        host = _timed(lambda: solver.solve(targets, seeds), args.reps)
        report = {
            "robot": solver.robot, "backend": args.backend, "arch": art.arch,
            "batch": args.batch, "machine": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "solves_per_s": round(args.batch / statistics.median(host), 1),
            "device_solves_per_s": None,
            "solved_fraction": float(np.mean((pos < 1e-4) & (rot < 1e-3))),
            "median_pos_err_m": float(np.median(pos)),
            "mean_iters": float(res["iters"].mean()), "max_iters": int(res["iters"].max()),
            "build": builds,
        }
        if args.backend == "cuda":
            rate = device_solves(solver, targets, seeds, args.reps)
            report["device_solves_per_s"] = round(rate, 1) if rate else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
