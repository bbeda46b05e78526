"""The joint-space mass matrix by the composite-rigid-body algorithm.

Composite pass (leaves to root, one level per step): `Ic_i = I_i + sum_children Icp_c`,
`Icp_i = Ic_i` expressed in the parent frame. Composite inertias of rigid bodies are
rigid-body inertias, so they stay in the 10-parameter form and move between frames with
`inertia_to_parent` (no 6x6 products).
Column pass (one lane per dof k of body i, all independent): `F = Ic_i S_k`,
`M[r, k] = S_r^T F` for the dofs r of body i, then up the ancestors j:
`F <- X^T F`, `M[r, k] = M[k, r] = S_r^T F`. Each lane writes only its column and the
mirrored row of its ancestors' dofs, so the full symmetric M needs no second pass. The
lanes run one loop body over tables of the tree, not a case per column.

Algorithm `crba`: input q (nq); output M (nv, nv), full and symmetric.
"""

from __future__ import annotations

import math

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.joints import subspace_terms
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.writer import Writer


def add_crba_buffers(ctx: EmitContext, L: Layout) -> None:
    L.add("Ic", 10, ctx.model.nb, doc="composite inertias (10 parameters, body frame)")
    L.add("Icp", 10, ctx.model.nb, doc="composite inertias in the parent frame")


def emit_crba_passes(ctx: EmitContext, w: Writer, L: Layout, M: Buffer, stride: int) -> None:
    """Fill `M[r * stride + k]` (r, k < nv) from the transforms `X`; the columns past nv
    of a wider `stride` are left untouched."""
    model = ctx.model

    # Blocks of M between dofs on different branches stay zero; no column writes them.
    with ctx.strategy.parallel(w, "e", model.nv * model.nv):
        w.line(f"{M[f'(e / {model.nv}) * {stride} + e % {model.nv}']} = T(0);")
    _emit_composites(ctx, w, L)
    _emit_columns(ctx, w, L, M, stride)
    ctx.strategy.barrier(w)


def _table(w: Writer, kind: str, name: str, values: list) -> None:
    """A constant table of the tree, local to the item function (global memory read
    through the read-only cache on the GPU, where lanes index it apart)."""
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"cannot emit the table {name}: it holds a non-finite value")
    w.line(f"static const {kind} {name}[{max(len(values), 1)}] = "
           f"{{{', '.join(repr(v) for v in values) or '0'}}};")


def _emit_composites(ctx: EmitContext, w: Writer, L: Layout) -> None:
    """The composite pass, a level at a time from the leaves, one body per lane with one
    loop body for all: `Ic_i = I_i + sum_children Icp_c`, `Icp_i = Ic_i` in the parent
    frame."""
    model = ctx.model
    X, Ic, Icp = L["X"], L["Ic"], L["Icp"]
    levels = [level for level in reversed(model.levels) if level]
    order = [i for level in levels for i in level]
    child_start, child_list = [0], []
    for kids in model.children:
        child_list.extend(kids)
        child_start.append(len(child_list))
    w.comment("composite inertias: one body per lane, a level at a time from the leaves")
    with w.block():
        _table(w, "short", "crba_order", order)
        _table(w, "short", "crba_child_start", child_start)
        _table(w, "short", "crba_children", child_list)
        _table(w, "short", "crba_parent", list(model.parents))
        if not ctx.options.runtime_inertia:
            _table(w, "double", "crba_inertia", [float(x) for b in model.bodies
                                                 for x in b.inertia.dynamic_parameters()])
        offset = 0
        for level in levels:
            with ctx.strategy.parallel(w, "u", len(level)):
                w.line(f"const int i = crba_order[{offset} + u];")
                w.line(f"T* Ici = {Ic.var} + 10 * i;")
                inertia = ("args.inertia[10 * i + k]" if ctx.options.runtime_inertia
                           else "T(crba_inertia[10 * i + k])")
                w.line(f"for (int k = 0; k < 10; ++k) Ici[k] = {inertia};")
                with w.block("for (int c = crba_child_start[i]; c < crba_child_start[i + 1]; ++c)"):
                    w.line(f"const T* Icc = {Icp.var} + 10 * crba_children[c];")
                    w.line("for (int k = 0; k < 10; ++k) Ici[k] += Icc[k];")
                w.line(f"if (crba_parent[i] >= 0) inertia_to_parent({X.var} + 12 * i, Ici, "
                       f"{Icp.var} + 10 * i);")
            ctx.strategy.barrier(w)
            offset += len(level)


def _emit_columns(ctx: EmitContext, w: Writer, L: Layout, M: Buffer, stride: int) -> None:
    """The column pass as one loop body for every lane: the dof's body, the bodies'
    parents and dof ranges, and the motion subspace columns are tables, so the lanes of a
    warp walk their columns together (a `switch` per column would run them one at a
    time: g1's 35 columns)."""
    model = ctx.model
    X, Ic = L["X"], L["Ic"]
    first = [joint.idx_v for joint in model.joints] + [model.nv]
    subspace: list[float] = []
    for joint in model.joints:
        for terms in subspace_terms(joint):
            column = [0.0] * 6
            for r, c in terms:
                column[r] = c
            subspace.extend(column)
    body_of = [body for body, _ in ctx.dof_body()]

    def row(mirror: bool) -> None:  # M[r, k] = S_r^T F over the dofs r of body j
        with w.block("for (int r = crba_first_dof[j]; r < crba_first_dof[j + 1]; ++r)"):
            w.line("T m = T(0);")
            w.line("for (int e = 0; e < 6; ++e) m += T(crba_subspace[6 * r + e]) * F[e];")
            w.line(f"{M.var}[r * {stride} + k] = m;")
            if mirror:
                w.line(f"{M.var}[k * {stride} + r] = m;")

    w.comment("mass matrix columns: one per lane, up the tree to the root")
    with ctx.strategy.parallel(w, "k", model.nv):
        _table(w, "short", "crba_body_of", body_of)
        _table(w, "short", "crba_parent", list(model.parents))
        _table(w, "short", "crba_first_dof", first)
        _table(w, "double", "crba_subspace", subspace)
        w.line("int j = crba_body_of[k];")
        w.line("T S[6], F[6], G[6];")
        w.line("for (int e = 0; e < 6; ++e) S[e] = T(crba_subspace[6 * k + e]);")
        w.line(f"inertia_apply({Ic.var} + 10 * j, S, F);")
        row(mirror=False)
        with w.block("while (crba_parent[j] >= 0)"):
            w.line(f"force_to_parent({X.var} + 12 * j, F, G);")
            w.line("for (int e = 0; e < 6; ++e) F[e] = G[e];")
            w.line("j = crba_parent[j];")
            row(mirror=True)


def add_kinematic_buffers(ctx: EmitContext, L: Layout) -> None:
    L.add("q", ctx.model.nq, doc="configuration")
    L.add("X", 12, ctx.model.nb, doc="parent -> body placements")


def crba(ctx: EmitContext) -> AlgorithmSpec:
    nv = ctx.model.nv
    L = Layout("crba")
    add_kinematic_buffers(ctx, L)
    add_crba_buffers(ctx, L)
    M = L.add("M", nv, nv, doc="mass matrix, row-major")
    port_q = Port("q", ctx.model.nq)

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], port_q)])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_crba_passes(ctx, w, L, M, nv)
        with ctx.strategy.parallel(w, "e", nv * nv):
            w.line(f"out[e] = {M['e']};")
        ctx.strategy.barrier(w)

    return AlgorithmSpec(
        name="crba", doc="The joint-space mass matrix M(q): out (nv x nv), symmetric.",
        inputs=(port_q,), output_shape=(nv, nv), uses_gravity=False, layout=L,
        emit_body=body)
