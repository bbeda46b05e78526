"""The centroidal momentum matrix `A` (Pinocchio's `ccrba` / `computeCentroidalMap`), its
configuration derivative and its time variation, from world-frame composites.

The momentum of the subtree moved by dof b, about the world origin, is
`F_b = Ic_j oS_b` (`Ic_j` the world composite inertia of b's joint j), so

    A = T(c) F,   T(c) = [[I, 0], [-[c], I]]    (momentum about the CoM c, world axes),

and `h = A qd`. Along the chart `q ⊕ eps`, dof a moves its subtree by the world twist
`xi_a = oS_a`, so (`crf(xi) = xi ×*`):

    dF_b/d eps_a = xi_a ×* F_b                                 a's joint above or at j,
                 = (crf(xi_a) Ic_i - Ic_i crm(xi_a)) oS_b      a's joint i strictly below j,
                 = 0                                           otherwise,
    dc/d eps_a   = F_lin,a / m,   dT/d eps_a F = [0; -(dc/d eps_a) × F_lin].
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial, world
from grid_rbd.reference.kinematics import Kinematics


def _composite_columns(model: RobotModel, kin: Kinematics, oS: np.ndarray,
                       I: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(oI (B, nb, 6, 6), Ic per dof (B, nv, 6, 6), F (B, 6, nv))`."""
    oI = world.world_inertias(model, kin, I)
    Ic_dof = world.subtree_sums(model, oI)[:, world.dof_joints(model)]
    F = np.einsum("bcij,bjc->bic", Ic_dof, oS)
    return oI, Ic_dof, F


def _to_com(model: RobotModel, oI: np.ndarray, X: np.ndarray) -> np.ndarray:
    """`T(c) X` for momenta `X` `(B, 6, ...)` about the origin; c from the world inertias."""
    mass = sum(body.inertia.mass for body in model.bodies)
    if mass == 0.0:
        return X.copy()
    # oI = [[m I, -[m c]], [[m c], ...]]: the first moment sits in its lower-left block.
    mc = oI[:, :, 3:, :3].sum(axis=1)
    c = np.stack([mc[:, 2, 1], mc[:, 0, 2], mc[:, 1, 0]], axis=-1) / mass
    out = X.copy()
    lin = np.moveaxis(X[:, :3], 1, -1)
    out[:, 3:] -= np.moveaxis(np.cross(c.reshape(c.shape[:1] + (1,) * (X.ndim - 2) + (3,)),
                                       lin), -1, 1)
    return out


def centroidal_map(model: RobotModel, kin: Kinematics, oS: np.ndarray, I: list[np.ndarray]
                   ) -> np.ndarray:
    """`(B, 6, nv)`: the centroidal momentum matrix `A`, `[linear; angular]` rows."""
    oI, _, F = _composite_columns(model, kin, oS, I)
    return _to_com(model, oI, F)


def centroidal_map_derivative(model: RobotModel, kin: Kinematics, oS: np.ndarray,
                              I: list[np.ndarray]) -> np.ndarray:
    """`(B, 6, nv, nv)`: `dA[:, :, b, a] = d A[:, b] / d eps_a` (module doc)."""
    oI, Ic_dof, F = _composite_columns(model, kin, oS, I)
    xi = np.swapaxes(oS, 1, 2)  # (B, nv, 6)
    # above[:, b, a] = xi_a ×* F_b
    above = spatial.cross_force(xi[:, None, :, :], np.swapaxes(F, 1, 2)[:, :, None, :])
    # below[:, b, a] = (crf(xi_a) Ic_a - Ic_a crm(xi_a)) oS_b, Ic_a of dof a's joint
    D = world.inertia_rate(Ic_dof, xi)  # (B, nv_a, 6, 6)
    below = np.einsum("baij,bjc->bcai", D, oS)
    ancestry = world.dof_ancestry(model)  # [a, b]: a's joint above or at b's
    strict_below = ancestry.T & ~ancestry
    dF = (np.where(ancestry.T[None, :, :, None], above, 0.0)
          + np.where(strict_below.T[None, :, :, None], below, 0.0))
    dF = np.moveaxis(dF, -1, 1)  # (B, 6, nv_b, nv_a)
    dA = _to_com(model, oI, dF)
    mass = sum(body.inertia.mass for body in model.bodies)
    if mass > 0.0:
        dc = np.swapaxes(F[:, :3], 1, 2) / mass  # (B, nv_a, 3)
        F_lin = np.swapaxes(F[:, :3], 1, 2)  # (B, nv_b, 3)
        dA[:, 3:] -= np.moveaxis(np.cross(dc[:, None, :, :], F_lin[:, :, None, :]), -1, 1)
    return dA


def centroidal_map_time_variation(model: RobotModel, kin: Kinematics, oS: np.ndarray,
                                  I: list[np.ndarray], qd: np.ndarray) -> np.ndarray:
    """`(B, 6, nv)`: `A_dot = sum_a dA/d eps_a qd_a`, directly: with body twists `ov`,
    `F_dot_b = Ic_dot_j oS_b + Ic_j (ov_j × oS_b)`, `Ic_dot_j = sum_{k in sub(j)}
    (crf(ov_k) oI_k - oI_k crm(ov_k))`, and `c_dot = h_lin / m`."""
    oI, Ic_dof, F = _composite_columns(model, kin, oS, I)
    ov = world.body_twists(model, oS, qd)
    joint_of = world.dof_joints(model)
    dIc_dof = world.subtree_sums(model, world.inertia_rate(oI, ov))[:, joint_of]
    dS = world.motion_subspace_rate(model, oS, ov)
    dF = np.einsum("bcij,bjc->bic", dIc_dof, oS) + np.einsum("bcij,bjc->bic", Ic_dof, dS)
    dA = _to_com(model, oI, dF)
    mass = sum(body.inertia.mass for body in model.bodies)
    if mass > 0.0:
        c_dot = np.einsum("bic,bc->bi", F[:, :3], qd) / mass
        dA[:, 3:] -= np.swapaxes(np.cross(c_dot[:, None, :], np.swapaxes(F[:, :3], 1, 2)),
                                 1, 2)
    return dA
