"""Jacobian passes in groups of consecutive columns (the thread strategy's and the plant
step's): each group one register-resident pass that writes its columns of the output
directly, recomputing the primal values it needs, planned from one trace of the whole
Jacobian."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from grid_codegen.symbolic import graph as G
from grid_codegen.symbolic.emit import Array, ItemBuilder

if TYPE_CHECKING:
    from grid_codegen.emit.thread import _Plan


class TooLarge(Exception):
    """The thread strategy of an algorithm would exceed the operations allowed."""

    def __init__(self, ops: int) -> None:
        super().__init__(f"{ops} traced operations")
        self.ops = ops


GROUP_OPS = 5000
"""Traced operations per column group of a Jacobian pass: each group is one
register-resident block (it recomputes the primal values it needs)."""

GROUP_OVERHEAD = 1.25
"""Groups are used while their operations add up to at most this times the Jacobian's
(iiwa14's FD gradient: 2 groups, 1.04x: 3.3 -> 2.1 ns/item on an H200; go2's ID
gradient: 6 groups, 1.22x: 25.3 -> 23.4 ns/item)."""


def column_groups(plan: _Plan, kb: ItemBuilder, name: str, doc: str, fn: Callable,
                   arrays: list[Array], out: Array, rows: int, cols: int,
                   max_ops: int | None = None) -> None:
    """`fn` (a row-major `rows x cols` Jacobian) as passes over groups of consecutive
    columns, each written straight to `out` and at most GROUP_OPS operations: the
    derivatives and what consumes them (the FD gradient's product with M^-1) stay in
    registers, and no `rows x cols` array goes through memory. The groups come from one
    trace of the whole Jacobian: a group's cost is the operations its columns reach."""
    groups, total, grouped = plan_groups(plan, fn, arrays, rows, cols)
    if max_ops is not None and total > max_ops:
        raise TooLarge(total)
    if grouped > GROUP_OVERHEAD * total:
        # Each group recomputes the primal values it needs: past this share the repeats
        # cost more than register residency gains; one pass (segmented) then.
        groups = [list(range(cols))]
    for k, group in enumerate(groups):
        label = name if len(groups) == 1 else f"{name}_g{k}"
        written = [r * cols + c for c in group for r in range(rows)]

        def traced(*values, group=group):
            return fn(*values, columns=group)

        plan.dynamics_call(kb, label, f"{doc}; columns {group[0]}..{group[-1]}.", traced,
                           arrays, out, passive=True, write=written, schedule_order=written)


def plan_groups(plan: _Plan, fn: Callable, arrays: list[Array], rows: int, cols: int
                ) -> tuple[list[list[int]], int, int]:
    """Consecutive column groups of at most GROUP_OPS operations each, the operation count
    of the whole Jacobian and the sum of the groups' counts, from one trace of it."""
    g = G.Graph()
    joint = plan.joint_array(True)
    values = [[g.input(f"{a.name}[{k}]") if p is None else p for k, p in enumerate(a.pattern)]
              for a in arrays + plan.inertia_array() + joint]
    gravity = g.input("gravity")
    joint_table = values.pop() if joint else None
    table = values.pop() if plan.runtime_inertia else None
    result = fn(*values, plan.inertias(table), gravity, plan.passive(joint_table))
    groups: list[list[int]] = []
    seen: set[int] = set()
    current: list[int] = []
    grouped = 0
    for c in range(cols):
        roots = [result[r * cols + c] for r in range(rows)]
        new = [i for i in G.reachable(g, roots) if i not in seen and g.nodes[i][0] != "in"]
        if current and len(seen) + len(new) > GROUP_OPS:
            groups.append(current)
            grouped += len(seen)
            current, seen = [], set()
            new = [i for i in G.reachable(g, roots) if g.nodes[i][0] != "in"]
        current.append(c)
        seen.update(new)
    groups.append(current)
    grouped += len(seen)
    total = sum(1 for i in G.reachable(g, result) if g.nodes[i][0] != "in")
    return groups, total, grouped


__all__ = ["GROUP_OPS", "GROUP_OVERHEAD", "TooLarge", "column_groups", "plan_groups"]
