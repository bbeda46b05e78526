"""Derivative tensors in the MuJoCo convention on a free-flyer root
(`grid_rbd._mujoco_convention`): the second-order `idsva_so`, `fdsva_so` and
`end_effector_pose_hessian`, and the time variations and derivatives of matrices whose
columns live in the tangent (`coriolis_matrix`, `cmm_time_variation`, `dccrba`,
`frame_jacobian_dot`).

Matrices with tangent columns `X` become `X_mj = X G^T` (`G = blockdiag(R, I)`), so
their time derivative along the motion gains `X d(G^T)/dt = -X Omega G^T`, `Omega =
blockdiag([omega]x, 0)` (`R_dot = R [omega]x`), and their derivative along the MuJoCo
position tangent `X d(G^T)/d dtheta_m = -X blockdiag([e_m]x R^T, 0)`:

    frame_jacobian_dot_mj = (Jdot - J Omega) G^T,   cmm_time_variation_mj = (Adot - A Omega) G^T,
    dccrba_mj[:, j, k] = (dA G^T contracted with G^T on k) - A[:, 0:3] [e_(k-3)]x R^T.

The Coriolis matrix `C_mj = G (C - M Omega) G^T` keeps both of its defining properties
in MuJoCo's velocities: `C_mj qvel` is MuJoCo's `qfrc_bias` less gravity
(`G (C u - M b)`, `b = Omega u = [omega x v_local; 0]`), and `M_mj_dot = C_mj + C_mj^T`.

The second-order tensors (the rest of this doc):

Notation: MuJoCo's variables at a state are `z = [d, v, x]`, `d` the position tangent of
`mj_integratePos` (`p + dp` in the world, `R exp([dtheta])`), `v = qvel`, `x` the
second input (`qacc` for inverse dynamics, `qfrc` for forward dynamics). Ours are
`y = [e, u, w]`, `e` Pinocchio's tangent (`q (+) e`: the SE(3) exponential of the local
twist), `u`, `w` the local-chart velocity and input. At `z = 0` the two configurations
agree when (to second order, `V(t)^-1 = I - [t]/2 + ...` the inverse of SE(3)'s `V`)

    e = [R^T dp - 1/2 dtheta x R^T dp, dtheta, ds],
    u = [exp(-[dtheta]) R^T v_lin, omega, v_joints],
    w = [exp(-[dtheta]) R^T x_lin - k omega x u_lin, x_rest],

with `k = 1` for inverse dynamics (`qacc_mj = G (qdd + b)`, `b = [omega x v_local; 0]`)
and `k = 0` for forward dynamics, whose output carries the bias instead:
`Y = G(d) (P(y) + (1 - k) [omega x u_lin; 0])`, `G(d) = blockdiag(R exp([dtheta]), I)`.
Every output block is the second-order chain rule of that composition,

    d2Y = G (Dy^T H Dy + J . D2y + D2bias) + (dG dY + dY^T dG^T + d2G P terms),

with `H` the kernels' symmetric second derivatives. The kernels' configuration block is
iterated (`q (+) e_k (+) e_j`, Pinocchio's `ComputeRNEASecondOrderDerivatives`), so it is
first made symmetric by the Baker-Campbell-Hausdorff term of SE(3):
`H_qq[:, j, k] = T[:, j, k] - 1/2 J_q [e_k, e_j]`. The MuJoCo configuration block is
returned iterated the same way along `mj_integratePos`, whose rotations compose as
SO(3)'s: `T_mj[:, j, k] = H_mj[:, j, k] + 1/2 J_mj . [0, e_k x e_j, 0]`. So
`d2tau_dq2[i, j, k]` is `d/dd_k` of the MuJoCo-convention `inverse_dynamics_gradient`
(column `j`) along `mj_integratePos`: what differentiating `mjd_inverseFD` gives.

`Dy` is `blockdiag(G^T, G^T, G^T)` plus a few 3x3 blocks, so every product costs
O(nv^3) per item (the size of the output): rotations of three entries of an axis, and
low-rank corrections.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _levi_civita() -> np.ndarray:
    eps = np.zeros((3, 3, 3))
    for a, b, c in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        eps[a, b, c], eps[a, c, b] = 1.0, -1.0
    return eps


def _se3_brackets() -> np.ndarray:
    """`L[m, k, j] = [e_k, e_j]_m` for the twists `[v; omega]` of the base (SE(3)'s Lie
    bracket: `[X, Y] = (w_X x v_Y - w_Y x v_X; w_X x w_Y)`)."""
    out = np.zeros((6, 6, 6))
    for k in range(6):
        for j in range(6):
            x, y = np.eye(6)[k], np.eye(6)[j]
            out[:3, k, j] = np.cross(x[3:], y[:3]) - np.cross(y[3:], x[:3])
            out[3:, k, j] = np.cross(x[3:], y[3:])
    return out


LC = _levi_civita()
BRACKETS = _se3_brackets()


class Tensors:
    """The few tensor operations the assembly needs, over a `_mujoco_convention._Ops`."""

    def __init__(self, ops: Any, R: Any) -> None:
        self.ops, self.R = ops, R
        self.lc = self.const(LC)

    def const(self, value: np.ndarray) -> Any:
        like = self.R
        if self.ops.kind == "torch":
            return self.ops.xp.as_tensor(value, dtype=like.dtype, device=like.device)
        return self.ops.xp.asarray(value, dtype=like.dtype)

    def e(self, spec: str, *xs: Any) -> Any:
        return self.ops.einsum(spec, *xs)

    def rotate(self, t: Any, axis: int) -> Any:
        """G applied along `axis` of `t` (batch first): entries 0..2 of that axis become
        `R @` them, the others stay."""
        letters = "acdfgh"[:t.ndim - 1]
        idx = "b" + letters
        moved = idx[:axis] + "x" + idx[axis + 1:]
        head = self.e(f"b{idx[axis]}x,{moved}->{idx}", self.R, _take(t, axis, 0, 3))
        return self.ops.cat([head, _take(t, axis, 3, t.shape[axis])], axis)

    def add(self, t: Any, where: tuple, block: Any) -> Any:
        """`t` with `block` added at `t[where]` (a fresh array; jax arrays are immutable)."""
        if self.ops.kind == "jax":
            return t.at[where].add(block)
        t = t.clone() if self.ops.kind == "torch" else t.copy()
        t[where] += block
        return t

    def skew(self, v: Any) -> Any:
        """[v]x (B, 3, 3): `[v]x y = v x y`."""
        return self.e("crm,br->bcm", self.lc, v)

    def w2(self, x: Any) -> Any:
        """`W2[c, m, n] = 1/2 (e_m x (e_n x x) + e_n x (e_m x x))_c` (B, 3, 3, 3): the
        second derivative of `exp([t]) x` in `t`."""
        eye = self.const(np.eye(3))
        half = 0.5 * (self.e("cn,bm->bcmn", eye, x) + self.e("cm,bn->bcmn", eye, x))
        return half - self.e("bc,mn->bcmn", x, eye)


def _take(t: Any, axis: int, start: int, stop: int) -> Any:
    index = [slice(None)] * t.ndim
    index[axis] = slice(start, stop)
    return t[tuple(index)]


def symmetric_qq(ts: Tensors, T: Any, Jq: Any) -> Any:
    """The symmetric configuration Hessian from the kernels' iterated one (module doc)."""
    fix = 0.5 * ts.e("bim,mkj->bijk", Jq[:, :, 0:6], ts.const(BRACKETS))
    return ts.add(T, (slice(None), slice(None), slice(0, 6), slice(0, 6)), -fix)


def dynamics_blocks(ts: Tensors, value: Any, Jq: Any, Ju: Any, J2: Any, T: Any, Huu: Any,
                    Hqu: Any, H2q: Any, qd_local: Any, x2_local: Any, inverse: bool
                    ) -> tuple[Any, Any, Any, Any]:
    """The four MuJoCo blocks `[d2Y/dd2 (iterated), d2Y/dv2, d2Y/dd dv, d2Y/dx dd]`,
    each (B, n, n, n) laid out as the kernels' (module doc), from the kernels' value
    `P`, first derivatives `J_q, J_u, J_2` (`J_2`: `M` or `M^-1`) and second ones `T`
    (iterated), `H_uu`, `H_qu[i, j(q), k(u)]`, `H_2q[i, j(x), k(q)]` at our state
    `qd_local` (u) and `x2_local` (`G^T x`, before the bias). `inverse`: k = 1."""
    e, R = ts.e, ts.R
    n = value.shape[1]
    vl, omega, xl = qd_local[:, 0:3], qd_local[:, 3:6], x2_local
    S_v, S_w = ts.skew(vl), ts.skew(omega)
    all_ = slice(None)
    lin, ang = slice(0, 3), slice(3, 6)
    k = 1.0 if inverse else 0.0

    # -- Dy: blockdiag(G^T) plus the 3x3 blocks S (rows: the linear entries of u, w) -----
    S_u_theta = S_v                                   # du_lin / dtheta
    S_2_theta = ts.skew(xl) - k * (S_w @ S_v)         # dw_lin / dtheta
    S_2_vlin = -k * e("bij,bkj->bik", S_w, R)         # dw_lin / dv_lin  (-[w] R^T)
    S_2_vang = k * S_v                                # dw_lin / domega
    Hq2 = e("bijk->bikj", H2q)                        # [i, j(q), k(x)]

    # First derivatives of P(y(z)) (B, n, n), before the outer G.
    D_d = ts.rotate(Jq, 2)
    D_d = ts.add(D_d, (all_, all_, ang), Ju[:, :, lin] @ S_u_theta + J2[:, :, lin] @ S_2_theta)
    D_v = ts.rotate(Ju, 2)
    D_v = ts.add(D_v, (all_, all_, lin), J2[:, :, lin] @ S_2_vlin)
    D_v = ts.add(D_v, (all_, all_, ang), J2[:, :, lin] @ S_2_vang)
    D_x = ts.rotate(J2, 2)
    # The forward-dynamics bias (1 - k) [omega x u_lin; 0]: rows 0..2 of the output.
    c = 1.0 - k
    if c:
        D_d = ts.add(D_d, (all_, lin, ang), c * (S_w @ S_v))
        D_v = ts.add(D_v, (all_, lin, lin), c * e("bij,bkj->bik", S_w, R))
        D_v = ts.add(D_v, (all_, lin, ang), -c * S_v)

    # -- Dy^T H Dy --------------------------------------------------------------------------
    Hqq = symmetric_qq(ts, T, Jq)
    Hqu_d = ts.rotate(Hqu, 2)           # j: e <- d (G^T)
    Hq2_d = ts.rotate(Hq2, 2)
    cross = e("biav,bvm->biam", Hqu_d[..., lin], S_u_theta) + \
        e("biav,bvm->biam", Hq2_d[..., lin], S_2_theta)
    QQ = ts.rotate(ts.rotate(Hqq, 2), 3)
    QQ = ts.add(QQ, (all_, all_, all_, ang), cross)
    QQ = ts.add(QQ, (all_, all_, ang, all_), e("biam->bima", cross))
    QQ = ts.add(QQ, (all_, all_, ang, ang),
                e("bvm,bivw,bwn->bimn", S_u_theta, Huu[:, :, lin, lin], S_u_theta))
    QV = ts.rotate(ts.rotate(Hqu, 2), 3)
    QV = ts.add(QV, (all_, all_, all_, lin), e("biav,bvm->biam", Hq2_d[..., lin], S_2_vlin))
    QV = ts.add(QV, (all_, all_, all_, ang), e("biav,bvm->biam", Hq2_d[..., lin], S_2_vang))
    QV = ts.add(QV, (all_, all_, ang, all_),
                e("bvm,bivz->bimz", S_u_theta, ts.rotate(Huu, 3)[:, :, lin]))
    VV = ts.rotate(ts.rotate(Huu, 2), 3)
    XQ = ts.rotate(ts.rotate(H2q, 2), 3)

    # -- J . D2y (and the bias's own second derivatives) -------------------------------
    RT = e("bij->bji", R)
    # dtheta_m x R^T e_n, component c: [c, m, n]
    cross_R = e("cmr,brn->bcmn", ts.lc, RT)
    # e_m x (v_l x e_n), component c, as [c, n(theta), m(omega)]: v_c d_mn - d_cn v_m
    eye = ts.const(np.eye(3))
    triple = e("bc,mn->bcnm", vl, eye) - e("cn,bm->bcnm", eye, vl)
    Jq_l, Ju_l, J2_l = Jq[:, :, lin], Ju[:, :, lin], J2[:, :, lin]
    # The bias -k omega x u_lin through J2, or +(1 - k) omega x u_lin on rows 0..2.
    Jb = -k * J2_l if k else ts.const(np.eye(n)[:, :3])[None] + 0 * Jq_l
    theta_p = -0.5 * e("bic,bcmn->bimn", Jq_l, cross_R)
    QQ = ts.add(QQ, (all_, all_, ang, lin), theta_p)
    QQ = ts.add(QQ, (all_, all_, lin, ang), e("bimn->binm", theta_p))
    w2v = ts.w2(vl)
    QQ = ts.add(QQ, (all_, all_, ang, ang),
                e("bic,bcmn->bimn", Ju_l, w2v) + e("bic,bcmn->bimn", J2_l, ts.w2(xl))
                + e("bic,bcd,bdmn->bimn", Jb, S_w, w2v))
    QV = ts.add(QV, (all_, all_, ang, lin),
                -e("bic,bcmn->bimn", Ju_l, cross_R) - e("bic,bcd,bdmn->bimn", Jb, S_w, cross_R))
    QV = ts.add(QV, (all_, all_, ang, ang), e("bic,bcnm->binm", Jb, triple))
    omega_v = e("bic,bcmn->bimn", Jb, cross_R)   # (omega m, v_lin n)
    VV = ts.add(VV, (all_, all_, ang, lin), omega_v)
    VV = ts.add(VV, (all_, all_, lin, ang), e("bimn->binm", omega_v))
    XQ = ts.add(XQ, (all_, all_, lin, ang), -e("bic,bcmn->binm", J2_l, cross_R))

    # -- the outer G(d): rows, and its derivatives in dtheta -----------------------------
    P = value + (0 if not c else c * ts.ops.cat([ts.e("bij,bj->bi", S_w, vl),
                                                 0 * value[:, 3:]], 1))
    QQ, QV, VV, XQ = (ts.rotate(t, 1) for t in (QQ, QV, VV, XQ))
    turn_d = e("bxc,cmr,brj->bxmj", R, ts.lc, D_d[:, lin])   # R [e_m] dP_lin/dd_j
    QQ = ts.add(QQ, (all_, lin, ang, all_), turn_d)
    QQ = ts.add(QQ, (all_, lin, all_, ang), e("bxmj->bxjm", turn_d))
    QQ = ts.add(QQ, (all_, lin, ang, ang), e("bxc,bcmn->bxmn", R, ts.w2(P[:, lin])))
    QV = ts.add(QV, (all_, lin, ang, all_), e("bxc,cmr,brj->bxmj", R, ts.lc, D_v[:, lin]))
    XQ = ts.add(XQ, (all_, lin, all_, ang), e("bxc,cmr,brj->bxjm", R, ts.lc, D_x[:, lin]))

    # -- iterated along mj_integratePos ------------------------------------------------
    J_theta = ts.rotate(D_d, 1)[:, :, ang] + \
        ts.ops.cat([e("bxc,cmr,br->bxm", R, ts.lc, P[:, lin]), 0 * D_d[:, 3:, ang]], 1)
    QQ = ts.add(QQ, (all_, all_, ang, ang), 0.5 * e("bic,ckj->bijk", J_theta, ts.lc))
    return QQ, VV, QV, XQ


def pose_hessian(ts: Tensors, H: Any, J: Any) -> Any:
    """`end_effector_pose_hessian` (B, r, n, n) along `mj_integratePos` from ours and the
    pose gradient `J` (B, r, n) (both symmetric; module doc's `e(d)`): `G H G^T` plus
    `1/2 [g_v] R^T` in the (dtheta, dp) block, `g_v` each row's linear-base gradient."""
    out = ts.rotate(ts.rotate(H, 2), 3)
    K = 0.5 * ts.e("bic,mcr,bnr->bimn", J[:, :, 0:3], ts.lc, ts.R)  # [g]x R^T, [i, m, n]
    out = ts.add(out, (slice(None), slice(None), slice(3, 6), slice(0, 3)), K)
    return ts.add(out, (slice(None), slice(None), slice(0, 3), slice(3, 6)),
                  ts.e("bimn->binm", K))


# -- the converters (`_mujoco_convention._CONVERT`'s signature: handle, chart, inputs,
#    keyword arguments) --------------------------------------------------------------------
def _tensors(h: Any, c: Any) -> Tensors:
    return Tensors(h._ops, c.R)


def _less_omega(ts: Tensors, X: Any, Y: Any, omega: Any) -> Any:
    """`X - Y Omega` (B, r, n): columns 0..2 of `X` less `Y[..., 0:3] [omega]x`."""
    return ts.add(X, (Ellipsis, slice(0, 3)),
                  -ts.e("bic,bcd->bid", Y[:, :, 0:3], ts.skew(omega)))


def idsva_so(h: Any, c: Any, v: dict, kw: dict) -> tuple[Any, Any, Any, Any]:
    nv = h.nv
    qd = c.to_local(v["qd"])
    qdd = h._local_qdd(c, qd, v.get("qdd"))
    args = (c.q, qd, qdd, v.get("f_ext"))
    blocks = h._call("idsva_so", kw, *args)
    grad = h._call("inverse_dynamics_gradient", kw, *args)
    tau = h._call("inverse_dynamics", kw, *args)
    mass = h._call("crba", {}, c.q)
    acc = v.get("qdd")
    x_lin = c.rot_t((h._ops.zeros_like(v["qd"]) if acc is None else acc)[:, 0:3])
    return dynamics_blocks(_tensors(h, c), tau, grad[..., :nv], grad[..., nv:], mass,
                           *blocks, qd, x_lin, True)


def fdsva_so(h: Any, c: Any, v: dict, kw: dict) -> tuple[Any, Any, Any, Any]:
    nv = h.nv
    qd, u = c.to_local(v["qd"]), c.to_local(v["u"])
    args = (c.q, qd, u, v.get("f_ext"))
    blocks = h._call("fdsva_so", kw, *args)
    grad = h._call("forward_dynamics_gradient", kw, *args)
    qdd = h._call("forward_dynamics", kw, *args)
    minv = h._call("minv", {}, c.q)
    return dynamics_blocks(_tensors(h, c), qdd, grad[..., :nv], grad[..., nv:], minv,
                           *blocks, qd, c.rot_t(v["u"][:, 0:3]), False)


def end_effector_pose_hessian(h: Any, c: Any, v: dict, kw: dict) -> Any:
    return pose_hessian(_tensors(h, c), h._call("end_effector_pose_hessian", kw, c.q),
                        h._call("end_effector_pose_gradient", {}, c.q))


def coriolis_matrix(h: Any, c: Any, v: dict, kw: dict) -> Any:
    ts = _tensors(h, c)
    qd = c.to_local(v["qd"])
    C = h._call("coriolis_matrix", kw, c.q, qd)
    M = h._call("crba", {}, c.q)
    return ts.rotate(ts.rotate(_less_omega(ts, C, M, qd[:, 3:6]), 1), 2)


def cmm_time_variation(h: Any, c: Any, v: dict, kw: dict) -> Any:
    ts = _tensors(h, c)
    qd = c.to_local(v["qd"])
    Adot = h._call("cmm_time_variation", kw, c.q, qd)
    A, _ = h._call("ccrba", {}, c.q, qd)
    return ts.rotate(_less_omega(ts, Adot, A, qd[:, 3:6]), 2)


def dccrba(h: Any, c: Any, v: dict, kw: dict) -> Any:
    ts = _tensors(h, c)
    dA = h._call("dccrba", kw, c.q)
    A, _ = h._call("ccrba", {}, c.q, h._ops.zeros_like(c.q[:, 1:]))
    out = ts.rotate(ts.rotate(dA, 2), 3)
    turn = ts.e("brc,cms,bjs->brjm", A[:, :, 0:3], ts.lc, ts.R)
    return ts.add(out, (slice(None), slice(None), slice(0, 3), slice(3, 6)), -turn)


def frame_jacobian_dot(h: Any, q: Any, qd: Any, frame: Any, reference_frame: str) -> Any:
    """`d/dt frame_jacobian` in MuJoCo's velocities (module doc), one frame."""
    c, single = h._state(q)
    qd = h._batch(qd)
    qd_local = c.to_local(qd)
    inner = h._inner
    dJ = inner.frame_jacobian_dot(c.q, qd_local, frame, reference_frame)
    J = inner.frame_jacobian(c.q, frame, reference_frame)
    ts = _tensors(h, c)
    out = ts.rotate(_less_omega(ts, dJ, J, qd_local[:, 3:6]), 2)
    return out[0] if single else out


def frame_jacobian_dot_indexed(h: Any, c: Any, v: dict, kw: dict) -> Any:
    """The `frame_jacobian_dot_indexed` kernel in MuJoCo's velocities (`frame_jacobian_dot`'s
    conversion; it needs the frame's Jacobian, `frame_jacobian_indexed`)."""
    if "frame_jacobian_indexed" not in h.algorithms:
        raise RuntimeError("frame_jacobian_dot_indexed in MuJoCo's convention needs "
                           "frame_jacobian_indexed, which was not built into this artifact; "
                           "register with the profile 'kinematics'")
    qd_local = c.to_local(v["qd"])
    dJ = h._call("frame_jacobian_dot_indexed", kw, c.q, qd_local, v["frame"])
    J = h._call("frame_jacobian_indexed", {}, c.q, v["frame"])
    ts = _tensors(h, c)
    return ts.rotate(_less_omega(ts, dJ, J, qd_local[:, 3:6]), 2)


def tangent_columns(h: Any, c: Any, value: Any) -> Any:
    """`value G^T`: the last axis of a kernel output on the tangent."""
    return _tensors(h, c).rotate(value, value.ndim - 1)
