"""`ReferenceRobot`: the float64 oracle's public face, one method per handle method.

Every method is batched on axis 0 (a 1-D input is taken as a batch of one) and follows
the conventions of the handles: `q (B, nq)`; `qd`, `qdd`, `u` `(B, nv)`; matrices
`(B, nv, nv)`; `f_ext (B, 6*nb)`, one `[force; torque]` per body in its local frame;
gravity signed along z (default -9.81) or a 3-vector.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import GRAVITY, Frame, RobotModel
from grid_rbd.reference import aba as _aba
from grid_rbd.reference import centroidal, kinematics, spatial
from grid_rbd.reference import crba as _crba
from grid_rbd.reference import rnea as _rnea
from grid_rbd.reference.api_centroidal import CentroidalMixin
from grid_rbd.reference.api_derivatives import DerivativesMixin
from grid_rbd.reference.api_kinematics import KinematicsMixin
from grid_rbd.reference.api_plant import PlantMixin
from grid_rbd.reference.joint_dynamics import PassiveJoints


class ReferenceRobot(DerivativesMixin, KinematicsMixin, CentroidalMixin, PlantMixin):
    """The float64 numpy oracle for one robot model."""

    def __init__(self, model: RobotModel, ee_joint_names: list[str] | tuple[str, ...] | None
                 = None, joint_dynamics: PassiveJoints | None = None):
        """`joint_dynamics`: damping and friction added to ID / FD and their gradients
        (`grid_rbd.reference.joint_dynamics`); None: the rigid dynamics."""
        self.model = model
        self.joint_dynamics = joint_dynamics
        self.ee_frames: tuple[Frame, ...] = model.end_effector_frames(
            tuple(ee_joint_names) if ee_joint_names else None)
        self._S = [j.motion_subspace() for j in model.joints]
        self._I = [b.inertia.spatial_matrix() for b in model.bodies]

    # -- dimensions ----------------------------------------------------------------
    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    @property
    def nb(self) -> int:
        return self.model.nb

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.model.joint_names

    @property
    def body_names(self) -> tuple[str, ...]:
        return self.model.body_names

    @property
    def num_ees(self) -> int:
        return len(self.ee_frames)

    # -- dynamics --------------------------------------------------------------------
    def inverse_dynamics(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv)`: `tau = M qdd + C qd + g - J^T f_ext`; `qdd=None` gives the bias."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        qdd = np.zeros_like(qd) if qdd is None else self._v(qdd, "qdd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        tau = _rnea.rnea(self.model, kin, self._S, self._I, qd, qdd,
                         self._root_acceleration(gravity, len(q)), self._fext(f_ext, len(q)))
        return tau + self._passive(qd)

    rnea = inverse_dynamics

    def _passive(self, qd: np.ndarray) -> np.ndarray | float:
        return 0.0 if self.joint_dynamics is None else self.joint_dynamics.torque(qd)

    def crba(self, q) -> np.ndarray:
        """`(B, nv, nv)`: the joint-space mass matrix, full and symmetric."""
        q = self._q(q)
        return _crba.crba(self.model, kinematics.forward_pass(self.model, q), self._S, self._I)

    def minv(self, q) -> np.ndarray:
        """`(B, nv, nv)`: the inverse mass matrix."""
        return np.linalg.inv(self.crba(q))

    def forward_dynamics(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv)`: `qdd = M^-1 (u - c)`, through the mass matrix."""
        q = self._q(q)
        u = self._v(u, "u", len(q))
        bias = self.inverse_dynamics(q, qd, None, f_ext, gravity)
        return np.linalg.solve(self.crba(q), (u - bias)[..., None])[..., 0]

    fd = forward_dynamics

    def aba(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv)`: forward dynamics by the articulated-body algorithm."""
        q = self._q(q)
        qd, u = self._v(qd, "qd", len(q)), self._v(u, "u", len(q))
        kin = kinematics.forward_pass(self.model, q)
        return _aba.aba(self.model, kin, self._S, self._I, qd, u - self._passive(qd),
                        self._root_acceleration(gravity, len(q)), self._fext(f_ext, len(q)))

    # -- kinematics ------------------------------------------------------------------
    def forward_kinematics(self, q) -> np.ndarray:
        """`(B, nb, 4, 4)`: the world pose of every body frame."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        out = np.zeros((len(q), self.nb, 4, 4))
        out[:, :, 3, 3] = 1.0
        out[:, :, :3, :3] = np.stack(kin.oR, axis=1)
        out[:, :, :3, 3] = np.stack(kin.op, axis=1)
        return out

    def end_effector_pose(self, q) -> np.ndarray:
        """`(B, 6*num_ees)`: `[x, y, z, roll, pitch, yaw]` of each end-effector frame in
        the world, rpy with `R = Rz(yaw) Ry(pitch) Rx(roll)`."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        poses = []
        for frame in self.ee_frames:
            R, p = kinematics.frame_pose(kin, frame, len(q))
            poses.append(np.concatenate([p, spatial.matrix_to_rpy(R)], axis=-1))
        return np.concatenate(poses, axis=-1)

    def com(self, q) -> tuple[np.ndarray, np.ndarray]:
        """`(com (B, 3), J_com (B, 3, nv))`: the centre of mass and its Jacobian."""
        q = self._q(q)
        return centroidal.center_of_mass(self.model, kinematics.forward_pass(self.model, q))

    def energy(self, q, qd, gravity=GRAVITY) -> np.ndarray:
        """`(B, 3)`: `[kinetic, potential, mechanical]` energy (potential zero at z = 0)."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        kin = kinematics.forward_pass(self.model, q)
        v, _ = _rnea.rnea_forward_pass(self.model, kin, self._S, qd, np.zeros_like(qd),
                                       np.zeros((len(q), 6)))
        return centroidal.energy(self.model, kin, v, self._I, self._gravity_vector(gravity))

    # -- input handling ----------------------------------------------------------------
    def _q(self, q) -> np.ndarray:
        return _batched(q, self.nq, "q", "configuration width nq")

    def _v(self, x, name: str, batch: int) -> np.ndarray:
        x = _batched(x, self.nv, name, "tangent width nv")
        if len(x) != batch:
            raise ValueError(f"{name} has batch {len(x)}; q has batch {batch}")
        return x

    def _fext(self, f_ext, batch: int) -> np.ndarray | None:
        if f_ext is None:
            return None
        f_ext = _batched(f_ext, 6 * self.nb, "f_ext", "width 6*nb")
        if len(f_ext) != batch:
            raise ValueError(f"f_ext has batch {len(f_ext)}; q has batch {batch}")
        return f_ext

    @staticmethod
    def _gravity_vector(gravity) -> np.ndarray:
        g = np.asarray(gravity, dtype=np.float64)
        if g.ndim == 0:
            return np.array([0.0, 0.0, float(g)])
        if g.shape != (3,):
            raise ValueError(f"gravity must be a scalar (along z) or a 3-vector; got shape "
                             f"{g.shape}")
        return g

    def _root_acceleration(self, gravity, batch: int) -> np.ndarray:
        # Gravity enters as a fictitious upward acceleration of the world: a_0 = -g.
        a0 = np.zeros((batch, 6))
        a0[:, :3] = -self._gravity_vector(gravity)
        return a0


def _batched(x, width: int, name: str, what: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x[None, :]
    if x.ndim != 2 or x.shape[1] != width:
        got = x.shape[-1] if x.ndim >= 1 else "scalar"
        raise ValueError(f"{name} has width {got}; this robot's {what} is {width} "
                         f"(expected shape (B, {width}))")
    return x
