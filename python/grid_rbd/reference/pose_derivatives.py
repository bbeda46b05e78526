"""First and second derivatives of a frame's pose coordinates `[x, y, z, roll, pitch, yaw]`
(`end_effector_pose`) along the tangent chart, analytically.

The chart is `eps -> q ⊕ eps`: joint coordinates add, and a free flyer moves by the SE(3)
exponential of its local twist, `M_base exp(eps_base)` (Pinocchio's `integrate`). Let
`xi_a(eps)` be the world twist (about the origin) with `d/d eps_a T(q ⊕ eps) = xi_a^ T`.
At `eps = 0` it is column a of `oS` on the frame's support, and its first variation is

    d xi_a / d eps_b = xi_b × xi_a        if b's joint is a strict ancestor of a's,
                     = 1/2 xi_b × xi_a    if a, b are dofs of the same joint (free flyer:
                                          the right Jacobian `I - 1/2 ad_eps` of exp),
                     = 0                  otherwise.

With `xi_a = (v_a, w_a)`, the frame origin `p` and rotation `R`, and `rpy_dot = E^-1(rpy) w`
(`rpy_rate_inverse`):

    dp/de_a = v_a + w_a × p,                 drpy/de_a = E^-1 w_a,
    d2p/de_a de_b = dv_ab + dw_ab × p + w_a × dp/de_b,
    d2rpy/de_a de_b = (dE^-1/dpitch drpy_pitch/de_b + dE^-1/dyaw drpy_yaw/de_b) w_a
                      + E^-1 dw_ab,

where `(dv_ab, dw_ab) = d xi_a / d eps_b`. These are singular at pitch = ±pi/2.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import Frame, RobotModel
from grid_rbd.reference import spatial, world
from grid_rbd.reference.kinematics import Kinematics, frame_pose


def rpy_rate_inverse(rpy: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(E^-1, dE^-1/dpitch, dE^-1/dyaw)`, each `(B, 3, 3)`, where the world angular
    velocity of `R = Rz(yaw) Ry(pitch) Rx(roll)` is `w = E rpy_dot`,
    `E = [Rz Ry e_x, Rz e_y, e_z]`."""
    pitch, yaw = rpy[:, 1], rpy[:, 2]
    cp, sp, cy, sy = np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    tp, zero, one = sp / cp, np.zeros_like(cp), np.ones_like(cp)
    Einv = np.stack([
        np.stack([cy / cp, sy / cp, zero], -1),
        np.stack([-sy, cy, zero], -1),
        np.stack([cy * tp, sy * tp, one], -1)], -2)
    dpitch = np.stack([
        np.stack([cy * sp / cp**2, sy * sp / cp**2, zero], -1),
        np.stack([zero, zero, zero], -1),
        np.stack([cy / cp**2, sy / cp**2, zero], -1)], -2)
    dyaw = np.stack([
        np.stack([-sy / cp, cy / cp, zero], -1),
        np.stack([-cy, -sy, zero], -1),
        np.stack([-sy * tp, cy * tp, zero], -1)], -2)
    return Einv, dpitch, dyaw


def twist_variation_weights(model: RobotModel) -> np.ndarray:
    """`(nv, nv)`: `W[a, b]` with `d xi_a / d eps_b = W[a, b] xi_b × xi_a` (module doc)."""
    joint_of = world.dof_joints(model)
    same = joint_of[:, None] == joint_of[None, :]
    strict_ancestor = world.dof_ancestry(model).T & ~same
    return np.where(same, 0.5, 0.0) + np.where(strict_ancestor, 1.0, 0.0)


def frame_pose_gradient(model: RobotModel, kin: Kinematics, oS: np.ndarray, frame: Frame
                        ) -> np.ndarray:
    """`(B, 6, nv)`: `d[x, y, z, roll, pitch, yaw] / d eps` of `frame`."""
    return _pose_derivatives(model, kin, oS, frame, hessian=False)[0]


def frame_pose_hessian(model: RobotModel, kin: Kinematics, oS: np.ndarray, frame: Frame
                       ) -> tuple[np.ndarray, np.ndarray]:
    """`(gradient (B, 6, nv), hessian (B, 6, nv, nv))` of `frame`'s pose coordinates;
    the Hessian is `d2/de_a de_b f(q ⊕ eps)` at `eps = 0`, symmetric."""
    grad, hess = _pose_derivatives(model, kin, oS, frame, hessian=True)
    assert hess is not None
    return grad, hess


def _pose_derivatives(model: RobotModel, kin: Kinematics, oS: np.ndarray, frame: Frame,
                      hessian: bool) -> tuple[np.ndarray, np.ndarray | None]:
    batch = oS.shape[0]
    R, p = frame_pose(kin, frame, batch)
    Einv, dEinv_dpitch, dEinv_dyaw = rpy_rate_inverse(spatial.matrix_to_rpy(R))
    xi = np.swapaxes(oS * world.support(model, frame.body), 1, 2)  # (B, nv, 6)
    v, w = xi[..., :3], xi[..., 3:]
    dp = v + np.cross(w, p[:, None, :])  # (B, nv, 3)
    drpy = np.einsum("bij,baj->bai", Einv, w)
    grad = np.swapaxes(np.concatenate([dp, drpy], axis=-1), 1, 2)
    if not hessian:
        return grad, None
    # dxi[:, a, b] = d xi_a / d eps_b.
    W = twist_variation_weights(model)
    dxi = W[None, :, :, None] * spatial.cross_motion(xi[:, None, :, :], xi[:, :, None, :])
    dv, dw = dxi[..., :3], dxi[..., 3:]
    d2p = dv + np.cross(dw, p[:, None, None, :]) + np.cross(w[:, :, None, :], dp[:, None, :, :])
    dE_w = (np.einsum("bij,baj->bai", dEinv_dpitch, w)[:, :, None, :]
            * drpy[:, None, :, 1, None]
            + np.einsum("bij,baj->bai", dEinv_dyaw, w)[:, :, None, :]
            * drpy[:, None, :, 2, None])
    d2rpy = dE_w + np.einsum("nij,nabj->nabi", Einv, dw)
    hess = np.moveaxis(np.concatenate([d2p, d2rpy], axis=-1), -1, 1)  # (B, 6, nv, nv)
    return grad, 0.5 * (hess + np.swapaxes(hess, -1, -2))
