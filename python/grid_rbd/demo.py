"""The main job: load the in-tree iiwa14, run the float64 reference on a batch of states,
print forward dynamics and the mass matrix, and how closely Pinocchio agrees.

    python -m grid_rbd.demo [--urdf PATH] [--batch N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import grid_rbd.reference as reference

DEFAULT_URDF = Path(__file__).resolve().parents[2] / "robots/iiwa14/iiwa14.urdf"


def _pinocchio_agreement(urdf: Path, q, qd, u, qdd, M) -> tuple[float, float] | None:
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()
    fd_err = m_err = 0.0
    for b in range(len(q)):
        qdd_pin = pin.aba(pm, pd, q[b], qd[b], u[b])
        M_pin = pin.crba(pm, pd, q[b])
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        fd_err = max(fd_err, np.abs(qdd[b] - qdd_pin).max() / np.abs(qdd_pin).max())
        m_err = max(m_err, np.abs(M[b] - M_pin).max() / np.abs(M_pin).max())
    return fd_err, m_err


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urdf", type=Path, default=DEFAULT_URDF)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.urdf.is_file():
        print(f"no URDF at {args.urdf}; pass --urdf PATH", file=sys.stderr)
        return 2

    robot = reference.load(args.urdf)
    print(f"{robot.model.name}: nq={robot.nq} nv={robot.nv} nb={robot.nb}")
    print("joints:", ", ".join(robot.joint_names))
    rng = np.random.default_rng(args.seed)
    q = rng.uniform(-np.pi, np.pi, (args.batch, robot.nq))
    qd = rng.uniform(-10.0, 10.0, (args.batch, robot.nv))
    u = rng.uniform(-50.0, 50.0, (args.batch, robot.nv))

    start = time.perf_counter()
    qdd = robot.forward_dynamics(q, qd, u)
    M = robot.crba(q)
    elapsed = time.perf_counter() - start
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    print(f"\nforward dynamics, item 0 (rad/s^2):\n{qdd[0]}")
    print(f"\nmass matrix, item 0:\n{M[0]}")
    print(f"\nreference float64: forward dynamics + mass matrix for {args.batch} states "
          f"in {elapsed * 1e3:.1f} ms")
    agreement = _pinocchio_agreement(args.urdf, q, qd, u, qdd, M)
    if agreement is None:
        print("pinocchio is not installed: no cross-check (run tools/setup.sh)")
        return 0
    fd_err, m_err = agreement
    print(f"agreement with Pinocchio (max relative error over the batch): "
          f"forward dynamics {fd_err:.2e}, mass matrix {m_err:.2e}")
    return 0 if max(fd_err, m_err) < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
