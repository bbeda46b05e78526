"""Collision kernels per item: sphere_positions[_gradient] and self_collision_distance
with its gradient, per robot at B = 65,536, on the CPU (numpy handle, `out=` buffers) or
the GPU (torch handle on CUDA tensors, synchronized), plus the sphere model's size.

    .venv/bin/python tools/bench/bench_collision.py --device cuda --out RESULT.json

iiwa14's URDF has no collision geometry: it gets one cylinder or sphere per link
(tests/collision_support.py). g1 (example-robot-data, or $GRID_RBD_ROBOT_DATA) is fitted
to its own meshes and primitives at `--g1-res` (the kernels unroll every sphere pair of
every checked link pair, so the resolution sets the code size and compile time). Each
figure is the median over `--reps` calls after one warm-up.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from bench_centroidal import _median_seconds  # noqa: E402
from sidebyside_common import use_tree, write_rows  # noqa: E402

use_tree(REPO)
sys.path.insert(0, str(REPO / "tests"))

import grid_rbd  # noqa: E402
from grid_codegen.registry import PROFILES, algorithm  # noqa: E402

METHODS = PROFILES["collision"]


def _register(robot: str, device: str, dtype: str, store: str, g1_res: float) -> Any:
    backend = "torch" if device == "cuda" else "numpy"
    common = dict(collision=True, dtype=dtype, device=device, backend=backend,
                  algorithm_list=["collision"], cache_dir=store)
    if robot == "iiwa14":
        from collision_support import iiwa14_with_cylinders
        return grid_rbd.register_robot("iiwa14_collision_bench",
                                       urdf_string=iiwa14_with_cylinders(), **common)
    from support import ROBOTS
    entry = ROBOTS[robot]
    return grid_rbd.register_robot(f"{robot}_collision_bench", urdf_path=str(entry.path),
                                   floating_base=entry.floating_base, collision_res=g1_res,
                                   **common)


def bench_robot(robot: str, device: str, dtype: str, batch: int, reps: int, store: str,
                g1_res: float) -> list[dict]:
    start = time.perf_counter()
    handle = _register(robot, device, dtype, store, g1_res)
    build_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.0, 1.0, (batch, handle.nq))
    if handle.nq == handle.nv + 1:
        quat = rng.standard_normal((batch, 4))
        q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    q = q.astype(dtype)
    sync = None
    if device == "cuda":
        import torch
        q = torch.from_numpy(q).cuda()
        sync = torch.cuda.synchronize
    spheres, pairs = len(handle.collision_spheres), len(handle.collision_pairs)
    rows = []
    for name in METHODS:
        size = algorithm(name).output_size(handle._dims)
        if device == "cuda":
            import torch
            out = torch.empty((batch, size), dtype=getattr(torch, dtype), device="cuda")
        else:
            out = np.empty((batch, size), dtype)
        method = getattr(handle, name)
        seconds = _median_seconds(lambda m=method, o=out: m(q, out=o), reps, sync)
        rows.append({"robot": robot, "algorithm": name, "batch": batch, "dtype": dtype,
                     "device": device, "ns_per_item": seconds / batch * 1e9,
                     "spheres": spheres, "pairs": pairs, "build_seconds": build_s})
        print(f"{robot:7s} {name:34s} {seconds / batch * 1e9:10.2f} ns/item "
              f"(S={spheres}, P={pairs})", flush=True)
    both = _median_seconds(lambda: (handle.self_collision_distance(q),
                                    handle.self_collision_distance_gradient(q)), reps, sync)
    rows.append({"robot": robot, "algorithm": "self_collision_distance+gradient",
                 "batch": batch, "dtype": dtype, "device": device,
                 "ns_per_item": both / batch * 1e9, "spheres": spheres, "pairs": pairs,
                 "build_seconds": build_s})
    print(f"{robot:7s} {'distance + gradient':34s} {both / batch * 1e9:10.2f} ns/item")
    handle.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--robots", default="iiwa14,g1")
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--g1-res", type=float, default=0.1)
    parser.add_argument("--store", help="store folder (default: a fresh temporary one)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    store = args.store or tempfile.mkdtemp(prefix="grid_collision_bench_")
    rows, skipped = [], {}
    for robot in args.robots.split(","):
        if robot != "iiwa14":
            from support import robot_available
            if not robot_available(robot):
                skipped[robot] = "URDF not on this machine (GRID_RBD_ROBOT_DATA)"
                print(f"skipping {robot}: {skipped[robot]}")
                continue
        rows += bench_robot(robot, args.device, args.dtype, args.batch, args.reps, store,
                            args.g1_res)
    write_rows(args.out, rows, skipped=skipped)


if __name__ == "__main__":
    main()
