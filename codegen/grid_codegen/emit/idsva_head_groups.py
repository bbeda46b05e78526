"""The gather strategy's head in groups of bodies: one thread per (item, group).

The memory form's first kernel (go2, g1) computed an item's head on one thread: for g1
a straight-line pass of 19,400 operations over an 11 KB stack, 526 us at B = 1,024 on an
H100 (1,024 threads, each a latency-bound chain), as long as the entry kernel after it.
A body's entries of K (its dofs' columns, then its inertia, `BC` term and net force)
need only the placements, velocities and accelerations of its own chain, so a group of
bodies is a pass of its own: the whole table traced from `q`, every entry outside the
group dead code. Each group recomputes its chain (the placements from `q` too), which
costs work for latency: g1's longest group is a few thousand operations, all groups
together about twice the single head.

Groups are runs of consecutive bodies (the tree's depth-first order, so mostly a parent
and its children, which share a chain) of at most GROUP_OPS traced operations, a body
heavier than that alone; the first group also writes the head's padding. The threads
are group-major with the items padded to whole warps, so a warp runs one group's code.
The host runs the groups one after the other per item (so the CPU build's tests check
them against the reference).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grid_codegen.emit.thread import ThreadItem, _Plan, item_params
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import graph as GR
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

GROUP_OPS = 2500
"""Traced operations per group (a body heavier than that is a group of its own)."""

MIN_BODIES = 8
"""Fewer bodies than this keep the single head (its chain is short already)."""


def _head_table(model: RobotModel, plan: _Plan, head_size: int, column_stride: int
                ) -> Callable:
    """`fn(q, qd, acc, f_ext, [transform,] I, g)`: the head in its padded layout."""
    nv = model.nv

    def table(q, qd, acc, fext, *rest):
        *extra, inertias, gravity = rest
        X = plan.placements(q, extra[0] if extra else None)
        K = idsva.forward_table(model, X, inertias, qd, acc, fext, gravity)
        out: list = []
        for d in range(nv):
            out += [*K[24 * d:24 * d + 24], *[0.0] * (column_stride - 24)]
        out += K[24 * nv:]
        return out + [0.0] * (head_size - len(out))

    return table


def body_entries(model: RobotModel, b: int, column_stride: int) -> list[int]:
    """The head's entries of body `b`: its dofs' columns (24 each), then its 52."""
    joint = model.joints[b]
    cols = [column_stride * d + k for d in range(joint.idx_v, joint.idx_v + joint.nv)
            for k in range(24)]
    start = column_stride * model.nv + 52 * b
    return cols + list(range(start, start + 52))


def _trace(model: RobotModel, plan: _Plan, arrays: list[Array], head_size: int,
           column_stride: int) -> tuple[GR.Graph, list]:
    g = GR.Graph()
    inputs = [[g.input(f"{a.name}[{k}]") if p is None else p
               for k, p in enumerate(a.pattern)] for a in arrays]
    table = inputs.pop() if plan.runtime_inertia else None
    values = _head_table(model, plan, head_size, column_stride)(
        *inputs, plan.inertias(table), g.input("gravity"))
    return g, values


def head_groups(model: RobotModel, plan: _Plan, arrays: list[Array], head_size: int,
                column_stride: int, budget: int | None = None) -> list[list[int]]:
    """The head's entries in groups of at most `budget` (default GROUP_OPS) traced
    operations, every entry in exactly one; `[]` for a model with fewer than MIN_BODIES
    bodies."""
    if model.nb < MIN_BODIES:
        return []
    budget = GROUP_OPS if budget is None else budget
    g, values = _trace(model, plan, arrays + plan.inertia_array(), head_size,
                       column_stride)

    def cost(entries: Sequence[int]) -> int:
        return sum(1 for i in GR.reachable(g, [values[k] for k in entries])
                   if g.nodes[i][0] != "in")

    groups: list[list[int]] = []
    current: list[int] = []
    for b in range(model.nb):
        mine = body_entries(model, b, column_stride)
        if current and cost(current + mine) > budget:
            groups.append(current)
            current = []
        current = current + mine
    groups.append(current)
    owned = {k for group in groups for k in group}
    groups[0] = groups[0] + [k for k in range(head_size) if k not in owned]
    return groups


def build_group_items(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                      runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                      head_size: int, column_stride: int, tile: int,
                      runtime_transform: bool = False) -> list[ThreadItem]:
    """`<name>_gather_head_g<k>(inputs, inertia, gravity, out[, transform])`: group k's
    entries of the head, entry e at `out[tile e]`; `[]` where groups do not apply."""
    plan = _Plan(model, ee_frames, runtime_inertia, library, None, runtime_transform)
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    acc = Array.runtime("acc", model.nv, "item")  # qdd, zero where not given
    arrays = [ports["q"], ports["qd"], acc, ports["f_ext"], *plan.transform_array()]
    groups = head_groups(model, plan, arrays, head_size, column_stride)
    items = []
    for k, entries in enumerate(groups):
        kb = ItemBuilder(library)
        acc_local = kb.call("acceleration", "qdd (zero when not given), for the second-order "
                            "passes.", lambda a: list(a), [ports["qdd"]], "acc", dense=True)
        plan.dynamics_call(
            kb, f"{algorithm.name}_head_part{k}",
            f"Group {k} of the head of {algorithm.name}'s gather strategy "
            f"(emit.idsva_head_groups): {len(entries)} entries of K"
            + (f", entry e at out[{tile} e]." if tile > 1 else "."),
            _head_table(model, plan, head_size, column_stride),
            [ports["q"], ports["qd"], acc_local, ports["f_ext"], *plan.transform_array()],
            Array.runtime("out", head_size, "out"), write=sorted(entries), out_stride=tile)
        name = f"{algorithm.name}_gather_head_g{k}"
        kb.emit_item_function(w, name, f"Group {k} of the head of `{algorithm.name}`'s "
                              "gather strategy (`emit.idsva_head_groups`).",
                              item_params(algorithm, dims, False, runtime_transform))
        w.line()
        items.append(ThreadItem(name, kb.total_ops))
    return items


def emit_head_kernel(w: Writer, name: str, tile: int, width: int, groups: Sequence[str],
                     head_call: Callable[[str, str, str], str], block: int) -> None:
    """The first kernel over the head's groups: thread `t` runs group `t / lanes` of item
    `t % lanes` (the items of whole tiles, padded to whole warps: a warp runs one
    group's code)."""
    w.doc(f"First kernel of `{name}`: the heads of the items of whole tiles of {tile} items,\n"
          f"one thread per (item, group of bodies), {len(groups)} groups "
          f"(emit.idsva_head_groups), into the\nhead of their tile's output (entry k of item "
          f"j at tile * width + {tile} k + j).")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({block}) "
                 f"{name}_head_kernel(const Args<T> args)"):
        w.line(f"const size_t whole = (size_t)(args.batch / {tile}) * {tile};")
        w.line("const size_t lanes = (whole + 31) / 32 * 32;")
        with w.block(f"for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; "
                     f"t < lanes * {len(groups)}; t += (size_t)blockDim.x * gridDim.x)"):
            w.line("const size_t i = t % lanes;")
            w.line("if (i >= whole) continue;")
            w.line(f"T* const out = args.out + (i / {tile}) * {tile * width} + i % {tile};")
            with w.block("switch ((int)(t / lanes))"):
                for k, fn in enumerate(groups):
                    w.line(f"case {k}: {head_call(fn, 'i', 'out')}; break;")
                w.line("default: break;")


__all__ = ["GROUP_OPS", "MIN_BODIES", "body_entries", "build_group_items",
           "emit_head_kernel", "head_groups"]
