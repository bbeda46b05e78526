"""World-frame quantities shared by the frame, centroidal, Coriolis and pose-derivative
algorithms: dof ancestry, body twists, world inertias and cross products of column sets.

"World" means expressed in the world frame and taken about the world origin, `[linear;
angular]` order. Column `a` of `oS` (`kinematics.world_motion_subspace`) is the twist
`xi_a` that tangent direction `a` gives to every body it moves.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics


def dof_joints(model: RobotModel) -> np.ndarray:
    """`(nv,)`: the joint (= body) index each tangent direction belongs to."""
    out = np.zeros(model.nv, dtype=int)
    for i, joint in enumerate(model.joints):
        out[joint.idx_v:joint.idx_v + joint.nv] = i
    return out


def dof_ancestry(model: RobotModel) -> np.ndarray:
    """`(nv, nv)` bool: `[a, b]` is True when dof a's joint is dof b's joint or one of its
    ancestors, i.e. when moving along dof a moves the body that dof b carries."""
    joint_of = dof_joints(model)
    joint_anc = np.zeros((model.nb, model.nb), dtype=bool)
    for j in range(model.nb):
        joint_anc[list(model.ancestors(j)), j] = True
    return joint_anc[np.ix_(joint_of, joint_of)]


def support(model: RobotModel, body: int) -> np.ndarray:
    """`(nv,)` bool: the dofs that move `body` (none for a frame welded to the world)."""
    out = np.zeros(model.nv, dtype=bool)
    if body < 0:
        return out
    for j in model.ancestors(body):
        joint = model.joints[j]
        out[joint.idx_v:joint.idx_v + joint.nv] = True
    return out


def body_twists(model: RobotModel, oS: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """`(B, nb, 6)`: each body's world twist `ov_k = sum_{j in anc(k)} oS_j qd_j`."""
    ov = np.zeros((qd.shape[0], model.nb, 6))
    for k, joint in enumerate(model.joints):
        dofs = slice(joint.idx_v, joint.idx_v + joint.nv)
        ov[:, k] = np.einsum("bij,bj->bi", oS[:, :, dofs], qd[:, dofs])
        if joint.parent >= 0:
            ov[:, k] += ov[:, joint.parent]
    return ov


def motion_subspace_rate(model: RobotModel, oS: np.ndarray, ov: np.ndarray) -> np.ndarray:
    """`(B, 6, nv)`: `d/dt oS`; a joint's axes ride on its own body, so column a moves as
    `ov_{joint(a)} × oS_a` (Pinocchio's `dJ`)."""
    twist_of_dof = ov[:, dof_joints(model), :]
    return np.swapaxes(spatial.cross_motion(twist_of_dof, np.swapaxes(oS, 1, 2)), 1, 2)


def world_inertias(model: RobotModel, kin: Kinematics, I: list[np.ndarray]
                   ) -> np.ndarray:
    """`(B, nb, 6, 6)`: each body's spatial inertia in the world frame about the origin,
    `oI_k = X_k^T I_k X_k` with `X_k` the motion transform world -> body k."""
    out = []
    for k, Ik in enumerate(I):
        X = spatial.act_inv(kin.oR[k], kin.op[k])
        out.append(np.swapaxes(X, -1, -2) @ Ik @ X)
    return np.stack(out, axis=1)


def inertia_rate(oI: np.ndarray, ov: np.ndarray) -> np.ndarray:
    """`d/dt oI = crf(ov) oI - oI crm(ov)` for world inertias `(..., 6, 6)` moving with
    world twists `(..., 6)`."""
    return spatial.force_cross(ov) @ oI - oI @ spatial.motion_cross(ov)


def subtree_sums(model: RobotModel, per_body: np.ndarray) -> np.ndarray:
    """Sum a per-body quantity `(B, nb, ...)` over each body's subtree (leaf to root)."""
    out = per_body.copy()
    for k in reversed(range(model.nb)):
        parent = model.joints[k].parent
        if parent >= 0:
            out[:, parent] += out[:, k]
    return out
