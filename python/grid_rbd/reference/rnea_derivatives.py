"""First-order derivatives of RNEA: the chain rule carried through its passes.

The directions are the tangent of `z = (q, qd)`: `n = 2 nv` columns, `q` first, so the
result `dtau (B, nv, 2 nv)` is `[dtau/dq | dtau/dqd]`. Every per-body quantity `x`
`(B, 6)` gets its stack of derivatives `dx (B, 6, n)` (see `spatial_stacks`).

Along the local chart (`q (+) dq`: a revolute or prismatic angle adds, a free flyer's
placement is right-multiplied by `exp(dq)`), only joint `i`'s own coordinates move
`Xup_i`, and they move it as `d Xup_i / dq_k = -crm(S_ik) Xup_i`. Hence

    d(Xup_i x)   = Xup_i dx   + (Xup_i x) x S_ik        (column q_k of joint i)
    d(Xup_i^T f) = Xup_i^T (df + S_ik x* f)

The velocity dofs enter through `vJ_i = S_i qd_i`, whose derivative is `S_i` in the
columns `qd_i`. Gravity is the constant root acceleration `a_0 = -g`, and `f_ext` is
constant in each body frame, so neither has a derivative of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics
from grid_rbd.reference.spatial_stacks import cross_force, cross_motion, transform


@dataclass(frozen=True)
class RneaFirstOrder:
    """RNEA and its first derivatives over `z = (q, qd)`, per body `i`:

    `v[i]`, `a[i]` `(B, 6)` and `dv[i]`, `da[i]` `(B, 6, 2 nv)`: velocity, acceleration;
    `F[i]`, `dF[i]`: the force transmitted by joint `i` (its whole subtree's, in its
    frame); `tau (B, nv)` and `dtau (B, nv, 2 nv)`.
    """

    v: list[np.ndarray]
    a: list[np.ndarray]
    dv: list[np.ndarray]
    da: list[np.ndarray]
    F: list[np.ndarray]
    dF: list[np.ndarray]
    tau: np.ndarray
    dtau: np.ndarray


def q_columns(model: RobotModel, i: int) -> slice:
    """The columns of joint `i`'s configuration directions in a `(q, qd)` stack; also its
    dofs in any `(B, nv)` array."""
    joint = model.joints[i]
    return slice(joint.idx_v, joint.idx_v + joint.nv)


def qd_columns(model: RobotModel, i: int) -> slice:
    """The columns of joint `i`'s velocity directions in a `(q, qd)` stack."""
    joint = model.joints[i]
    return slice(model.nv + joint.idx_v, model.nv + joint.idx_v + joint.nv)


def rnea_derivatives_forward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                                  qd: np.ndarray, qdd: np.ndarray, a_root: np.ndarray
                                  ) -> tuple[list[np.ndarray], ...]:
    """`(v, a, dv, da)`, root to leaf, differentiating
    `v_i = Xup_i v_p + vJ_i` and `a_i = Xup_i a_p + S_i qdd_i + v_i x vJ_i`:

        dv_i = Xup_i dv_p + (Xup_i v_p) x S_i [q_i] + S_i [qd_i]
        da_i = Xup_i da_p + (Xup_i a_p) x S_i [q_i] + dv_i x vJ_i + v_i x S_i [qd_i]
    """
    batch, n = qd.shape[0], 2 * model.nv
    v: list[np.ndarray] = []
    a: list[np.ndarray] = []
    dv: list[np.ndarray] = []
    da: list[np.ndarray] = []
    for i, joint in enumerate(model.joints):
        dofs, cv = q_columns(model, i), qd_columns(model, i)
        X, Si = kin.Xup[i], S[i]
        vJ = qd[:, dofs] @ Si.T
        if joint.parent < 0:
            Xv, Xa = np.zeros((batch, 6)), spatial.apply(X, a_root)
            dvi, dai = np.zeros((batch, 6, n)), np.zeros((batch, 6, n))
        else:
            Xv, Xa = spatial.apply(X, v[joint.parent]), spatial.apply(X, a[joint.parent])
            dvi, dai = transform(X, dv[joint.parent]), transform(X, da[joint.parent])
        dvi[:, :, dofs] += cross_motion(Xv[:, :, None], Si[None])
        dvi[:, :, cv] += Si
        vi = Xv + vJ
        ai = Xa + qdd[:, dofs] @ Si.T + spatial.apply(spatial.motion_cross(vi), vJ)
        dai[:, :, dofs] += cross_motion(Xa[:, :, None], Si[None])
        dai += transform(-spatial.motion_cross(vJ), dvi)
        dai[:, :, cv] += spatial.motion_cross(vi) @ Si
        v.append(vi)
        a.append(ai)
        dv.append(dvi)
        da.append(dai)
    return v, a, dv, da


def body_force_derivatives(I: list[np.ndarray], v: list[np.ndarray], a: list[np.ndarray],
                           dv: list[np.ndarray], da: list[np.ndarray],
                           f_ext: np.ndarray | None) -> tuple[list[np.ndarray], ...]:
    """`(f, df)` with `f_i = I_i a_i + v_i x* (I_i v_i) - f_ext_i` and
    `df_i = I_i da_i + dv_i x* (I_i v_i) + v_i x* (I_i dv_i)`."""
    f: list[np.ndarray] = []
    df: list[np.ndarray] = []
    for i, Ii in enumerate(I):
        h = v[i] @ Ii.T
        crf = spatial.force_cross(v[i])
        fi = a[i] @ Ii.T + spatial.apply(crf, h)
        if f_ext is not None:
            fi = fi - f_ext[:, 6 * i:6 * i + 6]
        f.append(fi)
        df.append(transform(Ii, da[i]) + cross_force(dv[i], h[:, :, None])
                  + transform(crf, transform(Ii, dv[i])))
    return f, df


def rnea_derivatives_backward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                                   f: list[np.ndarray], df: list[np.ndarray]
                                   ) -> tuple[np.ndarray, np.ndarray]:
    """`(tau, dtau)`, leaf to root: `tau_i = S_i^T F_i`, `dtau_i = S_i^T dF_i`, and
    `F_p += Xup_i^T F_i`, `dF_p += Xup_i^T (dF_i + S_i x* F_i [q_i])`.

    Consumes `f` and `df`: on return they hold the transmitted forces `F`, `dF`."""
    batch, n = f[0].shape[0], df[0].shape[-1]
    tau = np.zeros((batch, model.nv))
    dtau = np.zeros((batch, model.nv, n))
    for i in reversed(range(model.nb)):
        joint = model.joints[i]
        dofs = q_columns(model, i)
        tau[:, dofs] = f[i] @ S[i]
        dtau[:, dofs] = transform(S[i].T, df[i])
        if joint.parent >= 0:
            X, p = kin.Xup[i], joint.parent
            f[p] = f[p] + spatial.apply_transposed(X, f[i])
            dFi = df[i].copy()
            dFi[:, :, dofs] += cross_force(S[i][None], f[i][:, :, None])
            df[p] = df[p] + transform(np.swapaxes(X, -1, -2), dFi)
    return tau, dtau


def rnea_derivatives(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                     I: list[np.ndarray], qd: np.ndarray, qdd: np.ndarray,
                     a_root: np.ndarray, f_ext: np.ndarray | None) -> RneaFirstOrder:
    """RNEA and `dtau/d(q, qd)` `(B, nv, 2 nv)` in one forward and one backward pass."""
    v, a, dv, da = rnea_derivatives_forward_pass(model, kin, S, qd, qdd, a_root)
    F, dF = body_force_derivatives(I, v, a, dv, da, f_ext)
    tau, dtau = rnea_derivatives_backward_pass(model, kin, S, F, dF)
    return RneaFirstOrder(v, a, dv, da, F, dF, tau, dtau)
