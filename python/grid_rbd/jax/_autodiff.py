"""Analytic reverse mode of the differentiable methods (`jax.custom_vjp`).

The forward runs the `_stamped` twin: the value plus the model version it ran under,
written by the same launch. The backward runs only `_checked` launches with that stamp,
so a backward whose forward saw another model is refused by the runtime ("model mutated
between forward and backward (version A -> B); recompute the forward"). Without
differentiation the plain launch runs and no stamp is written.

Vector-Jacobian products, with J the `(B, m, 2*nv)` gradient `[d/dq | d/dqd]` (row i is
the derivative of output i) and ct the `(B, m)` cotangent of the output:

* forward_dynamics / aba: ct_q = ct J[:, :, :nv], ct_qd = ct J[:, :, nv:] and
  ct_u = M^-1 ct (M is symmetric). M^-1 ct is one more launch of the same method at
  qd = 0, u = ct, gravity = 0, without f_ext, where qdd = M^-1 (u - c(q, 0)) = M^-1 ct;
  the two launches are one group (one admission, one stamp read).
* inverse_dynamics: ct_q, ct_qd from inverse_dynamics_gradient, taken at the given qdd
  and f_ext; those two are residuals and get zero cotangents.
* end_effector_pose: ct_q = ct J with J the (B, 6*num_ees, nv) pose gradient.

ct_q above lives in the tangent chart; unless q is a vector, `ambient_pullback` maps it
to the configuration layout (free-flyer, ball and planar blocks) as the exact derivative
of what the kernels evaluate (f(normalize(quat)), the planar (cos, sin) normalised).
There is no forward mode and no second order (see docs/jax.md).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from grid_rbd._framework import ambient_pullback, unsupported_q_gradient
from grid_rbd._methods import Method
from grid_rbd.jax._launch import Launcher

Arrays = dict[str, jax.Array]


def _contract(ct: jax.Array, jacobian: jax.Array) -> jax.Array:
    """Row-vector times matrix per item: (B, m) x (B, m, n) -> (B, n)."""
    return jnp.einsum("bi,bij->bj", ct, jacobian)


def _concat(blocks: list[jax.Array]) -> jax.Array:
    return jnp.concatenate(blocks, axis=1)


def _q_cotangent(launch: Launcher, q: jax.Array, ct_tangent: jax.Array) -> jax.Array:
    if launch.chart is None:
        raise unsupported_q_gradient(launch.robot, launch.dims.nq, launch.dims.nv)
    if launch.chart == "vector":
        return ct_tangent
    return ambient_pullback(q, ct_tangent, _concat, jnp.sqrt, launch.chart)


def _reverse_mode(launch: Launcher, method: Method, x: Arrays, ct: jax.Array,
                  stamp: jax.Array, gravity: float) -> Arrays | None:
    """The backward as one launch of the method's reverse-mode kernel (its q cotangent
    already in the configuration layout), or None without one or with f_ext."""
    if method.vjp is None or method.vjp not in launch.ids or x.get("f_ext") is not None:
        return None
    nq, nv = launch.dims.nq, launch.dims.nv
    if method.vjp == "forward_dynamics_vjp":
        out = launch.run(method.vjp, [x["q"], x["qd"], x["u"], ct], gravity, stamp=stamp)
        return {"q": out[:, :nq], "qd": out[:, nq:nq + nv], "u": out[:, nq + nv:]}
    out = launch.run(method.vjp, [x["q"], x["qd"], ct, x.get("qdd")], gravity, stamp=stamp)
    return {"q": out[:, :nq], "qd": out[:, nq:]}


def _forward_dynamics_vjp(launch: Launcher, method: Method, x: Arrays, ct: jax.Array,
                          stamp: jax.Array, gravity: float) -> Arrays:
    reverse = _reverse_mode(launch, method, x, ct, stamp, gravity)
    if reverse is not None:
        return reverse
    nv = launch.dims.nv
    # One call: both launches under one admission, the stamp read once.
    jac, minv_ct = launch.run_group(
        [("forward_dynamics_gradient", [x["q"], x["qd"], x["u"], x.get("f_ext")], gravity),
         (method.name, [x["q"], jnp.zeros_like(x["qd"]), ct, None], 0.0)], stamp=stamp)
    return {"q": _q_cotangent(launch, x["q"], _contract(ct, jac[:, :, :nv])),
            "qd": _contract(ct, jac[:, :, nv:]), "u": minv_ct}


def _inverse_dynamics_vjp(launch: Launcher, method: Method, x: Arrays, ct: jax.Array,
                          stamp: jax.Array, gravity: float) -> Arrays:
    reverse = _reverse_mode(launch, method, x, ct, stamp, gravity)
    if reverse is not None:
        return reverse
    nv = launch.dims.nv
    jac = launch.run("inverse_dynamics_gradient",
                     [x["q"], x["qd"], x.get("qdd"), x.get("f_ext")], gravity, stamp=stamp)
    return {"q": _q_cotangent(launch, x["q"], _contract(ct, jac[:, :, :nv])),
            "qd": _contract(ct, jac[:, :, nv:])}


def _end_effector_pose_vjp(launch: Launcher, method: Method, x: Arrays, ct: jax.Array,
                           stamp: jax.Array, gravity: float) -> Arrays:
    jac = launch.run("end_effector_pose_gradient", [x["q"]], gravity, stamp=stamp)
    return {"q": _q_cotangent(launch, x["q"], _contract(ct, jac))}


def _q_jacobian_vjp(launch: Launcher, method: Method, x: Arrays, ct: jax.Array,
                    stamp: jax.Array, gravity: float) -> Arrays:
    """A q-only method whose gradient is its (output..., nv) Jacobian (the collision
    profile): ct_q = ct J, the output axes flattened."""
    jac = launch.run(method.gradient, [x["q"]], gravity, stamp=stamp)
    batch = ct.shape[0]
    flat = _contract(ct.reshape(batch, -1), jac.reshape(batch, -1, launch.dims.nv))
    return {"q": _q_cotangent(launch, x["q"], flat)}


_PULLBACKS = {
    "forward_dynamics": _forward_dynamics_vjp,
    "aba": _forward_dynamics_vjp,
    "inverse_dynamics": _inverse_dynamics_vjp,
    "end_effector_pose": _end_effector_pose_vjp,
    "sphere_positions": _q_jacobian_vjp,
    "self_collision_distance": _q_jacobian_vjp,
}


def differentiable(launch: Launcher, method: Method, gravity: float,
                   present: tuple[bool, ...]) -> Callable[..., jax.Array]:
    """`method` as a function of its present inputs (table order) with the analytic VJP;
    inputs outside `method.differentiable` get zero cotangents."""
    pullback = _PULLBACKS[method.name]
    names = [p.name for p, here in zip(method.inputs, present, strict=True) if here]

    def table_order(arrays: tuple[jax.Array, ...]) -> list[jax.Array | None]:
        given = iter(arrays)
        return [next(given) if here else None for here in present]

    @jax.custom_vjp
    def call(*arrays: jax.Array) -> jax.Array:
        return launch.run(method.name, table_order(arrays), gravity)

    def forward(*arrays: jax.Array) -> tuple[jax.Array, tuple]:
        value, stamp = launch.run(method.name, table_order(arrays), gravity, stamp_out=True)
        return value, (arrays, stamp)

    def backward(residuals: tuple, ct: jax.Array) -> tuple[jax.Array, ...]:
        arrays, stamp = residuals
        cotangents = pullback(launch, method, dict(zip(names, arrays, strict=True)), ct,
                              stamp, gravity)
        return tuple(cotangents[name] if name in method.differentiable else
                     jnp.zeros_like(array) for name, array in zip(names, arrays, strict=True))

    call.defvjp(forward, backward)
    return call
