"""`KinematicsMixin`: frame Jacobians, their derivatives and end-effector pose derivatives."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from grid_codegen.model import Frame, RobotModel
from grid_rbd.reference import crba as _crba
from grid_rbd.reference import frames, kinematics, pose_derivatives


class KinematicsMixin:
    """Kinematic derivatives of `ReferenceRobot`.

    Tangent directions are `[v_lin, omega, joints]` on a floating base (the free flyer's
    local twist, Pinocchio's LOCAL chart) and the joints on a fixed one. A `frame` is a
    moving-joint name (its body frame), a fixed-joint name, a URDF link name or a body
    index; `reference_frame` is `"LOCAL"`, `"WORLD"` or `"LOCAL_WORLD_ALIGNED"` with
    Pinocchio's meanings (see `frames`).
    """

    model: RobotModel
    ee_frames: tuple[Frame, ...]
    _S: list[np.ndarray]
    _I: list[np.ndarray]
    if TYPE_CHECKING:
        def _q(self, q) -> np.ndarray: ...
        def _v(self, x, name: str, batch: int) -> np.ndarray: ...

    def end_effector_pose_gradient(self, q) -> np.ndarray:
        """`(B, 6*num_ees, nv)`: `d[x, y, z, roll, pitch, yaw]/d eps` of each end effector,
        the coordinate derivative of `end_effector_pose` along `q ⊕ eps` (not a geometric
        Jacobian; singular at pitch = ±pi/2)."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return np.concatenate([pose_derivatives.frame_pose_gradient(self.model, kin, oS, f)
                               for f in self.ee_frames], axis=1)

    def end_effector_pose_hessian(self, q) -> np.ndarray:
        """`(B, 6*num_ees, nv, nv)`: `H[b, k, i, j] = d2/d eps_i d eps_j f_k(q ⊕ eps)` at
        `eps = 0`, with `f` the `end_effector_pose` coordinates and `q ⊕ eps` adding the
        joint coordinates and moving a free flyer by the SE(3) exponential of its local
        twist (Pinocchio's `integrate`). Symmetric in `(i, j)`. On a floating base the
        base-base block depends on that choice of chart (another retraction of the same
        first order gives another Hessian)."""
        q = self._q(q)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return np.concatenate([pose_derivatives.frame_pose_hessian(self.model, kin, oS, f)[1]
                               for f in self.ee_frames], axis=1)

    def frame_jacobian(self, q, frame: str | int, reference_frame: str = "LOCAL_WORLD_ALIGNED"
                       ) -> np.ndarray:
        """`(B, 6, nv)`: the geometric Jacobian of `frame`, `[linear; angular]` rows, in
        `reference_frame` (Pinocchio's `getFrameJacobian`)."""
        q = self._q(q)
        target = frames.resolve_frame(self.model, frame)
        rf = frames.check_reference_frame(reference_frame)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return frames.frame_jacobian(self.model, kin, oS, target, rf)

    def frame_jacobian_dot(self, q, qd, frame: str | int,
                           reference_frame: str = "LOCAL_WORLD_ALIGNED") -> np.ndarray:
        """`(B, 6, nv)`: `d/dt frame_jacobian(q, frame, reference_frame)` along `qd`
        (Pinocchio's `getFrameJacobianTimeVariation`)."""
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        target = frames.resolve_frame(self.model, frame)
        rf = frames.check_reference_frame(reference_frame)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        return frames.frame_jacobian_time_variation(self.model, kin, oS, qd, target, rf)

    def osc_inertia(self, q, frame: str | int | None = None,
                    reference_frame: str = "LOCAL_WORLD_ALIGNED") -> np.ndarray:
        """`(B, 6, 6)`: the operational-space inertia `(J M^-1 J^T)^-1` of `frame` (default:
        the first end effector), `J = frame_jacobian(q, frame, reference_frame)`. Raises
        if fewer than six dofs move the frame."""
        q = self._q(q)
        target = frames.resolve_frame(self.model, self.ee_frames[0] if frame is None
                                      else frame)
        rf = frames.check_reference_frame(reference_frame)
        kin = kinematics.forward_pass(self.model, q)
        oS = kinematics.world_motion_subspace(self.model, kin)
        J = frames.frame_jacobian(self.model, kin, oS, target, rf)
        M = _crba.crba(self.model, kin, self._S, self._I)
        return frames.operational_space_inertia(self.model, J, M, target)
