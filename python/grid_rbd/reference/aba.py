"""Articulated-body forward dynamics (Featherstone's three passes), local frames."""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics


def aba(model: RobotModel, kin: Kinematics, S: list[np.ndarray], I: list[np.ndarray],
        qd: np.ndarray, tau: np.ndarray, a_root: np.ndarray, f_ext: np.ndarray | None
        ) -> np.ndarray:
    batch = qd.shape[0]
    nb = model.nb
    v: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    c: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    IA: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    pA: list[np.ndarray] = [None] * nb  # type: ignore[list-item]

    # Pass 1: velocities, bias accelerations c_i = v_i x (S_i qd_i), bias forces.
    for i, joint in enumerate(model.joints):
        vj = qd[:, joint.idx_v:joint.idx_v + joint.nv] @ S[i].T
        v_parent = np.zeros((batch, 6)) if joint.parent < 0 else v[joint.parent]
        v[i] = spatial.apply(kin.Xup[i], v_parent) + vj
        c[i] = spatial.apply(spatial.motion_cross(v[i]), vj)
        IA[i] = np.broadcast_to(I[i], (batch, 6, 6)).copy()
        pA[i] = spatial.apply(spatial.force_cross(v[i]), v[i] @ I[i].T)
        if f_ext is not None:
            pA[i] = pA[i] - f_ext[:, 6 * i:6 * i + 6]

    # Pass 2: articulated inertias, leaf to root.
    U: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    Dinv: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    u: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    for i in reversed(range(nb)):
        joint = model.joints[i]
        U[i] = IA[i] @ S[i]
        Dinv[i] = np.linalg.inv(S[i].T @ U[i])
        u[i] = tau[:, joint.idx_v:joint.idx_v + joint.nv] - pA[i] @ S[i]
        if joint.parent >= 0:
            UD = U[i] @ Dinv[i]
            Ia = IA[i] - UD @ np.swapaxes(U[i], -1, -2)
            pa = pA[i] + spatial.apply(Ia, c[i]) + spatial.apply(UD, u[i])
            Xt = np.swapaxes(kin.Xup[i], -1, -2)
            IA[joint.parent] += Xt @ Ia @ kin.Xup[i]
            pA[joint.parent] += spatial.apply(Xt, pa)

    # Pass 3: accelerations, root to leaf.
    qdd = np.zeros((batch, model.nv))
    a: list[np.ndarray] = [None] * nb  # type: ignore[list-item]
    for i, joint in enumerate(model.joints):
        a_parent = a_root if joint.parent < 0 else a[joint.parent]
        ai = spatial.apply(kin.Xup[i], a_parent) + c[i]
        qdd_i = spatial.apply(Dinv[i], u[i] - spatial.apply(np.swapaxes(U[i], -1, -2), ai))
        qdd[:, joint.idx_v:joint.idx_v + joint.nv] = qdd_i
        a[i] = ai + qdd_i @ S[i].T
    return qdd

