"""Spatial algebra on stacks of derivatives, `[linear; angular]` order.

A stack is a `(B, 6, ...)` array: the spatial component on axis 1, derivative
directions on the trailing axes (`(B, 6, n)` for first derivatives, `(B, 6, n, n)` for
second ones). The products broadcast over every axis but axis 1, so a constant motion
subspace `S (6, m)` enters as `S[None]` and pairs of directions come from inserting axes.
"""

from __future__ import annotations

import numpy as np


def _cross3(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    """`u x w` on axis 1 of `(B, 3, ...)` arrays, broadcasting elsewhere."""
    u0, u1, u2 = u[:, 0], u[:, 1], u[:, 2]
    w0, w1, w2 = w[:, 0], w[:, 1], w[:, 2]
    return np.stack([u1 * w2 - u2 * w1, u2 * w0 - u0 * w2, u0 * w1 - u1 * w0], axis=1)


def cross_motion(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`m x x` for motion vectors: `[w x x_lin + v x x_ang; w x x_ang]` with `m = [v; w]`."""
    v, w = m[:, :3], m[:, 3:]
    x_lin, x_ang = x[:, :3], x[:, 3:]
    return np.concatenate([_cross3(w, x_lin) + _cross3(v, x_ang), _cross3(w, x_ang)], axis=1)


def cross_force(m: np.ndarray, f: np.ndarray) -> np.ndarray:
    """`m x* f` for a motion `m = [v; w]` and a force `f = [n_lin; n_ang]`:
    `[w x f_lin; w x f_ang + v x f_lin]`."""
    v, w = m[:, :3], m[:, 3:]
    f_lin, f_ang = f[:, :3], f[:, 3:]
    return np.concatenate([_cross3(w, f_lin), _cross3(w, f_ang) + _cross3(v, f_lin)], axis=1)


def transform(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """`X @ D` on axis 1 of a stack `D (B, 6, ...)`, for `X (6, 6)` or `(B, 6, 6)`."""
    flat = D.reshape(D.shape[0], D.shape[1], -1)
    return (X @ flat).reshape(D.shape[0], X.shape[-2], *D.shape[2:])


def transform_transposed(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """`X^T @ D` on axis 1 of a stack `D (B, 6, ...)`."""
    return transform(np.swapaxes(X, -1, -2), D)
