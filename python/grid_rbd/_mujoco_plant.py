"""MuJoCo's configuration chart for the plant layer of `grid_rbd.MujocoHandle`.

The free joint `q = [p, quat w, x, y, z]` moves as `mj_integratePos` moves it: `p + dp`
in the world and `quat (x) exp(dtheta / 2)` (a rotation `R exp([dtheta])` by a local
angle), normalised; hinge and slide coordinates add. `difference` is
`mj_differentiatePos` (the local rotation vector of `R0^T R1` by its shortest path).
The integrators over this chart are MuJoCo's own: `euler` (`q' = integratePos(q, dt v)`,
`v' = v + dt qacc`), `semi_implicit_euler` (MuJoCo's Euler integrator: `v' = v + dt qacc`,
then `q' = integratePos(q, dt v')`; `grid_rbd._integrators.Stepper` over this chart)
and `rk4`, MuJoCo 4's `mjINT_RK4` (`MujocoStepper`): classical RK4 whose stages move the
configuration from `q` by `integratePos(q, inc_i)`, `inc_i = dt sum_j a_ij r_j`, with the
rates `r_j = [v_j lin, Jr(theta_j)^-1 omega_j, v_j joints]` (`theta_j` the angular part of
`inc_j`): the free joint's rotation integrated in its Lie algebra (Munthe-Kaas), where
MuJoCo 3 added the stage angular velocities themselves. They are not the Pinocchio
convention's steps converted: on a floating base whose linear and angular velocities are
both non-zero `mj_integratePos` and the SE(3) exponential differ at second order in `dt`.

Jacobians in the chart (tangents `[dp world, dtheta local, joints]` at each end):
`q' = integratePos(q, xi)` has `dq'/dq = blockdiag(I, exp([xi_w])^T, I)` and
`dq'/dxi = blockdiag(I, Jr(xi_w), I)`, `Jr` SO(3)'s right Jacobian; `e = q1 (-) q0` has
`de/dq1 = blockdiag(I, Jr(e_w)^-1, I)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_rbd._array_ops import ArrayOps
from grid_rbd._integrators import Stage, Stepper

#: Below these angles the SO(3) coefficients use their Taylor series (truncation and the
#: closed forms' cancellation both under about 1e-11 relative there).
SMALL = 1e-2
SMALL_INVERSE = 0.3
#: `d(t) = sum c_k t^2k` of `Jr(t)^-1` (`-(-1)^n B_2n / (2n)!`, B the Bernoulli numbers).
_D_SERIES = (1 / 12, 1 / 720, 1 / 30240, 1 / 1209600, 1 / 47900160)


def _outer(a: Any, b: Any) -> Any:
    return a[:, :, None] * b[:, None, :]


class MujocoChart:
    """`grid_rbd._integrators.Chart` over MuJoCo's free-joint chart (module doc), on one
    framework's arrays."""

    def __init__(self, nq: int, nv: int, like: Any) -> None:
        self.nq, self.nv = nq, nv
        self.ops = ArrayOps(like)

    # -- SO(3) --------------------------------------------------------------------------
    def _coefficients(self, theta: Any) -> tuple[Any, Any, Any]:
        """`sin t / t, (1 - cos t) / t^2, (t - sin t) / t^3`."""
        ops, m = self.ops, self.ops.m
        small = theta < SMALL
        t = ops.where(small, 1.0 + 0 * theta, theta)
        t2 = theta * theta
        t4 = t2 * t2
        return (ops.where(small, 1.0 - t2 / 6.0 + t4 / 120.0, m.sin(t) / t),
                ops.where(small, 0.5 - t2 / 24.0 + t4 / 720.0, (1.0 - m.cos(t)) / t**2),
                ops.where(small, 1.0 / 6.0 - t2 / 120.0 + t4 / 5040.0,
                          (t - m.sin(t)) / t**3))

    def _rotation_and_jacobian(self, w: Any) -> tuple[Any, Any]:
        """`exp([w])` and `Jr(w) = I - b [w] + c [w]^2` (B, 3, 3)."""
        ops = self.ops
        a, b, c = (x[:, None, None] for x in self._coefficients(ops.norm(w)))
        W = ops.skew(w)
        eye = ops.eye(3)
        return eye + a * W + b * (W @ W), eye - b * W + c * (W @ W)

    def _inverse_coefficients(self, theta: Any) -> tuple[Any, Any]:
        """`d = 1/t^2 - (1 + cos t) / (2 t sin t)` of `Jr(t)^-1 = I + [e]/2 + d [e]^2`, and
        `d'(t) / t`."""
        ops, m = self.ops, self.ops.m
        small = theta < SMALL_INVERSE
        t = ops.where(small, 1.0 + 0 * theta, theta)
        t2 = theta * theta
        series = sum(c * t2**k for k, c in enumerate(_D_SERIES))
        rate = sum(2 * k * c * t2 ** (k - 1) for k, c in enumerate(_D_SERIES) if k)
        cot, csc2 = m.cos(t / 2) / m.sin(t / 2), 1.0 / m.sin(t / 2) ** 2
        return (ops.where(small, series, 1.0 / t**2 - cot / (2.0 * t)),
                ops.where(small, rate,
                          (-2.0 / t**3 + csc2 / (4.0 * t) + cot / (2.0 * t * t)) / t))

    def _right_jacobian_inverse(self, e: Any) -> Any:
        """`Jr(e)^-1 = I + [e]/2 + d [e]^2` (B, 3, 3)."""
        d, _ = self._inverse_coefficients(self.ops.norm(e))
        E = self.ops.skew(e)
        return self.ops.eye(3) + 0.5 * E + d[:, None, None] * (E @ E)

    def rate(self, inc: Any, v: Any) -> Any:
        """`[v lin, Jr(inc_w)^-1 v_w, v joints]` (B, nv): the Lie-algebra rate of MuJoCo's
        RK4 (module doc)."""
        turned = (self._right_jacobian_inverse(inc[:, 3:6]) @ v[:, 3:6, None])[:, :, 0]
        return self.ops.cat([v[:, :3], turned, v[:, 6:]], 1)

    def rate_jacobians(self, inc: Any, v: Any) -> tuple[Any, Any]:
        """`d rate / d inc`, `d rate / d v` (B, nv, nv): with `e = inc_w`, `w = v_w`,
        `d(Jr(e)^-1 w)/de = -[w]/2 + d'(t)/t (e x (e x w)) e^T + d ((e.w) I + e w^T
        - 2 w e^T)`."""
        ops = self.ops
        e, w = inc[:, 3:6], v[:, 3:6]
        d, dd = self._inverse_coefficients(ops.norm(e))
        ew = (e * w).sum(1)[:, None, None]
        eye = ops.eye(3)
        ee_w = ops.cross(e, ops.cross(e, w, 1), 1)
        de = (-0.5 * ops.skew(w) + dd[:, None, None] * _outer(ee_w, e)
              + d[:, None, None] * (ew * eye + _outer(e, w) - 2.0 * _outer(w, e)))
        zero = 0 * self._blocks(de, inc)
        d_inc = ops.cat([zero[:, :3], ops.cat([zero[:, 3:6, :3], de, zero[:, 3:6, 6:]], 2),
                         zero[:, 6:]], 1)
        return d_inc, self._blocks(self._right_jacobian_inverse(e), inc)

    def _quat_multiply(self, p: Any, r: Any) -> Any:
        """Hamilton product of (B, 4) quaternions in `w, x, y, z` order."""
        ops = self.ops
        pw, pv, rw, rv = p[:, :1], p[:, 1:], r[:, :1], r[:, 1:]
        return ops.cat([pw * rw - (pv * rv).sum(1, keepdims=True),
                        pw * rv + rw * pv + ops.cross(pv, rv, 1)], 1)

    def _blocks(self, rotation: Any, like: Any) -> Any:
        """`(B, nv, nv)`: `blockdiag(I, rotation, I)` (rotation (B, 3, 3))."""
        ops, n = self.ops, self.nv
        eye = ops.eye(n)[None] + 0 * like[:, :1, None]
        return ops.cat([eye[:, :3], ops.cat([eye[:, 3:6, :3], rotation, eye[:, 3:6, 6:]], 2),
                        eye[:, 6:]], 1)

    # -- the chart ------------------------------------------------------------------------
    def integrate(self, q: Any, dq: Any) -> Any:
        """`mj_integratePos(q, dq, 1)` `(B, nq)`."""
        ops, m = self.ops, self.ops.m
        w = dq[:, 3:6]
        theta = ops.norm(w)
        a, _, _ = self._coefficients(0.5 * theta)  # sin(t/2) / (t/2)
        step = ops.cat([m.cos(0.5 * theta)[:, None], 0.5 * a[:, None] * w], 1)
        quat = self._quat_multiply(q[:, 3:7], step)
        quat = quat / ops.norm(quat)[:, None]
        return ops.cat([q[:, :3] + dq[:, :3], quat, q[:, 7:] + dq[:, 6:]], 1)

    def integrate_jacobians(self, q: Any, dq: Any) -> tuple[Any, Any]:
        rotation, jr = self._rotation_and_jacobian(dq[:, 3:6])
        return self._blocks(self.ops.swap(rotation), dq), self._blocks(jr, dq)

    def difference(self, q0: Any, q1: Any) -> Any:
        """`mj_differentiatePos(q0 -> q1)` `(B, nv)`."""
        ops = self.ops
        quat0 = q0[:, 3:7] / ops.norm(q0[:, 3:7])[:, None]
        quat1 = q1[:, 3:7] / ops.norm(q1[:, 3:7])[:, None]
        rel = self._quat_multiply(ops.cat([quat0[:, :1], -quat0[:, 1:]], 1), quat1)
        rel = rel * ops.where(rel[:, 0] < 0.0, -1.0 + 0 * rel[:, 0],
                              1.0 + 0 * rel[:, 0])[:, None]
        sin_half = ops.norm(rel[:, 1:])
        theta = 2.0 * ops.atan2(sin_half, rel[:, 0])
        tiny = sin_half < 1e-12
        scale = ops.where(tiny, 2.0 + 0 * theta,
                          theta / ops.where(tiny, 1.0 + 0 * theta, sin_half))
        return ops.cat([q1[:, :3] - q0[:, :3], rel[:, 1:] * scale[:, None],
                        q1[:, 7:] - q0[:, 7:]], 1)

    def difference_jacobian(self, q0: Any, q1: Any) -> Any:
        """`d (q1 (-) q0) / d q1` `(B, nv, nv)` in the tangent at `q1`."""
        e = self.difference(q0, q1)
        return self._blocks(self._right_jacobian_inverse(e[:, 3:6]), e)

    # -- for the Stepper ------------------------------------------------------------------
    def selector(self, like: Any, block: int) -> Any:
        out = np.zeros((self.nv, 3 * self.nv))
        out[:, block * self.nv:(block + 1) * self.nv] = np.eye(self.nv)
        return self.ops.const(out)

    def cat(self, xs: list, axis: int) -> Any:
        return self.ops.cat(xs, axis)


class MujocoStepper(Stepper):
    """`Stepper` over `MujocoChart`, with MuJoCo 4's RK4 (module doc) for "rk4"."""

    def _advance(self, q0: Any, v0: Any, u: Any, dt: float, integrator: str,
                 with_jacobian: bool) -> tuple[Stage, Stage]:
        if integrator != "rk4":
            return super()._advance(q0, v0, u, dt, integrator, with_jacobian)
        chart = self.chart
        q, v, lin = self._start(q0, v0, with_jacobian)

        def rate(inc: Stage, vel: Stage) -> Stage:
            value = chart.rate(inc.value, vel.value)
            if not with_jacobian:
                return Stage(value, None)
            d_inc, d_v = chart.rate_jacobians(inc.value, vel.value)
            return Stage(value, self._compose([(d_inc, inc), (d_v, vel)]))

        def moved(inc: Stage) -> Stage:
            value = chart.integrate(q.value, inc.value)
            if not with_jacobian:
                return Stage(value, None)
            d_q, d_inc = chart.integrate_jacobians(q.value, inc.value)
            return Stage(value, self._compose([(d_q, q), (d_inc, inc)]))

        zero = lin((0.0, v))
        rates, accels, vels = [], [], [v]
        incs = [zero]
        for a_row in ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)):
            if a_row:
                incs.append(lin(*((dt * c, r) for c, r in zip(a_row, rates, strict=True))))
                vels.append(lin((1.0, v), *((dt * c, a) for c, a in zip(a_row, accels,
                                                                          strict=True))))
            stage_q = q if not a_row else moved(incs[-1])
            accels.append(self._accel(stage_q, vels[-1], u, with_jacobian))
            rates.append(rate(incs[-1], vels[-1]))
        weights = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
        q_next = moved(lin(*((dt * b, r) for b, r in zip(weights, rates, strict=True))))
        v_next = lin((1.0, v), *((dt * b, a) for b, a in zip(weights, accels, strict=True)))
        return q_next, v_next


def state_tracking_cost(handle: Any, x: Any, x_des: Any, Q: Any) -> tuple[Any, Any, Any]:
    """`quadratic_state_cost` in MuJoCo's chart: `1/2 e^T Q e`, `e = [mj_differentiatePos(
    q_des -> q), qd - qd_des]`; value, gradient `(B, 2nv)` and Gauss-Newton Hessian in the
    tangent `[dq (mj_integratePos), dqd]`."""
    from grid_rbd._plant import _tracking, _weight

    x, x_des = handle._as_arrays(x, x_des)
    q, qd, _ = handle._split_state(x)
    q_des, qd_des, _ = handle._split_state(x_des, "x_des")
    chart = MujocoChart(handle.nq, handle.nv, q)
    ops, nv = chart.ops, handle.nv
    e = ops.cat([chart.difference(q_des, q), qd - qd_des], 1)
    Jq = chart.difference_jacobian(q_des, q)
    zeros = 0 * Jq
    J = ops.cat([ops.cat([Jq, zeros], 2), ops.cat([zeros, zeros + ops.eye(nv)], 2)], 1)
    return _tracking(ops, e, J, _weight(ops, Q, 2 * nv, "Q"))
