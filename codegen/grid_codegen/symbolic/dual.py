"""Forward-mode derivatives at trace time: dual numbers over trace values.

A `Dual` carries a primal value `v` and a sparse tangent `d = {direction: value}` (absent
directions are exact zeros). Tracing an algorithm on duals records, in the same graph,
the primal expressions and every directional derivative; zero tangents never become
nodes, so a perturbation of joint k touches only the bodies it moves (the O(n^2)
structure of the analytic derivatives falls out of the tree), and the primal values the
derivative reuses are ordinary shared nodes (column invariants are computed once).

Math functions for algorithm code that runs on floats, `Sym`s or `Dual`s alike are here
(`sin`, `cos`, `sqrt`, `atan2`); they dispatch on the operand type.
"""

from __future__ import annotations

import math

from grid_codegen.symbolic import graph as G


class Dual:
    """`v + sum_k d[k] eps_k` with `eps_k eps_j = 0`."""

    __slots__ = ("v", "d")

    def __init__(self, v: object, d: dict[int, object] | None = None) -> None:
        self.v = G.const(v) if not isinstance(v, Dual) else v
        self.d = d if d is not None else {}

    def __repr__(self) -> str:
        return f"Dual({self.v!r}, {self.d!r})"

    def __add__(self, other):
        return _add(self, other)

    __radd__ = __add__

    def __sub__(self, other):
        return _add(self, _neg(_lift(other)))

    def __rsub__(self, other):
        return _add(_lift(other), _neg(self))

    def __mul__(self, other):
        return _mul(self, other)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return _div(_lift(self), _lift(other))

    def __rtruediv__(self, other):
        return _div(_lift(other), self)

    def __neg__(self):
        return _neg(self)

    def __pos__(self):
        return self

    def __bool__(self) -> bool:
        raise TypeError("a traced value has no truth value at generation time")


def _is_zero(x: object) -> bool:
    """An exact zero (a nested dual, as used for second derivatives, never is)."""
    return not isinstance(x, Dual) and G.is_zero(x)


def _lift(x: object) -> Dual:
    return x if isinstance(x, Dual) else Dual(x)


def _merge(a: dict, b: dict, sign: float = 1.0) -> dict:
    if not b:
        return dict(a)
    out = dict(a)
    for k, t in b.items():
        if k in out:
            s = out[k] + t if sign > 0 else out[k] - t
            if _is_zero(s):
                del out[k]
            else:
                out[k] = s
        else:
            out[k] = t if sign > 0 else -t
    return out


def _add(a: object, b: object) -> Dual:
    a, b = _lift(a), _lift(b)
    return Dual(a.v + b.v, _merge(a.d, b.d))


def _neg(a: Dual) -> Dual:
    return Dual(-a.v, {k: -t for k, t in a.d.items()})


def _scale(d: dict, s: object) -> dict:
    if _is_zero(s):
        return {}
    out = {}
    for k, t in d.items():
        p = t * s
        if not _is_zero(p):
            out[k] = p
    return out


def _mul(a: object, b: object) -> Dual:
    a, b = _lift(a), _lift(b)
    d = _scale(a.d, b.v)
    for k, t in b.d.items():
        p = a.v * t
        if _is_zero(p):
            continue
        if k in d:
            s = d[k] + p
            if _is_zero(s):
                del d[k]
            else:
                d[k] = s
        else:
            d[k] = p
    return Dual(a.v * b.v, d)


def _div(a: Dual, b: Dual) -> Dual:
    q = a.v / b.v
    # d(a/b) = (da - q db) / b
    num = _merge(a.d, _scale(b.d, q), -1.0)
    inv = 1.0 / b.v
    return Dual(q, _scale(num, inv))


def _unary(x: Dual, value: object, slope: object) -> Dual:
    return Dual(value, _scale(x.d, slope))


def sin(x: object) -> object:
    if isinstance(x, Dual):
        return _unary(x, sin(x.v), cos(x.v))
    if isinstance(x, G.Sym):
        return G.sin(x)
    return math.sin(float(x))


def cos(x: object) -> object:
    if isinstance(x, Dual):
        return _unary(x, cos(x.v), -sin(x.v))
    if isinstance(x, G.Sym):
        return G.cos(x)
    return math.cos(float(x))


def sqrt(x: object) -> object:
    if isinstance(x, Dual):
        s = sqrt(x.v)
        return _unary(x, s, 0.5 / s)
    if isinstance(x, G.Sym):
        return G.sqrt(x)
    return math.sqrt(float(x))


def atan2(y: object, x: object) -> object:
    if isinstance(y, Dual) or isinstance(x, Dual):
        y, x = _lift(y), _lift(x)
        value = atan2(y.v, x.v)
        r2 = x.v * x.v + y.v * y.v
        # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)
        num = _merge(_scale(y.d, x.v), _scale(x.d, y.v), -1.0)
        return Dual(value, _scale(num, 1.0 / r2))
    if isinstance(y, G.Sym) or isinstance(x, G.Sym):
        return G.atan2(y, x)
    return math.atan2(float(y), float(x))


def primal(x: object) -> object:
    return x.v if isinstance(x, Dual) else x


def tangent(x: object, direction: int) -> object:
    """The derivative of `x` along `direction` (0.0 when it does not depend on it)."""
    if isinstance(x, Dual):
        return x.d.get(direction, 0.0)
    return 0.0


def second_order_seed(direction: int) -> Dual:
    """The tangent coordinate `eps_direction` as a nested dual: perturbed along
    `direction` at both levels, so that `hessian_entry(f, i, j)` is `d2 f / d eps_i
    d eps_j` (a hyper-dual number: `eps1 eps2` terms are kept, `eps1^2`, `eps2^2` not)."""
    return Dual(Dual(0.0, {direction: 1.0}), {direction: 1.0})


def hessian_entry(x: object, i: int, j: int) -> object:
    """`d2 x / d eps_i d eps_j` of a nested dual (0.0 when it does not depend on both)."""
    return tangent(tangent(x, i), j)


def seed(value: object, direction: int) -> Dual:
    """`value` perturbed along `direction` with unit slope."""
    return Dual(primal(value), {direction: 1.0})
