"""The inverse mass matrix, and the dense solves the dynamics share.

`minv` builds M with the CRBA passes and inverts it in place by Gauss-Jordan
elimination without pivoting (stable for symmetric positive-definite M). Each pivot step
is three block-wide phases: save the pivot column, scale the pivot row, eliminate every
other row; a barrier separates them. The result is symmetrised, `(A + A^T) / 2`, so the
returned inverse is exactly symmetric.

Algorithm `minv`: input q (nq); output M^-1 (nv, nv), full and symmetric.
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.crba import add_crba_buffers, add_kinematic_buffers, emit_crba_passes
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.writer import Writer


def emit_gauss_jordan_inverse(ctx: EmitContext, w: Writer, A: Buffer, n: int,
                              col: Buffer) -> None:
    """Invert the SPD `A` (n x n, row-major) in place; `col` holds n scalars."""
    s = ctx.strategy
    s.note_width(n * n)
    with w.block(f"for (int p = 0; p < {n}; ++p)"):
        with s.parallel(w, "i", n):
            w.line(f"{col['i']} = {A[f'i * {n} + p']};")
        s.barrier(w)
        with s.parallel(w, "j", n):
            w.line(f"T* a = &{A[f'p * {n} + j']};")
            w.line(f"*a = (j == p ? T(1) : *a) / {col['p']};")
        s.barrier(w)
        with s.parallel(w, "e", n * n):
            w.line(f"const int i = e / {n};")
            w.line(f"const int j = e % {n};")
            with w.block("if (i != p)"):
                w.line(f"T* a = &{A['e']};")
                w.line(f"*a = (j == p ? T(0) : *a) - {col['i']} * {A[f'p * {n} + j']};")
        s.barrier(w)


def emit_gauss_jordan_solve(ctx: EmitContext, w: Writer, A: Buffer, n: int, width: int,
                            col: Buffer) -> None:
    """Solve in place `[M | B]` (n x width, row-major; M SPD in the first n columns):
    afterwards columns n..width-1 hold `M^-1 B`."""
    s = ctx.strategy
    s.note_width(n * (width - 1))
    with w.block(f"for (int p = 0; p < {n}; ++p)"):
        w.line(f"const int rest = {width - 1} - p;  // columns right of the pivot")
        with s.parallel(w, "i", n):
            w.line(f"{col['i']} = {A[f'i * {width} + p']};")
        s.barrier(w)
        with s.parallel(w, "j", "rest"):
            w.line(f"{A[f'p * {width} + p + 1 + j']} /= {col['p']};")
        s.barrier(w)
        with s.parallel(w, "e", f"{n} * rest"):
            w.line("const int i = e / rest;")
            w.line("const int j = p + 1 + e % rest;")
            with w.block("if (i != p)"):
                w.line(f"{A[f'i * {width} + j']} -= {col['i']} * {A[f'p * {width} + j']};")
        s.barrier(w)


def minv(ctx: EmitContext) -> AlgorithmSpec:
    nv = ctx.model.nv
    L = Layout("minv")
    add_kinematic_buffers(ctx, L)
    add_crba_buffers(ctx, L)
    M = L.add("M", nv, nv, doc="mass matrix, inverted in place")
    col = L.add("col", nv, doc="pivot column of the elimination")
    port_q = Port("q", ctx.model.nq)

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], port_q)])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_crba_passes(ctx, w, L, M, nv)
        emit_gauss_jordan_inverse(ctx, w, M, nv, col)
        with ctx.strategy.parallel(w, "e", nv * nv):
            w.line(f"const int i = e / {nv};")
            w.line(f"const int j = e % {nv};")
            w.line(f"out[e] = T(0.5) * ({M[f'i * {nv} + j']} + {M[f'j * {nv} + i']});")
        ctx.strategy.barrier(w)

    return AlgorithmSpec(
        name="minv", doc="The inverse mass matrix M(q)^-1: out (nv x nv), symmetric.",
        inputs=(port_q,), output_shape=(nv, nv), uses_gravity=False, layout=L,
        emit_body=body)
