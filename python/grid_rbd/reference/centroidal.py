"""Centre of mass, its Jacobian, and mechanical energy."""

from __future__ import annotations

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference.kinematics import Kinematics, point_jacobian, world_motion_subspace


def center_of_mass(model: RobotModel, kin: Kinematics) -> tuple[np.ndarray, np.ndarray]:
    """`(com (B, 3), J_com (B, 3, nv))` in the world frame; a massless robot gives zeros."""
    batch = kin.op[0].shape[0]
    oS = world_motion_subspace(model, kin)
    total = sum(body.inertia.mass for body in model.bodies)
    com = np.zeros((batch, 3))
    J = np.zeros((batch, 3, model.nv))
    if total == 0.0:
        return com, J
    for i, body in enumerate(model.bodies):
        m = body.inertia.mass
        if m == 0.0:
            continue
        c = (kin.oR[i] @ body.inertia.com) + kin.op[i]
        com += m * c
        J += m * point_jacobian(model, oS, i, c)
    return com / total, J / total


def energy(model: RobotModel, kin: Kinematics, v: list[np.ndarray], I: list[np.ndarray],
           gravity: np.ndarray) -> np.ndarray:
    """`(B, 3)`: kinetic `sum 1/2 v_i^T I_i v_i`, potential `-sum m_i g . c_i`, and their sum."""
    kinetic = sum(0.5 * np.einsum("bi,ij,bj->b", vi, Ii, vi) for vi, Ii in zip(v, I, strict=True))
    potential = 0.0
    for i, body in enumerate(model.bodies):
        c = (kin.oR[i] @ body.inertia.com) + kin.op[i]
        potential = potential - body.inertia.mass * (c @ gravity)
    kinetic = np.asarray(kinetic) + np.zeros(kin.op[0].shape[0])
    potential = np.asarray(potential) + np.zeros_like(kinetic)
    return np.stack([kinetic, potential, kinetic + potential], axis=-1)
