"""Integrators over the state `x = [q, qd]` and their Jacobians, written once over a chart.

`q` moves on its manifold by the chart's `integrate` (joint coordinates add, a free flyer
by the exponential of its local twist) and `qd` is a plain vector, so the state's tangent
is `[dq (nv), dqd (nv)]`. With `a(q, qd, u)` the forward dynamics:

* `euler`:               `qd' = qd + dt a(q, qd)`,  `q' = q (+) dt qd`;
* `semi_implicit_euler`: `qd' = qd + dt a(q, qd)`,  `q' = q (+) dt qd'`;
* `rk4`: the classical four stages, each configuration stage taken from `q` along the
  previous stage's velocity (`q_i = q (+) c_i dt v_{i-1}`), then
  `q' = q (+) dt/6 (v_1 + 2 v_2 + 2 v_3 + v_4)`, `qd' = qd + dt/6 (a_1 + 2 a_2 + 2 a_3 + a_4)`
  (on a free flyer the stage twists are added in `q`'s frame, a first-order-consistent
  choice; on scalar joints it is exactly RK4).

`[A | B] = dx'/d(x, u)` `(B, 2nv, 3nv)` is propagated through the stages in forward mode:
every stage value carries its Jacobian with respect to `z = [dq, dqd, du]`, combined with
the stage's FD gradient and `M^-1` and the chart's Jacobians. The float64 reference and
the handles run this same composition over their own charts and dynamics (the reference's
chart is checked against Pinocchio, its steps against Pinocchio's aba + integrate and
their gradients against finite differences).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")


def check_step(integrator: str, dt: float) -> float:
    if integrator not in INTEGRATORS:
        raise ValueError(f"integrator_type {integrator!r} is not one of "
                         f"{', '.join(INTEGRATORS)}")
    try:
        dt = float(dt)
    except (TypeError, ValueError):
        raise TypeError(f"dt must be a Python float (a static step); got {type(dt).__name__}"
                        ) from None
    if not math.isfinite(dt) or dt <= 0.0:
        raise ValueError(f"dt must be a positive finite time step; got {dt}")
    return dt


class Chart(Protocol):
    """The configuration manifold and array operations of one backend."""

    nq: int
    nv: int

    def integrate(self, q: Any, dq: Any) -> Any: ...
    def integrate_jacobians(self, q: Any, dq: Any) -> tuple[Any, Any]: ...
    def selector(self, like: Any, block: int) -> Any: ...
    def cat(self, xs: list, axis: int) -> Any: ...


@dataclass
class Stage:
    """A stage value and its Jacobian with respect to `z = [dq, dqd, du]` (or None).
    `block`: the Jacobian is the selector of that column block of `z` (the first stages
    `q0`, `qd0`), so that a product with it is a placement, not a matrix product."""

    value: Any
    jacobian: Any
    block: int | None = None


Dynamics = Callable[[Any, Any, Any, bool], tuple]
"""`(q, qd, u, with_jacobian) -> (a, [da/dq | da/dqd], M^-1)`; the last two None unless
asked for."""


class Stepper:
    """The integrators of the module doc over a chart and a dynamics function."""

    def __init__(self, chart: Chart, dynamics: Dynamics) -> None:
        self.chart = chart
        self.dynamics = dynamics

    def _accel(self, q: Stage, v: Stage, u: Any, with_jacobian: bool) -> Stage:
        a, dF, Minv = self.dynamics(q.value, v.value, u, with_jacobian)
        if not with_jacobian:
            return Stage(a, None)
        nv = self.chart.nv
        return Stage(a, self._compose([(dF[:, :, :nv], q), (dF[:, :, nv:], v),
                                       (Minv, Stage(None, None, 2))]))

    def _compose(self, terms: list[tuple[Any, Stage]]) -> Any:
        """`sum M @ stage.jacobian` over `(M (B, nv, nv), stage)`: a selector stage's
        product places `M` in its column block (no matrix product with the selector)."""
        blocks: dict[int, Any] = {}
        dense = None
        for M, stage in terms:
            if stage.block is not None:
                blocks[stage.block] = M if stage.block not in blocks else blocks[stage.block] + M
            else:
                product = M @ stage.jacobian
                dense = product if dense is None else dense + product
        if not blocks:
            return dense
        zero = 0 * next(iter(blocks.values()))
        placed = self.chart.cat([blocks.get(k, zero) for k in range(3)], 2)
        return placed if dense is None else placed + dense

    def _move(self, q: Stage, step: Stage, h: float, with_jacobian: bool) -> Stage:
        """`q (+) h * step` and its Jacobian (the chart's Jacobians at that move)."""
        dq = h * step.value
        moved = self.chart.integrate(q.value, dq)
        if not with_jacobian:
            return Stage(moved, None)
        d_q, d_v = self.chart.integrate_jacobians(q.value, dq)
        return Stage(moved, self._compose([(d_q, q), (h * d_v, step)]))

    def _start(self, q0: Any, v0: Any, with_jacobian: bool
               ) -> tuple[Stage, Stage, Callable[..., Stage]]:
        """The first stages `q0`, `v0` (their Jacobians the selectors of `dq`, `dqd` in `z`)
        and `lin(*(c, stage))`: the linear combination `sum c * stage`, value and
        Jacobian (what every integrator's stages are built from)."""
        chart = self.chart
        q = Stage(q0, chart.selector(v0, 0) if with_jacobian else None, 0)
        v = Stage(v0, chart.selector(v0, 1) if with_jacobian else None, 1)

        def lin(*terms: tuple[float, Stage]) -> Stage:
            value = sum(c * s.value for c, s in terms)
            jac = sum(c * s.jacobian for c, s in terms) if with_jacobian else None
            return Stage(value, jac)
        return q, v, lin

    def step(self, q0: Any, v0: Any, u: Any, dt: float, integrator: str,
             with_jacobian: bool = False) -> tuple[Any, Any]:
        """`(x', [A | B] or None)` for states split as `q0 (B, nq)`, `v0 (B, nv)`."""
        dt = check_step(integrator, dt)
        q_next, v_next = self._advance(q0, v0, u, dt, integrator, with_jacobian)
        x_next = self.chart.cat([q_next.value, v_next.value], 1)
        if not with_jacobian:
            return x_next, None
        return x_next, self.chart.cat([q_next.jacobian, v_next.jacobian], 1)

    def advance(self, q0: Any, v0: Any, u: Any, dt: float, integrator: str
                ) -> tuple[Any, Any]:
        """`(q', qd')`: the state after one step as `step` computes it, left split (so
        that several steps in a row neither join nor split it between them)."""
        q_next, v_next = self._advance(q0, v0, u, check_step(integrator, dt), integrator,
                                       False)
        return q_next.value, v_next.value

    def _advance(self, q0: Any, v0: Any, u: Any, dt: float, integrator: str,
                 with_jacobian: bool) -> tuple[Stage, Stage]:
        q, v, lin = self._start(q0, v0, with_jacobian)
        if integrator in ("euler", "semi_implicit_euler"):
            a = self._accel(q, v, u, with_jacobian)
            v_next = lin((1.0, v), (dt, a))
            q_next = self._move(q, v if integrator == "euler" else v_next, dt, with_jacobian)
        else:
            a1 = self._accel(q, v, u, with_jacobian)
            v2 = lin((1.0, v), (0.5 * dt, a1))
            a2 = self._accel(self._move(q, v, 0.5 * dt, with_jacobian), v2, u, with_jacobian)
            v3 = lin((1.0, v), (0.5 * dt, a2))
            a3 = self._accel(self._move(q, v2, 0.5 * dt, with_jacobian), v3, u, with_jacobian)
            v4 = lin((1.0, v), (dt, a3))
            a4 = self._accel(self._move(q, v3, dt, with_jacobian), v4, u, with_jacobian)
            mean_v = lin((1 / 6, v), (2 / 6, v2), (2 / 6, v3), (1 / 6, v4))
            v_next = lin((1.0, v), (dt / 6, a1), (dt / 3, a2), (dt / 3, a3), (dt / 6, a4))
            q_next = self._move(q, mean_v, dt, with_jacobian)
        return q_next, v_next


def check_hessian_step(integrator: str, dt: float) -> float:
    """`check_step`, and the integrators the step Hessian has (not rk4;
    `grid_rbd._step_hessian`)."""
    dt = check_step(integrator, dt)
    if integrator not in ("euler", "semi_implicit_euler"):
        raise ValueError("plant_step_hessian supports euler and semi_implicit_euler; "
                         f"got {integrator!r} (rk4's Hessian is not provided)")
    return dt
