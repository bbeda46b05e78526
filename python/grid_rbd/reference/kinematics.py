"""Forward kinematics: joint placements, body poses, frame poses and motion subspaces."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grid_codegen.model import Frame, JointType, RobotModel
from grid_rbd.reference import spatial


@dataclass(frozen=True)
class Kinematics:
    """Per-body results of one forward pass over a batch.

    `Xup[i]`: motion transform parent body -> body i `(B, 6, 6)`;
    `oR[i]`, `op[i]`: pose of body i in the world `(B, 3, 3)`, `(B, 3)`.
    """

    Xup: list[np.ndarray]
    oR: list[np.ndarray]
    op: list[np.ndarray]


def joint_placement(model: RobotModel, i: int, q: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Placement parent body -> body i (`liMi`): the constant origin, then the joint motion."""
    joint = model.joints[i]
    batch = q.shape[0]
    qi = q[:, joint.idx_q:joint.idx_q + joint.nq]
    if joint.type is JointType.FREE_FLYER:
        Rj, pj = spatial.quat_xyzw_to_matrix(qi[:, 3:7]), qi[:, :3]
    elif joint.type is JointType.REVOLUTE:
        Rj, pj = spatial.axis_rotation(joint.axis, qi[:, 0]), np.zeros((batch, 3))
    elif joint.type is JointType.SPHERICAL:
        Rj, pj = spatial.quat_xyzw_to_matrix(qi), np.zeros((batch, 3))
    elif joint.type is JointType.PLANAR:
        cs = qi[:, 2:4] / np.linalg.norm(qi[:, 2:4], axis=1, keepdims=True)
        Rj = np.zeros((batch, 3, 3))
        Rj[:, 0, 0] = Rj[:, 1, 1] = cs[:, 0]
        Rj[:, 1, 0], Rj[:, 0, 1] = cs[:, 1], -cs[:, 1]
        Rj[:, 2, 2] = 1.0
        pj = np.concatenate([qi[:, :2], np.zeros((batch, 1))], axis=1)
    else:
        Rj, pj = np.broadcast_to(np.eye(3), (batch, 3, 3)), qi[:, :1] * joint.axis
    R0 = np.broadcast_to(joint.placement.R, (batch, 3, 3))
    p0 = np.broadcast_to(joint.placement.p, (batch, 3))
    return spatial.compose(R0, p0, Rj, pj)


def forward_pass(model: RobotModel, q: np.ndarray) -> Kinematics:
    Xup, oR, op = [], [], []
    for i, joint in enumerate(model.joints):
        R, p = joint_placement(model, i, q)
        Xup.append(spatial.act_inv(R, p))
        if joint.parent < 0:
            oR.append(R)
            op.append(p)
        else:
            Ro, po = spatial.compose(oR[joint.parent], op[joint.parent], R, p)
            oR.append(Ro)
            op.append(po)
    return Kinematics(Xup, oR, op)


def frame_pose(kin: Kinematics, frame: Frame, batch: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """World pose `(R, p)` of a frame fixed to a body (or to the world)."""
    R0 = np.broadcast_to(frame.placement.R, (batch, 3, 3))
    p0 = np.broadcast_to(frame.placement.p, (batch, 3))
    if frame.body < 0:
        return R0.copy(), p0.copy()
    return spatial.compose(kin.oR[frame.body], kin.op[frame.body], R0, p0)


def world_motion_subspace(model: RobotModel, kin: Kinematics) -> np.ndarray:
    """`(B, 6, nv)`: each joint's motion subspace expressed in the world frame (about the
    world origin). Column k is the spatial velocity dof k contributes to its subtree."""
    batch = kin.op[0].shape[0]
    out = np.zeros((batch, 6, model.nv))
    for i, joint in enumerate(model.joints):
        oX = spatial.act(kin.oR[i], kin.op[i])
        out[:, :, joint.idx_v:joint.idx_v + joint.nv] = oX @ joint.motion_subspace()
    return out


def point_jacobian(model: RobotModel, oS: np.ndarray, body: int, point: np.ndarray
                   ) -> np.ndarray:
    """`(B, 3, nv)`: d(world position of a point fixed to `body`)/d(tangent), where
    `point` `(B, 3)` is the point's current world position."""
    cols = np.zeros(model.nv, dtype=bool)
    for j in model.ancestors(body):
        joint = model.joints[j]
        cols[joint.idx_v:joint.idx_v + joint.nv] = True
    lin, ang = oS[:, :3, :], oS[:, 3:, :]
    # Velocity of a point x: v_o + omega x x = v_o - [x] omega.
    J = lin - spatial.skew(point) @ ang
    return J * cols
