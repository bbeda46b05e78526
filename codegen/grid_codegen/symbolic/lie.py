"""The free flyer's SE(3) chart at trace time: the Jacobians of `q (+) xi`.

A free flyer moves as `M exp(xi)` with `xi = [v; w]` its local twist (Pinocchio's
`integrate`). In the tangent charts at `q` and at `q (+) xi` (Pinocchio's `dIntegrate`):

    d(q (+) xi)/dq  = Ad(exp(xi))^-1 = [[R^T, -R^T [p]], [0, R^T]]   with (R, p) = exp(xi)
    d(q (+) xi)/dxi = Jr(xi) = Jl(-xi) = [[J3, Q], [0, J3]]           (at -xi)

with `J3 = 1 + b [w] + c [w]^2` and `Q` the coupling block (Barfoot's form; the same as
`grid_rbd.reference.configuration`). Their coefficients of `t = |w|` (`sin t / t`,
`(1 - cos t)/t^2`, ...) lose every digit to cancellation near `t = 0` (in float32 below
about 0.2), so they switch to their Taylor series below `SERIES_BELOW`. A trace has no
branches: with `s = sign(SERIES_BELOW - t)` the switch is `m = (s + s^2) / 2` (1 below
it, 0 from it on), the closed forms are taken at `t + m (1 - t)` (1 on the series side,
never 0) and the two are blended by `m`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import factorial

from grid_codegen.symbolic import graph as G

SERIES_BELOW = 0.5
"""Below this angle the coefficients are Taylor series (six terms: the first dropped one
is under 1e-13 of the coefficient there); above it the closed forms' float32
cancellation stays under about 1e-4 of the (already small) terms they weigh."""

_TERMS = 6


def _series(t2: object, coefficient) -> object:
    """`sum_k coefficient(k) (-t2)^k` over the first `_TERMS` terms."""
    total: object = 0.0
    power: object = 1.0
    for k in range(_TERMS):
        total = total + coefficient(k) * power
        power = -power * t2
    return total


def _coefficients(w: Sequence) -> tuple[object, ...]:
    """`(a, b, c, d, e)` of `t = |w|`: `sin t/t`, `(1 - cos t)/t^2`, `(t - sin t)/t^3`,
    `(t^2 + 2 cos t - 2)/(2 t^4)`, `(2 t - 3 sin t + t cos t)/(2 t^5)`."""
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = G.sqrt(t2)
    below = G.sign(SERIES_BELOW - theta)
    m = 0.5 * (below + below * below)  # 1 below SERIES_BELOW, else 0
    t = theta + m * (1.0 - theta)
    s, c = G.sin(t), G.cos(t)
    tt = t * t
    closed = (s / t, (1.0 - c) / tt, (t - s) / (tt * t), (tt + 2.0 * c - 2.0) / (2.0 * tt * tt),
              (2.0 * t - 3.0 * s + t * c) / (2.0 * tt * tt * t))
    series = (_series(t2, lambda k: 1.0 / factorial(2 * k + 1)),
              _series(t2, lambda k: 1.0 / factorial(2 * k + 2)),
              _series(t2, lambda k: 1.0 / factorial(2 * k + 3)),
              _series(t2, lambda k: 1.0 / factorial(2 * k + 4)),
              _series(t2, lambda k: (k + 1) / factorial(2 * k + 5)))
    return tuple(m * low + (1.0 - m) * high for low, high in zip(series, closed, strict=True))


def _skew(x: Sequence) -> list[list]:
    return [[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]]


def _mat(A: list[list], B: list[list]) -> list[list]:
    return [[sum((A[i][k] * B[k][j] for k in range(3)), 0.0) for j in range(3)]
            for i in range(3)]


def _lin(*terms: tuple[object, list[list]]) -> list[list]:
    return [[sum((c * M[i][j] for c, M in terms), 0.0) for j in range(3)] for i in range(3)]


_EYE = [[1.0 if i == j else 0.0 for j in range(3)] for i in range(3)]


def integrate_jacobians(xi: Sequence) -> tuple[list[list], list[list]]:
    """`(d(q (+) xi)/dq, d(q (+) xi)/dxi)` of a free flyer, each 6x6 (module doc)."""
    v, w = list(xi[:3]), list(xi[3:])
    a, b, c, d, e = _coefficients(w)
    W = _skew(w)
    WW = _mat(W, W)
    R = _lin((1.0, _EYE), (a, W), (b, WW))
    V = _lin((1.0, _EYE), (b, W), (c, WW))
    p = [sum((V[i][k] * v[k] for k in range(3)), 0.0) for i in range(3)]
    RT = [[R[j][i] for j in range(3)] for i in range(3)]
    coupling = _mat(RT, _skew(p))
    J0 = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(3):
            J0[i][j] = J0[3 + i][3 + j] = RT[i][j]
            J0[i][3 + j] = -coupling[i][j]
    # Jr(xi) = Jl(-xi): the coefficients are even in w, W and P change sign.
    Wn, Pn = _skew([-x for x in w]), _skew([-x for x in v])
    WnWn = WW  # (-W)(-W)
    J3 = _lin((1.0, _EYE), (b, Wn), (c, WnWn))
    WP, PW = _mat(Wn, Pn), _mat(Pn, Wn)
    WPW = _mat(WP, Wn)
    Q = _lin((0.5, Pn), (c, _lin((1.0, WP), (1.0, PW), (1.0, WPW))),
             (d, _lin((1.0, _mat(Wn, WP)), (1.0, _mat(PW, Wn)), (-3.0, WPW))),
             (e, _lin((1.0, _mat(WPW, Wn)), (1.0, _mat(Wn, WPW)))))
    J1 = [[0.0] * 6 for _ in range(6)]
    for i in range(3):
        for j in range(3):
            J1[i][j] = J1[3 + i][3 + j] = J3[i][j]
            J1[i][3 + j] = Q[i][j]
    return J0, J1
