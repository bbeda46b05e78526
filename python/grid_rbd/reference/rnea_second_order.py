"""Second-order derivatives of RNEA: the chain rule of `rnea_derivatives` taken once more.

Directions are the tangent of `z = (q, qd)` (`n = 2 nv`, `q` first). A second
derivative `d2x (B, 6, n, n)` holds, at `[alpha, beta]`, the derivative along `beta` of
the first derivative along `alpha`: `d/dz_beta (dx/dz_alpha)`, where the outer
derivative is taken at the point already moved along `beta`. On a free flyer this is
`d2/(de_a de_b) x(q (+) e_b (+) e_a)`, not symmetric in `(a, b)`: it is the tensor
`d/dq_b (dtau/dq_a)` one gets by differentiating the local-chart gradient again,
which is Pinocchio's `ComputeRNEASecondOrderDerivatives` convention. On the joint's own
pair of directions the motion transform then has the second derivative

    d2 Xup_i [a, b] = crm(S_ia) crm(S_ib) Xup_i,

which with the product rule gives, for a parent quantity `x` (its `dx`, `d2x`),

    d2(Xup_i x)[a, b]   = Xup_i d2x - S_ia x Xup_i dx_b - S_ib x Xup_i dx_a
                          + S_ia x (S_ib x Xup_i x)
    d2(Xup_i^T f)[a, b] = Xup_i^T (d2f + S_ia x* df_b + S_ib x* df_a + S_ib x* (S_ia x* f))

(the `S_i` terms only where `a`, `b` are joint `i`'s configuration directions). Every
bilinear step `x(y, w)` contributes `x(d2y, w) + x(y, d2w) + x(dy_a, dw_b) + x(dy_b, dw_a)`.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics
from grid_rbd.reference.rnea_derivatives import (
    RneaFirstOrder,
    q_columns,
    qd_columns,
    rnea_derivatives,
)
from grid_rbd.reference.spatial_stacks import (
    cross_force,
    cross_motion,
    transform,
    transform_transposed,
)


def _pair(stack: np.ndarray) -> np.ndarray:
    """`P + P^T` over the two direction axes of a `(B, 6, n, n)` stack."""
    return stack + np.swapaxes(stack, 2, 3)


def _transformed_second_derivative(X: np.ndarray, Si: np.ndarray, cols: slice,
                                   x: np.ndarray, dx: np.ndarray, d2x: np.ndarray
                                   ) -> np.ndarray:
    """`d2(Xup_i x)`, see the module docstring."""
    y, Xdx = spatial.apply(X, x), transform(X, dx)
    d2y = transform(X, d2x)
    # [a, b] = -S_ia x (Xup dx)_b, for a in joint i's configuration directions.
    T = -cross_motion(Si[None, :, :, None], Xdx[:, :, None, :])
    d2y[:, :, cols, :] += T
    d2y[:, :, :, cols] += np.swapaxes(T, 2, 3)
    Sy = cross_motion(Si[None], y[:, :, None])
    d2y[:, :, cols, cols] += cross_motion(Si[None, :, :, None], Sy[:, :, None, :])
    return d2y


def rnea_second_order_forward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                                   qd: np.ndarray, a_root: np.ndarray, first: RneaFirstOrder
                                   ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`(d2v, d2a)`, root to leaf. `vJ_i = S_i qd_i` has no second derivative, so

        d2v_i = d2(Xup_i v_p)
        d2a_i = d2(Xup_i a_p) + d2v_i x vJ_i + pair(dv_i[a] x S_i[qd_i: b])
    """
    batch, n = qd.shape[0], 2 * model.nv
    zero_d, zero_d2 = np.zeros((batch, 6, n)), np.zeros((batch, 6, n, n))
    d2v: list[np.ndarray] = []
    d2a: list[np.ndarray] = []
    for i, joint in enumerate(model.joints):
        X, Si, cq, cv = kin.Xup[i], S[i], q_columns(model, i), qd_columns(model, i)
        p = joint.parent
        if p < 0:
            d2vi = zero_d2.copy()
            d2ai = _transformed_second_derivative(X, Si, cq, a_root, zero_d, zero_d2)
        else:
            d2vi = _transformed_second_derivative(X, Si, cq, first.v[p], first.dv[p], d2v[p])
            d2ai = _transformed_second_derivative(X, Si, cq, first.a[p], first.da[p], d2a[p])
        vJ = qd[:, cq] @ Si.T
        d2ai += transform(-spatial.motion_cross(vJ), d2vi)
        P = cross_motion(first.dv[i][:, :, :, None], Si[None, :, None, :])
        d2ai[:, :, :, cv] += P
        d2ai[:, :, cv, :] += np.swapaxes(P, 2, 3)
        d2v.append(d2vi)
        d2a.append(d2ai)
    return d2v, d2a


def body_force_second_derivatives(I: list[np.ndarray], first: RneaFirstOrder,
                                  d2v: list[np.ndarray], d2a: list[np.ndarray]
                                  ) -> list[np.ndarray]:
    """`d2f_i = I_i d2a_i + d2v_i x* (I_i v_i) + v_i x* (I_i d2v_i)
    + pair(dv_i[a] x* (I_i dv_i)[b])`."""
    d2f = []
    for i, Ii in enumerate(I):
        v, dv = first.v[i], first.dv[i]
        h, dh = v @ Ii.T, transform(Ii, dv)
        d2f.append(transform(Ii, d2a[i]) + cross_force(d2v[i], h[:, :, None, None])
                   + transform(spatial.force_cross(v), transform(Ii, d2v[i]))
                   + _pair(cross_force(dv[:, :, :, None], dh[:, :, None, :])))
    return d2f


def rnea_second_order_backward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                                    first: RneaFirstOrder, d2f: list[np.ndarray]
                                    ) -> np.ndarray:
    """`d2tau (B, nv, n, n)`, leaf to root: `d2tau_i = S_i^T d2F_i` and
    `d2F_p += d2(Xup_i^T F_i)` (module docstring). Consumes `d2f`."""
    batch, n = d2f[0].shape[0], d2f[0].shape[-1]
    d2tau = np.zeros((batch, model.nv, n, n))
    for i in reversed(range(model.nb)):
        joint = model.joints[i]
        Si, cq = S[i], q_columns(model, i)
        d2tau[:, cq] = transform(Si.T, d2f[i])
        if joint.parent < 0:
            continue
        F, dF = first.F[i], first.dF[i]
        Z = d2f[i].copy()
        T = cross_force(Si[None, :, :, None], dF[:, :, None, :])
        Z[:, :, cq, :] += T
        Z[:, :, :, cq] += np.swapaxes(T, 2, 3)
        SF = cross_force(Si[None], F[:, :, None])
        Z[:, :, cq, cq] += cross_force(Si[None, :, None, :], SF[:, :, :, None])
        d2f[joint.parent] = d2f[joint.parent] + transform_transposed(kin.Xup[i], Z)
    return d2tau


def rnea_second_order(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                      I: list[np.ndarray], qd: np.ndarray, qdd: np.ndarray,
                      a_root: np.ndarray, f_ext: np.ndarray | None
                      ) -> tuple[RneaFirstOrder, np.ndarray]:
    """The first-order results and `d2tau (B, nv, 2 nv, 2 nv)` over `z = (q, qd)`,
    `d2tau[:, i, a, b] = d/dz_b (dtau_i/dz_a)`."""
    first = rnea_derivatives(model, kin, S, I, qd, qdd, a_root, f_ext)
    d2v, d2a = rnea_second_order_forward_pass(model, kin, S, qd, a_root, first)
    d2f = body_force_second_derivatives(I, first, d2v, d2a)
    return first, rnea_second_order_backward_pass(model, kin, S, first, d2f)


def mass_matrix_derivative(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                           I: list[np.ndarray]) -> np.ndarray:
    """`dM (B, nv, nv, nv)` with `dM[:, i, j, k] = dM_ij/dq_k` (local chart).

    Column `j` of `M` is RNEA at `qd = 0`, `qdd = e_j`, without gravity or external
    forces; its `q`-derivative comes from one first-order pass over all `nv` columns."""
    batch, nv = kin.Xup[0].shape[0], model.nv
    columns = Kinematics(*([np.repeat(x, nv, axis=0) for x in field]
                           for field in (kin.Xup, kin.oR, kin.op)))
    unit = np.tile(np.eye(nv), (batch, 1))
    first = rnea_derivatives(model, columns, S, I, np.zeros_like(unit), unit,
                             np.zeros((batch * nv, 6)), None)
    dM = first.dtau[:, :, :nv].reshape(batch, nv, nv, nv)  # [b, j, i, k]
    return np.swapaxes(dM, 1, 2)
