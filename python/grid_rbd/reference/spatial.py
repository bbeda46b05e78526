"""Batched spatial algebra in float64, `[linear; angular]` order (Pinocchio's).

Shapes: vectors `(B, 6)`, operators `(B, 6, 6)`, rotations `(B, 3, 3)`. A placement
`(R, p)` maps child coordinates to parent ones: `x_parent = R @ x_child + p`.
"""

from __future__ import annotations

import numpy as np


def skew(v: np.ndarray) -> np.ndarray:
    """`(..., 3) -> (..., 3, 3)` with `skew(a) @ b == cross(a, b)`."""
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -v[..., 2], v[..., 1]
    out[..., 1, 0], out[..., 1, 2] = v[..., 2], -v[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -v[..., 1], v[..., 0]
    return out


def motion_cross(v: np.ndarray) -> np.ndarray:
    """`crm(v)` with `crm(v) @ m == v x m` for motion vectors `v = [lin; ang]`."""
    lin, ang = skew(v[..., :3]), skew(v[..., 3:])
    out = np.zeros(v.shape[:-1] + (6, 6))
    out[..., :3, :3] = ang
    out[..., :3, 3:] = lin
    out[..., 3:, 3:] = ang
    return out


def force_cross(v: np.ndarray) -> np.ndarray:
    """`crf(v) = -crm(v)^T`, so that `crf(v) @ f == v x* f` for a force `f`."""
    return -np.swapaxes(motion_cross(v), -1, -2)


def act_inv(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The motion transform parent -> child of placement `(R, p)`:
    `[[R^T, -R^T [p]], [0, R^T]]`. Its transpose maps forces child -> parent."""
    Rt = np.swapaxes(R, -1, -2)
    out = np.zeros(R.shape[:-2] + (6, 6))
    out[..., :3, :3] = Rt
    out[..., :3, 3:] = -Rt @ skew(p)
    out[..., 3:, 3:] = Rt
    return out


def act(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """The motion transform child -> parent of placement `(R, p)`: `[[R, [p] R], [0, R]]`."""
    out = np.zeros(R.shape[:-2] + (6, 6))
    out[..., :3, :3] = R
    out[..., :3, 3:] = skew(p) @ R
    out[..., 3:, 3:] = R
    return out


def compose(Ra: np.ndarray, pa: np.ndarray, Rb: np.ndarray, pb: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Placement `a * b` (apply `b`, then `a`)."""
    return Ra @ Rb, (Ra @ pb[..., None])[..., 0] + pa


def axis_rotation(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Rodrigues: rotation by `angle` `(B,)` about the unit `axis` `(3,)`."""
    K = skew(axis)
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * K + (1.0 - c) * (K @ K)


def quat_xyzw_to_matrix(quat: np.ndarray) -> np.ndarray:
    """Rotation of `quat` `(B, 4)` in `[x, y, z, w]` order, normalised first."""
    quat = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    x, y, z, w = np.moveaxis(quat, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def matrix_to_rpy(R: np.ndarray) -> np.ndarray:
    """`(..., 3, 3) -> (..., 3)` roll, pitch, yaw with `R = Rz(yaw) Ry(pitch) Rx(roll)`,
    pitch in [-pi/2, pi/2] (Pinocchio's `rpy.matrixToRpy` branch for non-singular R)."""
    pitch = np.arctan2(-R[..., 2, 0], np.hypot(R[..., 0, 0], R[..., 1, 0]))
    roll = np.arctan2(R[..., 2, 1], R[..., 2, 2])
    yaw = np.arctan2(R[..., 1, 0], R[..., 0, 0])
    return np.stack([roll, pitch, yaw], axis=-1)


def apply(X: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`X @ x` for batched operators `(B, n, m)` and vectors `(B, m)`."""
    return np.einsum("bij,bj->bi", X, x)


def apply_transposed(X: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`X^T @ x` for batched operators `(B, m, n)` and vectors `(B, m)`."""
    return np.einsum("bji,bj->bi", X, x)


def cross_motion(m: np.ndarray, x: np.ndarray, axis: int = -1) -> np.ndarray:
    """`m x x` for motion vectors along `axis` (broadcast elsewhere):
    `[w x x_lin + v x x_ang; w x x_ang]` with `m = [v; w]`."""
    m, x = np.moveaxis(m, axis, -1), np.moveaxis(x, axis, -1)
    v, w = m[..., :3], m[..., 3:]
    out = np.concatenate([np.cross(w, x[..., :3]) + np.cross(v, x[..., 3:]),
                          np.cross(w, x[..., 3:])], axis=-1)
    return np.moveaxis(out, -1, axis)


def cross_force(m: np.ndarray, f: np.ndarray, axis: int = -1) -> np.ndarray:
    """`m x* f` for a motion `m = [v; w]` and a force `f` along `axis`:
    `[w x f_lin; w x f_ang + v x f_lin]`."""
    m, f = np.moveaxis(m, axis, -1), np.moveaxis(f, axis, -1)
    v, w = m[..., :3], m[..., 3:]
    out = np.concatenate([np.cross(w, f[..., :3]),
                          np.cross(w, f[..., 3:]) + np.cross(v, f[..., :3])], axis=-1)
    return np.moveaxis(out, -1, axis)
