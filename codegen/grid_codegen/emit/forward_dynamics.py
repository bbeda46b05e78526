"""Forward dynamics through the mass matrix: `qdd = M^-1 (u - c)`.

The bias `c = ID(q, qd, 0, f_ext)` (RNEA without acceleration) is written straight into
the last column of the augmented system `[M | u - c]`, M comes from the CRBA passes, is
factored along the tree (`grid_codegen.emit.tree_ldlt`), and one lane solves for `qdd`.

Algorithm `forward_dynamics`: inputs q (nq), qd (nv), u (nv), f_ext (6 nb, optional);
output qdd (nv).
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.crba import add_crba_buffers, add_kinematic_buffers, emit_crba_passes
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.passive import emit_passive_torque
from grid_codegen.emit.rnea import add_rnea_buffers, emit_rnea_passes
from grid_codegen.emit.tree_ldlt import emit_tree_ldlt, emit_tree_ldlt_solve
from grid_codegen.emit.writer import Writer


def forward_dynamics(ctx: EmitContext) -> AlgorithmSpec:
    model = ctx.model
    nv = model.nv
    width = nv + 1
    L = Layout("forward_dynamics")
    add_kinematic_buffers(ctx, L)
    L.add("qd", nv, doc="velocity")
    L.add("u", nv, doc="joint torques")
    add_rnea_buffers(ctx, L)
    add_crba_buffers(ctx, L)
    A = L.add("A", width, nv, doc="augmented system [M | u - c], row-major")
    dinv = L.add("dinv", nv, doc="D^-1 of M's factor")
    ports = (Port("q", model.nq), Port("qd", nv), Port("u", nv),
             Port("f_ext", 6 * model.nb, False))

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], ports[0]), (L["qd"], ports[1]), (L["u"], ports[2])])
        emit_passive_torque(ctx, w, L["qd"], lambda k: L["u"][k], "-")
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_rnea_passes(ctx, w, L, False, "in_f_ext", lambda k: A[f"{k} * {width} + {nv}"])
        emit_crba_passes(ctx, w, L, A, width)
        with ctx.strategy.parallel(w, "i", nv):
            w.line(f"T* rhs = &{A[f'i * {width} + {nv}']};")
            w.line(f"*rhs = {L['u']['i']} - *rhs;")
        ctx.strategy.barrier(w)
        emit_tree_ldlt(ctx, w, A, nv, width, dinv)
        with ctx.strategy.single(w):
            emit_tree_ldlt_solve(ctx, w, A, nv, width, dinv,
                                 lambda r: A[r * width + nv], lambda r, v: f"out[{r}] = {v};")
        ctx.strategy.barrier(w)

    return AlgorithmSpec(
        name="forward_dynamics",
        doc="qdd = M(q)^-1 (u - c(q, qd, f_ext)) through the mass matrix: out (nv).",
        inputs=ports, output_shape=(nv,), uses_gravity=True, layout=L, emit_body=body)
