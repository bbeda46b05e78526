"""Joint dynamics: each joint's viscous damping and Coulomb friction.

The convention, per joint-dynamics dof `k` (every tangent dof of a non-free-flyer joint;
a floating base's 6 dofs carry none, as the URDF's `<dynamics>` belongs to joints):

    tau_passive_k(qd) = damping_k qd_k + friction_k phi(qd_k)
    phi = sign      (sign(0) = 0; d phi / d qd = 0)            friction_model="sign"
    phi = tanh(qd / width_k)  (d phi / d qd = sech^2(qd / width_k) / width_k)  "tanh"

and the dynamics gain it as a torque the actuators must overcome:

    inverse dynamics:   tau = ID_rigid(q, qd, qdd, f_ext) + tau_passive(qd)
    forward dynamics:   M(q) qdd = u - c(q, qd, f_ext) - tau_passive(qd)
    ID gradient:        d tau / d qd += diag(damping + friction phi'(qd))
    FD gradient:        -M^-1 [d tau / d q | d tau / d qd] at qdd = FD (so the same term)

The rigid-body quantities (mass matrix, Coriolis matrix, `nonlinear_effects`,
`generalized_gravity`, the regressors) stay rigid: they are Pinocchio's definitions.

The coefficients are the URDF's, baked into the code (`use_joint_dynamics=True`) or read
from a per-context table (`runtime_joint_dynamics=True`), laid out
`[damping (n) | friction (n)]` over the `n` joint-dynamics dofs in tangent order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grid_codegen.model import JointType, RobotModel
from grid_codegen.options import CodegenOptions
from grid_codegen.symbolic import graph as G


@dataclass(frozen=True)
class JointDynamics:
    """The joint-dynamics terms of one artifact (`JointDynamics.of`)."""

    nv: int
    dofs: tuple[int, ...]  # tangent index of each joint-dynamics dof
    damping: tuple[float, ...]  # the URDF's, per dof
    friction: tuple[float, ...]
    friction_model: str  # "sign" | "tanh"
    widths: tuple[float, ...]  # tanh velocity scale per dof
    runtime: bool  # coefficients from the per-context table

    @classmethod
    def of(cls, model: RobotModel, options: CodegenOptions) -> JointDynamics | None:
        """The terms `options` ask for on `model`, or None when they are off."""
        if not options.joint_dynamics:
            return None
        if getattr(model, "coupling", None) is not None:
            raise ValueError("joint dynamics with mimic=True coupling are not supported yet "
                             "(the terms would act on the reduced coordinates)")
        dofs, damping, friction = joint_dynamics_dofs(model)
        return cls(model.nv, tuple(dofs), tuple(damping), tuple(friction),
                   options.friction_model, options.friction_widths(len(dofs)),
                   options.runtime_joint_dynamics)

    @property
    def table_size(self) -> int:
        return 2 * len(self.dofs)

    def default_table(self) -> list[float]:
        return list(self.damping) + list(self.friction)

    def coefficients(self, table: Sequence | None) -> tuple[list, list]:
        """`(damping, friction)` per dof: baked floats, or the run-time table's values."""
        if table is None:
            return list(self.damping), list(self.friction)
        n = len(self.dofs)
        return list(table[:n]), list(table[n:2 * n])

    def torque(self, qd: Sequence, table: Sequence | None) -> list:
        """`tau_passive (nv)`; zero on the free flyer's dofs."""
        damping, friction = self.coefficients(table)
        out: list = [0.0] * self.nv
        for j, k in enumerate(self.dofs):
            if self.friction_model == "tanh":
                phi = G.tanh(qd[k] * (1.0 / self.widths[j]))
            else:
                phi = G.sign(qd[k])
            out[k] = damping[j] * qd[k] + friction[j] * phi
        return out

    def slope(self, qd: Sequence, table: Sequence | None) -> list:
        """`d tau_passive_k / d qd_k (nv)`."""
        damping, friction = self.coefficients(table)
        out: list = [0.0] * self.nv
        for j, k in enumerate(self.dofs):
            out[k] = damping[j]
            if self.friction_model == "tanh":
                t = G.tanh(qd[k] * (1.0 / self.widths[j]))
                out[k] = damping[j] + friction[j] * (1.0 - t * t) * (1.0 / self.widths[j])
        return out


def joint_dynamics_dofs(model: RobotModel) -> tuple[list[int], list[float], list[float]]:
    """`(dofs, damping, friction)`: the tangent dofs that carry joint dynamics (all but a
    free flyer's) and the URDF's coefficients of their joints."""
    dofs: list[int] = []
    damping: list[float] = []
    friction: list[float] = []
    for joint in model.joints:
        if joint.type is JointType.FREE_FLYER:
            continue
        for d in range(joint.nv):
            dofs.append(joint.idx_v + d)
            damping.append(float(joint.damping))
            friction.append(float(joint.friction))
    return dofs, damping, friction
