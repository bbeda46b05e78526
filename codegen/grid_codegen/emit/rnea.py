"""Inverse dynamics by the recursive Newton-Euler algorithm, in local body frames.

Forward pass (root to leaves, one tree level per step):
  `v_i = X_i v_p + S_i qd_i`, `a_i = X_i a_p + S_i qdd_i + v_i x (S_i qd_i)`,
  `f_i = I_i a_i + v_i x* (I_i v_i) - f_ext_i`, with `a_root = -g` (signed gravity on z).
Backward pass (leaves to root): `f_i += sum_children X_c^T f_c`, `tau_i = S_i^T f_i`.
A child writes `X_c^T f_c` to its own slot `fp_c` and the parent sums its children's
slots one step later, so a tree level runs without atomics.

Algorithm `inverse_dynamics`: inputs q (nq), qd (nv), qdd (nv, optional: zero), f_ext
(6 nb, optional; one `[force; torque]` per body in its frame); output tau (nv).
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.joints import emit_subspace_add, subspace_transpose_times
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.passive import emit_passive_torque
from grid_codegen.emit.writer import Writer, comment_text


def add_rnea_buffers(ctx: EmitContext, L: Layout) -> None:
    """Per-body `v`, `a`, `f` and the child-to-parent force slots `fp`."""
    nb = ctx.model.nb
    L.add("v", 6, nb, doc="body spatial velocities")
    L.add("a", 6, nb, doc="body spatial accelerations")
    L.add("f", 6, nb, doc="body spatial forces")
    L.add("fp", 6, nb, doc="X^T f of each body, summed by its parent")


def emit_rnea_passes(ctx: EmitContext, w: Writer, L: Layout, with_qdd: bool,
                     fext: str | None, tau: Callable[[int], str]) -> None:
    """RNEA over loaded `q`, `qd` (and `qdd` when `with_qdd`) and transforms `X`;
    `fext` is the item's f_ext pointer (may be NULL at run time; None: the algorithm
    takes none), `tau(k)` the lvalue of torque k."""
    model = ctx.model
    X, v, a, f, fp = L["X"], L["v"], L["a"], L["f"], L["fp"]
    qd = L["qd"]
    qdd = L["qdd"] if with_qdd else None

    def forward(w: Writer, i: int) -> None:
        joint = model.joints[i]
        w.comment(f"body {i}: joint '{comment_text(joint.name)}'")
        ctx.emit_inertia(w, i)
        w.line(f"T* vi = {v.at(i)};")
        w.line(f"T* ai = {a.at(i)};")
        w.line(f"T* fi = {f.at(i)};")
        if joint.parent >= 0:
            w.line(f"motion_to_child({X.at(i)}, {v.at(joint.parent)}, vi);")
            w.line(f"motion_to_child({X.at(i)}, {a.at(joint.parent)}, ai);")
        else:
            w.line("const T a_root[6] = {T(0), T(0), -args.gravity, T(0), T(0), T(0)};")
            w.line("for (int k = 0; k < 6; ++k) vi[k] = T(0);")
            w.line(f"motion_to_child({X.at(i)}, a_root, ai);")
        w.line("T vj[6] = {T(0), T(0), T(0), T(0), T(0), T(0)};")
        emit_subspace_add(w, joint, lambda d: qd[joint.idx_v + d], "vj")
        w.line("for (int k = 0; k < 6; ++k) vi[k] += vj[k];")
        if qdd is not None:
            emit_subspace_add(w, joint, lambda d: qdd[joint.idx_v + d], "ai")
        w.line("motion_cross_add(vi, vj, ai);")
        w.line("T h[6];")
        w.line("inertia_apply(I, vi, h);")
        w.line("inertia_apply(I, ai, fi);")
        w.line("force_cross_add(vi, h, fi);")
        if fext is not None:
            with w.block(f"if ({fext} != nullptr)"):
                w.line(f"for (int k = 0; k < 6; ++k) fi[k] -= {fext}[{6 * i} + k];")

    def backward(w: Writer, i: int) -> None:
        joint = model.joints[i]
        w.line(f"T* fi = {f.at(i)};")
        for c in model.children[i]:
            w.line(f"for (int k = 0; k < 6; ++k) fi[k] += {fp.at(c)}[k];")
        for d in range(joint.nv):
            w.line(f"{tau(joint.idx_v + d)} = {subspace_transpose_times(joint, d, 'fi')};")
        if joint.parent >= 0:
            w.line(f"force_to_parent({X.at(i)}, fi, {fp.at(i)});")

    ctx.strategy.schedule(w, model.levels, forward, "rnea forward pass")
    ctx.strategy.schedule(w, tuple(reversed(model.levels)), backward, "rnea backward pass")


def inverse_dynamics(ctx: EmitContext) -> AlgorithmSpec:
    model = ctx.model
    L = Layout("inverse_dynamics")
    L.add("q", model.nq, doc="configuration")
    L.add("qd", model.nv, doc="velocity")
    L.add("qdd", model.nv, doc="acceleration (zero when absent)")
    L.add("X", 12, model.nb, doc="parent -> body placements")
    add_rnea_buffers(ctx, L)
    ports = (Port("q", model.nq), Port("qd", model.nv), Port("qdd", model.nv, False),
             Port("f_ext", 6 * model.nb, False))

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], ports[0]), (L["qd"], ports[1]), (L["qdd"], ports[2])])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_rnea_passes(ctx, w, L, True, "in_f_ext", lambda k: f"out[{k}]")
        emit_passive_torque(ctx, w, L["qd"], lambda k: f"out[{k}]", "+")

    return AlgorithmSpec(
        name="inverse_dynamics",
        doc="tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext: out (nv).",
        inputs=ports, output_shape=(model.nv,), uses_gravity=True, layout=L,
        emit_body=body)

