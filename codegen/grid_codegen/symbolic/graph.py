"""Scalar expression graphs: the form every traced pass takes before it becomes C++.

An algorithm written once in Python over ordinary arithmetic is *traced*: run on `Sym`
values instead of numbers, it records a directed acyclic graph of scalar operations. A
value in a trace is either a Python `float` (a constant known at generation time) or a
`Sym` (a node of one `Graph`). Building a node folds what generation already knows:

* constants are evaluated in float64 (`2.0 * 3.0` is `6.0`, never a node);
* exact zeros and ones vanish (`x * 0.0 -> 0.0`, `x * 1.0 -> x`, `x + 0.0 -> x`,
  `x - x -> 0.0`), so the sparsity of joint transforms, motion subspaces and inertias
  removes work instead of multiplying by literal zeros;
* negations move outwards (`(-a) * b -> -(a * b)`, `a + (-b) -> a - b`) so that equal
  magnitudes share one node;
* every node is hash-consed on (operation, operands), commutative operands sorted: the
  same expression built twice is one node (common-subexpression elimination).

Operands are node ids (ints) or constants; a constant operand is stored as a one-tuple
`(value,)` in the node key so that node 1 and the constant 1.0 never collide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

# Operations and the number of operands they take.
ARITY = {"in": 0, "add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "sqrt": 1,
         "sin": 1, "cos": 1, "atan2": 2, "tanh": 1, "sign": 1}
COMMUTATIVE = frozenset({"add", "mul"})

Scalar = "float | Sym"


class Sym:
    """A node of a `Graph`: a scalar whose value is known only at run time."""

    __slots__ = ("g", "i")

    def __init__(self, g: Graph, i: int) -> None:
        self.g = g
        self.i = i

    def __repr__(self) -> str:
        return f"Sym({self.g.describe(self.i)})"

    # Arithmetic returns NotImplemented for operands it does not know (a Dual), so that
    # Python asks the other operand.
    def __add__(self, other):
        return add(self, other) if _plain(other) else NotImplemented

    def __radd__(self, other):
        return add(other, self) if _plain(other) else NotImplemented

    def __sub__(self, other):
        return sub(self, other) if _plain(other) else NotImplemented

    def __rsub__(self, other):
        return sub(other, self) if _plain(other) else NotImplemented

    def __mul__(self, other):
        return mul(self, other) if _plain(other) else NotImplemented

    def __rmul__(self, other):
        return mul(other, self) if _plain(other) else NotImplemented

    def __truediv__(self, other):
        return div(self, other) if _plain(other) else NotImplemented

    def __rtruediv__(self, other):
        return div(other, self) if _plain(other) else NotImplemented

    def __neg__(self):
        return neg(self)

    def __pos__(self):
        return self

    def __bool__(self) -> bool:
        raise TypeError("a traced value has no truth value at generation time; branch on "
                        "the model, not on run-time values")


def _plain(x: object) -> bool:
    return type(x) in (Sym, float, int)


class Graph:
    """Hash-consed scalar operations in creation (hence topological) order.

    `nodes[i]` is `(op, a, b)` with `a`, `b` node ids, `(value,)` constants or None; an
    input node is `("in", name, None)` where `name` is the C++ expression it reads."""

    def __init__(self) -> None:
        self.nodes: list[tuple] = []
        self._index: dict[tuple, Sym] = {}
        self._inputs: dict[str, Sym] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def input(self, name: str) -> Sym:
        """The run-time value `name` (a C++ lvalue such as `q[3]`): one node per name."""
        found = self._inputs.get(name)
        if found is None:
            found = self._make(("in", name, None))
            self._inputs[name] = found
        return found

    def inputs(self, prefix: str, count: int) -> list[Sym]:
        """`prefix[0] ... prefix[count - 1]` as input nodes."""
        return [self.input(f"{prefix}[{k}]") for k in range(count)]

    def _make(self, key: tuple) -> Sym:
        found = self._index.get(key)
        if found is None:
            found = Sym(self, len(self.nodes))
            self.nodes.append(key)
            self._index[key] = found
        return found

    def node(self, op: str, a: object, b: object = None) -> Sym:
        return self._make((op, _key(a), _key(b)))

    def op(self, i: int) -> str:
        return self.nodes[i][0]

    def operands(self, i: int) -> tuple[object, object]:
        """The two operand slots of node `i`: a node id (int), a float or None."""
        _, a, b = self.nodes[i]
        return _unkey(a), _unkey(b)

    def describe(self, i: int) -> str:
        op, a, b = self.nodes[i]
        if op == "in":
            return a
        args = [f"#{x}" if isinstance(x, int) else repr(x[0]) for x in (a, b) if x is not None]
        return f"#{i}={op}({', '.join(args)})"

    def count_ops(self, roots: Iterable[object]) -> dict[str, int]:
        """Operations reachable from `roots`, by kind (inputs excluded)."""
        counts: dict[str, int] = {}
        for i in reachable(self, roots):
            op = self.nodes[i][0]
            if op != "in":
                counts[op] = counts.get(op, 0) + 1
        return counts


def _key(x: object) -> object:
    if x is None:
        return None
    if type(x) is Sym:
        return x.i
    value = float(x)
    return (0.0 if value == 0.0 else value,)


def _unkey(x: object) -> object:
    if x is None or isinstance(x, int):
        return x
    return x[0]


def const(x: object) -> object:
    """`x` as a trace value: a float for numbers (ints become floats), a Sym unchanged."""
    if type(x) is Sym:
        return x
    value = float(x)
    if not math.isfinite(value):
        raise ValueError(f"a traced constant must be finite, got {value!r}")
    return 0.0 if value == 0.0 else value


def is_zero(x: object) -> bool:
    return type(x) is not Sym and float(x) == 0.0


def _graph(*xs: object) -> Graph:
    for x in xs:
        if type(x) is Sym:
            return x.g
    raise AssertionError("no Sym operand")


def _is(x: object, op: str) -> bool:
    return type(x) is Sym and x.g.nodes[x.i][0] == op


def _arg(x: Sym, slot: int = 0) -> object:
    """Operand `slot` of a Sym node, as a trace value (Sym or float)."""
    value = x.g.operands(x.i)[slot]
    return Sym(x.g, value) if isinstance(value, int) else value


def _commutative(g: Graph, op: str, a: object, b: object) -> Sym:
    # Canonical operand order: nodes by id, constants last.
    if type(a) is not Sym or (type(b) is Sym and b.i < a.i):
        a, b = b, a
    return g.node(op, a, b)


def add(a: object, b: object) -> object:
    a, b = const(a), const(b)
    if type(a) is not Sym and type(b) is not Sym:
        return const(a + b)
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if _is(b, "neg"):
        return sub(a, _arg(b))
    if _is(a, "neg"):
        return sub(b, _arg(a))
    return _commutative(_graph(a, b), "add", a, b)


def sub(a: object, b: object) -> object:
    a, b = const(a), const(b)
    if type(a) is not Sym and type(b) is not Sym:
        return const(a - b)
    if is_zero(b):
        return a
    if is_zero(a):
        return neg(b)
    if type(a) is Sym and type(b) is Sym and a.i == b.i:
        return 0.0
    if _is(b, "neg"):
        return add(a, _arg(b))
    if type(b) is not Sym:
        return add(a, -b)
    if _is(a, "neg"):  # -x - b = -(x + b)
        return neg(add(_arg(a), b))
    return _graph(a, b).node("sub", a, b)


def neg(a: object) -> object:
    a = const(a)
    if type(a) is not Sym:
        return const(-a)
    if _is(a, "neg"):
        return _arg(a)
    if _is(a, "sub"):  # -(x - y) = y - x
        x, y = _arg(a, 0), _arg(a, 1)
        return sub(y, x)
    if _is(a, "mul"):  # fold into a constant factor when there is one
        x, y = _arg(a, 0), _arg(a, 1)
        if type(y) is not Sym:
            return mul(x, -y)
    return a.g.node("neg", a)


def mul(a: object, b: object) -> object:
    a, b = const(a), const(b)
    if type(a) is not Sym and type(b) is not Sym:
        return const(a * b)
    if type(a) is not Sym:
        a, b = b, a  # the constant (if any) second
    if type(b) is not Sym:
        if b == 0.0:
            return 0.0
        if b == 1.0:
            return a
        if b == -1.0:
            return neg(a)
        if _is(a, "neg"):
            return mul(_arg(a), -b)
        if _is(a, "mul") and type(_arg(a, 1)) is not Sym:  # (x * c) * d = x * (c d)
            return mul(_arg(a, 0), _arg(a, 1) * b)
        return a.g.node("mul", a, b)
    negate = False
    if _is(a, "neg"):
        a, negate = _arg(a), not negate
    if _is(b, "neg"):
        b, negate = _arg(b), not negate
    product = _commutative(_graph(a, b), "mul", a, b)
    return neg(product) if negate else product


def div(a: object, b: object) -> object:
    a, b = const(a), const(b)
    if type(b) is not Sym:
        if b == 0.0:
            raise ZeroDivisionError("a traced division by the constant zero")
        return mul(a, 1.0 / b)
    if is_zero(a):
        return 0.0
    if _is(b, "neg"):
        return neg(div(a, _arg(b)))
    return _graph(a, b).node("div", a, b)


def sqrt(a: object) -> object:
    a = const(a)
    if type(a) is not Sym:
        return const(math.sqrt(a))
    return a.g.node("sqrt", a)


def sin(a: object) -> object:
    a = const(a)
    if type(a) is not Sym:
        return const(math.sin(a))
    return a.g.node("sin", a)


def cos(a: object) -> object:
    a = const(a)
    if type(a) is not Sym:
        return const(math.cos(a))
    return a.g.node("cos", a)


def tanh(a: object) -> object:
    a = const(a)
    if type(a) is not Sym:
        return const(math.tanh(a))
    return a.g.node("tanh", a)


def sign(a: object) -> object:
    """sign(a), 0 at 0."""
    a = const(a)
    if type(a) is not Sym:
        return const(float((a > 0.0) - (a < 0.0)))
    return a.g.node("sign", a)


def atan2(y: object, x: object) -> object:
    y, x = const(y), const(x)
    if type(y) is not Sym and type(x) is not Sym:
        return const(math.atan2(y, x))
    return _graph(y, x).node("atan2", y, x)


def reachable(g: Graph, roots: Iterable[object]) -> list[int]:
    """Ids of the nodes `roots` depend on, in creation order."""
    seen: set[int] = set()
    stack = [r.i for r in roots if type(r) is Sym]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for x in g.operands(i):
            if isinstance(x, int) and x not in seen:
                stack.append(x)
    return sorted(seen)


def schedule(g: Graph, roots: Sequence[object]) -> list[int]:
    """An emission order for the nodes `roots` need: a depth-first post-order taken root
    by root, so that each output's expression is completed before the next one starts
    (short live ranges: one gradient column at a time), shared nodes at first use."""
    done: set[int] = set()
    order: list[int] = []
    for root in roots:
        if type(root) is not Sym or root.i in done:
            continue
        stack: list[tuple[int, bool]] = [(root.i, False)]
        while stack:
            i, expanded = stack.pop()
            if i in done:
                continue
            if expanded:
                done.add(i)
                order.append(i)
                continue
            stack.append((i, True))
            a, b = g.operands(i)
            # Push b first so that a is emitted first (left-to-right evaluation).
            for x in (b, a):
                if isinstance(x, int) and x not in done:
                    stack.append((x, False))
    return order
