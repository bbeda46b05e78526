"""Batched inverse kinematics for iiwa14, as a consumer of grid.cuh's device API.

ik_solver.cu and ik_api.cu are the consumer's own sources: one thread (or one CPU loop
iteration) per target runs damped least squares on the end-effector pose and its
Jacobian from `grid::device`. `grid_rbd.build_artifact` compiles them against iiwa14's
generated header into the consumer's namespace of the cache; this script loads the
artifact itself with ctypes (GRiD never binds a consumer's symbols) and solves targets
made by the float64 reference's forward kinematics.

    python examples/consumer_ik/ik_iiwa14.py --device cpu --batch 4096
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
URDF = HERE.parent.parent / "robots" / "iiwa14" / "iiwa14.urdf"
SOURCES = (HERE / "ik_solver.cu", HERE / "ik_api.cu")
HEADERS = (HERE / "ik_solver.h",)
ALGORITHMS = ("end_effector_pose", "end_effector_pose_gradient")
DAMPING, TOL_POS, TOL_ROT, MAX_ITERS = 2e-3, 1e-5, 1e-4, 100


def build(cache_dir: str | os.PathLike | None = None, backend: str = "cpu",
          sources: tuple[Path, ...] = SOURCES, name: str = "iiwa14") -> object:
    """The consumer artifact (`grid_rbd.consumer.ConsumerArtifact`) of the IK solver."""
    import grid_rbd

    return grid_rbd.build_artifact("ik_dls", name, URDF, sources=list(sources),
                                   headers=list(HEADERS), cache_dir=cache_dir,
                                   backend=backend, algorithm_list=list(ALGORITHMS))


class IKSolver:
    """The artifact's C functions (ik_solver.h) over numpy arrays."""

    def __init__(self, so_path: str | os.PathLike) -> None:
        self.lib = ctypes.CDLL(os.fspath(so_path))
        P, I, F = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
        self.lib.ik_solve.argtypes = [P, P, P, P, P, I, I, F, F, F]
        self.lib.ik_dims.argtypes = [P, P, P]
        self.lib.ik_robot_name.restype = ctypes.c_char_p
        self.lib.ik_state_selftest.argtypes = [P]
        dims = (ctypes.c_int * 3)()
        self.gpu = bool(self.lib.ik_dims(ctypes.byref(dims, 0), ctypes.byref(dims, 4),
                                         ctypes.byref(dims, 8)))
        self.nq, self.nv, self.num_ees = list(dims)
        self.robot = self.lib.ik_robot_name().decode()

    def solve(self, targets: np.ndarray, seeds: np.ndarray, max_iters: int = MAX_ITERS,
              damping: float = DAMPING, tol_pos: float = TOL_POS, tol_rot: float = TOL_ROT
              ) -> dict[str, np.ndarray]:
        """targets (B, 6) [xyz, rpy], seeds (B, nq) -> q (B, nq), err (B, 2), iters (B,)."""
        t = np.ascontiguousarray(targets, dtype=np.float32)
        s = np.ascontiguousarray(seeds, dtype=np.float32)
        batch = len(t)
        if t.shape != (batch, 6) or s.shape != (batch, self.nq):
            raise ValueError(f"targets must be (B, 6) and seeds (B, {self.nq}); got "
                             f"{t.shape} and {s.shape}")
        q = np.empty_like(s)
        err = np.empty((batch, 2), np.float32)
        iters = np.empty(batch, np.int32)
        rc = self.lib.ik_solve(t.ctypes.data, s.ctypes.data, q.ctypes.data, err.ctypes.data,
                               iters.ctypes.data, batch, max_iters, damping, tol_pos, tol_rot)
        if rc != 0:
            raise RuntimeError(f"ik_solve returned status {rc}")
        return {"q": q, "err": err, "iters": iters}

    def state_selftest(self) -> tuple[int, list[int]]:
        codes = (ctypes.c_int * 6)()
        return self.lib.ik_state_selftest(codes), list(codes)


def make_problem(batch: int, seed: int = 0, noise: float = 0.5
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q_true, targets, seeds): reachable targets from the reference's forward
    kinematics (float64) at random configurations, seeds perturbed by up to `noise` rad."""
    from grid_rbd import reference

    rng = np.random.default_rng(seed)
    ref = reference.load(URDF)
    q_true = rng.uniform(-2.0, 2.0, (batch, ref.nq))
    targets = ref.end_effector_pose(q_true)[:, :6]
    seeds = q_true + rng.uniform(-noise, noise, q_true.shape)
    return q_true, targets, seeds


def pose_errors(q: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and max rpy (rad) errors of the reference's pose at `q` (float64)."""
    from grid_rbd import reference

    pose = reference.load(URDF).end_effector_pose(np.asarray(q, np.float64))[:, :6]
    pos = np.linalg.norm(pose[:, :3] - targets[:, :3], axis=1)
    rot = np.abs((pose[:, 3:] - targets[:, 3:] + np.pi) % (2 * np.pi) - np.pi).max(axis=1)
    return pos, rot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    art = build(args.cache_dir, args.device)
    build_s = time.perf_counter() - start
    solver = IKSolver(art.path)
    _, targets, seeds = make_problem(args.batch)
    start = time.perf_counter()
    res = solver.solve(targets, seeds)
    solve_s = time.perf_counter() - start
    pos, rot = pose_errors(res["q"], targets)
    report = {"robot": solver.robot, "gpu": solver.gpu, "batch": args.batch,
              "build_s": round(build_s, 3), "compiled": art.compiled,
              "solve_s": round(solve_s, 4), "solves_per_s": args.batch / solve_s,
              "solved_fraction": float(np.mean((pos < 1e-4) & (rot < 1e-3))),
              "median_pos_err_m": float(np.median(pos)),
              "mean_iters": float(res["iters"].mean())}
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    raise SystemExit(main())
