"""Reverse mode on a traced graph: the vector-Jacobian product of a traced pass.

`vjp(outputs, seeds, wrt)` returns, for each value in `wrt`, the sum over outputs of
`seed * d output / d value`, as new trace values built in the same graph (so they fold and
share with the primal like any traced expression). Nodes are visited once, in reverse
creation order, which is a reverse topological order of the hash-consed graph. The local
derivative of each operation is written in terms of its operands and its own value:

    add, sub, neg   +-1                 mul    the other operand
    div a/b         1/b, -(a/b)/b       sqrt   1 / (2 sqrt a)
    sin, cos        cos a, -sin a       tanh   1 - tanh^2
    atan2(y, x)     x/r2, -y/r2 (r2 = x^2 + y^2)
    sign            0 (almost everywhere: Coulomb friction's slope is not a force)

A cost of reverse mode against the forward-mode Jacobians of `algorithms`: one pass for
all inputs, at a few times the primal's operations, where a Jacobian takes one directional
pass per input.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.symbolic import graph as G


def _value(g: G.Graph, operand: object) -> object:
    return G.Sym(g, operand) if isinstance(operand, int) else operand


def vjp(outputs: Sequence[object], seeds: Sequence[object], wrt: Sequence[object]
        ) -> list[object]:
    """`sum_k seeds[k] * d outputs[k] / d wrt[j]` for each j (0.0 where none depends)."""
    if len(outputs) != len(seeds):
        raise ValueError(f"{len(outputs)} outputs but {len(seeds)} seeds")
    syms = [x for x in (*outputs, *seeds, *wrt) if type(x) is G.Sym]
    if not syms:
        return [0.0] * len(wrt)
    g = syms[0].g
    adjoint: dict[int, object] = {}

    def accumulate(operand: object, value: object) -> None:
        if isinstance(operand, int) and not G.is_zero(value):
            adjoint[operand] = adjoint[operand] + value if operand in adjoint else value

    for out, seed in zip(outputs, seeds, strict=True):
        if type(out) is G.Sym:
            accumulate(out.i, seed)
    targets = {x.i for x in wrt if type(x) is G.Sym}
    found: dict[int, object] = {}
    top = max(adjoint) if adjoint else -1
    for i in range(top, -1, -1):
        bar = adjoint.pop(i, None)
        if bar is None:
            continue
        if i in targets:
            found[i] = bar
        op = g.op(i)
        if op == "in":
            continue
        a, b = g.operands(i)
        x, y, me = _value(g, a), _value(g, b), G.Sym(g, i)
        if op == "add":
            accumulate(a, bar)
            accumulate(b, bar)
        elif op == "sub":
            accumulate(a, bar)
            accumulate(b, -bar)
        elif op == "neg":
            accumulate(a, -bar)
        elif op == "mul":
            accumulate(a, bar * y)
            accumulate(b, bar * x)
        elif op == "div":
            accumulate(a, bar / y)
            accumulate(b, -(bar * me) / y)
        elif op == "sqrt":
            accumulate(a, bar / (2.0 * me))
        elif op == "sin":
            accumulate(a, bar * G.cos(x))
        elif op == "cos":
            accumulate(a, -(bar * G.sin(x)))
        elif op == "tanh":
            accumulate(a, bar * (1.0 - me * me))
        elif op == "atan2":  # atan2(y = x here, x = y here)
            r2 = x * x + y * y
            accumulate(a, bar * y / r2)
            accumulate(b, -(bar * x) / r2)
        elif op == "sign":
            pass
        else:
            raise NotImplementedError(f"reverse mode has no rule for {op!r}")
    return [found.get(x.i, 0.0) if type(x) is G.Sym else 0.0 for x in wrt]
