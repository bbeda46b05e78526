"""Joint dynamics in the float64 oracle: viscous damping and Coulomb friction.

The convention is `grid_codegen.joint_dynamics`'s: per joint-dynamics dof `k` (every
tangent dof but a free flyer's), `tau_passive_k = damping_k qd_k + friction_k phi(qd_k)`
with `phi = sign` (sign(0) = 0) or `tanh(qd / width_k)`; inverse dynamics adds it, forward
dynamics solves `M qdd = u - c - tau_passive`, and `d tau / d qd` gains its diagonal
slope (`damping + friction sech^2(qd / width) / width` for tanh, `damping` for sign).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grid_codegen.joint_dynamics import joint_dynamics_dofs
from grid_codegen.model import RobotModel
from grid_codegen.options import DEFAULT_FRICTION_WIDTH


@dataclass(frozen=True)
class PassiveJoints:
    """Damping and friction per joint-dynamics dof (`dofs` in tangent order)."""

    nv: int
    dofs: np.ndarray
    damping: np.ndarray
    friction: np.ndarray
    friction_model: str = "sign"
    width: np.ndarray | None = None

    @classmethod
    def from_model(cls, model: RobotModel, friction_model: str = "sign",
                   friction_width: float | list[float] | None = None,
                   damping: np.ndarray | None = None, friction: np.ndarray | None = None
                   ) -> PassiveJoints:
        """The URDF's `<dynamics damping= friction=>` (or the given coefficients)."""
        dofs, d0, f0 = joint_dynamics_dofs(model)
        n = len(dofs)
        w = DEFAULT_FRICTION_WIDTH if friction_width is None else friction_width
        width = np.broadcast_to(np.asarray(w, dtype=np.float64), (n,)).copy()
        return cls(model.nv, np.asarray(dofs, dtype=np.intp),
                   np.asarray(d0 if damping is None else damping, dtype=np.float64),
                   np.asarray(f0 if friction is None else friction, dtype=np.float64),
                   friction_model, width)

    def _phi(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.friction_model == "tanh":
            t = np.tanh(v / self.width)
            return t, (1.0 - t * t) / self.width
        return np.sign(v), np.zeros_like(v)

    def torque(self, qd: np.ndarray) -> np.ndarray:
        """`(B, nv)` passive torque (zero on a free flyer's dofs)."""
        out = np.zeros((len(qd), self.nv))
        v = qd[:, self.dofs]
        out[:, self.dofs] = self.damping * v + self.friction * self._phi(v)[0]
        return out

    def slope(self, qd: np.ndarray) -> np.ndarray:
        """`(B, nv)`: `d tau_passive_k / d qd_k`."""
        out = np.zeros((len(qd), self.nv))
        v = qd[:, self.dofs]
        out[:, self.dofs] = self.damping + self.friction * self._phi(v)[1]
        return out

    def add_to_gradient(self, dtau: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """`dtau (B, nv, 2 nv)` with the slope added on the `d/dqd` diagonal."""
        dtau = dtau.copy()
        k = np.arange(self.nv)
        dtau[:, k, self.nv + k] += self.slope(qd)
        return dtau
