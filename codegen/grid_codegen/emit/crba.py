"""The joint-space mass matrix by the composite-rigid-body algorithm.

Composite pass (leaves to root, one level per step): `Ic_i = I_i + sum_children Icp_c`,
`Icp_i = Ic_i` expressed in the parent frame. Composite inertias of rigid bodies are
rigid-body inertias, so they stay in the 10-parameter form and move between frames with
`inertia_to_parent` (no 6x6 products).
Column pass (one unit per dof k of body i, all independent): `F = Ic_i S_k`,
`M[r, k] = S_r^T F` for the dofs r of body i, then up the ancestors j:
`F <- X^T F`, `M[r, k] = M[k, r] = S_r^T F`. Each thread writes only its column and the
mirrored row of its ancestors' dofs, so the full symmetric M needs no second pass.

Algorithm `crba`: input q (nq); output M (nv, nv), full and symmetric.
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.joints import emit_subspace_column, subspace_transpose_times
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.writer import Writer, comment_text


def add_crba_buffers(ctx: EmitContext, L: Layout) -> None:
    L.add("Ic", 10, ctx.model.nb, doc="composite inertias (10 parameters, body frame)")
    L.add("Icp", 10, ctx.model.nb, doc="composite inertias in the parent frame")


def emit_crba_passes(ctx: EmitContext, w: Writer, L: Layout, M: Buffer, stride: int) -> None:
    """Fill `M[r * stride + k]` (r, k < nv) from the transforms `X`; the columns past nv
    of a wider `stride` are left untouched."""
    model = ctx.model
    X, Ic, Icp = L["X"], L["Ic"], L["Icp"]
    dof_body = ctx.dof_body()

    def composite(w: Writer, i: int) -> None:
        joint = model.joints[i]
        ctx.emit_inertia(w, i)
        w.line(f"T* Ici = {Ic.at(i)};")
        children = "".join(f" + {Icp.at(c)}[k]" for c in model.children[i])
        w.line(f"for (int k = 0; k < 10; ++k) Ici[k] = I[k]{children};")
        if joint.parent >= 0:
            w.line(f"inertia_to_parent({X.at(i)}, Ici, {Icp.at(i)});")

    def column(w: Writer, k: int) -> None:
        i, d = dof_body[k]
        joint = model.joints[i]
        w.comment(f"column {k}: dof {d} of joint '{comment_text(joint.name)}'")
        emit_subspace_column(w, joint, d, "S")
        w.line("T F[6], G[6];")
        w.line(f"inertia_apply({Ic.at(i)}, S, F);")
        for r in range(joint.nv):
            w.line(f"{M.var}[{joint.idx_v + r} * {stride} + {k}] = "
                   f"{subspace_transpose_times(joint, r, 'F')};")
        current, spare, j = "F", "G", i
        while model.joints[j].parent >= 0:
            w.line(f"force_to_parent({X.at(j)}, {current}, {spare});")
            current, spare, j = spare, current, model.joints[j].parent
            ancestor = model.joints[j]
            for r in range(ancestor.nv):
                row = ancestor.idx_v + r
                with w.block():
                    w.line(f"const T m = {subspace_transpose_times(ancestor, r, current)};")
                    w.line(f"{M.var}[{row} * {stride} + {k}] = m;")
                    w.line(f"{M.var}[{k} * {stride} + {row}] = m;")

    # Blocks of M between dofs on different branches stay zero; no column writes them.
    with ctx.strategy.parallel(w, "e", model.nv * model.nv):
        w.line(f"{M[f'(e / {model.nv}) * {stride} + e % {model.nv}']} = T(0);")
    ctx.strategy.schedule(w, tuple(reversed(model.levels)), composite, "composite inertias")
    ctx.strategy.schedule(w, [tuple(range(model.nv))], column, "mass matrix columns")


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
