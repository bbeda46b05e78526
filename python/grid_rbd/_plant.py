"""The plant layer on the handles: one step of the dynamics and its Jacobian, several
steps, costs and barriers, composed from the artifact's kernels with array operations of
the handle's own framework (numpy, torch or jax; see `grid_rbd._array_ops`).

The integrators are `grid_rbd._integrators` over `HandleChart` (this module's chart of
the configuration manifold: joint coordinates add, the free flyer `[p, quat xyzw]` moves
by the SE(3) exponential of its local twist, as Pinocchio's `integrate`) with
`forward_dynamics`, `forward_dynamics_gradient` and `minv` as the dynamics. On torch and
JAX `plant_step` and `integrator` are differentiable (through the analytic backward of
`forward_dynamics` and the framework's own operations, a floating base included);
`plant_step_gradient` returns the tangent Jacobian `[A | B]` itself and
`plant_step_hessian` the step's second derivatives (`grid_rbd._step_hessian`, from the
`fdsva_so` kernel), both forward-only. Costs and barriers are as
`grid_rbd.reference.costs` describes (tangent gradients, Gauss-Newton Hessians).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_codegen.registry import algorithm
from grid_rbd._array_ops import ArrayOps
from grid_rbd._integrators import Stepper, check_hessian_step, check_step
from grid_rbd._step_hessian import left_jacobian, moved_velocity, step_hessian
from grid_rbd._step_inputs import plan_of, step_columns
from grid_rbd.reference.costs import barrier_bounds

SMALL = 1e-2  # below this rotation angle the SE(3) coefficients use their Taylor series


class HandleChart:
    """The configuration chart on one framework's arrays (module doc): joint coordinates
    add, and with `floating` the free-flyer root `q[:7] = [p, quat xyzw]` moves on SE(3).
    Which of the two a robot has is its artifact's recorded chart (`PlantMethods.
    _plant_chart`), never a count of coordinates (a fixed base with one ball joint has
    nq == nv + 1 too)."""

    def __init__(self, floating: bool, nq: int, nv: int, like: Any) -> None:
        self.nq, self.nv = nq, nv
        self.floating = bool(floating)
        self.ops = ArrayOps(like)

    # -- SE(3) pieces ---------------------------------------------------------------------
    def _coefficients(self, theta: Any) -> tuple[Any, Any, Any]:
        """`sin t / t, (1 - cos t)/t^2, (t - sin t)/t^3` (the left Jacobian's, which
        cancel more, are `grid_rbd._step_hessian.coefficients`)."""
        ops, m = self.ops, self.ops.m
        small = theta < SMALL
        t = ops.where(small, 1.0 + 0 * theta, theta)
        t2 = theta * theta
        s, c = m.sin(t), m.cos(t)
        return (ops.where(small, 1.0 - t2 / 6.0, s / t),
                ops.where(small, 0.5 - t2 / 24.0, (1.0 - c) / t**2),
                ops.where(small, 1.0 / 6.0 - t2 / 120.0, (t - s) / t**3))

    def _quat_matrix(self, quat: Any) -> Any:
        ops = self.ops
        quat = quat / ops.norm(quat)[:, None]
        x, y, z, w = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]
        return ops.stack([
            ops.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], 1),
            ops.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], 1),
            ops.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], 1),
        ], 1)

    def _quat_multiply(self, p: Any, r: Any) -> Any:
        ops = self.ops
        pv, pw, rv, rw = p[:, :3], p[:, 3:], r[:, :3], r[:, 3:]
        return ops.cat([pw * rv + rw * pv + ops.cross(pv, rv, 1),
                        pw * rw - (pv * rv).sum(1, keepdims=True)], 1)

    def _exp(self, v: Any, w: Any) -> tuple[Any, Any]:
        ops = self.ops
        a, b, c = self._coefficients(ops.norm(w))
        W = ops.skew(w)
        eye = ops.eye(3)
        R = eye + a[:, None, None] * W + b[:, None, None] * (W @ W)
        V = eye + b[:, None, None] * W + c[:, None, None] * (W @ W)
        return R, (V @ v[:, :, None])[:, :, 0]

    def _left_jacobian(self, v: Any, w: Any) -> Any:
        """`(B, 6, 6)`: SE(3)'s left Jacobian of exp at `[v; w]` (`grid_rbd._step_hessian`'s,
        the reference's `configuration.se3_left_jacobian`)."""
        return left_jacobian(self.ops, v, w)

    def _adjoint_inverse(self, R: Any, p: Any) -> Any:
        ops = self.ops
        RT = ops.swap(R)
        return ops.cat([ops.cat([RT, -RT @ ops.skew(p)], 2), ops.cat([0 * RT, RT], 2)], 1)

    def _with_base_block(self, block: Any, like: Any) -> Any:
        """`(B, nv, nv)`: `block` (B, 6, 6) on the base dofs, the identity elsewhere."""
        ops, n = self.ops, self.nv - 6
        if n == 0:
            return block
        b = 0 * like[:, :1, None]  # (B, 1, 1) zeros, for the batch axis
        top = ops.cat([block, b + ops.const(np.zeros((6, n)))], 2)
        bottom = ops.cat([b + ops.const(np.zeros((n, 6))), b + ops.eye(n)], 2)
        return ops.cat([top, bottom], 1)

    # -- the chart ------------------------------------------------------------------------
    def integrate(self, q: Any, dq: Any) -> Any:
        if not self.floating:
            return q + dq
        ops = self.ops
        v, w = dq[:, :3], dq[:, 3:6]
        quat = q[:, 3:7]
        theta = ops.norm(w)
        _, b, c = self._coefficients(theta)
        W = ops.skew(w)
        V = ops.eye(3) + b[:, None, None] * W + c[:, None, None] * (W @ W)
        p = q[:, :3] + (self._quat_matrix(quat) @ (V @ v[:, :, None]))[:, :, 0]
        half_sinc = self._coefficients(0.5 * theta)[0]
        step = ops.cat([0.5 * half_sinc[:, None] * w, self.ops.m.cos(0.5 * theta)[:, None]], 1)
        new = self._quat_multiply(quat, step)
        new = new / ops.norm(new)[:, None]
        new = new * ops.where((new * quat).sum(1) < 0.0, -1.0 + 0 * theta,
                              1.0 + 0 * theta)[:, None]
        return ops.cat([p, new, q[:, 7:] + dq[:, 6:]], 1)

    def integrate_jacobians(self, q: Any, dq: Any) -> tuple[Any, Any]:
        ops = self.ops
        if not self.floating:
            eye = ops.eye(self.nv)[None] + 0 * dq[:, :, None]
            return eye, eye
        v, w = dq[:, :3], dq[:, 3:6]
        R, p = self._exp(v, w)
        return (self._with_base_block(self._adjoint_inverse(R, p), dq),
                self._with_base_block(self._left_jacobian(-v, -w), dq))

    def difference(self, q0: Any, q1: Any) -> Any:
        """`q1 (-) q0` `(B, nv)` (the reference's `configuration.difference`)."""
        if not self.floating:
            return q1 - q0
        ops = self.ops
        quat0 = q0[:, 3:7] / ops.norm(q0[:, 3:7])[:, None]
        quat1 = q1[:, 3:7] / ops.norm(q1[:, 3:7])[:, None]
        rel = self._quat_multiply(ops.cat([-quat0[:, :3], quat0[:, 3:]], 1), quat1)
        rel = rel * ops.where(rel[:, 3] < 0.0, -1.0 + 0 * rel[:, 3], 1.0 + 0 * rel[:, 3])[:, None]
        sin_half = ops.norm(rel[:, :3])
        theta = 2.0 * ops.atan2(sin_half, rel[:, 3])
        tiny = sin_half < 1e-12
        scale = ops.where(tiny, 2.0 + 0 * theta,
                          theta / ops.where(tiny, 1.0 + 0 * theta, sin_half))
        w = rel[:, :3] * scale[:, None]
        R0 = self._quat_matrix(quat0)
        p = (ops.swap(R0) @ (q1[:, :3] - q0[:, :3])[:, :, None])
        J3 = self._left_jacobian(0 * w, w)[:, :3, :3]
        v = (ops.inv(J3) @ p)[:, :, 0]
        return ops.cat([v, w, q1[:, 7:] - q0[:, 7:]], 1)

    def difference_jacobian(self, q0: Any, q1: Any) -> Any:
        """`d (q1 (-) q0) / d q1` `(B, nv, nv)`."""
        ops = self.ops
        e = self.difference(q0, q1)
        if not self.floating:
            return ops.eye(self.nv)[None] + 0 * e[:, :, None]
        return self._with_base_block(ops.inv(self._left_jacobian(-e[:, :3], -e[:, 3:6])), e)

    # -- for the Stepper ------------------------------------------------------------------
    def selector(self, like: Any, block: int) -> Any:
        out = np.zeros((self.nv, 3 * self.nv))
        out[:, block * self.nv:(block + 1) * self.nv] = np.eye(self.nv)
        return self.ops.const(out)

    def cat(self, xs: list, axis: int) -> Any:
        return self.ops.cat(xs, axis)


def _weight(ops: ArrayOps, W: Any, n: int, what: str) -> Any:
    """`(1 or B, n, n)` from a scalar, an `(n,)` diagonal, an `(n, n)` matrix or `(B, n, n)`."""
    if not hasattr(W, "shape") or type(W).__module__.startswith("numpy") or np.isscalar(W):
        W = ops.const(np.asarray(W, dtype=np.float64))
    shape = tuple(W.shape)
    if shape == ():
        return W * ops.eye(n)[None]
    if shape == (n,):
        return W[None, :, None] * ops.eye(n)[None]
    if shape == (n, n):
        return W[None]
    if len(shape) == 3 and shape[1:] == (n, n):
        return W
    raise ValueError(f"{what} has shape {shape}; expected a scalar, ({n},) (a diagonal), "
                     f"({n}, {n}) or (B, {n}, {n})")


def _tracking(ops: ArrayOps, r: Any, J: Any, W: Any) -> tuple[Any, Any, Any]:
    Wr = (W @ r[:, :, None])[:, :, 0]
    value = 0.5 * (r * Wr).sum(1)
    JT = ops.swap(J)
    grad = (JT @ Wr[:, :, None])[:, :, 0]
    hess = JT @ W @ J
    return value, grad, 0.5 * (hess + ops.swap(hess))


def _barrier(ops: ArrayOps, x: Any, lower: Any, upper: Any, mu: float) -> tuple:
    lower_np, upper_np, mu = barrier_bounds(lower, upper, mu, tuple(x.shape[1:]))
    m = ops.m
    below, above = x - ops.const(lower_np), ops.const(upper_np) - x
    inside = (below > 0) & (above > 0)
    one = 1.0 + 0 * x
    safe_b, safe_a = ops.where(inside, below, one), ops.where(inside, above, one)
    finite = -mu * (m.log(safe_b) + m.log(safe_a)).sum(1)
    all_inside = inside.all(1) if ops.kind != "torch" else inside.all(dim=1)
    value = ops.where(all_inside, finite, finite * 0 + float("inf"))
    return (value, -mu * (1.0 / safe_b - 1.0 / safe_a),
            mu * (1.0 / safe_b**2 + 1.0 / safe_a**2))


class PlantMethods:
    """Mixin of the three handles (module doc). The handle supplies `nq`, `nv`,
    `algorithms`, `_stop_gradient` and the kernel methods."""

    def _as_arrays(self, *xs: Any) -> tuple:
        return tuple(self._as_array(x) for x in xs)

    def _require_plant(self, needs: tuple[str, ...], method: str) -> None:
        built = plan_of(self).algorithms
        missing = [a for a in needs if a not in built]
        if missing:
            profiles = ", ".join(dict.fromkeys(repr(algorithm(a).profile) for a in missing))
            raise RuntimeError(f"{method} needs {', '.join(needs)}; this artifact lacks "
                               f"{', '.join(missing)}: register with {profiles} in "
                               "algorithm_list")

    def _check_state(self, x: Any, name: str = "x") -> tuple[Any, bool]:
        """`x` as `(B, nq + nv)` (a single state viewed as a batch of one) and whether it
        was a single state."""
        single = x.ndim == 1
        if single:
            x = x[None]
        width = plan_of(self).state_width
        if x.ndim != 2:
            raise ValueError(f"{name} has shape {tuple(x.shape)}; a state [q, qd] is "
                             f"({width},) or a batch (B, {width})")
        if x.shape[1] != width:
            raise ValueError(f"{name} has width {x.shape[1]}; the state [q, qd] of this "
                             f"robot has nq + nv = {width}")
        return x, single

    def _split_state(self, x: Any, name: str = "x") -> tuple[Any, Any, bool]:
        x, single = self._check_state(x, name)
        nq = plan_of(self).nq
        return x[:, :nq], x[:, nq:], single

    def _plant_chart(self, method: str) -> str:
        """"vector" or "free_flyer" (a free-flyer root, added with floating_base=True or
        the URDF's own root `floating` joint): the chart `HandleChart` integrates on,
        from the artifact's recorded one (meta.json's "q_chart", read once per handle:
        `grid_rbd._step_inputs.plan_of`). Other charts are refused, naming the joints:
        the handles do not integrate ball, planar or inner free-flyer joints."""
        chart = plan_of(self).chart
        if chart in ("vector", "free_flyer"):
            return chart
        if chart == (("free_flyer", 0, 0),):
            return "free_flyer"
        joints = ("not recorded in this artifact's metadata" if chart is None else
                  ", ".join(f"{kind} at q[{iq}], v[{iv}]" for kind, iq, iv in chart))
        raise ValueError(f"{method} is provided for a vector configuration and a "
                         f"free-flyer root; this robot has ball, planar or inner "
                         f"free-flyer joints (nq {self.nq}, nv {self.nv}; {joints}): the "
                         "float64 reference (grid_rbd.reference) has them")

    def _stepper(self, like: Any, gravity: float) -> Stepper:
        plan = plan_of(self)
        chart = HandleChart(self._plant_chart("plant_step") == "free_flyer", plan.nq,
                            plan.nv, like)
        ops = chart.ops
        forward_dynamics = self.forward_dynamics

        def dynamics(q, qd, u, with_jacobian):
            q, qd, u = ops.contiguous(q), ops.contiguous(qd), ops.contiguous(u)
            a = forward_dynamics(q, qd, u, gravity=gravity)
            if not with_jacobian:
                return a, None, None
            return (a, self.forward_dynamics_gradient(q, qd, u, gravity=gravity),
                    self.minv(q))
        return Stepper(chart, dynamics)

    def _begin_steps(self, x: Any, u: Any, dt: float, integrator_type: str, method: str
                     ) -> tuple[Any, Any, Any, float, bool]:
        """What `plant_step` and `integrator` check once per call: `(q, qd, u, dt,
        single)` with the state split and a single state viewed as a batch of one."""
        x, u = self._as_arrays(x, u)
        dt = check_step(integrator_type, dt)
        self._require_plant(("forward_dynamics",), method)
        q, qd, single = self._split_state(x)
        return q, qd, u[None] if single else u, dt, single

    def plant_step(self, x: Any, u: Any, dt: float, integrator_type: str = "euler", *,
                   gravity: float = -9.81) -> Any:
        """`(B, nq + nv)`: the state `x = [q, qd]` one step of `dt` later under torques `u`
        (`integrator_type`: "euler", "semi_implicit_euler" or "rk4"; see
        `grid_rbd._integrators`). Differentiable on torch and JAX."""
        q, qd, u, dt, single = self._begin_steps(x, u, dt, integrator_type, "plant_step")
        out = self._stepper(q, gravity).step(q, qd, u, dt, integrator_type)[0]
        return out[0] if single else out

    def plant_step_gradient(self, x: Any, u: Any, dt: float, integrator_type: str = "euler",
                            *, gravity: float = -9.81) -> Any:
        """`(B, 2nv, 3nv)`: `[A | B] = dx'/d(x, u)` in the tangent `[dq, dqd]` of the
        states and `u` (forward-only). With the plant profile (`emit_plant=True`) on a
        vector configuration or a free-flyer root, euler and semi-implicit euler are one
        fused kernel that reads `x` itself; otherwise it is composed from FD, its
        gradient and M^-1 over the chart."""
        dt = check_step(integrator_type, dt)
        fused = plan_of(self).fused.get(integrator_type)
        if fused is not None:  # the plant profile's kernel (emit_plant=True): one launch
            return self._fused_step_gradient(fused, x, u, dt, gravity)
        self._plant_chart("plant_step_gradient")
        self._require_plant(("forward_dynamics", "forward_dynamics_gradient", "minv"),
                            "plant_step_gradient")
        x, u = self._as_arrays(x, u)
        x, u = self._stop_gradient(x), self._stop_gradient(u)
        q, qd, single = self._split_state(x)
        u = u[None] if single else u
        G = self._stepper(q, gravity).step(q, qd, u, dt, integrator_type, True)[1]
        return G[0] if single else G

    def _fused_step_gradient(self, kernel: str, x: Any, u: Any, dt: float,
                             gravity: float) -> Any:
        """The fused kernel `kernel` on the state `x` as given (no split into `q`, `qd`:
        the kernel reads them in `x`) and the handle's cached column of `dt`
        (`grid_rbd._step_inputs.StepColumns`). numpy and torch; the JAX handle has its
        own (one compiled call)."""
        x, u = self._stop_gradient(self._as_array(x)), self._stop_gradient(self._as_array(u))
        x, single = self._check_state(x)
        u = u[None] if single else u
        if isinstance(x, np.ndarray):  # numpy's kernels take C-contiguous arrays
            x, u = np.ascontiguousarray(x), np.ascontiguousarray(u)
        column = step_columns(self).get(x, x.shape[0], dt)
        G = getattr(self, kernel)(x, u, column, gravity=gravity)
        return G[0] if single else G

    def plant_step_hessian(self, x: Any, u: Any, dt: float, integrator_type: str = "euler",
                           *, gravity: float = -9.81) -> Any:
        """`(B, 2nv, 3nv, 3nv)`: `H[b, r, i, k] = d/dz_k (dx'_r/dz_i)` over `z = [dq, dqd,
        du]` (euler and semi-implicit euler; a vector configuration or a free-flyer root,
        where the outer derivative is taken of the tangent gradient at the perturbed
        point: `grid_rbd._step_hessian`). From the `fdsva_so` kernel (the "second_order"
        profile) and, for a free flyer under semi-implicit euler, `forward_dynamics`,
        its gradient and `minv` (the core profile). numpy: float64 out, on a float32
        build too (assembled in float64). torch / JAX: the handle's dtype, where the
        kernels wrote it; forward-only (an input that requires grad is refused)."""
        dt = check_hessian_step(integrator_type, dt)
        groups = self._lie_groups("plant_step_hessian")
        needs = ("fdsva_so",)
        if groups and integrator_type == "semi_implicit_euler":
            needs += ("forward_dynamics", "forward_dynamics_gradient", "minv")
        self._require_plant(needs, "plant_step_hessian")
        x, u = self._as_arrays(x, u)
        ops = ArrayOps(x)
        if ops.kind == "numpy":
            x, u = np.asarray(x), np.asarray(u)
        if ops.kind == "torch" and any(self._needs_gradient(a) for a in (x, u)):
            raise RuntimeError("plant_step_hessian is forward-only (no backward), but an "
                               "input requires grad; detach the inputs or call it under "
                               "torch.no_grad()")
        q, qd, single = self._split_state(x)
        u = u[None] if single else u
        if ops.kind == "numpy":
            q, qd, u = (np.ascontiguousarray(a, dtype=self._dtype) for a in (q, qd, u))
        else:
            q, qd, u = ops.contiguous(q), ops.contiguous(qd), ops.contiguous(u)
        blocks = self.fdsva_so(q, qd, u, gravity=gravity)
        w = Jw = None
        if groups:
            w, Jw = moved_velocity(ArrayOps(q), q, qd, u, dt, integrator_type,
                                   self._stepper(q, gravity).dynamics)
        if ops.kind == "numpy":  # the second derivatives are assembled in float64
            blocks = [b.astype(np.float64) for b in blocks]
            if groups:
                w, Jw = w.astype(np.float64), Jw.astype(np.float64)
            ops = ArrayOps(blocks[0])
        H = step_hessian(ops, blocks, dt, integrator_type, groups, w, Jw)
        return H[0] if single else H

    def _lie_groups(self, method: str) -> list[tuple[int, range]]:
        """`[]` on a vector configuration, the free-flyer root's `(0, range(6))`
        (`grid_rbd._step_hessian` groups); other charts are refused (`_plant_chart`)."""
        return [(0, range(6))] if self._plant_chart(method) == "free_flyer" else []

    def integrator(self, x: Any, u: Any, dt: float, steps: int = 1,
                   integrator_type: str = "euler", *, gravity: float = -9.81) -> Any:
        """The state after `steps` steps of `dt` under constant torques `u`; differentiable
        on torch and JAX (`dt` and `steps` are static)."""
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
            raise ValueError(f"steps must be a positive int; got {steps!r}")
        self._plant_chart("integrator")
        q, qd, u, dt, single = self._begin_steps(x, u, dt, integrator_type, "integrator")
        stepper = self._stepper(q, gravity)
        for _ in range(int(steps)):  # the state stays split between the steps
            q, qd = stepper.advance(q, qd, u, dt, integrator_type)
        out = stepper.chart.cat([q, qd], 1)
        return out[0] if single else out

    @property
    def cost_frames(self) -> tuple[str, ...]:
        """The frames `ee_pos_cost` tracks by default (`register_robot(cost_frames=...)`;
        the end effectors when none were named)."""
        return tuple(self._meta_dict().get("cost_frames") or self.ee_names)

    # -- costs ---------------------------------------------------------------------------
    def quadratic_state_cost(self, x: Any, x_des: Any, Q: Any) -> tuple[Any, Any, Any]:
        """`1/2 e^T Q e`, `e = [q (-) q_des, qd - qd_des]`: value `(B,)`, gradient
        `(B, 2nv)` and Gauss-Newton Hessian `(B, 2nv, 2nv)` in the tangent."""
        x, x_des = self._as_arrays(x, x_des)
        q, qd, _ = self._split_state(x)
        q_des, qd_des, _ = self._split_state(x_des, "x_des")
        chart = HandleChart(self._plant_chart("quadratic_state_cost") == "free_flyer",
                            self.nq, self.nv, q)
        ops, nv = chart.ops, self.nv
        e = ops.cat([chart.difference(q_des, q), qd - qd_des], 1)
        Jq = chart.difference_jacobian(q_des, q)
        zeros = 0 * Jq
        J = ops.cat([ops.cat([Jq, zeros], 2), ops.cat([zeros, zeros + ops.eye(nv)], 2)], 1)
        return _tracking(ops, e, J, _weight(ops, Q, 2 * nv, "Q"))

    def quadratic_input_cost(self, u: Any, u_des: Any, R: Any) -> tuple[Any, Any, Any]:
        """`1/2 (u - u_des)^T R (u - u_des)`: value, gradient `(B, nv)`, Hessian."""
        u, u_des = self._as_arrays(u, u_des)
        ops = ArrayOps(u)
        e = u - u_des
        J = ops.eye(self.nv)[None] + 0 * e[:, :, None]
        return _tracking(ops, e, J, _weight(ops, R, self.nv, "R"))

    def _configuration_tracking(self, r: Any, Jq: Any, W: Any) -> tuple[Any, Any, Any]:
        ops = ArrayOps(r)
        J = ops.cat([Jq, 0 * Jq], 2)
        return _tracking(ops, r, J, _weight(ops, W, r.shape[1], "W"))

    def ee_pos_cost(self, q: Any, p_des: Any, W: Any, frames: Any = None
                    ) -> tuple[Any, Any, Any]:
        """`1/2 |p - p_des|^2_W` of the positions of `frames` (any frame names; default:
        the registration's `cost_frames`, else the end effectors), `p_des (B, 3 n)`:
        value, gradient `(B, 2nv)` (its velocity part zero) and Gauss-Newton Hessian.
        Needs the kinematics profile."""
        q, p_des = self._as_arrays(q, p_des)
        default = self._meta_dict().get("cost_frames") or self.ee_names
        names = list(default if frames is None else
                     ([frames] if isinstance(frames, str) else frames))
        p = self.end_effector_pose_runtime(q, names)
        Jp = self.end_effector_pose_gradient_runtime(q, names)
        keep = [6 * k + r for k in range(len(names)) for r in range(3)]
        return self._configuration_tracking(p[:, keep] - p_des, Jp[:, keep], W)

    def com_cost(self, q: Any, p_des: Any, W: Any) -> tuple[Any, Any, Any]:
        """`1/2 |c - c_des|^2_W` of the centre of mass (needs the centroidal profile)."""
        q, p_des = self._as_arrays(q, p_des)
        c, Jc = self.com(ArrayOps(q).contiguous(q))
        return self._configuration_tracking(c - p_des, Jc, W)

    def momentum_cost(self, q: Any, qd: Any, h_des: Any, W: Any) -> tuple[Any, Any, Any]:
        """`1/2 |h - h_des|^2_W` of the centroidal momentum: value, gradient `(B, 2nv)`,
        Gauss-Newton Hessian with `dh/d[dq, dqd] = [dA/dq qd | A]` (centroidal profile)."""
        q, qd, h_des = self._as_arrays(q, qd, h_des)
        ops = ArrayOps(q)
        q, qd = ops.contiguous(q), ops.contiguous(qd)
        A, h = self.ccrba(q, qd)
        dA = self.dccrba(q)
        dh_dq = (dA * qd[:, None, :, None]).sum(2)
        J = ops.cat([dh_dq, A], 2)
        return _tracking(ops, h - h_des, J, _weight(ops, W, 6, "W"))

    # -- barriers ------------------------------------------------------------------------
    def joint_position_barrier(self, var: Any, lower: Any, upper: Any, mu: float) -> tuple:
        """`-mu sum (log(var - lower) + log(upper - var))` over `var (B, n)`: value (+inf
        outside the bounds), gradient `(B, n)` and Hessian diagonal `(B, n)`."""
        var = self._as_array(var)
        return _barrier(ArrayOps(var), var, lower, upper, mu)

    def joint_velocity_barrier(self, var: Any, lower: Any, upper: Any, mu: float) -> tuple:
        var = self._as_array(var)
        self._check_width(var, self.nv, "velocities")
        return _barrier(ArrayOps(var), var, lower, upper, mu)

    def joint_torque_barrier(self, var: Any, lower: Any, upper: Any, mu: float) -> tuple:
        var = self._as_array(var)
        self._check_width(var, self.nv, "torques")
        return _barrier(ArrayOps(var), var, lower, upper, mu)

    @staticmethod
    def _check_width(x: Any, width: int, name: str) -> None:
        if len(x.shape) != 2 or x.shape[1] != width:
            raise ValueError(f"{name} has shape {tuple(x.shape)}; expected (B, {width})")
