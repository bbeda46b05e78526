"""The gather strategy's head in groups of bodies: one thread per (item, group).

The memory form's first kernel (go2, g1) computed an item's head on one thread: for g1
a straight-line pass of 19,400 operations over an 11 KB stack, 526 us at B = 1,024 on an
H100 (1,024 threads, each a latency-bound chain), as long as the entry kernel after it.
A body's entries of K (its dofs' columns, then its inertia, `BC` term and net force)
need only the placements, velocities and accelerations of its own chain, so a group of
bodies is a pass of its own: the whole table traced from `q`, every entry outside the
group dead code. Each group recomputes its chain (the placements from `q` too), which
costs work for latency. At 2,500 operations a group (g1: 12 groups, at most 2,441 each,
254 registers) the first kernel took 111.3 us at B = 1,024 on an H100; at 1,760 (24
groups, at most 1,766: its wrists' own chains; 168 registers) 101.6 us. At 1,200 (30
groups, the same longest; 128 registers, so more warps an SM; 6% more work in all) the
head of `idsva_so` takes 73.7 us against 79.6 at 1,024 and 705 against 730 at 16,384
(H100, `tools/bench/gather_probe`; a limit of 900 gives g1 and go2 the same groups).
go2: 13 groups of at most 1,026 operations (7 of at most 1,677 at 1,760).

Groups are runs of consecutive bodies (the tree's depth-first order, so mostly a parent
and its children, which share a chain) of at most GROUP_OPS traced operations, a body
heavier than that alone; the first group also writes the head's padding. The first
kernel (`emit.idsva_gather`) runs one thread per (item, group), group-major with the items
padded to whole warps, so a warp runs one group's code. The host runs the groups one
after the other per item (so the CPU build's tests check them against the reference).
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit import second_order as SO
from grid_codegen.emit.idsva_gather_layout import COLUMN_STRIDE, layout, pad_columns, tile_of
from grid_codegen.emit.thread import ThreadItem, _Plan, item_params
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

GROUP_OPS = 1200
"""Traced operations per group (a body heavier than that is a group of its own)."""

MIN_BODIES = 8
"""Fewer bodies than this keep the single head (its chain is short already)."""


def _head_table(model: RobotModel, plan: _Plan, head_size: int) -> Callable:
    """`fn(q, qd, acc, f_ext, [transform,] I, g)`: the head in its padded layout, as
    `idsva_gather.build_head_items` writes it, from the placements on."""

    def table(q, qd, acc, fext, *rest):
        *extra, inertias, gravity = rest
        X = plan.placements(q, extra[0] if extra else None)
        out = pad_columns(model, idsva.forward_table(model, X, inertias, qd, acc, fext,
                                                     gravity))
        return out + [0.0] * (head_size - len(out))

    return table


def _body_entries(model: RobotModel, b: int) -> list[int]:
    """The head's entries of body `b`: its dofs' columns (24 each), then its 52."""
    joint = model.joints[b]
    cols = [COLUMN_STRIDE * d + k for d in range(joint.idx_v, joint.idx_v + joint.nv)
            for k in range(24)]
    start = COLUMN_STRIDE * model.nv + 52 * b
    return cols + list(range(start, start + 52))


def head_groups(model: RobotModel, plan: _Plan, arrays: list[Array], head_size: int
                ) -> list[list[int]]:
    """The head's entries in groups of at most GROUP_OPS traced operations, every entry
    in exactly one; `[]` for a model with fewer than MIN_BODIES bodies."""
    if model.nb < MIN_BODIES:
        return []
    trace = SO._SweepTrace(plan, arrays, _head_table(model, plan, head_size))
    groups: list[list[int]] = []
    current: list[int] = []
    for b in range(model.nb):
        mine = _body_entries(model, b)
        if current and trace.count(current + mine) > GROUP_OPS:
            groups.append(current)
            current = []
        current = current + mine
    groups.append(current)
    owned = {k for group in groups for k in group}
    groups[0] = groups[0] + [k for k in range(head_size) if k not in owned]
    return groups


def build_group_items(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                      runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                      runtime_transform: bool = False) -> list[ThreadItem]:
    """`<name>_gather_head_g<k>(inputs, inertia, gravity, out[, transform])`: group k's
    entries of the head, entry e at `out[tile e]` (the first kernel's layout); `[]` where
    groups do not apply (fdsva_so, whose M^-1 and dtau need the whole tree; the tile
    form; a small tree)."""
    lay = layout(model, False)
    if algorithm.name != "idsva_so" or lay.tile:
        return []
    tile = tile_of(algorithm.output_size(dims))
    plan = _Plan(model, ee_frames, runtime_inertia, library, None, runtime_transform)
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    acc = Array.runtime("acc", model.nv, "item")  # its pattern, for the trace
    extra = plan.transform_array()
    groups = head_groups(model, plan, [ports["q"], ports["qd"], acc, ports["f_ext"], *extra],
                         lay.head)
    items = []
    for k, entries in enumerate(groups):
        kb = ItemBuilder(library)
        plan.dynamics_call(
            kb, f"{algorithm.name}_head_part{k}",
            f"Group {k} of the head of {algorithm.name}'s gather strategy "
            f"(emit.idsva_head_groups): {len(entries)} entries of K"
            + (f", entry e at out[{tile} e]." if tile > 1 else "."),
            _head_table(model, plan, lay.head),
            [ports["q"], ports["qd"], SO._acceleration(kb, ports), ports["f_ext"], *extra],
            Array.runtime("out", lay.head, "out"), write=sorted(entries), out_stride=tile,
            vector_stores=tile == 1)
        name = f"{algorithm.name}_gather_head_g{k}"
        kb.emit_item_function(w, name, f"Group {k} of the head of `{algorithm.name}`'s "
                              "gather strategy (`emit.idsva_head_groups`).",
                              item_params(algorithm, dims, False, runtime_transform))
        w.line()
        items.append(ThreadItem(name, kb.total_ops))
    return items


__all__ = ["GROUP_OPS", "MIN_BODIES", "build_group_items", "head_groups"]
