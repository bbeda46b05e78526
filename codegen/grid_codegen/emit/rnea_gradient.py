"""First-order dynamics gradients: `inverse_dynamics_gradient` and
`forward_dynamics_gradient`, both `(nv, 2 nv)` per item, `[d/dq | d/dqd]`.

The chain rule is carried through RNEA along one direction `z_c` per thread (column c of
`(q, qd)`; q directions in the local chart, so a free flyer moves by `exp` of its local
twist). Only joint i's own coordinates move `X_i`, as `dX_i/dq_k = -crm(S_ik) X_i`:
  `dv_i = X_i dv_p + (X_i v_p) x S_ik [c = q_k] + S_ik [c = qd_k]`
  `da_i = X_i da_p + (X_i a_p) x S_ik [c = q_k] + dv_i x vJ_i + v_i x S_ik [c = qd_k]`
  `df_i = I_i da_i + dv_i x* (I_i v_i) + v_i x* (I_i dv_i)`
  `dtau_i = S_i^T dF_i`, `dF_p += X_i^T (dF_i + S_ik x* F_i [c = q_k])`
with `F_i` the force transmitted by joint i (RNEA's backward pass). Each column is
independent: lanes (threads) run across columns, the column invariants `X_i v_p`,
`X_i a_p`, `I_i v_i` are computed once per item before them, and each column walks the
tree depth first with its derivatives in nested scopes. The forward-dynamics gradient is
`-M^-1 dID` at `qdd = FD(q, qd, u)`.
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.crba import add_crba_buffers, add_kinematic_buffers, emit_crba_passes
from grid_codegen.emit.joints import emit_subspace_add, subspace_transpose_times
from grid_codegen.emit.kinematics import emit_joint_transforms
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.passive import emit_passive_slope, emit_passive_torque
from grid_codegen.emit.rnea import add_rnea_buffers, emit_rnea_passes
from grid_codegen.emit.tree_ldlt import emit_tree_ldlt, emit_tree_ldlt_solve
from grid_codegen.emit.writer import Writer, comment_text
from grid_codegen.model import Joint, JointType


def _emit_direction_column(w: Writer, joint: Joint, offset: str) -> None:
    """`T s[6]`: the column of S_i that direction `c` (at `c - offset`) selects."""
    if joint.type is JointType.FREE_FLYER:
        w.line("T s[6] = {T(0), T(0), T(0), T(0), T(0), T(0)};")
        w.line(f"s[c - {offset}] = T(1);")
    else:
        w.line("T s[6] = {T(0), T(0), T(0), T(0), T(0), T(0)};")
        emit_subspace_add(w, joint, lambda d: "T(1)", "s")


def add_gradient_buffers(ctx: EmitContext, L: Layout) -> None:
    """The column invariants of the gradient: `Xv_i = X_i v_p`, `Xa_i = X_i a_p` and
    `h_i = I_i v_i` per body, computed once per item instead of once per column."""
    nb = ctx.model.nb
    L.add("Xv", 6, nb, doc="X_i v_parent (column invariant)")
    L.add("Xa", 6, nb, doc="X_i a_parent, a_root = -g for the root (column invariant)")
    L.add("hv", 6, nb, doc="I_i v_i (column invariant)")


def _emit_invariants(ctx: EmitContext, w: Writer, L: Layout) -> None:
    model = ctx.model
    X, v, a = L["X"], L["v"], L["a"]
    Xv, Xa, hv = L["Xv"], L["Xa"], L["hv"]

    def unit(w: Writer, i: int) -> None:
        joint = model.joints[i]
        ctx.emit_inertia(w, i)
        if joint.parent >= 0:
            w.line(f"motion_to_child({X.at(i)}, {v.at(joint.parent)}, {Xv.at(i)});")
            w.line(f"motion_to_child({X.at(i)}, {a.at(joint.parent)}, {Xa.at(i)});")
        else:
            w.line("const T a_root[6] = {T(0), T(0), -args.gravity, T(0), T(0), T(0)};")
            w.line(f"for (int k = 0; k < 6; ++k) {Xv.at(i)}[k] = T(0);")
            w.line(f"motion_to_child({X.at(i)}, a_root, {Xa.at(i)});")
        w.line(f"inertia_apply(I, {v.at(i)}, {hv.at(i)});")

    ctx.strategy.schedule(w, [tuple(range(model.nb))], unit, "gradient column invariants")


def _support(model, i: int) -> list[tuple[int, int]]:
    """The dof ranges [lo, hi) of body i and its ancestors (the directions that move it)."""
    ranges = sorted((model.joints[j].idx_v, model.joints[j].idx_v + model.joints[j].nv)
                    for j in model.ancestors(i))
    merged: list[tuple[int, int]] = []
    for lo, hi in ranges:
        if merged and merged[-1][1] == lo:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


def emit_rnea_gradient_columns(ctx: EmitContext, w: Writer, L: Layout,
                               dtau: Callable[[int], str]) -> None:
    """After RNEA (`X`, `qd`, `v`, `a`, transmitted forces in `f`): every column
    `c < 2 nv` of `dtau/d(q, qd)`; `dtau(r)` is the lvalue of row r in column `c`.

    The bodies are visited depth first, each body's derivatives in a scope nested in its
    parent's: `dv`, `da` of the ancestors and the force sums `dF` of the open bodies are
    all that is live (O(depth), not O(bodies): register-resident for a humanoid too). A
    body that direction `c` cannot move (its joint is not an ancestor) skips its forward
    step (its derivatives are zero); its backward step still collects its children's."""
    model = ctx.model
    nv = model.nv
    if any(j.parent >= i for i, j in enumerate(model.joints)):
        raise ValueError("bodies must be numbered parents first")
    _emit_invariants(ctx, w, L)
    ctx.strategy.barrier(w)
    X, v, f, qd = L["X"], L["v"], L["f"], L["qd"]
    Xv, Xa, hv = L["Xv"], L["Xa"], L["hv"]
    children = model.children

    def visit(i: int) -> None:
        joint = model.joints[i]
        lo, hi = joint.idx_v, joint.idx_v + joint.nv
        p = joint.parent
        w.comment(f"body {i}: joint '{comment_text(joint.name)}'")
        w.line(f"T dv{i}[6], da{i}[6], dF{i}[6];")
        cond = " || ".join(f"(d >= {a} && d < {b})" for a, b in _support(model, i))
        w.line(f"const bool moved{i} = {cond};")
        with w.block(f"if (moved{i})"):
            ctx.emit_inertia(w, i)
            if p >= 0:
                w.line(f"motion_to_child({X.at(i)}, dv{p}, dv{i});")
                w.line(f"motion_to_child({X.at(i)}, da{p}, da{i});")
            else:
                w.line(f"for (int k = 0; k < 6; ++k) dv{i}[k] = da{i}[k] = T(0);")
            with w.block(f"if (c >= {lo} && c < {hi})"):
                _emit_direction_column(w, joint, str(lo))
                w.line(f"motion_cross_add({Xv.at(i)}, s, dv{i});")
                w.line(f"motion_cross_add({Xa.at(i)}, s, da{i});")
            with w.block(f"if (c >= {nv + lo} && c < {nv + hi})"):
                _emit_direction_column(w, joint, str(nv + lo))
                w.line(f"for (int k = 0; k < 6; ++k) dv{i}[k] += s[k];")
                w.line(f"motion_cross_add({v.at(i)}, s, da{i});")
            w.line("T vj[6] = {T(0), T(0), T(0), T(0), T(0), T(0)};")
            emit_subspace_add(w, joint, lambda d, j=joint: qd[j.idx_v + d], "vj")
            w.line(f"motion_cross_add(dv{i}, vj, da{i});  // dv_i complete: qd column added")
            w.line("T Idv[6];")
            w.line(f"inertia_apply(I, dv{i}, Idv);")
            w.line(f"inertia_apply(I, da{i}, dF{i});")
            w.line(f"force_cross_add(dv{i}, {hv.at(i)}, dF{i});")
            w.line(f"force_cross_add({v.at(i)}, Idv, dF{i});")
        with w.block("else"):
            w.line(f"for (int k = 0; k < 6; ++k) dv{i}[k] = da{i}[k] = dF{i}[k] = T(0);")
        for child in children[i]:
            with w.block():
                visit(child)
        w.comment(f"body {i}: backward")
        for dof in range(joint.nv):
            w.line(f"{dtau(lo + dof)} = {subspace_transpose_times(joint, dof, f'dF{i}')};")
        if p >= 0:
            w.line("T g[6], t[6];")
            w.line(f"for (int k = 0; k < 6; ++k) g[k] = dF{i}[k];")
            with w.block(f"if (c >= {lo} && c < {hi})"):
                _emit_direction_column(w, joint, str(lo))
                w.line(f"force_cross_add(s, {f.at(i)}, g);")
            w.line(f"force_to_parent({X.at(i)}, g, t);")
            w.line(f"for (int k = 0; k < 6; ++k) dF{p}[k] += t[k];")

    with ctx.strategy.parallel(w, "c", 2 * nv):
        w.line(f"const int d = c < {nv} ? c : c - {nv};  // the dof direction c moves")
        roots = [i for i, j in enumerate(model.joints) if j.parent < 0]
        for root in roots:
            with w.block():
                visit(root)
    ctx.strategy.barrier(w)


def _rnea_layout(ctx: EmitContext, name: str, control: str) -> Layout:
    model = ctx.model
    L = Layout(name)
    add_kinematic_buffers(ctx, L)
    L.add("qd", model.nv, doc="velocity")
    L.add(control, model.nv, doc="acceleration" if control == "qdd" else "joint torques")
    add_rnea_buffers(ctx, L)
    add_gradient_buffers(ctx, L)
    return L


def inverse_dynamics_gradient(ctx: EmitContext) -> AlgorithmSpec:
    model = ctx.model
    nv, n2 = model.nv, 2 * model.nv
    L = _rnea_layout(ctx, "inverse_dynamics_gradient", "qdd")
    L.add("tau", nv, doc="inverse dynamics (by-product)")
    ports = (Port("q", model.nq), Port("qd", nv), Port("qdd", nv, False),
             Port("f_ext", 6 * model.nb, False))

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], ports[0]), (L["qd"], ports[1]), (L["qdd"], ports[2])])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_rnea_passes(ctx, w, L, True, "in_f_ext", lambda k: L["tau"][k])
        emit_rnea_gradient_columns(ctx, w, L, lambda r: f"out[{r * n2} + c]")
        emit_passive_slope(ctx, w, L["qd"], lambda r, c: f"out[{r} * {n2} + {c}]")

    return AlgorithmSpec(
        name="inverse_dynamics_gradient",
        doc=f"[dtau/dq | dtau/dqd] (local chart): out ({nv} x {n2}), row-major.",
        inputs=ports, output_shape=(nv, n2), uses_gravity=True, layout=L, emit_body=body)


def fd_gradient_layout(ctx: EmitContext, name: str) -> Layout:
    """The scratch of the forward-dynamics gradient's passes (`emit_fd_gradient_passes`)."""
    model = ctx.model
    nv = model.nv
    L = _rnea_layout(ctx, name, "u")
    add_crba_buffers(ctx, L)
    L.add("c", nv, doc="bias forces, then ID at qdd")
    L.add("qdd", nv, doc="FD")
    L.add("M", nv, nv, doc="mass matrix, factored along the tree in place")
    L.add("dinv", nv, doc="D^-1 of the factor")
    L.add("dID", 2 * nv, nv, doc="dtau/d(q, qd) at qdd = FD, row-major")
    return L


def emit_fd_gradient_passes(ctx: EmitContext, w: Writer, L: Layout, fext: str | None,
                            after_solve: Callable[[Writer], None] | None = None) -> None:
    """With `q`, `qd` and `u` loaded into `L` (`fd_gradient_layout`): `qdd = FD(q, qd, u)`,
    `M` factored along the tree (`M`, `dinv`) and `dID = dtau/d(q, qd)` at `qdd`
    (`fext`: the f_ext pointer, None for none); `after_solve(w)` (optional) runs on one
    lane right after `qdd` is known."""
    s = ctx.strategy
    nv = ctx.model.nv
    n2 = 2 * nv
    c, qdd, M, dinv, dID = L["c"], L["qdd"], L["M"], L["dinv"], L["dID"]
    emit_passive_torque(ctx, w, L["qd"], lambda k: L["u"][k], "-")
    emit_joint_transforms(ctx, w, L["q"], L["X"])
    emit_rnea_passes(ctx, w, L, False, fext, lambda k: c[k])
    emit_crba_passes(ctx, w, L, M, nv)
    emit_tree_ldlt(ctx, w, M, nv, nv, dinv)
    with s.single(w):
        emit_tree_ldlt_solve(ctx, w, M, nv, nv, dinv, lambda r: f"{L['u'][r]} - {c[r]}",
                             lambda r, v: f"{qdd[r]} = {v};")
        if after_solve is not None:
            with w.block():
                after_solve(w)
    s.barrier(w)
    emit_rnea_passes(ctx, w, L, True, fext, lambda k: c[k])
    emit_rnea_gradient_columns(ctx, w, L, lambda r: dID[f"{r * n2} + c"])
    emit_passive_slope(ctx, w, L["qd"], lambda r, c: dID[f"{r} * {n2} + {c}"])


def forward_dynamics_gradient(ctx: EmitContext) -> AlgorithmSpec:
    model = ctx.model
    nv, n2 = model.nv, 2 * model.nv
    L = fd_gradient_layout(ctx, "forward_dynamics_gradient")
    M, dinv, dID = L["M"], L["dinv"], L["dID"]
    ports = (Port("q", model.nq), Port("qd", nv), Port("u", nv),
             Port("f_ext", 6 * model.nb, False))

    def body(w: Writer) -> None:
        s = ctx.strategy
        emit_load(ctx, w, [(L["q"], ports[0]), (L["qd"], ports[1]), (L["u"], ports[2])])
        emit_fd_gradient_passes(ctx, w, L, "in_f_ext")
        with s.parallel(w, "j", n2):  # column j of -M^-1 dID on one lane
            emit_tree_ldlt_solve(ctx, w, M, nv, nv, dinv, lambda r: f"-{dID[f'{r * n2} + j']}",
                                 lambda r, v: f"out[{r * n2} + j] = {v};")
        s.barrier(w)

    return AlgorithmSpec(
        name="forward_dynamics_gradient",
        doc=f"[dqdd/dq | dqdd/dqd] = -M^-1 dID at qdd = FD: out ({nv} x {n2}), row-major.",
        inputs=ports, output_shape=(nv, n2), uses_gravity=True, layout=L, emit_body=body)
