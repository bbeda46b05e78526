"""Inertial-parameter regressors: joint torque, kinetic and potential energy.

Each body's parameters are Pinocchio's `pi = [m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`
(`Inertia.dynamic_parameters`: first moment and rotational inertia about the body
origin, in the body frame); the robot's `pi` stacks them body by body, `(10 nb,)`.
With `I0` the 3x3 inertia about the origin, `L(w)` below maps `pi[4:]` to `I0 w`.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference import spatial
from grid_rbd.reference.kinematics import Kinematics


def inertia_action_matrix(m: np.ndarray) -> np.ndarray:
    """`(B, 6, 10)`: `Y(m)` with `I m = Y(m) pi` for a motion `m = [u; w]`:
    `I m = [u m + w × (m c); -u × (m c) + I0 w]`."""
    u, w = m[:, :3], m[:, 3:]
    Y = np.zeros((m.shape[0], 6, 10))
    Y[:, :3, 0] = u
    Y[:, :3, 1:4] = spatial.skew(w)
    Y[:, 3:, 1:4] = -spatial.skew(u)
    wx, wy, wz = w[:, 0], w[:, 1], w[:, 2]
    # I0 w, parameters [xx, xy, yy, xz, yz, zz].
    Y[:, 3, 4], Y[:, 3, 5], Y[:, 3, 7] = wx, wy, wz
    Y[:, 4, 5], Y[:, 4, 6], Y[:, 4, 8] = wx, wy, wz
    Y[:, 5, 7], Y[:, 5, 8], Y[:, 5, 9] = wx, wy, wz
    return Y


def body_force_regressor(v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """`(B, 6, 10)`: `f = I a + v ×* (I v) = (Y(a) + crf(v) Y(v)) pi`."""
    return inertia_action_matrix(a) + spatial.force_cross(v) @ inertia_action_matrix(v)


def joint_torque_regressor(model: RobotModel, kin: Kinematics, S: list[np.ndarray],
                           v: list[np.ndarray], a: list[np.ndarray]) -> np.ndarray:
    """`(B, nv, 10 nb)`: `Y` with `tau = Y pi`, from RNEA's body velocities and
    accelerations (gravity in `a`). Body k's block reaches every joint above it through
    the force transforms `Xup^T`, as the RNEA backward pass carries `f_k`."""
    batch = v[0].shape[0]
    Y = np.zeros((batch, model.nv, 10 * model.nb))
    for k in range(model.nb):
        F = body_force_regressor(v[k], a[k])
        j = k
        while True:
            joint = model.joints[j]
            Y[:, joint.idx_v:joint.idx_v + joint.nv, 10 * k:10 * k + 10] = S[j].T @ F
            if joint.parent < 0:
                break
            F = np.swapaxes(kin.Xup[j], -1, -2) @ F
            j = joint.parent
    return Y


def kinetic_energy_regressor(model: RobotModel, v: list[np.ndarray]) -> np.ndarray:
    """`(B, 10 nb)`: `T = y pi` from body velocities `v_k = [u; w]` (body frame):
    `T_k = 1/2 m |u|^2 + (u × w) . (m c) + 1/2 w^T I0 w`."""
    blocks = []
    for vk in v:
        u, w = vk[:, :3], vk[:, 3:]
        wx, wy, wz = w[:, 0], w[:, 1], w[:, 2]
        blocks.append(np.stack([
            0.5 * np.einsum("bi,bi->b", u, u), *np.moveaxis(np.cross(u, w), -1, 0),
            0.5 * wx * wx, wx * wy, 0.5 * wy * wy, wx * wz, wy * wz, 0.5 * wz * wz], axis=-1))
    return np.concatenate(blocks, axis=-1)


def potential_energy_regressor(model: RobotModel, kin: Kinematics, gravity: np.ndarray
                               ) -> np.ndarray:
    """`(B, 10 nb)`: `V = y pi` with `V_k = -g . (oR_k (m c) + m op_k)`."""
    batch = kin.op[0].shape[0]
    y = np.zeros((batch, 10 * model.nb))
    for k in range(model.nb):
        y[:, 10 * k] = -kin.op[k] @ gravity
        y[:, 10 * k + 1:10 * k + 4] = -np.swapaxes(kin.oR[k], 1, 2) @ gravity
    return y
