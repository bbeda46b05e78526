"""Costs and barriers of trajectory optimisation, with their derivatives in the tangent.

Every cost returns `(value (B,), grad, hess)`: the gradient and Hessian with respect to
the tangent of its inputs (`[dq, dqd]` for a state, `2 nv` wide; on a fixed base that
is the state's own width). Tracking costs of a residual `r` with weight `W`,
`1/2 r^T W r`, give the Gauss-Newton Hessian `J^T W J` (`J = dr/d tangent`); the exact
one would add the residual's curvature. A weight is a scalar, a diagonal, a matrix, or a
batch of matrices. Barriers are logarithmic, `-mu (log(x - lower) +
log(upper - x))` per entry, and return `(value (B,), grad, hess_diag)`; outside
`(lower, upper)` the value is +inf.
"""

from __future__ import annotations

import numpy as np


def weight(W: np.ndarray | float, n: int, what: str) -> np.ndarray:
    """`(1 or B, n, n)` from a scalar, an `(n,)` diagonal, an `(n, n)` matrix or a `(B, n,
    n)` batch of matrices."""
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 0:
        return float(W) * np.eye(n)[None]
    if W.shape == (n,):
        return np.diag(W)[None]
    if W.shape == (n, n):
        return W[None]
    if W.ndim == 3 and W.shape[1:] == (n, n):
        return W
    raise ValueError(f"{what} has shape {W.shape}; expected a scalar, ({n},) (a diagonal), "
                     f"({n}, {n}) or (B, {n}, {n})")


def tracking(r: np.ndarray, J: np.ndarray, W: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`1/2 r^T W r`, `J^T W r`, `J^T W J` for residuals `r (B, m)` with `J (B, m, n)`."""
    Wr = np.einsum("bij,bj->bi", W, r)
    value = 0.5 * np.einsum("bi,bi->b", r, Wr)
    grad = np.einsum("bmi,bm->bi", J, Wr)
    hess = np.swapaxes(J, 1, 2) @ W @ J
    return value, grad, 0.5 * (hess + np.swapaxes(hess, 1, 2))


def barrier_bounds(lower, upper, mu, shape: tuple) -> tuple[np.ndarray, np.ndarray, float]:
    """`(lower, upper, mu)` checked: the bounds broadcast to `shape` with lower < upper
    everywhere, and mu > 0 (ValueError naming the entry otherwise)."""
    lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), shape)
    upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), shape)
    if np.any(lower >= upper):
        bad = int(np.argmax(lower >= upper))
        raise ValueError(f"barrier bounds need lower < upper; entry {bad} has lower "
                         f"{lower[bad]} >= upper {upper[bad]}")
    mu = float(mu)
    if not mu > 0.0:
        raise ValueError(f"barrier weight mu must be positive; got {mu}")
    return lower, upper, mu


def barrier(x: np.ndarray, lower: np.ndarray | float, upper: np.ndarray | float, mu: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log barrier of `x (B, n)` inside `(lower, upper)` (module doc)."""
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    lower, upper, mu = barrier_bounds(lower, upper, mu, x.shape[1:])
    below, above = x - lower, upper - x
    inside = (below > 0) & (above > 0)
    safe_b, safe_a = np.where(inside, below, 1.0), np.where(inside, above, 1.0)
    value = np.where(inside.all(axis=1),
                     -mu * np.sum(np.log(safe_b) + np.log(safe_a), axis=1), np.inf)
    grad = -mu * (1.0 / safe_b - 1.0 / safe_a)
    hess = mu * (1.0 / safe_b**2 + 1.0 / safe_a**2)
    return value, grad, hess
