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
        if joint.type.scalar:
            out[:, iq] += dq[:, iv]
            continue
        if joint.type is JointType.SPHERICAL:
            out[:, iq:iq + 4] = _quat_step(q[:, iq:iq + 4], dq[:, iv:iv + 3])
            continue
        if joint.type is JointType.PLANAR:
            out[:, iq:iq + 4] = _planar_integrate(q[:, iq:iq + 4], dq[:, iv:iv + 3])
            continue
        p, quat = q[:, iq:iq + 3], q[:, iq + 3:iq + 7]
        v, w = dq[:, iv:iv + 3], dq[:, iv + 3:iv + 6]
        theta = np.linalg.norm(w, axis=1)
        _, b, c = _sinc_terms(theta)
        W = spatial.skew(w)
        V = np.eye(3) + b[:, None, None] * W + c[:, None, None] * (W @ W)
        R = spatial.quat_xyzw_to_matrix(quat)
        out[:, iq:iq + 3] = p + (R @ (V @ v[:, :, None]))[:, :, 0]
        out[:, iq + 3:iq + 7] = _quat_step(quat, w)
    return out


def _quat_step(quat: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`quat * exp(w / 2)` normalised, in the input's hemisphere (a rotation by the local
    angular step `w`, as `pin.integrate` on a free flyer or a spherical joint)."""
    theta = np.linalg.norm(w, axis=1)
    # exp(w / 2) = [sin(t/2) w / t, cos(t/2)]; sin(t/2)/t = 0.5 sinc(t/2).
    half_sinc, _, _ = _sinc_terms(0.5 * theta)
    step = np.concatenate([0.5 * half_sinc[:, None] * w, np.cos(0.5 * theta)[:, None]], 1)
    new = _quat_multiply(quat, step)
    new /= np.linalg.norm(new, axis=1, keepdims=True)
    return new * np.where(np.sum(new * quat, axis=1, keepdims=True) < 0.0, -1.0, 1.0)


def _planar_integrate(q: np.ndarray, dq: np.ndarray) -> np.ndarray:
    """`[x, y, cos, sin] (+) [v_x, v_y, w_z]`: the SE(2) exponential of the local twist
    (SE(3)'s on the twist `[v_x, v_y, 0, 0, 0, w_z]`)."""
    R, p = _planar_placement(q)
    Re, pe = se3_exp(*_planar_twist(dq))
    R1 = R @ Re
    return np.concatenate([(p + (R @ pe[:, :, None])[..., 0])[:, :2], R1[:, 0, :1],
                           R1[:, 1, :1]], axis=1)


def _planar_placement(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cs = q[:, 2:4] / np.linalg.norm(q[:, 2:4], axis=1, keepdims=True)
    R = np.zeros((len(q), 3, 3))
    R[:, 0, 0] = R[:, 1, 1] = cs[:, 0]
    R[:, 1, 0], R[:, 0, 1] = cs[:, 1], -cs[:, 1]
    R[:, 2, 2] = 1.0
    return R, np.concatenate([q[:, :2], np.zeros((len(q), 1))], axis=1)


def _planar_twist(dq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    zero = np.zeros((len(dq), 1))
    return (np.concatenate([dq[:, :2], zero], 1),
            np.concatenate([zero, zero, dq[:, 2:3]], 1))


_PLANAR_ROWS = np.array([0, 1, 5])  # [v_x, v_y, w_z] in the [linear; angular] twist


# -- the free flyer's SE(3) chart: difference and the Jacobians of integrate --------------
def _se3_coefficients(theta: np.ndarray) -> tuple[np.ndarray, ...]:
    """`(1 - cos t)/t^2, (t - sin t)/t^3, (t^2 + 2 cos t - 2)/(2 t^4),
    (2 t - 3 sin t + t cos t)/(2 t^5)` with their Taylor series near 0."""
    small = theta < 1e-2
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(t)) / t**2)
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0, (t - np.sin(t)) / t**3)
    d = np.where(small, 1.0 / 24.0 - t2 / 720.0, (t * t + 2 * np.cos(t) - 2) / (2 * t**4))
    e = np.where(small, 1.0 / 120.0 - t2 / 2520.0,
                 (2 * t - 3 * np.sin(t) + t * np.cos(t)) / (2 * t**5))
    return b, c, d, e


def se3_left_jacobian(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`(B, 6, 6)`: the left Jacobian of `exp` on SE(3) at the twist `[v; w]`:
    `[[J3, Q], [0, J3]]`, `J3 = 1 + b [w] + c [w]^2` and `Q` the coupling block (Barfoot's
    form). The right Jacobian is the left one at `-[v; w]`."""
    theta = np.linalg.norm(w, axis=1)
    b, c, d, e = (x[:, None, None] for x in _se3_coefficients(theta))
    W, P = spatial.skew(w), spatial.skew(v)
    J3 = np.eye(3) + b * W + c * (W @ W)
    WP, PW, WPW = W @ P, P @ W, W @ P @ W
    Q = (0.5 * P + c * (WP + PW + WPW) + d * (W @ WP + PW @ W - 3 * WPW)
         + e * (WPW @ W + W @ WPW))
    out = np.zeros((len(v), 6, 6))
    out[:, :3, :3] = out[:, 3:, 3:] = J3
    out[:, :3, 3:] = Q
    return out


def se3_exp(v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(R, p)` of `exp([v; w])`."""
    theta = np.linalg.norm(w, axis=1)
    b, c, _, _ = (x[:, None, None] for x in _se3_coefficients(theta))
    W = spatial.skew(w)
    a = np.where(theta < 1e-2, 1.0 - theta**2 / 6.0,
                 np.sin(np.where(theta < 1e-2, 1.0, theta)) / np.where(theta < 1e-2, 1.0,
                                                                         theta))
    R = np.eye(3) + a[:, None, None] * W + b * (W @ W)
    V = np.eye(3) + b * W + c * (W @ W)
    return R, (V @ v[:, :, None])[:, :, 0]


def _adjoint_inverse(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """`Ad((R, p))^-1` on `[linear; angular]` twists."""
    RT = np.swapaxes(R, 1, 2)
    out = np.zeros((len(R), 6, 6))
    out[:, :3, :3] = out[:, 3:, 3:] = RT
    out[:, :3, 3:] = -RT @ spatial.skew(p)
    return out


def integrate_jacobians(model: RobotModel, q: np.ndarray, dq: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """`(d(q (+) dq)/dq, d(q (+) dq)/d dq)`, each `(B, nv, nv)` in the tangent spaces
    (Pinocchio's `dIntegrate` ARG0, ARG1): the identity on scalar joints; on the free
    flyer `Ad(exp(dq))^-1` and the right Jacobian of `exp` at `dq`."""
    q, dq = np.atleast_2d(q), np.atleast_2d(dq)
    batch = len(q)
    d_q = np.broadcast_to(np.eye(model.nv), (batch, model.nv, model.nv)).copy()
    d_v = d_q.copy()
    for joint in model.joints:
        rows, v, w = _twist_rows(joint, dq)
        if rows is None:
            continue
        R, p = se3_exp(v, w)
        block = np.ix_(range(batch), joint.idx_v + np.arange(len(rows)),
                       joint.idx_v + np.arange(len(rows)))
        d_q[block] = _adjoint_inverse(R, p)[:, rows][:, :, rows]
        d_v[block] = se3_left_jacobian(-v, -w)[:, rows][:, :, rows]
    return d_q, d_v


def _twist_rows(joint, dq: np.ndarray) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Where a joint's tangent sits in the `[linear; angular]` twist (None for a scalar
    joint) and its `(v, w)` parts: a spherical joint's and a planar joint's Lie groups
    (SO(3), SE(2)) are subgroups of the free flyer's SE(3), so their chart Jacobians are
    blocks of SE(3)'s."""
    iv = joint.idx_v
    if joint.type is JointType.FREE_FLYER:
        return np.arange(6), dq[:, iv:iv + 3], dq[:, iv + 3:iv + 6]
    if joint.type is JointType.SPHERICAL:
        return np.arange(3, 6), np.zeros((len(dq), 3)), dq[:, iv:iv + 3]
    if joint.type is JointType.PLANAR:
        return (_PLANAR_ROWS, *_planar_twist(dq[:, iv:iv + 3]))
    return None, dq, dq


def difference(model: RobotModel, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """`q1 (-) q0` `(B, nv)`: the tangent `dq` with `q0 (+) dq = q1` (Pinocchio's
    `difference`; the free flyer's is `log(M0^-1 M1)`, its rotation of angle <= pi)."""
    q0, q1 = np.atleast_2d(q0), np.atleast_2d(q1)
    out = np.zeros((max(len(q0), len(q1)), model.nv))
    for joint in model.joints:
        iq, iv = joint.idx_q, joint.idx_v
        if joint.type.scalar:
            out[:, iv] = q1[:, iq] - q0[:, iq]
            continue
        if joint.type is JointType.SPHERICAL:
            out[:, iv:iv + 3] = _quat_log(q0[:, iq:iq + 4], q1[:, iq:iq + 4])
            continue
        if joint.type is JointType.PLANAR:
            R0, p0 = _planar_placement(q0[:, iq:iq + 4])
            R1, p1 = _planar_placement(q1[:, iq:iq + 4])
            angle = np.arctan2(R1[:, 1, 0] * R0[:, 0, 0] - R1[:, 0, 0] * R0[:, 1, 0],
                               R1[:, 0, 0] * R0[:, 0, 0] + R1[:, 1, 0] * R0[:, 1, 0])
            w = np.zeros((len(angle), 3))
            w[:, 2] = angle
            p = (np.swapaxes(R0, 1, 2) @ (p1 - p0)[:, :, None])[..., 0]
            v = np.linalg.solve(se3_left_jacobian(np.zeros_like(w), w)[:, :3, :3],
                                p[:, :, None])[..., 0]
            out[:, iv:iv + 3] = np.concatenate([v[:, :2], angle[:, None]], axis=1)
            continue
        quat0 = q0[:, iq + 3:iq + 7] / np.linalg.norm(q0[:, iq + 3:iq + 7], axis=1,
                                                      keepdims=True)
        w = _quat_log(q0[:, iq + 3:iq + 7], q1[:, iq + 3:iq + 7])
        R0 = spatial.quat_xyzw_to_matrix(quat0)
        p = (np.swapaxes(R0, 1, 2) @ (q1[:, iq:iq + 3] - q0[:, iq:iq + 3])[:, :, None])[..., 0]
        out[:, iv:iv + 6] = np.concatenate([np.linalg.solve(
            se3_left_jacobian(np.zeros_like(w), w)[:, :3, :3], p[:, :, None])[..., 0], w], 1)
    return out


def _quat_log(quat0: np.ndarray, quat1: np.ndarray) -> np.ndarray:
    """`log(R0^T R1)` `(B, 3)` of two (normalised here) quaternions, angle <= pi."""
    quat0 = quat0 / np.linalg.norm(quat0, axis=1, keepdims=True)
    quat1 = quat1 / np.linalg.norm(quat1, axis=1, keepdims=True)
    conj = np.concatenate([-quat0[:, :3], quat0[:, 3:]], axis=1)
    rel = _quat_multiply(conj, quat1)
    rel *= np.where(rel[:, 3:] < 0.0, -1.0, 1.0)
    sin_half = np.linalg.norm(rel[:, :3], axis=1)
    theta = 2.0 * np.arctan2(sin_half, rel[:, 3])
    scale = np.where(sin_half < 1e-12, 2.0, theta / np.maximum(sin_half, 1e-300))
    return rel[:, :3] * scale[:, None]


def difference_jacobian(model: RobotModel, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """`(B, nv, nv)`: `d (q1 (-) q0) / d q1` in q1's tangent (Pinocchio's `dDifference`
    ARG1): the identity on scalar joints, the inverse right Jacobian of `exp` at the
    difference on the free flyer."""
    e = difference(model, q0, q1)
    out = np.broadcast_to(np.eye(model.nv), (len(e), model.nv, model.nv)).copy()
    for joint in model.joints:
        rows, v, w = _twist_rows(joint, e)
        if rows is None:
            continue
        Jr = se3_left_jacobian(-v, -w)[:, rows][:, :, rows]
        span = joint.idx_v + np.arange(len(rows))
        out[np.ix_(range(len(e)), span, span)] = np.linalg.inv(Jr)
    return out


def configuration_cotangent(model: RobotModel, q: np.ndarray, ct: np.ndarray) -> np.ndarray:
    """The cotangent of the configuration array `q` `(B, nq)` as given (quaternions
    read as q / |q|) from the cotangent `ct` `(B, nv)` of the local tangent chart: the
    transpose of d(tangent)/d(q). Free flyer: `ct_p = R ct_v`; a quaternion block (free
    flyer or ball) `ct_quat = P 2 M^T ct_w` with `M = [w I - [v]x | -v]` (so that
    `w_local = 2 vec(conj(qn) dqn)`) and `P = (I - qn qn^T) / |quat|` (the normalisation);
    scalar joints pass through. A planar joint's (cos, sin) pair has no such map from the
    tangent alone (NotImplementedError)."""
    out = np.zeros((q.shape[0], model.nq))
    for joint in model.joints:
        iq, iv = joint.idx_q, joint.idx_v
        if joint.type is JointType.PLANAR:
            raise NotImplementedError("configuration_cotangent: planar joints")
        if joint.type in (JointType.FREE_FLYER, JointType.SPHERICAL):
            at_quat = iq + 3 if joint.type is JointType.FREE_FLYER else iq
            at_w = iv + 3 if joint.type is JointType.FREE_FLYER else iv
            quat = q[:, at_quat:at_quat + 4]
            norm = np.linalg.norm(quat, axis=1, keepdims=True)
            qn = quat / norm
            if joint.type is JointType.FREE_FLYER:
                R = spatial.quat_xyzw_to_matrix(quat)
                out[:, iq:iq + 3] = np.einsum("bij,bj->bi", R, ct[:, iv:iv + 3])
            v, w = qn[:, :3], qn[:, 3]
            M = np.concatenate([w[:, None, None] * np.eye(3) - spatial.skew(v),
                                -v[:, :, None]], axis=2)
            P = (np.eye(4) - qn[:, :, None] * qn[:, None, :]) / norm[:, :, None]
            g = 2.0 * np.einsum("bji,bj->bi", M, ct[:, at_w:at_w + 3])
            out[:, at_quat:at_quat + 4] = np.einsum("bij,bj->bi", P, g)
        else:
            out[:, iq:iq + joint.nq] = ct[:, iv:iv + joint.nv]
    return out
