"""The Hessian of one euler / semi-implicit euler plant step, `(B, 2nv, 3nv, 3nv)`, on a
chart whose non-vector joints are subgroups of SE(3) (a free flyer; a ball or a planar
joint in the reference), written once over `grid_rbd._array_ops.ArrayOps` so the float64
reference and the numpy, torch and JAX handles share it.

What is differentiated, in which chart. The step is

    v' = v + dt a(q, v, u),   q' = q (+) xi,   xi = dt w,   w = v (euler) or v' (semi-implicit),

and a perturbation `z = [dq, dv, du]` acts as `(q (+) dq, v + dv, u + du)`. The gradient
at a point, `G = d/d eps [step(x (+) eps) (-) step(x)]` (plant_step_gradient: the output
difference taken in the tangent at `x'`), is per joint

    G_q' = D0(xi) S_q + dt D1(xi) Jw,   G_v' = S_v + dt [da/dq | da/dv | Minv],

with `D0 = d(q (+) xi)/dq = Ad(exp xi)^-1` and `D1 = d(q (+) xi)/dxi = Jr(xi)` (both I
on a vector joint), `Jw = dw/dz` (`S_v`, or `G_v'` for semi-implicit euler) and `S_q`,
`S_v` the selectors of `dq`, `dv`. `D0` and `D1` depend on the increment `xi` only, not
on `q`. The Hessian is iterated: `H[r, i, k] = d/dz_k G[r, i]` at `(x (+) z, u + du)`,
the outer derivative taken of the gradient in the tangent charts at the perturbed point
(central differences of plant_step_gradient along the group give it; fdsva_so's q-q block
is iterated the same way, so the q-q corner is not symmetric on a Lie-group joint). With
`eta_k = dxi/dz_k = dt Jw[:, k]`:

    H_v'[..., k] = dt Ha[..., k]                       (Ha: fdsva_so's four blocks)
    H_q'[..., k] = dD0[eta_k] S_q + dt dD1[eta_k] Jw + dt D1 Hw[..., k],
    Hw = 0 (euler) or dt Ha (semi-implicit euler),

where `dD0[eta] = -ad(Jr(xi) eta) Ad(exp xi)^-1` (from `exp(xi + eta) = exp(xi)
exp(Jr(xi) eta)` to first order) and `dD1[eta] = -dJl(-xi)[eta]` is the derivative of
Barfoot's closed form of SE(3)'s left Jacobian (`Jr(xi) = Jl(-xi)`), coefficient by
coefficient. On vector joints only the last term is left, `dt^2 Ha` (semi-implicit) or 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grid_rbd._array_ops import ArrayOps
from grid_rbd._integrators import check_hessian_step

#: Below this angle the coefficients are their Taylor series in `t^2` (`SERIES_TERMS`
#: terms: the truncation is under 1e-20 relative there), above it their closed forms,
#: whose cancellation (they divide by up to `t^7`) costs under 1e-14 relative from 2 on.
SERIES_BELOW = 2.0
SERIES_TERMS = 12


def _taylor_coefficients() -> dict[str, tuple[float, ...]]:
    """The series in `t^2` of `a = sin t / t = sum (-1)^n t^2n / (2n+1)!`, `b = (1 - cos
    t)/t^2` (`/(2n+2)!`), `c = (t - sin t)/t^3` (`/(2n+3)!`), `d = (t^2 + 2 cos t - 2)/
    (2 t^4)` (`/(2n+4)!`), `e = (2 t - 3 sin t + t cos t)/(2 t^5)` (`(n+1)/(2n+5)!`), and
    of each `f`'s `df/dt / t = sum 2 (n+1) f_(n+1) t^2n` (named `"d" + f`)."""
    f, n_max = math.factorial, SERIES_TERMS + 1
    out = {
        "a": [(-1) ** n / f(2 * n + 1) for n in range(n_max)],
        "b": [(-1) ** n / f(2 * n + 2) for n in range(n_max)],
        "c": [(-1) ** n / f(2 * n + 3) for n in range(n_max)],
        "d": [(-1) ** n / f(2 * n + 4) for n in range(n_max)],
        "e": [(-1) ** n * (n + 1) / f(2 * n + 5) for n in range(n_max)],
    }
    for name in "bcde":
        out["d" + name] = [2 * (n + 1) * out[name][n + 1] for n in range(SERIES_TERMS)]
    return {name: tuple(c[:SERIES_TERMS]) for name, c in out.items()}


_SERIES = _taylor_coefficients()


def _series(name: str, t2: Any) -> Any:
    out = 0 * t2 + _SERIES[name][-1]
    for c in reversed(_SERIES[name][:-1]):
        out = out * t2 + c
    return out


def coefficients(ops: ArrayOps, theta: Any) -> dict[str, Any]:
    """`a, b, c, d, e` of `grid_rbd.reference.configuration`'s SE(3) formulas and their
    derivative coefficients `db, dc, dd, de` (`df/dt / t`), each shaped like `theta`."""
    m = ops.m
    small = theta < SERIES_BELOW
    t = ops.where(small, SERIES_BELOW + 0 * theta, theta)  # (the unused branch finite)
    s, c = m.sin(t), m.cos(t)
    closed = {"a": s / t, "b": (1 - c) / t**2, "c": (t - s) / t**3,
              "d": (t * t + 2 * c - 2) / (2 * t**4),
              "e": (2 * t - 3 * s + t * c) / (2 * t**5),
              "db": (t * s + 2 * c - 2) / t**4,
              "dc": (3 * s - 2 * t - t * c) / t**5,
              "dd": (4 - t * t - t * s - 4 * c) / t**6,
              "de": (15 * s - t * t * s - 7 * t * c - 8 * t) / (2 * t**7)}
    t2 = theta * theta
    return {name: ops.where(small, _series(name, t2), value)
            for name, value in closed.items()}


def _b3(x: Any) -> Any:
    return x[:, None, None]


def left_jacobian(ops: ArrayOps, v: Any, w: Any, k: dict[str, Any] | None = None) -> Any:
    """`(B, 6, 6)`: SE(3)'s left Jacobian of `exp` at `[v; w]` (linear first), Barfoot's
    `[[J3, Q], [0, J3]]`."""
    k = coefficients(ops, ops.norm(w)) if k is None else k
    b, c, d, e = (_b3(k[n]) for n in "bcde")
    W, P = ops.skew(w), ops.skew(v)
    J3 = ops.eye(3) + b * W + c * (W @ W)
    WP, PW, WPW = W @ P, P @ W, W @ P @ W
    Q = (0.5 * P + c * (WP + PW + WPW) + d * (W @ WP + PW @ W - 3 * WPW)
         + e * (WPW @ W + W @ WPW))
    return ops.cat([ops.cat([J3, Q], 2), ops.cat([0 * J3, J3], 2)], 1)


def _product_derivative(factors: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """`d(F1 F2 ... Fn)` from the factors and their derivatives (the product rule)."""
    total = None
    for i in range(len(factors)):
        term = None
        for j, f in enumerate(factors):
            f = tangents[j] if j == i else f
            term = f if term is None else term @ f
        total = term if total is None else total + term
    return total


def left_jacobian_derivative(ops: ArrayOps, v: Any, w: Any, dv: Any, dw: Any,
                             k: dict[str, Any] | None = None) -> Any:
    """`(B, 6, 6)`: the derivative of `left_jacobian(v, w)` along `[dv; dw]`: each
    coefficient `f(t)` moves by `(df/dt / t) (w . dw)` and each product of `W = [w]`,
    `P = [v]` by the product rule."""
    k = coefficients(ops, ops.norm(w)) if k is None else k
    s = _b3((w * dw).sum(-1))  # t dt
    W, P, dW, dP = ops.skew(w), ops.skew(v), ops.skew(dw), ops.skew(dv)

    def word(letters: str) -> tuple[Any, Any]:
        pick = {"W": (W, dW), "P": (P, dP)}
        fs, ts = zip(*(pick[x] for x in letters), strict=True)
        value = fs[0]
        for f in fs[1:]:
            value = value @ f
        return value, _product_derivative(fs, ts)

    WW, dWW = word("WW")
    dJ3 = (_b3(k["db"]) * s * W + _b3(k["b"]) * dW + _b3(k["dc"]) * s * WW
           + _b3(k["c"]) * dWW)
    groups = {"c": (("WP", 1), ("PW", 1), ("WPW", 1)),
              "d": (("WWP", 1), ("PWW", 1), ("WPW", -3)),
              "e": (("WPWW", 1), ("WWPW", 1))}
    dQ = 0.5 * dP
    for name, words in groups.items():
        value = tangent = 0
        for letters, weight in words:
            x, dx = word(letters)
            value, tangent = value + weight * x, tangent + weight * dx
        dQ = dQ + _b3(k["d" + name]) * s * value + _b3(k[name]) * tangent
    return ops.cat([ops.cat([dJ3, dQ], 2), ops.cat([0 * dJ3, dJ3], 2)], 1)


def _ad(ops: ArrayOps, twist: Any) -> Any:
    """`(B, 6, 6)`: `ad([v; w]) = [[w^, v^], [0, w^]]`."""
    W, V = ops.skew(twist[:, 3:]), ops.skew(twist[:, :3])
    return ops.cat([ops.cat([W, V], 2), ops.cat([0 * W, W], 2)], 1)


def increment_jacobians(ops: ArrayOps, xi: Any) -> tuple[Any, Any, Any]:
    """At the SE(3) increment `xi (B, 6)`: `Jr(xi) (B, 6, 6)` and the derivatives of the
    integration's Jacobians, `dD1[..., m] = dJr/dxi_m` and `dD0[..., m] =
    d Ad(exp xi)^-1 / dxi_m`, each `(B, 6, 6, 6)` (module doc)."""
    v, w = xi[:, :3], xi[:, 3:]
    k = coefficients(ops, ops.norm(w))
    Jr = left_jacobian(ops, -v, -w, k)
    W = ops.skew(w)
    R = ops.eye(3) + _b3(k["a"]) * W + _b3(k["b"]) * (W @ W)
    p = ((ops.eye(3) + _b3(k["b"]) * W + _b3(k["c"]) * (W @ W)) @ v[:, :, None])[:, :, 0]
    RT = ops.swap(R)
    Ad_inv = ops.cat([ops.cat([RT, -RT @ ops.skew(p)], 2), ops.cat([0 * RT, RT], 2)], 1)
    # The six directions e_m at once, as a batch of 6B (direction-major), then moved to
    # the last axis.
    batch = xi.shape[0]

    def repeat(a: Any) -> Any:
        return ops.cat([a] * 6, 0)

    def directions_last(a: Any) -> Any:
        return ops.m.moveaxis(a.reshape(6, batch, 6, 6), 0, -1)

    e = ops.const(np.repeat(np.eye(6), batch, axis=0))  # row m B + b: e_m
    dD1 = left_jacobian_derivative(ops, repeat(-v), repeat(-w), -e[:, :3], -e[:, 3:],
                                   {name: repeat(c) for name, c in k.items()})
    columns = ops.m.moveaxis(Jr, 2, 0).reshape(6 * batch, 6)  # row m B + b: Jr[b] e_m
    dD0 = -(_ad(ops, columns) @ repeat(Ad_inv))
    return Jr, directions_last(dD1), directions_last(dD0)


Dynamics = Callable[[Any, Any, Any, bool], tuple]


def moved_velocity(ops: ArrayOps, q: Any, qd: Any, u: Any, dt: float, integrator: str,
                   dynamics: Dynamics) -> tuple[Any, Any]:
    """`(w, dw/dz)`: the velocity the configuration moves by (`qd`, or `qd'` for
    semi-implicit euler, from `dynamics` as `grid_rbd._integrators.Stepper` takes it) and
    its Jacobian over `z = [dq, dqd, du]` `(B, nv, 3nv)`."""
    nv = qd.shape[1]
    select_v = np.zeros((nv, 3 * nv))
    select_v[:, nv:2 * nv] = np.eye(nv)
    S_v = ops.const(select_v)[None] + 0 * qd[:, :, None]
    if integrator == "euler":
        return qd, S_v
    a, dF, Minv = dynamics(q, qd, u, True)
    return qd + dt * a, S_v + dt * ops.cat([dF, Minv], 2)


def dynamics_hessian(ops: ArrayOps, blocks: Sequence[Any]) -> Any:
    """`(B, nv, 3nv, 3nv)`: `Ha[b, r, i, k] = d/dz_k (da_r/dz_i)` over `z = [q, qd, u]`
    from fdsva_so's `(qq, vv, qv, dMinv)` (`u` enters `a` linearly and `M^-1` depends on
    `q` alone, so the `(u, u)` and `(u, qd)` blocks are zero; the mixed blocks are
    symmetric, only the iterated `(q, q)` one may not be)."""
    qq, vv, qv, dMinv = blocks
    zero = 0 * vv
    return ops.cat([ops.cat([qq, qv, ops.swap(dMinv)], 3),
                    ops.cat([ops.swap(qv), vv, zero], 3),
                    ops.cat([dMinv, zero, zero], 3)], 2)


def step_hessian(ops: ArrayOps, blocks: Sequence[Any], dt: float, integrator: str,
                 groups: Sequence[tuple[int, Sequence[int]]] = (), w: Any = None,
                 Jw: Any = None) -> Any:
    """`(B, 2nv, 3nv, 3nv)`: the iterated Hessian of the module doc.

    `blocks`: fdsva_so's four `(B, nv, nv, nv)` blocks at the step's state. `groups`:
    the joints on a Lie group, as `(idx_v, rows)`: where the joint's tangent starts and
    which rows of the SE(3) twist `[v; w]` it is (`range(6)` for a free flyer). `w`,
    `Jw`: `moved_velocity`'s, needed when `groups` is not empty."""
    dt = check_hessian_step(integrator, dt)
    Ha = dynamics_hessian(ops, blocks)
    nv = Ha.shape[1]
    # dt Hw: 0 (euler) or dt^2 Ha (semi-implicit euler).
    config = ((dt * dt) * Ha if integrator == "semi_implicit_euler"
              else ops.m.zeros_like(Ha))
    rows_out, start = [], 0
    for idx_v, rows in sorted(groups, key=lambda g: g[0]):
        n = len(rows)
        rows_out.append(config[:, start:idx_v])
        rows_out.append(_group_rows(ops, Ha, dt, integrator, idx_v, list(rows), w, Jw))
        start = idx_v + n
    rows_out.append(config[:, start:nv])
    config = ops.cat([r for r in rows_out if r.shape[1]], 1) if groups else config
    return ops.cat([config, dt * Ha], 1)


def _group_rows(ops: ArrayOps, Ha: Any, dt: float, integrator: str,
                idx_v: int, rows: list[int], w: Any, Jw: Any) -> Any:
    """The rows `idx_v : idx_v + n` of `H_q'` for one Lie-group joint (module doc)."""
    n, nv = len(rows), Ha.shape[1]
    span = slice(idx_v, idx_v + n)
    embed = np.zeros((n, 6))
    embed[np.arange(n), rows] = 1.0
    xi = dt * (w[:, span] @ ops.const(embed))  # the joint's increment as an SE(3) twist
    Jr, dD1, dD0 = increment_jacobians(ops, xi)
    if n < 6:  # a subgroup: its Jacobians are these blocks of SE(3)'s
        Jr, dD1, dD0 = (x[:, rows][:, :, rows] for x in (Jr, dD1, dD0))
        dD1, dD0 = dD1[..., rows], dD0[..., rows]
    select_q = np.zeros((n, 3 * nv))
    select_q[np.arange(n), idx_v + np.arange(n)] = 1.0
    Jw_j = Jw[:, span]                       # (B, n, 3nv)
    eta = dt * Jw_j                          # d xi / dz
    # sum_{s, m} (dD0[r, s, m] S_q[s, i] + dt dD1[r, s, m] Jw[s, i]) eta[m, k]
    inner = (ops.m.einsum("brsm,si->brim", dD0, ops.const(select_q))
             + dt * ops.m.einsum("brsm,bsi->brim", dD1, Jw_j))
    out = inner @ eta[:, None]
    if integrator == "semi_implicit_euler":
        out = out + (dt * dt) * ops.m.einsum("brs,bsik->brik", Jr, Ha[:, span])
    return out
