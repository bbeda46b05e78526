"""The MuJoCo output convention: `register_robot(..., output_convention="mujoco")`.

MuJoCo's free joint (docs: "XML reference / joint", "Computation"): `qpos = [p (world),
quat w, x, y, z]` and `qvel = [v (world-frame linear velocity of the body origin),
omega (body frame)]`; `mj_integratePos` moves `p += dp` (world) and `R = R exp([dtheta])`
(local), and `qacc`, `qfrc_*` live on the same chart. Pinocchio's free flyer (ours) is
`q = [p, quat x, y, z, w]`, `v = [R^T pdot, omega]` (both local). With
`G = blockdiag(R, I)` (the free-flyer rotation R, identity on the joints):

    qd_mj = G qd,   tau_mj = G tau (power: tau_mj . qd_mj = tau . qd),
    qdd_mj = G (qdd + b),   b = [omega x v_local; 0],   M_mj = G M G^T,
    Minv_mj = G Minv G^T,   first-order position tangents d_mj = G d_pin.

Hinge and slide joints take MuJoCo's angle/displacement and axis sign as the URDF gives
them, so a fixed-base robot's convention is the identity.

Decision (docs/mujoco_convention.md): the convention is a conversion layer around the
Pinocchio-convention kernels, not emitted twin kernels. It is exact (the chart change and
its Jacobians, `dG/dq` included, in closed form below), cheap (O(nv^2) per item beside
kernels of O(nv^2..nv^3)), runs in the handle's own array library (numpy, jax.numpy or
torch: on the GPU for GPU arrays) and so JAX/torch autograd flows through it. The
rotation is that of quat/|quat|, so every value is invariant to the quaternion's scale
and the q cotangent is the on-manifold pullback (no radial component).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from grid_rbd import _mujoco_derivatives as D
from grid_rbd import _mujoco_vjp as V
from grid_rbd._collision import CollisionMethods
from grid_rbd._contacts import ContactMethods
from grid_rbd._frames import FrameMethods
from grid_rbd._methods import BY_NAME
from grid_rbd._mujoco_plant import MujocoChart, MujocoStepper, state_tracking_cost
from grid_rbd._parameters import ParameterOperands
from grid_rbd._plant import PlantMethods

CONVENTIONS = ("pinocchio", "mujoco")
ENV_FLAG = "GRID_ENABLE_MUJOCO_KERNELS"

#: Kernel methods whose outputs are converted exactly (`_CONVERT`); the methods composed
#: from them (frames, contacts, collision, plant, costs, parameters: `_COMPOSED`) run on
#: the converted kernels; the VJPs are `grid_rbd._mujoco_vjp`'s. Any other method (the
#: JAX _checked/_stamped twins) is refused on a floating base.
CONVERTED = ("inverse_dynamics", "rnea", "forward_dynamics", "fd", "aba", "crba", "minv",
             "inverse_dynamics_gradient", "forward_dynamics_gradient", "end_effector_pose",
             "end_effector_pose_gradient", "generalized_gravity", "nonlinear_effects",
             "com", "ccrba", "energy", "kinetic_energy_regressor",
             "potential_energy_regressor", "inverse_dynamics_regressor", "fk_batched",
             "world_kinematics", "frame_jacobian_indexed", "frame_jacobian_dot_indexed",
             "coriolis_matrix", "dccrba",
             "cmm_time_variation",
             "end_effector_pose_hessian", "idsva_so", "fdsva_so", "sphere_positions",
             "sphere_positions_gradient", "self_collision_distance",
             "self_collision_distance_gradient", "forward_dynamics_vjp",
             "inverse_dynamics_vjp")

#: Attributes that do not depend on the chart, forwarded to the wrapped handle.
_FORWARDED = frozenset((
    "name", "nq", "nv", "nb", "num_joints", "num_vel", "num_bodies", "num_ees",
    "joint_names", "body_names", "ee_names", "dtype", "np_dtype", "device",
    "torch_device", "max_batch_size", "runtime_inertia", "algorithms", "path",
    "registration", "ctx_id", "model_version", "device_profile", "closed", "close",
    "close_arena", "set_inertia_params", "get_inertia_params", "set_threads_for",
    "set_threads_per_block", "set_variant_for", "variants", "clear_launch_overrides",
    "launch_overrides", "pinned_empty", "allow_fp64", "floating_base", "frame_names",
    "set_transform_params", "get_transform_params", "runtime_transform",
    "set_joint_dynamics", "get_joint_dynamics", "runtime_joint_dynamics"))


def mujoco_kernels_default() -> bool:
    """`enable_mujoco_kernels`'s default: False when GRID_ENABLE_MUJOCO_KERNELS is "0"
    (or "false"/"no"/"off"), else True. An explicit argument always wins."""
    value = os.environ.get(ENV_FLAG, "").strip().lower()
    return value not in ("0", "false", "no", "off")


def check_convention(output_convention: str, enable_mujoco_kernels: bool | None) -> bool:
    """Validate register_robot's two options; the resolved `enable_mujoco_kernels`."""
    if output_convention not in CONVENTIONS:
        raise ValueError(f"output_convention must be one of {CONVENTIONS}, got "
                         f"{output_convention!r}")
    if enable_mujoco_kernels is not None and not isinstance(enable_mujoco_kernels, bool):
        raise ValueError("enable_mujoco_kernels must be True, False or None, got "
                         f"{enable_mujoco_kernels!r}")
    if output_convention == "mujoco":
        if enable_mujoco_kernels is False:
            raise ValueError("output_convention='mujoco' needs the MuJoCo-convention "
                             "twins; it is mutually exclusive with "
                             "enable_mujoco_kernels=False")
        return True
    return mujoco_kernels_default() if enable_mujoco_kernels is None else \
        enable_mujoco_kernels


# -- the array library of a handle --------------------------------------------------------
class _Ops:
    """The few array operations the conversion needs, for numpy, jax.numpy or torch."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "torch":
            import torch
            self.xp = torch
        elif kind == "jax":
            import jax.numpy as jnp
            self.xp = jnp
        else:
            self.xp = np

    def cat(self, parts: list[Any], axis: int) -> Any:
        if self.kind == "torch":
            return self.xp.cat(parts, dim=axis)
        return self.xp.concatenate(parts, axis=axis)

    def stack(self, parts: list[Any], axis: int) -> Any:
        if self.kind == "torch":
            return self.xp.stack(parts, dim=axis)
        return self.xp.stack(parts, axis=axis)

    def zeros_like(self, x: Any) -> Any:
        return self.xp.zeros_like(x)

    def einsum(self, spec: str, *xs: Any) -> Any:
        return self.xp.einsum(spec, *xs)

    def tracing(self, *xs: Any) -> bool:
        """Whether autograd sees any of `xs` (a torch tensor needing grad, a jax tracer)."""
        if self.kind == "torch":
            return any(getattr(x, "requires_grad", False) for x in xs)
        if self.kind == "jax":
            import jax
            return any(isinstance(x, jax.core.Tracer) for x in xs)
        return False

    def stop_gradient(self, x: Any) -> Any:
        if self.kind == "torch":
            return x.detach()
        if self.kind == "jax":
            import jax
            return jax.lax.stop_gradient(x)
        return x


def _backend_of(handle: Any) -> str:
    module = type(handle).__module__
    return "torch" if module.startswith("grid_rbd.torch") else \
        "jax" if module.startswith("grid_rbd.jax") else "numpy"


# -- the chart ----------------------------------------------------------------------------
def rotation_wxyz(ops: _Ops, quat: Any) -> Any:
    """(B, 3, 3): the rotation of quat/|quat| (quat (B, 4) as w, x, y, z)."""
    norm = (quat * quat).sum(-1) ** 0.5
    w, x, y, z = (quat[:, k] / norm for k in range(4))
    rows = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return ops.stack([ops.stack(r, -1) for r in rows], -2)


def _skew(ops: Any, v: Any) -> Any:
    """(B, 3, 3): [v]x, with [v]x u = v x u."""
    z = ops.zeros_like(v[:, 0])
    x, y, w = v[:, 0], v[:, 1], v[:, 2]
    return ops.stack([ops.stack([z, -w, y], -1), ops.stack([w, z, -x], -1),
                      ops.stack([-y, x, z], -1)], -2)


def _cross(ops: Any, a: Any, b: Any) -> Any:
    return ops.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                      a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                      a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], -1)


class Chart:
    """The free-joint chart change at a batch of MuJoCo configurations (B, nq)."""

    def __init__(self, ops: _Ops, q: Any) -> None:
        self.ops = ops
        self.R = rotation_wxyz(ops, q[:, 3:7])
        # Ours: [p, x, y, z, w, joints] (the kernels normalise the quaternion).
        self.q = ops.cat([q[:, 0:3], q[:, 4:7], q[:, 3:4], q[:, 7:]], 1)

    def rot(self, v: Any) -> Any:
        return self.ops.einsum("bij,bj->bi", self.R, v)

    def rot_t(self, v: Any) -> Any:
        return self.ops.einsum("bji,bj->bi", self.R, v)

    def to_local(self, x: Any) -> Any:
        """G^T x on a (B, nv) tangent vector (velocity, force or position tangent)."""
        return self.ops.cat([self.rot_t(x[:, 0:3]), x[:, 3:]], 1)

    def to_world(self, x: Any) -> Any:
        """G x on a (B, nv) vector."""
        return self.ops.cat([self.rot(x[:, 0:3]), x[:, 3:]], 1)

    def rows(self, m: Any) -> Any:
        """G m on the rows of m (B, nv, k)."""
        return self.ops.cat([self.ops.einsum("bij,bjk->bik", self.R, m[:, 0:3]),
                             m[:, 3:]], 1)

    def cols(self, m: Any) -> Any:
        """m G^T on the columns of m (B, k, nv)."""
        return self.ops.cat([self.ops.einsum("bkj,bij->bki", m[..., 0:3], self.R),
                             m[..., 3:]], -1)

    def bias(self, qd_local: Any) -> Any:
        """b = [omega x v_local; 0] (B, nv): qdd_mj = G (qdd + b)."""
        b = _cross(self.ops, qd_local[:, 3:6], qd_local[:, 0:3])
        return self.ops.cat([b, self.ops.zeros_like(qd_local[:, 3:])], 1)

    def _zeros(self, like: Any, count: int, axis: int) -> Any:
        """Zeros shaped as `like` (a slice of width 1 along `axis`) repeated `count`."""
        zero = self.ops.zeros_like(like)
        if self.ops.kind == "torch":
            return zero.repeat(*(count if a == axis else 1 for a in range(zero.ndim)))
        return self.ops.xp.repeat(zero, count, axis=axis)

    def block(self, m: Any, width: int, at: int) -> Any:
        """m (B, k, 3) as (B, k, width): columns at..at+3, zero elsewhere."""
        like = m[:, :, 0:1]
        return self.ops.cat([self._zeros(like, at, 2), m,
                             self._zeros(like, width - at - 3, 2)], 2)

    def rows_l(self, m: Any, height: int) -> Any:
        """m (B, 3, k) as (B, height, k): rows 0..3, zero elsewhere."""
        return self.ops.cat([m, self._zeros(m[:, 0:1, :], height - 3, 1)], 1)


# -- the handle ---------------------------------------------------------------------------
class _Composed:
    """A method (or property) of the handles' mixins, composed from kernel methods: on a
    floating base it runs on the MuJoCo handle, so over the converted kernels; on a fixed
    base it is the wrapped handle's own. Absent when the wrapped handle lacks it."""

    def __init__(self, name: str, impl: Any) -> None:
        self.name, self.impl = name, impl

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self.impl
        inner = obj._inner
        if getattr(type(inner), self.name, None) is None:
            raise AttributeError(f"{type(inner).__name__} has no {self.name}")
        if not obj._floating:
            return getattr(inner, self.name)
        return self.impl.__get__(obj, owner)


class MujocoHandle(FrameMethods, ContactMethods, CollisionMethods, PlantMethods,
                   ParameterOperands):
    """A handle (numpy, JAX or torch) whose methods take and return the free joint in
    MuJoCo's convention: `q` (B, nq) = [p, quat w, x, y, z, joints]; `qd`, `qdd`, `u` and
    every (B, nv) output on MuJoCo's chart [v world, omega local, joints]; `crba`/`minv`
    `G M G^T`; gradients `[d/d(mj_integratePos tangent) | d/dqd]` (what mjd_inverseFD
    and mjd_transitionFD differentiate), second derivatives iterated along
    `mj_integratePos`; the plant layer integrates over MuJoCo's chart (MuJoCo's Euler and
    RK4: `grid_rbd._mujoco_plant`). `f_ext` stays body-local. `pinocchio` is the wrapped
    handle. On a fixed base it is the identity and every method is forwarded."""

    output_convention = "mujoco"

    def __init__(self, inner: Any) -> None:
        if isinstance(inner, MujocoHandle):
            inner = inner.pinocchio
        if getattr(_base_of(inner), "_mujoco_kernels", True) is False:
            raise ValueError(f"{inner.name} was registered with enable_mujoco_kernels="
                             "False (Pinocchio convention only); register it without that "
                             "flag for the MuJoCo convention")
        from grid_rbd._framework import tangent_chart

        chart = tangent_chart(inner.nq, inner.nv, _base_of(inner)._meta)
        if chart not in ("vector", "free_flyer"):
            raise ValueError(
                f"{inner.name}: the MuJoCo convention is provided for a fixed base of "
                "hinge and slide joints and for a free-flyer root (registered with "
                f"floating_base=True); this robot's configuration has {chart!r} blocks "
                "(ball, planar or inner floating joints)")
        self._inner = inner
        self._ops = _Ops(_backend_of(inner))
        self._floating = chart == "free_flyer"

    @property
    def pinocchio(self) -> Any:
        """The wrapped Pinocchio-convention handle (same artifact and context)."""
        return self._inner

    def context(self, workspace_slots: int = 0) -> MujocoHandle:
        return MujocoHandle(self._inner.context(workspace_slots))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_inner":
            raise AttributeError(name)
        value = getattr(self._inner, name)
        # Private attributes are the wrapped handle's data and helpers (its dtype, meta,
        # array conversion); the methods composed over states are this class's own.
        if not self._floating or name in _FORWARDED or name.startswith("_"):
            return value
        if name.startswith("plant_step_gradient_"):  # it reads Pinocchio's state
            raise NotImplementedError(f"{name} is a fused kernel over Pinocchio's state; in "
                                      "the MuJoCo convention use plant_step_gradient(x, u, "
                                      "dt, ...)")
        raise NotImplementedError(
            f"{name} takes Pinocchio's state only (the JAX _checked/_stamped twins); in "
            f"the MuJoCo convention use the converted methods ({', '.join(CONVERTED)}, "
            "and the frame, contact, collision, plant, cost and parameter methods), or "
            f"call handle.pinocchio.{name} with grid_rbd.mujoco_to_pinocchio(q, qd)")

    # -- what the composed methods take from the wrapped handle --------------------------
    def _frame_table(self) -> Any:
        return self._inner._frame_table()  # one table: a tool's tip is seen by every view

    def _tool_owner(self) -> Any:
        return self._inner._tool_owner()

    def _as_array(self, x: Any) -> Any:
        return self._inner._as_array(x)

    def _stop_gradient(self, x: Any) -> Any:
        return self._inner._stop_gradient(x)

    def _needs_gradient(self, x: Any) -> bool:
        return self._inner._needs_gradient(x)

    # -- the plant layer over MuJoCo's chart (grid_rbd._mujoco_plant) --------------------
    def _stepper(self, like: Any, gravity: float) -> Any:
        dynamics = PlantMethods._stepper(self, like, gravity).dynamics  # converted ones
        return MujocoStepper(MujocoChart(self.nq, self.nv, like), dynamics)

    def _lie_groups(self, method: str) -> list[tuple[int, range]]:
        """The free joint's rotation, a subgroup of SE(3) (its position adds)."""
        return [(3, range(3, 6))]

    def _frame_jacobian_dot(self, q: Any, qd: Any, frame: Any,
                            reference_frame: str = "LOCAL_WORLD_ALIGNED") -> Any:
        """`(B, 6, nv)`: `d/dt frame_jacobian` along MuJoCo's `qvel` (`(Jdot - J Omega)
        G^T`: `grid_rbd._mujoco_derivatives`). Forward-only."""
        return D.frame_jacobian_dot(self, q, qd, frame, reference_frame)

    def _quadratic_state_cost(self, x: Any, x_des: Any, Q: Any) -> tuple[Any, Any, Any]:
        """`1/2 e^T Q e`, `e = [mj_differentiatePos(q_des -> q), qd - qd_des]`: value,
        gradient `(B, 2nv)` and Gauss-Newton Hessian in MuJoCo's tangent."""
        return state_tracking_cost(self, x, x_des, Q)

    def __enter__(self) -> MujocoHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()

    def __repr__(self) -> str:
        return repr(self._inner).replace("<", "<MuJoCo-convention ", 1)

    # -- the plumbing ---------------------------------------------------------------------
    def _call(self, method: str, kwargs: dict[str, Any], *args: Any) -> Any:
        run = {k: v for k, v in kwargs.items() if k == "gravity"}
        return getattr(self._inner, method)(*args, **run)

    def _state(self, q: Any) -> tuple[Chart, bool]:
        q = self._ops.xp.asarray(q) if self._ops.kind == "jax" else q
        single = q.ndim == 1
        return Chart(self._ops, q.reshape(1, -1) if single else q), single

    @staticmethod
    def _batch(x: Any) -> Any:
        return None if x is None else (x.reshape(1, -1) if x.ndim == 1 else x)

    def _out(self, result: Any, single: bool, kwargs: dict[str, Any]) -> Any:
        if single:
            result = tuple(r[0] for r in result) if isinstance(result, tuple) else result[0]
        out = kwargs.get("out")
        if out is None:
            return result
        if self._ops.kind == "jax":
            raise TypeError("out= is not supported on the JAX backend")
        parts = result if isinstance(result, tuple) else (result,)
        flat = out.reshape(-1)
        start = 0
        views = []
        for part in parts:
            view = flat[start:start + part.numel() if self._ops.kind == "torch"
                        else start + part.size].reshape(part.shape)
            view.copy_(part) if self._ops.kind == "torch" else np.copyto(view, part)
            views.append(view)
            start += part.numel() if self._ops.kind == "torch" else part.size
        return tuple(views) if isinstance(result, tuple) else views[0]

    def _local_qdd(self, c: Chart, qd_local: Any, qdd: Any) -> Any:
        """Our qdd from MuJoCo's: G^T qdd_mj - b (qdd None is zero)."""
        qdd = self._ops.zeros_like(qd_local) if qdd is None else self._batch(qdd)
        return c.to_local(qdd) - c.bias(qd_local)


def _base_of(handle: Any) -> Any:
    """The numpy handle under a JAX or torch view (a numpy handle is its own)."""
    base = getattr(handle, "_base", None)
    return handle if base is None else base


def _method(name: str) -> Any:
    def call(self: MujocoHandle, *args: Any, **kwargs: Any) -> Any:
        if not self._floating:
            return getattr(self._inner, name)(*args, **kwargs)
        ports = _PORTS[name]
        if len(args) > len(ports):
            raise TypeError(f"{name}() takes {len(ports)} inputs ({', '.join(ports)}), "
                            f"got {len(args)}")
        unknown = set(kwargs) - set(ports) - {"gravity", "out"}
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument "
                            f"{sorted(unknown)[0]!r}")
        values = dict(zip(ports, args, strict=False))  # trailing optional inputs omitted
        values.update({k: v for k, v in kwargs.items() if k in ports})
        if "q" not in values:
            raise TypeError(f"{name}() missing required input 'q'")
        c, single = self._state(values.pop("q"))
        b = {k: self._batch(v) for k, v in values.items()}
        return self._out(_CONVERT[name](self, c, b, kwargs), single, kwargs)

    call.__name__ = name
    call.__doc__ = (f"`{name}` in the MuJoCo convention (see MujocoHandle); the "
                    "Pinocchio-convention method is handle.pinocchio." + name + ".")
    return call


def _id(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    qd = c.to_local(v["qd"])
    qdd = h._local_qdd(c, qd, v.get("qdd"))
    tau = h._call("inverse_dynamics", kw, c.q, qd, qdd, v.get("f_ext"))
    if h._ops.tracing(c.q, qd, qdd):
        # The kernels' backward holds qdd fixed (a residual), but ours depends on q and
        # qd (G^T qdd_mj - b): add M (qdd - stop_gradient(qdd)), zero in value, whose
        # derivative is the missing d tau/d qdd = M path.
        mass = h._ops.stop_gradient(h._call("crba", {}, h._ops.stop_gradient(c.q)))
        tau = tau + h._ops.einsum("bij,bj->bi", mass, qdd - h._ops.stop_gradient(qdd))
    return c.to_world(tau)


def _fd(name: str) -> Any:
    def convert(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
        qd = c.to_local(v["qd"])
        qdd = h._call(name, kw, c.q, qd, c.to_local(v["u"]), v.get("f_ext"))
        return c.to_world(qdd + c.bias(qd))
    return convert


def _id_gradient(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    ops, nv = h._ops, h.nv
    qd = c.to_local(v["qd"])
    qdd = h._local_qdd(c, qd, v.get("qdd"))
    grad = h._call("inverse_dynamics_gradient", kw, c.q, qd, qdd, v.get("f_ext"))
    tau = h._call("inverse_dynamics", kw, c.q, qd, qdd, v.get("f_ext"))
    mass = h._call("crba", {}, c.q)
    d_q, d_qd = grad[..., :nv], grad[..., nv:]
    v_loc, omega = qd[:, 0:3], qd[:, 3:6]
    a_loc = c.rot_t((v.get("qdd") if v.get("qdd") is not None
                     else ops.zeros_like(v["qd"]))[:, 0:3])
    s_v, s_w = _skew(ops, v_loc), _skew(ops, omega)
    m_l = mass[:, :, 0:3]
    # d/d dtheta of G^T qd, G^T qdd - b and the outer G, on the angular columns.
    t_q = c.cols(d_q) + c.block(ops.einsum("bkj,bji->bki", d_qd[:, :, 0:3], s_v) +
                                ops.einsum("bkj,bji->bki", m_l, _skew(ops, a_loc) -
                                           ops.einsum("bij,bjk->bik", s_w, s_v)), nv, 3)
    outer = -ops.einsum("bij,bjk->bik", c.R, _skew(ops, tau[:, 0:3]))
    dq = c.rows(t_q) + c.rows_l(c.block(outer, nv, 3), nv)
    t_v = c.cols(d_qd) + c.block(-ops.einsum("bkj,bji,bli->bkl", m_l, s_w, c.R), nv, 0) \
        + c.block(ops.einsum("bkj,bji->bki", m_l, s_v), nv, 3)
    return ops.cat([dq, c.rows(t_v)], -1)


def _fd_gradient(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    ops, nv = h._ops, h.nv
    qd = c.to_local(v["qd"])
    u = c.to_local(v["u"])
    grad = h._call("forward_dynamics_gradient", kw, c.q, qd, u, v.get("f_ext"))
    qdd = h._call("forward_dynamics", kw, c.q, qd, u, v.get("f_ext"))
    minv = h._call("minv", {}, c.q)
    d_q, d_qd = grad[..., :nv], grad[..., nv:]
    v_loc, omega = qd[:, 0:3], qd[:, 3:6]
    s_v, s_w = _skew(ops, v_loc), _skew(ops, omega)
    y = qdd + c.bias(qd)
    t_q = c.cols(d_q) + c.block(ops.einsum("bkj,bji->bki", d_qd[:, :, 0:3], s_v) +
                                ops.einsum("bkj,bji->bki", minv[:, :, 0:3],
                                           _skew(ops, u[:, 0:3])), nv, 3) \
        + c.rows_l(c.block(ops.einsum("bij,bjk->bik", s_w, s_v), nv, 3), nv)
    outer = -ops.einsum("bij,bjk->bik", c.R, _skew(ops, y[:, 0:3]))
    dq = c.rows(t_q) + c.rows_l(c.block(outer, nv, 3), nv)
    db = c.block(ops.einsum("bij,bkj->bik", s_w, c.R), nv, 0) + c.block(-s_v, nv, 3)
    t_v = c.cols(d_qd) + c.rows_l(db, nv)
    return ops.cat([dq, c.rows(t_v)], -1)


def _matrix(name: str) -> Any:
    return lambda h, c, v, kw: c.cols(c.rows(h._call(name, kw, c.q)))


def _q_only(name: str) -> Any:
    return lambda h, c, v, kw: h._call(name, kw, c.q)


def _q_qd(name: str) -> Any:
    return lambda h, c, v, kw: h._call(name, kw, c.q, c.to_local(v["qd"]))


def _tangent_columns(name: str) -> Any:
    return lambda h, c, v, kw: c.cols(h._call(name, kw, c.q))


def _nle(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    return _id(h, c, {"qd": v["qd"]}, kw)  # MuJoCo's qfrc_bias: ID at qacc_mj = 0


def _com(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    com, jac = h._call("com", kw, c.q)
    return com, c.cols(jac)


def _ccrba(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    a, m = h._call("ccrba", kw, c.q, c.to_local(v["qd"]))
    return c.cols(a), m


def _regressor(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    qd = c.to_local(v["qd"])
    return c.rows(h._call("inverse_dynamics_regressor", kw, c.q, qd,
                          h._local_qdd(c, qd, v.get("qdd"))))


def _world_kinematics(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    qd = None if v.get("qd") is None else c.to_local(v["qd"])
    rotations, positions, subspace, twists = h._call("world_kinematics", kw, c.q, qd)
    return rotations, positions, c.cols(subspace), twists


def _frame_jacobian_indexed(h: MujocoHandle, c: Chart, v: dict, kw: dict) -> Any:
    return c.cols(h._call("frame_jacobian_indexed", kw, c.q, v["frame"]))


_CONVERT = {
    "inverse_dynamics": _id, "forward_dynamics": _fd("forward_dynamics"),
    "aba": _fd("aba"), "crba": _matrix("crba"), "minv": _matrix("minv"),
    "inverse_dynamics_gradient": _id_gradient, "forward_dynamics_gradient": _fd_gradient,
    "end_effector_pose": _q_only("end_effector_pose"),
    "end_effector_pose_gradient": _tangent_columns("end_effector_pose_gradient"),
    "generalized_gravity": lambda h, c, v, kw: c.to_world(
        h._call("generalized_gravity", kw, c.q)),
    "nonlinear_effects": _nle, "com": _com, "ccrba": _ccrba,
    "energy": _q_qd("energy"), "kinetic_energy_regressor": _q_qd("kinetic_energy_regressor"),
    "potential_energy_regressor": _q_only("potential_energy_regressor"),
    "inverse_dynamics_regressor": _regressor, "fk_batched": _q_only("fk_batched"),
    "world_kinematics": _world_kinematics, "frame_jacobian_indexed": _frame_jacobian_indexed,
    "frame_jacobian_dot_indexed": D.frame_jacobian_dot_indexed,
    "coriolis_matrix": D.coriolis_matrix, "dccrba": D.dccrba,
    "cmm_time_variation": D.cmm_time_variation,
    "end_effector_pose_hessian": D.end_effector_pose_hessian,
    "idsva_so": D.idsva_so, "fdsva_so": D.fdsva_so,
    "sphere_positions": _q_only("sphere_positions"),
    "sphere_positions_gradient": lambda h, c, v, kw: D.tangent_columns(
        h, c, h._call("sphere_positions_gradient", kw, c.q)),
    "self_collision_distance": _q_only("self_collision_distance"),
    "self_collision_distance_gradient": lambda h, c, v, kw: D.tangent_columns(
        h, c, h._call("self_collision_distance_gradient", kw, c.q)),
    "forward_dynamics_vjp": V.forward_dynamics_vjp,
    "inverse_dynamics_vjp": V.inverse_dynamics_vjp}
assert set(_CONVERT) == set(CONVERTED) - {"rnea", "fd"}

#: Every kernel method's inputs, from the one method table.
_PORTS = {name: tuple(p.name for p in BY_NAME[name].inputs) for name in _CONVERT}

for _name in _CONVERT:
    setattr(MujocoHandle, _name, _method(_name))
MujocoHandle.rnea = MujocoHandle.inverse_dynamics
MujocoHandle.fd = MujocoHandle.forward_dynamics

#: The mixins' methods composed from kernel methods (module doc of each mixin), with the
#: two whose chart enters beyond their kernels written for MuJoCo's.
_OWN = {"frame_jacobian_dot": MujocoHandle._frame_jacobian_dot,
        "quadratic_state_cost": MujocoHandle._quadratic_state_cost}
_COMPOSED = sorted({name for mixin in (FrameMethods, ContactMethods, CollisionMethods,
                                       PlantMethods, ParameterOperands)
                    for name in vars(mixin) if not name.startswith("_")})
for _name in _COMPOSED:
    setattr(MujocoHandle, _name, _Composed(_name, _OWN.get(_name,
                                                          getattr(MujocoHandle, _name))))


def as_mujoco(handle: Any) -> MujocoHandle:
    """`handle` (numpy, JAX or torch) seen in the MuJoCo convention; refused on a handle
    registered with enable_mujoco_kernels=False."""
    return MujocoHandle(handle)


def mujoco_to_pinocchio(q: np.ndarray, qd: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray | None]:
    """numpy: a floating-base MuJoCo state (q (B, nq) [p, wxyz, joints], qd [v world,
    omega local, joints]) as ours ([p, xyzw, joints], [v local, omega local, joints])."""
    batched = np.asarray(q).ndim == 2
    c = Chart(_Ops("numpy"), np.atleast_2d(q))
    qd_out = None if qd is None else c.to_local(np.atleast_2d(qd))
    if not batched:
        return c.q[0], None if qd_out is None else qd_out[0]
    return c.q, qd_out
