"""The float64 plant step: the integrators of `grid_rbd._integrators` over the
reference's chart (`configuration`: integrate and its Jacobians, checked against
Pinocchio's `integrate` / `dIntegrate`) and its dynamics, and the step's Hessian.

The Hessian `(B, 2nv, 3nv, 3nv)` (euler and semi-implicit euler, fixed base) is made of
the second derivatives of the forward dynamics (`fdsva_so`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd._integrators import INTEGRATORS, Stepper, check_hessian_step, check_step
from grid_rbd._integrators import step_hessian as assemble_step_hessian
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


def step_hessian(model: RobotModel, x: np.ndarray, u: np.ndarray, dt: float, integrator: str,
                 fdsva_so: Callable) -> np.ndarray:
    """`(B, 2nv, 3nv, 3nv)`: `H[b, r, i, j] = d2 x'_r / dz_i dz_j`, `z = [q, qd, u]`
    (euler and semi-implicit euler on a fixed base, where the chart is additive: the
    second derivatives are those of the forward dynamics, `fdsva_so`, and `dM^-1/dq`;
    `grid_rbd._integrators.step_hessian` assembles them)."""
    check_hessian_step(integrator, dt)  # before the second derivatives are computed
    if model.floating_base:
        raise ValueError("plant_step_hessian is provided on a fixed base only (the "
                         "floating base's second-order chart terms are not implemented)")
    q, v = split(model, x)
    u = np.atleast_2d(np.asarray(u, dtype=np.float64))
    return assemble_step_hessian(*fdsva_so(q, v, u), dt, integrator)
