"""The inverse mass matrix of the level strategies.

`minv` builds M with the CRBA passes and factors it as `L^T D L` along the tree
(`grid_codegen.emit.tree_ldlt`). Lane j then solves for column j of M^-1 in registers and
keeps its entries below the diagonal, in the free upper triangle of M (row j) and the
diagonal beside it; the output reads each entry from the lane that owns its lower
triangle, so M^-1 is exactly symmetric.

Algorithm `minv`: input q (nq); output M^-1 (nv, nv), full and symmetric.
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.crba import add_crba_buffers, add_kinematic_buffers, emit_crba_passes
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.tree_ldlt import emit_tree_ldlt, emit_tree_ldlt_solve
from grid_codegen.emit.writer import Writer


def minv(ctx: EmitContext) -> AlgorithmSpec:
    nv = ctx.model.nv
    L = Layout("minv")
    add_kinematic_buffers(ctx, L)
    add_crba_buffers(ctx, L)
    M = L.add("M", nv, nv, doc="mass matrix; its factor below, M^-1 above the diagonal")
    dinv = L.add("dinv", nv, doc="D^-1 of the factor")
    diag = L.add("diag", nv, doc="diagonal of M^-1")
    port_q = Port("q", ctx.model.nq)

    def keep(r: int, value: str) -> str:  # x_j[r] of lane j, kept where its owner reads
        return (f"if (j < {r}) {M[f'j * {nv} + {r}']} = {value}; "
                f"else if (j == {r}) {diag['j']} = {value};")

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], port_q)])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_crba_passes(ctx, w, L, M, nv)
        emit_tree_ldlt(ctx, w, M, nv, nv, dinv)
        s = ctx.strategy
        with s.parallel(w, "j", nv):  # column j of M^-1 on lane j
            emit_tree_ldlt_solve(ctx, w, M, nv, nv, dinv,
                                 lambda r: f"(j == {r} ? T(1) : T(0))", keep)
        s.barrier(w)
        with s.parallel(w, "e", nv * nv):
            w.line(f"const int i = e / {nv};")
            w.line(f"const int j = e % {nv};")
            w.line(f"out[e] = i < j ? {M[f'i * {nv} + j']} : "
                   f"(i > j ? {M[f'j * {nv} + i']} : {diag['i']});")
        s.barrier(w)

    return AlgorithmSpec(
        name="minv", doc="The inverse mass matrix M(q)^-1: out (nv x nv), symmetric.",
        inputs=(port_q,), output_shape=(nv, nv), uses_gravity=False, layout=L,
        emit_body=body)
