"""`CentroidalMixin`: centroidal quantities, Coriolis matrix and regressors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from grid_codegen.model import GRAVITY, RobotModel
from grid_rbd.reference import centroidal_dynamics, coriolis, kinematics, regressors
from grid_rbd.reference import rnea as _rnea


class CentroidalMixin:
    """Centroidal dynamics, the Coriolis matrix and inertial-parameter regressors of
    `ReferenceRobot`.

    Tangent directions are `[v_lin, omega, joints]` on a floating base (Pinocchio's LOCAL
    chart). Inertial parameters `pi` are `(10*nb,)`, body by body in Pinocchio's order
    `[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]` about the body origin
    (`Inertia.dynamic_parameters`).
    """

    model: RobotModel
    _S: list[np.ndarray]
    _I: list[np.ndarray]
    if TYPE_CHECKING:
        def _q(self, q) -> np.ndarray: ...
        def _v(self, x, name: str, batch: int) -> np.ndarray: ...
        def _gravity_vector(self, gravity) -> np.ndarray: ...
        def _root_acceleration(self, gravity, batch: int) -> np.ndarray: ...
        def inverse_dynamics(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY
                             ) -> np.ndarray: ...

    def generalized_gravity(self, q, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv)`: `g(q)`, the joint torques that hold the robot still."""
        q = self._q(q)
        return self.inverse_dynamics(q, np.zeros((len(q), self.model.nv)), None,
                                     gravity=gravity)

    def nonlinear_effects(self, q, qd, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv)`: `C(q, qd) qd + g(q)` (Pinocchio's `nonLinearEffects`)."""
        return self.inverse_dynamics(q, qd, None, gravity=gravity)

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        """`(B, nv, nv)`: Pinocchio's `computeCoriolisMatrix`: `C qd + g =
        nonlinear_effects` and `M_dot = C + C^T` (see `coriolis`)."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return coriolis.coriolis_matrix(self.model, kin, oS, self._I, qd)

    def ccrba(self, q, qd) -> tuple[np.ndarray, np.ndarray]:
        """`(A (B, 6, nv), h (B, 6))`: the centroidal momentum matrix and the centroidal
        momentum `h = A qd`, `[linear; angular]` about the centre of mass in world axes
        (Pinocchio's `ccrba` / `computeCentroidalMap`)."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        A = centroidal_dynamics.centroidal_map(self.model, kin, oS, self._I)
        return A, np.einsum("bij,bj->bi", A, qd)

    def dccrba(self, q) -> np.ndarray:
        """`(B, 6, nv, nv)`: `dA[b, r, c, i] = d A[b, r, c] / d eps_i`, the derivative of the
        centroidal momentum matrix along the tangent chart `q ⊕ eps` (derivative index
        last)."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return centroidal_dynamics.centroidal_map_derivative(self.model, kin, oS, self._I)

    def cmm_time_variation(self, q, qd) -> np.ndarray:
        """`(B, 6, nv)`: `A_dot = sum_i (dA/d eps_i) qd_i` (Pinocchio's
        `computeCentroidalMapTimeVariation`, computed directly in O(n))."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return centroidal_dynamics.centroidal_map_time_variation(self.model, kin, oS,
                                                                 self._I, qd)

    def kinetic_energy_regressor(self, q, qd) -> np.ndarray:
        """`(B, 10*nb)`: `y` with kinetic energy `T = y . pi`."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        v, _ = _rnea.rnea_forward_pass(self.model, kin, self._S, qd, np.zeros_like(qd),
                                       np.zeros((len(q), 6)))
        return regressors.kinetic_energy_regressor(self.model, v)

    def potential_energy_regressor(self, q, gravity=GRAVITY) -> np.ndarray:
        """`(B, 10*nb)`: `y` with potential energy `V = y . pi = -sum_k m_k g . c_k`."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        return regressors.potential_energy_regressor(self.model, kin,
                                                     self._gravity_vector(gravity))

    def inverse_dynamics_regressor(self, q, qd, qdd=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv, 10*nb)`: `Y` with `inverse_dynamics(q, qd, qdd) = Y pi`
        (Pinocchio's `computeJointTorqueRegressor`); `qdd=None` is zero acceleration."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        qdd = np.zeros_like(qd) if qdd is None else self._v(qdd, "qdd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        v, a = _rnea.rnea_forward_pass(self.model, kin, self._S, qd, qdd,
                                       self._root_acceleration(gravity, len(q)))
        return regressors.joint_torque_regressor(self.model, kin, self._S, v, a)

