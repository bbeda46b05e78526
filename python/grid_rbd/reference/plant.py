"""The float64 plant step: the integrators of `grid_rbd._integrators` over the
reference's chart (`configuration`: integrate and its Jacobians, checked against
Pinocchio's `integrate` / `dIntegrate`) and its dynamics, and the step's Hessian.

The Hessian `(B, 2nv, 3nv, 3nv)` (euler and semi-implicit euler, any joints) is made of
the second derivatives of the forward dynamics (`fdsva_so`) and, on the Lie-group joints,
those of the chart's integration (`grid_rbd._step_hessian`, which the handles share).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grid_codegen.model import JointType, RobotModel
from grid_rbd import _step_hessian
from grid_rbd._array_ops import ArrayOps
from grid_rbd._integrators import INTEGRATORS, Stepper, check_hessian_step, check_step
from grid_rbd.reference import configuration

__all__ = ["INTEGRATORS", "NumpyChart", "Stepper", "check_step", "split", "step_hessian"]


def split(model: RobotModel, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    if x.shape[1] != model.nq + model.nv:
        raise ValueError(f"x has width {x.shape[1]}; the state [q, qd] of this robot has "
                         f"nq + nv = {model.nq + model.nv}")
    return x[:, :model.nq], x[:, model.nq:]


class NumpyChart:
    """The reference's configuration chart for `grid_rbd._integrators.Stepper`."""

    def __init__(self, model: RobotModel) -> None:
        self.model, self.nq, self.nv = model, model.nq, model.nv

    def integrate(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        return configuration.integrate(self.model, q, dq)

    def integrate_jacobians(self, q: np.ndarray, dq: np.ndarray):
        return configuration.integrate_jacobians(self.model, q, dq)

    def selector(self, like: np.ndarray, block: int) -> np.ndarray:
        """`(nv, 3nv)`: the identity in column block `block` of `z = [dq, dqd, du]`."""
        out = np.zeros((self.nv, 3 * self.nv))
        out[:, block * self.nv:(block + 1) * self.nv] = np.eye(self.nv)
        return out

    def cat(self, xs: list, axis: int) -> np.ndarray:
        return np.concatenate(xs, axis=axis)


#: Where a Lie-group joint's tangent sits in SE(3)'s twist `[v; w]` (its group is a
#: subgroup of SE(3), so its chart's Jacobians are blocks of SE(3)'s).
TWIST_ROWS = {JointType.FREE_FLYER: (0, 1, 2, 3, 4, 5), JointType.SPHERICAL: (3, 4, 5),
              JointType.PLANAR: (0, 1, 5)}


def lie_groups(model: RobotModel) -> list[tuple[int, tuple[int, ...]]]:
    """`(idx_v, twist rows)` of every joint that is not a vector (`_step_hessian`)."""
    return [(j.idx_v, TWIST_ROWS[j.type]) for j in model.joints if not j.type.scalar]


def step_hessian(model: RobotModel, x: np.ndarray, u: np.ndarray, dt: float, integrator: str,
                 fdsva_so: Callable, dynamics: Callable) -> np.ndarray:
    """`(B, 2nv, 3nv, 3nv)`: `H[b, r, i, k] = d/dz_k (d x'_r / dz_i)` over `z = [dq, dqd,
    du]` (euler and semi-implicit euler; iterated on the Lie-group joints, see
    `grid_rbd._step_hessian`), from `fdsva_so(q, qd, u)` and, for a floating base under
    semi-implicit euler, `dynamics` as `Stepper` takes it (the step's `qd'` and its
    Jacobian)."""
    check_hessian_step(integrator, dt)  # before the second derivatives are computed
    q, v = split(model, x)
    u = np.atleast_2d(np.asarray(u, dtype=np.float64))
    ops, groups = ArrayOps(v), lie_groups(model)
    w = Jw = None
    if groups:
        w, Jw = _step_hessian.moved_velocity(ops, q, v, u, dt, integrator, dynamics)
    return _step_hessian.step_hessian(ops, fdsva_so(q, v, u), dt, integrator, groups, w, Jw)
