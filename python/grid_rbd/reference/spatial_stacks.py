"""Spatial algebra on stacks of derivatives, `[linear; angular]` order.

A stack is a `(B, 6, ...)` array: the spatial component on axis 1, derivative
directions on the trailing axes (`(B, 6, n)` for first derivatives, `(B, 6, n, n)` for
second ones). The products broadcast over every axis but axis 1, so a constant motion
subspace `S (6, m)` enters as `S[None]` and pairs of directions come from inserting axes.
"""

from __future__ import annotations

import numpy as np

from grid_rbd.reference import spatial


def cross_motion(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """`m x x` for motion stacks (spatial axis 1)."""
    return spatial.cross_motion(m, x, axis=1)


def cross_force(m: np.ndarray, f: np.ndarray) -> np.ndarray:
    """`m x* f` for a motion stack and a force stack (spatial axis 1)."""
    return spatial.cross_force(m, f, axis=1)


def transform(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """`X @ D` on axis 1 of a stack `D (B, 6, ...)`, for `X (6, 6)` or `(B, 6, 6)`."""
    flat = D.reshape(D.shape[0], D.shape[1], -1)
    return (X @ flat).reshape(D.shape[0], X.shape[-2], *D.shape[2:])


def transform_transposed(X: np.ndarray, D: np.ndarray) -> np.ndarray:
    """`X^T @ D` on axis 1 of a stack `D (B, 6, ...)`."""
    return transform(np.swapaxes(X, -1, -2), D)
