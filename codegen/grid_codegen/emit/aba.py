"""Forward dynamics by the articulated-body algorithm (Featherstone), local frames.

Pass 1 (root to leaves): `v_i = X_i v_p + S_i qd_i`, `c_i = v_i x (S_i qd_i)`,
  `IA_i = I_i`, `pA_i = v_i x* (I_i v_i) - f_ext_i`.
Pass 2 (leaves to root): add the children's slots to `IA_i`, `pA_i`; `U_i = IA_i S_i`,
  `D_i = S_i^T U_i`, `u_i = tau_i - S_i^T pA_i`; for a body with a parent,
  `Ia = IA_i - U_i D_i^-1 U_i^T`, `pa = pA_i + Ia c_i + U_i D_i^-1 u_i`, and the slots
  `X_i^T Ia X_i`, `X_i^T pa` go to the parent one step later (no atomics).
Pass 3 (root to leaves): `a' = X_i a_p + c_i`, `qdd_i = D_i^-1 (u_i - U_i^T a')`,
  `a_i = a' + S_i qdd_i`, with `a_root = -g`.
One-dof joints keep `U` (6) and `D^-1` (1); a free-flyer root (6 dofs, `S = 1`) has
`U = D = IA`, so pass 3 solves `IA qdd = u - IA a'` by a 6x6 Cholesky.

Algorithm `aba`: inputs q (nq), qd (nv), u (nv), f_ext (6 nb, optional); output qdd (nv).
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.crba import add_kinematic_buffers
from grid_codegen.emit.joints import emit_subspace_add, subspace_terms, subspace_transpose_times
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.passive import emit_passive_torque
from grid_codegen.emit.writer import Writer, linear_combination
from grid_codegen.model import JointType


def aba(ctx: EmitContext) -> AlgorithmSpec:
    model = ctx.model
    nb, nv = model.nb, model.nv
    for joint in model.joints:
        if joint.type is JointType.FREE_FLYER and joint.parent >= 0:
            raise NotImplementedError(f"aba: free-flyer joint '{joint.name}' below the root")
    L = Layout("aba")
    add_kinematic_buffers(ctx, L)
    qd, u_in = L.add("qd", nv, doc="velocity"), L.add("tau", nv, doc="joint torques")
    X = L["X"]
    v, c = L.add("v", 6, nb, doc="body velocities"), L.add("c", 6, nb, doc="bias accelerations")
    IA = L.add("IA", 36, nb, doc="articulated inertias (6x6, row-major)")
    IAp = L.add("IAp", 36, nb, doc="X^T Ia X of each body, summed by its parent")
    pA = L.add("pA", 6, nb, doc="articulated bias forces")
    pAp = L.add("pAp", 6, nb, doc="X^T pa of each body, summed by its parent")
    U = L.add("U", 6, nb, doc="IA S of one-dof joints")
    Dinv = L.add("Dinv", 1, nb, doc="(S^T IA S)^-1 of one-dof joints")
    u = L.add("u", nv, doc="tau - S^T pA")
    a = L.add("a", 6, nb, doc="body accelerations")
    ports = (Port("q", model.nq), Port("qd", nv), Port("u", nv),
             Port("f_ext", 6 * nb, False))

    def velocities(w: Writer, i: int) -> None:
        joint = model.joints[i]
        ctx.emit_inertia(w, i)
        w.line(f"T* vi = {v.at(i)};")
        if joint.parent >= 0:
            w.line(f"motion_to_child({X.at(i)}, {v.at(joint.parent)}, vi);")
        else:
            w.line("for (int k = 0; k < 6; ++k) vi[k] = T(0);")
        w.line("T vj[6] = {T(0), T(0), T(0), T(0), T(0), T(0)};")
        emit_subspace_add(w, joint, lambda d: qd[joint.idx_v + d], "vj")
        w.line("for (int k = 0; k < 6; ++k) vi[k] += vj[k];")
        w.line(f"T* ci = {c.at(i)};")
        w.line("for (int k = 0; k < 6; ++k) ci[k] = T(0);")
        w.line("motion_cross_add(vi, vj, ci);")
        w.line(f"inertia_to_matrix(I, {IA.at(i)});")
        w.line("T h[6];")
        w.line("inertia_apply(I, vi, h);")
        w.line(f"T* pi = {pA.at(i)};")
        w.line("for (int k = 0; k < 6; ++k) pi[k] = T(0);")
        w.line("force_cross_add(vi, h, pi);")
        with w.block("if (in_f_ext != nullptr)"):
            w.line(f"for (int k = 0; k < 6; ++k) pi[k] -= in_f_ext[{6 * i} + k];")

    def articulated(w: Writer, i: int) -> None:
        joint = model.joints[i]
        w.line(f"T* IAi = {IA.at(i)};")
        w.line(f"T* pi = {pA.at(i)};")
        for ch in model.children[i]:
            w.line(f"for (int k = 0; k < 36; ++k) IAi[k] += {IAp.at(ch)}[k];")
            w.line(f"for (int k = 0; k < 6; ++k) pi[k] += {pAp.at(ch)}[k];")
        for d in range(joint.nv):
            k = joint.idx_v + d
            w.line(f"{u[k]} = {u_in[k]} - {subspace_transpose_times(joint, d, 'pi')};")
        if joint.type is JointType.FREE_FLYER:
            return  # the root: pass 3 solves with IA directly
        terms = subspace_terms(joint)[0]
        w.line(f"T* Ui = {U.at(i)};")
        for r in range(6):
            row = linear_combination([(cf, f"IAi[{6 * r + k}]") for k, cf in terms])
            w.line(f"Ui[{r}] = {row};")
        w.line(f"const T dinv = T(1) / ({subspace_transpose_times(joint, 0, 'Ui')});")
        w.line(f"{Dinv[i]} = dinv;")
        if joint.parent < 0:
            return
        w.line("T Ia[36], pa[6];")
        with w.block("for (int r = 0; r < 6; ++r)"):
            w.line("for (int k = 0; k < 6; ++k) "
                   "Ia[6 * r + k] = IAi[6 * r + k] - Ui[r] * Ui[k] * dinv;")
        w.line(f"mat6_vec(Ia, {c.at(i)}, pa);")
        w.line(f"const T ud = {u[joint.idx_v]} * dinv;")
        w.line("for (int k = 0; k < 6; ++k) pa[k] += pi[k] + Ui[k] * ud;")
        w.line(f"congruence_to_parent({X.at(i)}, Ia, {IAp.at(i)});")
        w.line(f"force_to_parent({X.at(i)}, pa, {pAp.at(i)});")

    def accelerations(w: Writer, i: int) -> None:
        joint = model.joints[i]
        w.line(f"T* ai = {a.at(i)};")
        if joint.parent >= 0:
            w.line(f"motion_to_child({X.at(i)}, {a.at(joint.parent)}, ai);")
        else:
            w.line("const T a_root[6] = {T(0), T(0), -args.gravity, T(0), T(0), T(0)};")
            w.line(f"motion_to_child({X.at(i)}, a_root, ai);")
        w.line(f"for (int k = 0; k < 6; ++k) ai[k] += {c.at(i)}[k];")
        if joint.type is JointType.FREE_FLYER:
            w.line("T rhs[6];")
            w.line(f"mat6_vec({IA.at(i)}, ai, rhs);")
            w.line(f"for (int k = 0; k < 6; ++k) rhs[k] = {u.at(joint.idx_v)}[k] - rhs[k];")
            w.line(f"spd_solve6({IA.at(i)}, rhs, rhs);")
            with w.block("for (int k = 0; k < 6; ++k)"):
                w.line(f"out[{joint.idx_v} + k] = rhs[k];")
                w.line("ai[k] += rhs[k];")
            return
        k = joint.idx_v
        Ua = linear_combination([(1.0, f"{U.at(i)}[{r}] * ai[{r}]") for r in range(6)])
        w.line(f"const T Ua = {Ua};")
        w.line(f"const T qdd = {Dinv[i]} * ({u[k]} - Ua);")
        w.line(f"out[{k}] = qdd;")
        emit_subspace_add(w, joint, lambda d: "qdd", "ai")

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], ports[0]), (qd, ports[1]), (u_in, ports[2])])
        emit_passive_torque(ctx, w, qd, lambda k: u_in[k], "-")
        emit_joint_transforms(ctx, w, L["q"], X)
        ctx.strategy.schedule(w, model.levels, velocities, "aba velocities")
        ctx.strategy.schedule(w, tuple(reversed(model.levels)), articulated,
                              "aba articulated inertias")
        ctx.strategy.schedule(w, model.levels, accelerations, "aba accelerations")

    return AlgorithmSpec(
        name="aba", doc="qdd by the articulated-body algorithm: out (nv).",
        inputs=ports, output_shape=(nv,), uses_gravity=True, layout=L, emit_body=body)
