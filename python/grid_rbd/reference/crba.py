"""Composite-rigid-body mass matrix and its inverse."""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference.kinematics import Kinematics


def composite_inertias(model: RobotModel, kin: Kinematics, I: list[np.ndarray]
                       ) -> list[np.ndarray]:
    """`Ic_i`: the inertia of body i's whole subtree in body i's frame,
    accumulated leaf to root as `Ic_p += Xup_i^T Ic_i Xup_i`."""
    batch = kin.Xup[0].shape[0]
    Ic = [np.broadcast_to(Ii, (batch, 6, 6)).copy() for Ii in I]
    for i in reversed(range(model.nb)):
        parent = model.joints[i].parent
        if parent >= 0:
            X = kin.Xup[i]
            Ic[parent] += np.swapaxes(X, -1, -2) @ Ic[i] @ X
    return Ic


def crba(model: RobotModel, kin: Kinematics, S: list[np.ndarray], I: list[np.ndarray]
         ) -> np.ndarray:
    """`(B, nv, nv)` full symmetric mass matrix. Block (i, j) for an ancestor j of i is
    `S_j^T (Xup ... chain)^T Ic_i S_i`: the force `Ic_i S_i` carried down to body j."""
    Ic = composite_inertias(model, kin, I)
    batch = kin.Xup[0].shape[0]
    M = np.zeros((batch, model.nv, model.nv))
    for i, joint in enumerate(model.joints):
        rows = slice(joint.idx_v, joint.idx_v + joint.nv)
        F = Ic[i] @ S[i]
        diagonal = S[i].T @ F
        M[:, rows, rows] = 0.5 * (diagonal + np.swapaxes(diagonal, -1, -2))
        j = i
        while model.joints[j].parent >= 0:
            F = np.swapaxes(kin.Xup[j], -1, -2) @ F
            j = model.joints[j].parent
            cols = slice(model.joints[j].idx_v, model.joints[j].idx_v + model.joints[j].nv)
            block = S[j].T @ F
            M[:, cols, rows] = block
            M[:, rows, cols] = np.swapaxes(block, -1, -2)
    return M
