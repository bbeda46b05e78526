"""Recursive Newton-Euler inverse dynamics, in each body's local frame (Featherstone)."""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics


def rnea_forward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                      qd: np.ndarray, qdd: np.ndarray, a_root: np.ndarray
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Body velocities and accelerations:
    `v_i = Xup_i v_p + S_i qd_i`, `a_i = Xup_i a_p + S_i qdd_i + v_i x (S_i qd_i)`."""
    v: list[np.ndarray] = []
    a: list[np.ndarray] = []
    batch = qd.shape[0]
    for i, joint in enumerate(model.joints):
        dofs = slice(joint.idx_v, joint.idx_v + joint.nv)
        vj = qd[:, dofs] @ S[i].T
        if joint.parent < 0:
            v_parent, a_parent = np.zeros((batch, 6)), a_root
        else:
            v_parent, a_parent = v[joint.parent], a[joint.parent]
        vi = spatial.apply(kin.Xup[i], v_parent) + vj
        ai = (spatial.apply(kin.Xup[i], a_parent) + qdd[:, dofs] @ S[i].T
              + spatial.apply(spatial.motion_cross(vi), vj))
        v.append(vi)
        a.append(ai)
    return v, a


def rnea_backward_pass(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                       f: list[np.ndarray]) -> np.ndarray:
    """Project body forces on the joints, accumulating children into parents:
    `tau_i = S_i^T f_i`, `f_p += Xup_i^T f_i`. Consumes `f`."""
    batch = f[0].shape[0]
    tau = np.zeros((batch, model.nv))
    for i in reversed(range(model.nb)):
        joint = model.joints[i]
        tau[:, joint.idx_v:joint.idx_v + joint.nv] = f[i] @ S[i]
        if joint.parent >= 0:
            f[joint.parent] = f[joint.parent] + spatial.apply_transposed(kin.Xup[i], f[i])
    return tau


def body_forces(I: list[np.ndarray], v: list[np.ndarray], a: list[np.ndarray],
                f_ext: np.ndarray | None) -> list[np.ndarray]:
    """`f_i = I_i a_i + v_i x* (I_i v_i) - f_ext_i`."""
    f = []
    for i, (Ii, vi, ai) in enumerate(zip(I, v, a, strict=True)):
        h = vi @ Ii.T
        fi = ai @ Ii.T + spatial.apply(spatial.force_cross(vi), h)
        if f_ext is not None:
            fi = fi - f_ext[:, 6 * i:6 * i + 6]
        f.append(fi)
    return f


def rnea(model: RobotModel, kin: Kinematics, S: list[np.ndarray], I: list[np.ndarray],
         qd: np.ndarray, qdd: np.ndarray, a_root: np.ndarray,
         f_ext: np.ndarray | None) -> np.ndarray:
    v, a = rnea_forward_pass(model, kin, S, qd, qdd, a_root)
    return rnea_backward_pass(model, kin, S, body_forces(I, v, a, f_ext))

