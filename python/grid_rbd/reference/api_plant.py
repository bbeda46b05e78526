"""`PlantMixin`: integrators, one plant step and its derivatives, costs and barriers of
`ReferenceRobot` (see `plant` and `costs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from grid_codegen.model import GRAVITY, RobotModel
from grid_rbd.reference import configuration, costs, kinematics, plant
from grid_rbd.reference import frames as frame_ops


def _batched(x, width: int, name: str) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    if x.shape[-1] != width:
        raise ValueError(f"{name} has width {x.shape[-1]}; expected {width}")
    return x


class PlantMixin:
    """Plant-layer methods of `ReferenceRobot`. States are `x = [q, qd]` `(B, nq + nv)`;
    derivatives are in the tangent `[dq, dqd]` (`2 nv`) and, for a step, `[dq, dqd, du]`
    (`3 nv`)."""

    model: RobotModel
    if TYPE_CHECKING:
        def forward_dynamics(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray: ...
        def forward_dynamics_gradient(self, q, qd, u, f_ext=None, gravity=GRAVITY
                                      ) -> np.ndarray: ...
        def minv(self, q) -> np.ndarray: ...
        def fdsva_so(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> tuple: ...
        def com(self, q) -> tuple: ...
        def ccrba(self, q, qd) -> tuple: ...
        def dccrba(self, q) -> np.ndarray: ...

    def _step(self, x, u, dt: float, integrator_type: str, gravity: float,
              with_jacobian: bool):
        def dynamics(q, qd, uu, jacobian):
            a = self.forward_dynamics(q, qd, uu, gravity=gravity)
            if not jacobian:
                return a, None, None
            return a, self.forward_dynamics_gradient(q, qd, uu, gravity=gravity), self.minv(q)
        q, qd = plant.split(self.model, x)
        u = _batched(u, self.model.nv, "u")
        stepper = plant.Stepper(plant.NumpyChart(self.model), dynamics)
        return stepper.step(q, qd, u, dt, integrator_type, with_jacobian)

    def plant_step(self, x, u, dt: float, integrator_type: str = "euler",
                   gravity: float = GRAVITY) -> np.ndarray:
        """`(B, nq + nv)`: the state one step of `dt` later (`grid_rbd._integrators`)."""
        return self._step(x, u, dt, integrator_type, gravity, False)[0]

    def plant_step_gradient(self, x, u, dt: float, integrator_type: str = "euler",
                            gravity: float = GRAVITY) -> np.ndarray:
        """`(B, 2nv, 3nv)`: `[A | B] = dx'/d(x, u)` in the tangent."""
        return self._step(x, u, dt, integrator_type, gravity, True)[1]

    def plant_step_hessian(self, x, u, dt: float, integrator_type: str = "euler",
                           gravity: float = GRAVITY) -> np.ndarray:
        """`(B, 2nv, 3nv, 3nv)`: `H[b, r, i, k] = d/dz_k (dx'_r/dz_i)` over `z = [dq, dqd,
        du]` (euler and semi-implicit euler, fixed or floating base; on a Lie-group joint
        the outer derivative is taken of the tangent gradient at the perturbed point, so
        central differences of `plant_step_gradient` along the group give it)."""
        u = _batched(u, self.model.nv, "u")

        def dynamics(q, qd, uu, jacobian):
            return (self.forward_dynamics(q, qd, uu, gravity=gravity),
                    self.forward_dynamics_gradient(q, qd, uu, gravity=gravity), self.minv(q))
        return plant.step_hessian(self.model, x, u, dt, integrator_type,
                                  lambda q, v, uu: self.fdsva_so(q, v, uu, gravity=gravity),
                                  dynamics)

    # -- costs ---------------------------------------------------------------------------
    def quadratic_state_cost(self, x, x_des, Q):
        """`1/2 e^T Q e` with `e = [q (-) q_des, qd - qd_des]` (the configuration part on
        the manifold): value, gradient `(B, 2nv)` and Gauss-Newton Hessian."""
        model, nv = self.model, self.model.nv
        q, v = plant.split(model, x)
        q_des, v_des = plant.split(model, x_des)
        e = np.concatenate([configuration.difference(model, q_des, q), v - v_des], axis=1)
        J = np.zeros((len(e), 2 * nv, 2 * nv))
        J[:, :nv, :nv] = configuration.difference_jacobian(model, q_des, q)
        J[:, nv:, nv:] = np.eye(nv)
        return costs.tracking(e, J, costs.weight(Q, 2 * nv, "Q"))

    def quadratic_input_cost(self, u, u_des, R):
        """`1/2 (u - u_des)^T R (u - u_des)`: value, gradient `(B, nv)`, Hessian."""
        nv = self.model.nv
        u, u_des = _batched(u, nv, "u"), _batched(u_des, nv, "u_des")
        e = u - u_des
        return costs.tracking(e, np.broadcast_to(np.eye(nv), (len(e), nv, nv)),
                              costs.weight(R, nv, "R"))

    def ee_pos_cost(self, q, p_des, W, frames=None):
        """`1/2 |p - p_des|^2_W` over the positions of `frames` (default: the end
        effectors), `p_des (B, 3 n)`: value, gradient `(B, 2nv)` (zero velocity part) and
        Gauss-Newton Hessian `(B, 2nv, 2nv)`."""
        model = self.model
        q = _batched(q, model.nq, "q")
        targets = [frame_ops.resolve_frame(model, f) for f in
                   (frames if frames is not None else self.ee_frames)]
        kin = kinematics.forward_pass(model, q)
        oS = kinematics.world_motion_subspace(model, kin)
        p = np.concatenate([kinematics.frame_pose(kin, f, len(q))[1] for f in targets], 1)
        Jp = np.concatenate([frame_ops.frame_jacobian(model, kin, oS, f, "LOCAL_WORLD_ALIGNED")
                             [:, :3] for f in targets], axis=1)
        return self._configuration_tracking(p - _batched(p_des, p.shape[1], "p_des"), Jp, W)

    def com_cost(self, q, p_des, W):
        """`1/2 |c - c_des|^2_W` of the centre of mass: as `ee_pos_cost`."""
        c, Jc = self.com(q)
        return self._configuration_tracking(c - _batched(p_des, 3, "p_des"), Jc, W)

    def _configuration_tracking(self, r, Jq, W):
        nv = self.model.nv
        J = np.zeros((len(r), r.shape[1], 2 * nv))
        J[:, :, :nv] = Jq
        return costs.tracking(r, J, costs.weight(W, r.shape[1], "W"))

    def momentum_cost(self, q, qd, h_des, W):
        """`1/2 |h - h_des|^2_W` of the centroidal momentum `h = A qd`: value, gradient
        `(B, 2nv)` and the Gauss-Newton Hessian with `dh/d[dq, dqd] = [dA/dq qd | A]`."""
        q = _batched(q, self.model.nq, "q")
        qd = _batched(qd, self.model.nv, "qd")
        A, h = self.ccrba(q, qd)
        dh_dq = np.einsum("brci,bc->bri", self.dccrba(q), qd)
        J = np.concatenate([dh_dq, A], axis=2)
        return costs.tracking(h - _batched(h_des, 6, "h_des"), J, costs.weight(W, 6, "W"))

    # -- barriers ------------------------------------------------------------------------
    def joint_position_barrier(self, var, lower, upper, mu):
        """The log barrier of positions `var (B, n)` inside `(lower, upper)`: value,
        gradient `(B, n)`, Hessian diagonal `(B, n)`."""
        return costs.barrier(var, lower, upper, mu)

    def joint_velocity_barrier(self, var, lower, upper, mu):
        return costs.barrier(_batched(var, self.model.nv, "velocities"), lower, upper, mu)

    def joint_torque_barrier(self, var, lower, upper, mu):
        return costs.barrier(_batched(var, self.model.nv, "torques"), lower, upper, mu)
