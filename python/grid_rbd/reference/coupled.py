"""`CoupledReference`: the float64 oracle of a robot with mimic couplings, in its reduced
coordinates (`grid_codegen.coupling` gives the equations: `q_full = G q + b`,
`tau = G^T tau_full`, `M = G^T M_full G`, forward dynamics through `G^T M G`).

It wraps the oracle of the independent tree (`full`) and maps every input and output;
the methods and shapes are `ReferenceRobot`'s with `nq`, `nv` the reduced widths.
Methods without a reduced form here (the second-order tensors, frame Jacobians, the
plant layer) are refused by name rather than answered in the wrong coordinates.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import GRAVITY, RobotModel
from grid_rbd.reference.robot import ReferenceRobot, _batched


class CoupledReference:
    """The reduced-coordinate oracle of `model` (whose `coupling` is set)."""

    def __init__(self, model: RobotModel, ee_joint_names=None) -> None:
        if model.coupling is None:
            raise ValueError(f"{model.name} has no mimic coupling; use ReferenceRobot")
        self.model = model
        self.coupling = model.coupling
        self.full = ReferenceRobot(model, ee_joint_names)
        self.ee_frames = self.full.ee_frames
        self.G = self.coupling.matrix()

    nq = property(lambda self: self.coupling.nq)
    nv = property(lambda self: self.coupling.nv)
    nb = property(lambda self: self.model.nb)
    num_ees = property(lambda self: self.full.num_ees)

    # -- coordinate maps -----------------------------------------------------------------
    def expand_q(self, q) -> np.ndarray:
        """`(B, nq_full)`: `G q + b`."""
        return self.coupling.expand_q_array(_batched(q, self.nq, "q", "configuration width nq"))

    def _v(self, x, name: str) -> np.ndarray | None:
        if x is None:
            return None
        return _batched(x, self.nv, name, "tangent width nv") @ self.G.T

    def _force(self, tau: np.ndarray) -> np.ndarray:
        return tau @ self.G

    def _both(self, D: np.ndarray) -> np.ndarray:
        """`G^T [D_q G | D_v G]` of a full `(B, nv_full, 2 nv_full)` gradient."""
        n = self.coupling.nv_full
        G = self.G
        return np.concatenate([G.T @ D[:, :, :n] @ G, G.T @ D[:, :, n:] @ G], axis=2)

    # -- dynamics ----------------------------------------------------------------------
    def inverse_dynamics(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        return self._force(self.full.inverse_dynamics(
            self.expand_q(q), self._v(qd, "qd"), self._v(qdd, "qdd"), f_ext, gravity))

    rnea = inverse_dynamics

    def crba(self, q) -> np.ndarray:
        return self.G.T @ self.full.crba(self.expand_q(q)) @ self.G

    def minv(self, q) -> np.ndarray:
        return np.linalg.inv(self.crba(q))

    def forward_dynamics(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        u = _batched(u, self.nv, "u", "tangent width nv")
        bias = self.inverse_dynamics(q, qd, None, f_ext, gravity)
        return np.linalg.solve(self.crba(q), (u - bias)[..., None])[..., 0]

    fd = aba = forward_dynamics

    def inverse_dynamics_gradient(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY
                                  ) -> np.ndarray:
        qdd_full = None if qdd is None else self._v(qdd, "qdd")
        return self._both(self.full.inverse_dynamics_gradient(
            self.expand_q(q), self._v(qd, "qd"), qdd_full, f_ext, gravity))

    def forward_dynamics_gradient(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        qdd = self.forward_dynamics(q, qd, u, f_ext, gravity)
        return -self.minv(q) @ self.inverse_dynamics_gradient(q, qd, qdd, f_ext, gravity)

    def generalized_gravity(self, q, gravity=GRAVITY) -> np.ndarray:
        return self._force(self.full.generalized_gravity(self.expand_q(q), gravity))

    def nonlinear_effects(self, q, qd, gravity=GRAVITY) -> np.ndarray:
        return self._force(self.full.nonlinear_effects(self.expand_q(q), self._v(qd, "qd"),
                                                       gravity))

    def coriolis_matrix(self, q, qd) -> np.ndarray:
        return self.G.T @ self.full.coriolis_matrix(self.expand_q(q), self._v(qd, "qd")) @ self.G

    def energy(self, q, qd, gravity=GRAVITY) -> np.ndarray:
        return self.full.energy(self.expand_q(q), self._v(qd, "qd"), gravity)

    # -- kinematics ----------------------------------------------------------------------
    def forward_kinematics(self, q) -> np.ndarray:
        return self.full.forward_kinematics(self.expand_q(q))

    def end_effector_pose(self, q) -> np.ndarray:
        return self.full.end_effector_pose(self.expand_q(q))

    def end_effector_pose_gradient(self, q) -> np.ndarray:
        return self.full.end_effector_pose_gradient(self.expand_q(q)) @ self.G

    def end_effector_pose_hessian(self, q) -> np.ndarray:
        H = self.full.end_effector_pose_hessian(self.expand_q(q))
        return np.einsum("...kij,ia,jb->...kab", H, self.G, self.G)

    def com(self, q) -> tuple[np.ndarray, np.ndarray]:
        c, J = self.full.com(self.expand_q(q))
        return c, J @ self.G

    def ccrba(self, q, qd) -> tuple[np.ndarray, np.ndarray]:
        A, h = self.full.ccrba(self.expand_q(q), self._v(qd, "qd"))
        return A @ self.G, h

    def __getattr__(self, name: str):
        if name.startswith("_") or not hasattr(ReferenceRobot, name):
            raise AttributeError(name)
        raise NotImplementedError(f"the reference has no reduced (mimic-coupled) form of "
                                  f"{name!r}; call it on .full with expand_q(q) for the "
                                  "independent tree")
