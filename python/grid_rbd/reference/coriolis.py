"""The Coriolis matrix `C(q, qd)` with `C qd = nonlinear_effects - g` and `M_dot = C + C^T`
(Pinocchio's `computeCoriolisMatrix`), in world-frame quantities.

Body k contributes `J_k^T (oI_k J_dot_k + B_k J_k)` with `oI_k` its world inertia, `J_k`
its world Jacobian (columns `oS_a`), `J_dot_k` columns `ov_{joint(a)} × oS_a`, and

    B_k = 1/2 (crf(ov_k) oI_k - oI_k crm(ov_k) + cross_bar(oI_k ov_k)),

`cross_bar(h) m = m ×* h` (skew). `B + B^T = d/dt oI` gives `M_dot = C + C^T`, and
`B ov = ov ×* oI ov` gives the Coriolis and centrifugal forces (Echeandia and Wensing,
2021). Summed over subtrees with composites `Ic_j = sum oI_k`, `Bc_j = sum B_k`:

    C[a, b] = oS_a^T (Ic_j oS_dot_b + Bc_j oS_b),  j the deeper of joint(a), joint(b),

when one of the two joints is an ancestor of (or is) the other, and 0 otherwise.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial, world
from grid_rbd.reference.kinematics import Kinematics


def cross_bar(h: np.ndarray) -> np.ndarray:
    """`(..., 6, 6)`: the matrix of `m -> m ×* h` for a force `h = [f; n]`:
    `[[0, -[f]], [-[f], -[n]]]`."""
    f, n = spatial.skew(h[..., :3]), spatial.skew(h[..., 3:])
    out = np.zeros(h.shape[:-1] + (6, 6))
    out[..., :3, 3:] = -f
    out[..., 3:, :3] = -f
    out[..., 3:, 3:] = -n
    return out


def coriolis_matrix(model: RobotModel, kin: Kinematics, oS: np.ndarray, I: list[np.ndarray],
                    qd: np.ndarray) -> np.ndarray:
    """`(B, nv, nv)`: the Coriolis matrix (module doc)."""
    ov = world.body_twists(model, oS, qd)
    oI = world.world_inertias(model, kin, I)
    h = np.einsum("bkij,bkj->bki", oI, ov)
    Bk = 0.5 * (world.inertia_rate(oI, ov) + cross_bar(h))
    Ic = world.subtree_sums(model, oI)
    Bc = world.subtree_sums(model, Bk)
    dS = world.motion_subspace_rate(model, oS, ov)

    joint_of = world.dof_joints(model)
    Ic_dof, Bc_dof = Ic[:, joint_of], Bc[:, joint_of]  # (B, nv, 6, 6)
    # Column b carried by its own joint's composite: F_b = Ic_jb dS_b + Bc_jb S_b.
    F = np.einsum("bcij,bjc->bic", Ic_dof, dS) + np.einsum("bcij,bjc->bic", Bc_dof, oS)
    upper = np.swapaxes(oS, 1, 2) @ F  # C[a, b] for joint(a) an ancestor of joint(b)
    # Row a carried by its own joint's composite: oS_a^T Ic_ja dS_b + oS_a^T Bc_ja S_b.
    Kt = np.einsum("bja,bajk->bak", oS, Ic_dof)
    Lt = np.einsum("bja,bajk->bak", oS, Bc_dof)
    lower = Kt @ dS + Lt @ oS  # C[a, b] for joint(b) a strict ancestor of joint(a)

    ancestry = world.dof_ancestry(model)
    strict_below = ancestry.T & ~ancestry
    return np.where(ancestry, upper, 0.0) + np.where(strict_below, lower, 0.0)
