"""Operations on the configuration space: integration along the tangent (Pinocchio's)."""

from __future__ import annotations

import numpy as np

from grid_codegen.model import JointType, RobotModel
from grid_rbd.reference import spatial


def _sinc_terms(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(sin t / t, (1 - cos t) / t^2, (t - sin t) / t^3)`, with Taylor series near 0."""
    small = theta < 1e-4
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    a = np.where(small, 1.0 - t2 / 6.0, np.sin(t) / t)
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(t)) / (t * t))
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0, (t - np.sin(t)) / (t * t * t))
    return a, b, c


def _quat_multiply(p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Hamilton product `p r` of `(B, 4)` quaternions in `[x, y, z, w]` order."""
    pv, pw = p[:, :3], p[:, 3:]
    rv, rw = r[:, :3], r[:, 3:]
    return np.concatenate([pw * rv + rw * pv + np.cross(pv, rv),
                           pw * rw - np.sum(pv * rv, axis=1, keepdims=True)], axis=1)


def integrate(model: RobotModel, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """`q (+) dq` `(B, nq)` for `q (B, nq)` and a tangent `dq (B, nv)` (1-D: batch of one).

    Revolute and prismatic coordinates add. A free flyer `[p, quat xyzw]` with
    `dq = [v, w]` (local frame) moves to the placement `M exp(dq)`: the rotation
    `R exp([w])` and the position `p + R V(w) v`, `V(w) = I + (1 - cos t)/t^2 [w]
    + (t - sin t)/t^3 [w]^2`, `t = |w|`. The new quaternion is `quat * exp(w / 2)`,
    normalised and kept in the input's hemisphere (as `pin.integrate`)."""
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    dq = np.atleast_2d(np.asarray(dq, dtype=np.float64))
    if q.shape[1] != model.nq or dq.shape[1] != model.nv or len(q) != len(dq):
        raise ValueError(f"integrate expects q (B, {model.nq}) and dq (B, {model.nv}); got "
                         f"{q.shape} and {dq.shape}")
    out = q.copy()
    for joint in model.joints:
        iq, iv = joint.idx_q, joint.idx_v
        if joint.type is not JointType.FREE_FLYER:
            out[:, iq] += dq[:, iv]
            continue
        p, quat = q[:, iq:iq + 3], q[:, iq + 3:iq + 7]
        v, w = dq[:, iv:iv + 3], dq[:, iv + 3:iv + 6]
        theta = np.linalg.norm(w, axis=1)
        _, b, c = _sinc_terms(theta)
        W = spatial.skew(w)
        V = np.eye(3) + b[:, None, None] * W + c[:, None, None] * (W @ W)
        R = spatial.quat_xyzw_to_matrix(quat)
        out[:, iq:iq + 3] = p + (R @ (V @ v[:, :, None]))[:, :, 0]
        # exp(w / 2) = [sin(t/2) w / t, cos(t/2)]; sin(t/2)/t = 0.5 sinc(t/2).
        half_sinc, _, _ = _sinc_terms(0.5 * theta)
        step = np.concatenate([0.5 * half_sinc[:, None] * w, np.cos(0.5 * theta)[:, None]], 1)
        new = _quat_multiply(quat, step)
        new /= np.linalg.norm(new, axis=1, keepdims=True)
        new *= np.where(np.sum(new * quat, axis=1, keepdims=True) < 0.0, -1.0, 1.0)
        out[:, iq + 3:iq + 7] = new
    return out
