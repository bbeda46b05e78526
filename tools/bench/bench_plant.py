"""The plant layer per item: `plant_step_gradient` (euler and semi-implicit euler) beside
the forward-dynamics gradient it is built on, per robot (iiwa14 and go2 at 65,536, g1 at
16,384), on the GPU (torch handle on CUDA tensors) or the CPU (numpy handle): the fused
kernel of the plant profile on a fixed base, the composed form on a free flyer; and
`plant_step_hessian` (numpy handle, fixed base) when `--hessian` is given.

    .venv/bin/python tools/bench/bench_plant.py --device cuda --out RESULT.json

Each figure is the median over `--reps` calls after one warm-up (synchronised on CUDA);
`ratio` is the step gradient's time over the FD gradient's (the issue's target: within
1.5x for iiwa14 at 65,536 on the H200).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_centroidal import _median_seconds, _states, _urdf  # noqa: E402
from sidebyside_common import write_rows  # noqa: E402

import grid_rbd  # noqa: E402

BATCHES = {"iiwa14": 65536, "go2": 65536, "g1": 16384}


def bench_robot(robot: str, device: str, dtype: str, reps: int, store: str,
                hessian: bool, strategy: str = "auto") -> list[dict]:
    path, floating = _urdf(robot)
    backend = "torch" if device == "cuda" else "numpy"
    # The fused step gradients (the plant profile) where the configuration is a vector.
    profiles = ["core"] + ([] if floating else ["plant"]) \
        + (["second_order"] if hessian and not floating else [])
    handle = grid_rbd.register_robot(f"{robot}_plant_bench_{strategy}", urdf_path=str(path),
                                     floating_base=floating, dtype=dtype, device=device,
                                     algorithm_list=profiles, backend=backend,
                                     cache_dir=store, strategy=strategy)
    batch = BATCHES[robot]
    s = _states(handle, batch, np.dtype(dtype), floating)
    x = np.concatenate([s["q"], s["qd"]], axis=1)
    sync = None
    if device == "cuda":
        import torch
        s = {k: torch.from_numpy(v).cuda() for k, v in s.items()}
        x = torch.from_numpy(x).cuda()
        sync = torch.cuda.synchronize
    fd = _median_seconds(lambda: handle.forward_dynamics_gradient(s["q"], s["qd"], s["u"]),
                         reps, sync)
    rows = []
    for integrator in ("euler", "semi_implicit_euler"):
        step = _median_seconds(
            lambda i=integrator: handle.plant_step_gradient(x, s["u"], 0.01, i), reps, sync)
        rows.append({"robot": robot, "batch": batch, "dtype": dtype, "device": device,
                     "strategy": strategy, "method": f"plant_step_gradient[{integrator}]",
                     "path": "composed" if floating else "fused kernel",
                     "ns_per_item": step / batch * 1e9,
                     "fd_gradient_ns_per_item": fd / batch * 1e9, "ratio": step / fd})
        print(f"{robot:7s} plant_step_gradient {integrator:20s} {step / batch * 1e9:9.1f} "
              f"ns/item (FD gradient {fd / batch * 1e9:8.1f}, x{step / fd:5.2f})", flush=True)
    if hessian and not floating:
        numpy_handle = grid_rbd.get_robot(f"{robot}_plant_bench_{strategy}") \
            if device == "cuda" \
            else handle
        small = min(batch, 4096)
        xs = np.ascontiguousarray(np.asarray(x.cpu() if device == "cuda" else x)[:small])
        us = np.ascontiguousarray(np.asarray(s["u"].cpu() if device == "cuda"
                                             else s["u"])[:small])
        seconds = _median_seconds(
            lambda: numpy_handle.plant_step_hessian(xs, us, 0.01, "semi_implicit_euler"),
            max(1, reps // 2))
        rows.append({"robot": robot, "batch": small, "dtype": dtype, "device": device,
                     "method": "plant_step_hessian[semi_implicit_euler] (numpy handle)",
                     "ns_per_item": seconds / small * 1e9})
        print(f"{robot:7s} plant_step_hessian (numpy handle, B={small}) "
              f"{seconds / small * 1e9:9.1f} ns/item", flush=True)
    handle.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--robots", default="iiwa14,go2,g1")
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--strategy", default="auto", choices=("auto", "thread", "warp", "block"),
                        help="register_robot's strategy= (the FD gradient's; the fused "
                        "kernels are thread-only)")
    parser.add_argument("--hessian", action="store_true",
                        help="also plant_step_hessian (builds the second-order profile)")
    parser.add_argument("--store", help="store folder (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    store = args.store or tempfile.mkdtemp(prefix="grid_plant_bench_")
    rows = []
    for robot in args.robots.split(","):
        rows += bench_robot(robot, args.device, args.dtype, args.reps, store, args.hessian,
                            args.strategy)
    write_rows(args.out, rows)


if __name__ == "__main__":
    main()
