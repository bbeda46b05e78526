"""Collision kernels per item and the sphere model's accuracy against exact geometry.

Timing: sphere_positions[_gradient] and self_collision_distance with its gradient, per
robot at B = 65,536, on the CPU (numpy handle, `out=` buffers) or the GPU (torch handle
on CUDA tensors, synchronized), with the sphere model's size, the generated header's size
and the registration (generate + compile) time.

Accuracy (`--accuracy-configs N`, default 200; 0 skips it, it needs pinocchio with
coal): on N random configurations (joints uniform within their limits, the same ones for
every robot run), the sphere model's self-collision distance per checked link pair (the
float64 reference on the artifact's spheres) against Pinocchio's exact distances
(`computeDistances`, coal, over every geometry pair of the two links: meshes as meshes).
Reported per robot: the error `sphere - exact` on free pairs (mean, median, p95, max of
its magnitude), lower-bound violations (sphere > exact: none expected, the spheres cover
the surfaces), missed collisions (exact <= 0 but sphere > 0: none expected) and false
collisions (exact > 0, sphere <= 0: the price of the covering).

    .venv/bin/python tools/bench/bench_collision.py --device cuda --out RESULT.json

iiwa14's URDF has no collision geometry: it gets one cylinder or sphere per link
(tests/collision_support.py). g1 (example-robot-data, or $GRID_RBD_ROBOT_DATA) is fitted
to its own meshes and primitives at `--g1-res`; above UNROLL_MAX_PAIRS primitive pairs
the kernels loop over the pair table (grid_codegen.collision.emit), so the header stays
small at any resolution. Each timing is the median over `--reps` calls after a warm-up.
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


def _urdf(robot: str, folder: Path) -> tuple[Path, bool]:
    """(URDF path, floating base) of a bench robot; iiwa14 written with its cylinders."""
    if robot == "iiwa14":
        from collision_support import iiwa14_with_cylinders
        path = folder / "iiwa14_with_cylinders.urdf"
        path.write_text(iiwa14_with_cylinders())
        return path, False
    from support import ROBOTS
    return ROBOTS[robot].path, ROBOTS[robot].floating_base


def _register(robot: str, device: str, dtype: str, store: str, g1_res: float) -> Any:
    backend = "torch" if device == "cuda" else "numpy"
    path, floating = _urdf(robot, Path(store))
    extra = {} if robot == "iiwa14" else {"collision_res": g1_res}
    return grid_rbd.register_robot(f"{robot}_collision_bench", urdf_path=str(path),
                                   floating_base=floating, collision=True, dtype=dtype,
                                   device=device, backend=backend,
                                   algorithm_list=["collision"], cache_dir=store, **extra)


def accuracy(robot: str, handle: Any, store: str, configs: int, seed: int = 0) -> dict:
    """The sphere model against coal's exact distances (module doc)."""
    import pinocchio as pin

    from grid_codegen import parse_urdf
    from grid_rbd.reference import collision as ref

    path, floating = _urdf(robot, Path(store))
    model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating
             else pin.buildModelFromUrdf(str(path)))
    # package://example-robot-data/... resolves under the share folder holding the data
    packages = [str(p) for p in Path(path).resolve().parents if p.name == "share"][:1]
    geom = pin.buildGeomFromUrdf(model, str(path), pin.GeometryType.COLLISION,
                                 package_dirs=packages)
    of_link: dict[str, list[int]] = {}
    for k, g in enumerate(geom.geometryObjects):
        of_link.setdefault(model.frames[g.parentFrame].name, []).append(k)
    span = []
    for a, b in handle.collision_pairs:
        first = len(geom.collisionPairs)
        for ga in of_link[a]:
            for gb in of_link[b]:
                geom.addCollisionPair(pin.CollisionPair(ga, gb))
        span.append((first, len(geom.collisionPairs)))
    rng = np.random.default_rng(seed)
    q = np.tile(pin.neutral(model), (configs, 1))
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    first_joint = 7 if floating else 0
    q[:, first_joint:] = rng.uniform(lo[first_joint:], hi[first_joint:],
                                     (configs, model.nq - first_joint))
    ours = parse_urdf(Path(path).read_bytes(), floating_base=floating, source=str(path))
    sphere = ref.self_collision_distance(ours, handle._meta["collision"], q)
    data, gdata = model.createData(), pin.GeometryData(geom)
    exact = np.zeros_like(sphere)
    start = time.perf_counter()
    for i in range(configs):
        pin.computeDistances(model, data, geom, gdata, q[i])
        d = np.array([r.min_distance for r in gdata.distanceResults])
        exact[i] = [d[a:b].min() for a, b in span]
    coal_s = time.perf_counter() - start
    free, hit = exact > 0, exact <= 0
    err = (sphere - exact)[free]
    row = {"robot": robot, "kind": "accuracy", "configs": configs,
           "pairs": len(handle.collision_pairs), "spheres": len(handle.collision_spheres),
           "free_pairs": int(free.sum()), "colliding_pairs": int(hit.sum()),
           "error_mean_m": float(np.abs(err).mean()) if err.size else None,
           "error_median_m": float(np.median(np.abs(err))) if err.size else None,
           "error_p95_m": float(np.percentile(np.abs(err), 95)) if err.size else None,
           "error_max_m": float(np.abs(err).max()) if err.size else None,
           "lower_bound_violations": int((err > 1e-7).sum()),
           "missed_collisions": int((sphere[hit] > 1e-9).sum()),
           "false_collisions": int((sphere[free] <= 0).sum()),
           "coal_seconds_per_config": coal_s / configs}
    print(f"{robot:7s} accuracy over {configs} configs: free pairs {row['free_pairs']}, "
          f"colliding {row['colliding_pairs']}; |sphere - exact| mean "
          f"{row['error_mean_m']:.4f} m, p95 {row['error_p95_m']:.4f}, max "
          f"{row['error_max_m']:.4f}; violations {row['lower_bound_violations']}, missed "
          f"{row['missed_collisions']}, false {row['false_collisions']}", flush=True)
    return row


def bench_robot(robot: str, device: str, dtype: str, batch: int, reps: int, store: str,
                g1_res: float, configs: int) -> list[dict]:
    start = time.perf_counter()
    handle = _register(robot, device, dtype, store, g1_res)
    build_s = time.perf_counter() - start
    base = getattr(handle, "_base", handle)  # a torch handle wraps the numpy one
    header_bytes = (base._registration.entry_dir / "grid.cuh").stat().st_size
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
                     "spheres": spheres, "pairs": pairs, "build_seconds": build_s,
                     "header_bytes": header_bytes})
        print(f"{robot:7s} {name:34s} {seconds / batch * 1e9:10.2f} ns/item "
              f"(S={spheres}, P={pairs})", flush=True)
    both = _median_seconds(lambda: (handle.self_collision_distance(q),
                                    handle.self_collision_distance_gradient(q)), reps, sync)
    rows.append({"robot": robot, "algorithm": "self_collision_distance+gradient",
                 "batch": batch, "dtype": dtype, "device": device,
                 "ns_per_item": both / batch * 1e9, "spheres": spheres, "pairs": pairs,
                 "build_seconds": build_s, "header_bytes": header_bytes})
    print(f"{robot:7s} {'distance + gradient':34s} {both / batch * 1e9:10.2f} ns/item "
          f"(header {header_bytes / 1e6:.2f} MB, registration {build_s:.1f} s)")
    if configs:
        rows.append(accuracy(robot, handle, store, configs))
    handle.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--robots", default="iiwa14,g1")
    parser.add_argument("--batch", type=int, default=65536)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--g1-res", type=float, default=0.05)
    parser.add_argument("--accuracy-configs", type=int, default=200,
                        help="configurations of the comparison with coal (0: skip it)")
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
                            args.g1_res, args.accuracy_configs)
    write_rows(args.out, rows, skipped=skipped)


if __name__ == "__main__":
    main()
