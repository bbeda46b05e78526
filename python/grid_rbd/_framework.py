"""What the JAX and torch handles share: a view over a numpy `RobotHandle`.

A framework handle never owns a context: it references a numpy handle (the artifact plus
its context id) and launches on caller-owned buffers through `_core.Artifact.launch` (the
torch ops) or the C bridge (the JAX FFI handler). Dimensions, names, the model version,
the inertia table and `close()` are the numpy handle's.

`ambient_pullback` maps a tangent-space cotangent of `q` to the ambient configuration
layout, joint block by joint block (`tangent_chart` reads the layout from meta.json); the
backends pass their own `concat` and `sqrt`, so one text serves jax.numpy and torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from grid_rbd._collision import CollisionMethods
from grid_rbd._contacts import ContactMethods
from grid_rbd._frames import FrameMethods
from grid_rbd._handle import RobotHandle
from grid_rbd._methods import BY_NAME, Method
from grid_rbd._parameters import ParameterOperands
from grid_rbd._plant import PlantMethods
from grid_rbd._transforms import FrameworkTransformParams

#: Bytes of a model-version stamp (a uint64 the forward writes on its stream).
STAMP_BYTES = 8


class FrameworkHandle(ParameterOperands, FrameMethods, PlantMethods, ContactMethods,
                      FrameworkTransformParams, CollisionMethods):
    """Base of `JaxRobotHandle` and `TorchRobotHandle` (see the module doc)."""

    def __init__(self, base: RobotHandle) -> None:
        if not isinstance(base, RobotHandle):
            raise TypeError(f"expected a grid_rbd.RobotHandle, got {type(base).__name__}")
        self._base = base
        self._artifact = base._artifact
        self._dims = base._dims
        self._ids = {name: int(info["id"]) for name, info in base._algorithms.items()}
        self._output_shapes = {name: BY_NAME[name].output_shape(base._dims)
                               for name in self._ids}
        self._max_batch = base.max_batch_size

    # -- what the numpy handle knows ----------------------------------------------------
    def _meta_dict(self) -> dict[str, Any]:
        return self._base._meta

    def _frame_table(self) -> Any:
        return self._base._frame_table()  # one table: a tool's tip is seen by every view

    def _tool_owner(self) -> Any:
        return self._base

    @property
    def numpy(self) -> RobotHandle:
        """The numpy handle on the same artifact and context."""
        return self._base

    name = property(lambda self: self._base.name)
    nq = property(lambda self: self._base.nq, doc="Configuration width (q is (B, nq)).")
    nv = property(lambda self: self._base.nv, doc="Tangent width (qd, u are (B, nv)).")
    nb = property(lambda self: self._base.nb, doc="Body count (f_ext is (B, 6*nb)).")
    num_joints = nq
    num_vel = nv
    num_bodies = nb
    num_ees = property(lambda self: self._base.num_ees)
    joint_names = property(lambda self: self._base.joint_names)
    body_names = property(lambda self: self._base.body_names)
    ee_names = property(lambda self: self._base.ee_names)
    device = property(lambda self: self._base.device, doc='"cuda" or "cpu".')
    max_batch_size = property(lambda self: self._base.max_batch_size)
    runtime_inertia = property(lambda self: self._base.runtime_inertia)
    algorithms = property(lambda self: self._base.algorithms)
    path = property(lambda self: self._base.path)
    ctx_id = property(lambda self: self._base.ctx_id)
    closed = property(lambda self: self._base.closed)

    @property
    def np_dtype(self) -> np.dtype:
        """The compute dtype as a numpy dtype."""
        return self._base.dtype

    @property
    def floating_base(self) -> bool:
        """Whether q carries a free-flyer root (and otherwise scalar joints)."""
        return self.tangent_chart == "free_flyer"

    @property
    def tangent_chart(self) -> Chart:
        """How a `q` cotangent comes from the kernels' tangent one (`tangent_chart`)."""
        return tangent_chart(self.nq, self.nv, self._meta_dict())

    @property
    def model_version(self) -> int:
        """The context's model version; every mutation bumps it (see the numpy handle)."""
        return self._base.model_version

    @property
    def device_profile(self) -> dict[str, Any]:
        return self._base.device_profile

    def set_inertia_params(self, table: Any) -> int:
        """Replace the context's (nb, 10) inertia table; returns the new model version. A
        backward whose forward ran before this call is refused."""
        if hasattr(table, "detach"):  # a torch tensor, possibly on the GPU
            table = table.detach().cpu().numpy()
        return self._base.set_inertia_params(np.asarray(table))

    def get_inertia_params(self) -> np.ndarray:
        return self._base.get_inertia_params()

    def set_joint_dynamics(self, damping: Any = None, friction: Any = None) -> int:
        """Replace the context's joint damping / friction (see the numpy handle); returns
        the new model version. A backward whose forward ran before this call is refused."""
        def host(x: Any) -> Any:
            return x.detach().cpu().numpy() if hasattr(x, "detach") else x
        return self._base.set_joint_dynamics(host(damping), host(friction))

    def get_joint_dynamics(self) -> dict[str, np.ndarray]:
        return self._base.get_joint_dynamics()

    def context(self, workspace_slots: int = 0) -> FrameworkHandle:
        """A view of this backend over a new explicit context (its own tables); closing
        the returned handle closes that context."""
        return type(self)(self._base.context(workspace_slots))

    def close(self) -> None:
        """Close the context of the numpy handle this view references (see its close)."""
        self._base.close()

    def close_arena(self) -> None:
        """Close the default context now, whatever its other owners (see the numpy
        handle's close_arena)."""
        self._base.close_arena()

    # -- launch overrides (the numpy handle's; see RobotHandle.set_threads_for) ----------
    def set_threads_for(self, algorithm: str, threads: int) -> None:
        self._base.set_threads_for(algorithm, threads)

    def set_threads_per_block(self, threads: int) -> None:
        self._base.set_threads_per_block(threads)

    def set_variant_for(self, algorithm: str, variant: str) -> None:
        self._base.set_variant_for(algorithm, variant)

    def variants(self, algorithm: str) -> tuple[str, ...]:
        return self._base.variants(algorithm)

    def clear_launch_overrides(self) -> None:
        self._base.clear_launch_overrides()

    @property
    def launch_overrides(self) -> dict[str, dict[str, Any]]:
        return self._base.launch_overrides

    def __enter__(self) -> FrameworkHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- launching --------------------------------------------------------------------------
    def _require(self, method: Method) -> int:
        """The artifact's id of `method`'s algorithm; RuntimeError when it was not built."""
        self._base._check_open()
        algorithm_id = self._ids.get(method.name)
        if algorithm_id is None:
            raise RuntimeError(f"{method.name} was not built into this artifact (built: "
                               f"{', '.join(self._ids)}); register with {method.name!r} or its "
                               f"profile {method.profile!r} in algorithm_list")
        return algorithm_id

    def _check_batch(self, batch: int) -> None:
        if batch > self._max_batch:
            raise ValueError(f"batch {batch} exceeds this artifact's max_batch_size "
                             f"{self.max_batch_size}; split the batch or register with a "
                             "larger max_batch_size")

    @property
    def _allow_fp64(self) -> bool:
        return self._base._allow_fp64

    allow_fp64 = property(lambda self: self._base.allow_fp64)

    def __repr__(self) -> str:
        wide = " allow_fp64 (float64 in/out, float32 compute)" if self._allow_fp64 else ""
        return (f"<{type(self).__name__} {self.name!r} nq={self.nq} nv={self.nv} "
                f"nb={self.nb} dtype={self.np_dtype}{wide} device={self.device!r} "
                f"ctx_id={self.ctx_id:#x}{' closed' if self.closed else ''}>")


#: A robot's configuration chart (`tangent_chart`): "vector", "free_flyer", the blocks
#: (joint type, first q index, first tangent index) of its non-vector joints, or None.
Chart = str | tuple[tuple[str, int, int], ...] | None

#: The (nq, nv) of a joint block whose configuration is not its tangent.
_BLOCK_WIDTHS = {"free_flyer": (7, 6), "spherical": (4, 3), "planar": (4, 3)}


def tangent_chart(nq: int, nv: int, meta: dict[str, Any]) -> Chart:
    """How the JAX/torch backward maps the kernels' tangent cotangent of q to q's:
    "vector" (nq == nv: it is q's), "free_flyer" (a root added with floating_base=True,
    scalar joints otherwise), or the blocks `(type, idx_q, idx_v)` of every free-flyer,
    ball and planar joint (meta.json's "q_chart"), which `ambient_pullback` pulls back
    one by one. None when q is not a vector and the entry does not record its layout
    (an entry built before it was recorded, other than a free-flyer root)."""
    if nq == nv:
        return "vector"
    blocks = _recorded_blocks(nq, nv, meta.get("q_chart"))
    if blocks is None:
        return "free_flyer" if nq == nv + 1 and meta.get("floating_base", True) else None
    if blocks == (("free_flyer", 0, 0),) and meta.get("floating_base", False):
        return "free_flyer"
    return blocks


def _recorded_blocks(nq: int, nv: int, recorded: Any
                     ) -> tuple[tuple[str, int, int], ...] | None:
    """meta.json's "q_chart" as blocks, or None when absent or not a layout of (nq, nv):
    known types, in order, scalar runs of equal width in q and the tangent between them."""
    if not isinstance(recorded, list):
        return None
    blocks = []
    end_q = end_v = 0
    for block in recorded:
        try:
            kind, iq, iv = str(block["type"]), int(block["idx_q"]), int(block["idx_v"])
        except (KeyError, TypeError, ValueError):
            return None
        if kind not in _BLOCK_WIDTHS or iq < end_q or iq - end_q != iv - end_v:
            return None
        end_q, end_v = iq + _BLOCK_WIDTHS[kind][0], iv + _BLOCK_WIDTHS[kind][1]
        blocks.append((kind, iq, iv))
    if end_q > nq or nq - end_q != nv - end_v:
        return None
    return tuple(blocks)


def unsupported_q_gradient(name: str, nq: int, nv: int) -> NotImplementedError:
    return NotImplementedError(
        f"{name}: the JAX/torch backward with respect to q needs the robot's joint layout "
        f"(nq {nq}, nv {nv}: ball, planar or floating joints), which this store entry's "
        "meta.json predates; register again with force_rebuild=True, differentiate with "
        "respect to qd / u only, or use the numpy handle's *_gradient methods (local "
        "tangent chart, docs/joints.md).")


def ambient_pullback(q: Any, ct: Any, concat: Callable[[list[Any]], Any],
                     sqrt: Callable[[Any], Any], chart: Chart = "free_flyer") -> Any:
    """The cotangent of `q` (B, nq) from the cotangent `ct` (B, nv) of the kernels' local
    tangent chart, for `chart` "free_flyer" (a root [p, quat xyzw, joints]) or a
    `tangent_chart` block tuple; scalar coordinates pass through. Each block is the exact
    transpose of d(tangent)/d(configuration) of what the kernels evaluate:

    * free flyer [p, quat] (tangent [v, omega], local): the placement (quat/|quat|, p),
      dv = R^T dp and domega as a ball joint's: ct_p = R ct_v.
    * ball, quat xyzw (tangent omega, local): the rotation of qn = quat/|quat|,
      domega = 2 E(qn) dqn with dqn = (I - qn qn^T) dquat / |quat|, so
      ct_quat = (I - qn qn^T) 2 E^T ct_omega / |quat|.
    * planar [x, y, c, s] (tangent [v_x, v_y, omega], local): the rotation of
      (c, s)/|(c, s)| by t = atan2(s, c) and the raw translation (x, y):
      dv = R2(t)^T d(x, y), domega = (c ds - s dc) / (c^2 + s^2), so
      ct_xy = R2(t) ct_v, ct_c = -s ct_omega / (c^2 + s^2), ct_s = c ct_omega / (...).

    `concat` joins (B, k) blocks along axis 1."""
    blocks = (("free_flyer", 0, 0),) if chart == "free_flyer" else chart
    parts: list[Any] = []
    end_v = 0
    for kind, iq, iv in blocks:
        width_q, width_v = _BLOCK_WIDTHS[kind]
        if iv > end_v:
            parts.append(ct[:, end_v:iv])
        columns = _BLOCK_PULLBACKS[kind](q[:, iq:iq + width_q], ct[:, iv:iv + width_v], sqrt)
        parts += [c[:, None] for c in columns]
        end_v = iv + width_v
    parts.append(ct[:, end_v:])
    return concat(parts)


def _quaternion_pullback(quat: Any, ct_omega: Any, sqrt: Callable[[Any], Any]
                         ) -> list[Any]:
    """ct_quat (4 columns, x y z w) of a local angular cotangent (see ambient_pullback)."""
    x, y, z, w = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]
    norm = sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    c0, c1, c2 = ct_omega[:, 0], ct_omega[:, 1], ct_omega[:, 2]
    # 2 E^T ct_omega, E's rows: [w, z, -y, -x], [-z, w, x, -y], [y, -x, w, -z].
    gx = 2 * (w * c0 - z * c1 + y * c2)
    gy = 2 * (z * c0 + w * c1 - x * c2)
    gz = 2 * (-y * c0 + x * c1 + w * c2)
    gw = 2 * (-x * c0 - y * c1 - z * c2)
    radial = x * gx + y * gy + z * gz + w * gw
    return [(g - qn * radial) / norm for g, qn in ((gx, x), (gy, y), (gz, z), (gw, w))]


def _free_flyer_pullback(q: Any, ct: Any, sqrt: Callable[[Any], Any]) -> list[Any]:
    x, y, z, w = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    norm = sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    cv0, cv1, cv2 = ct[:, 0], ct[:, 1], ct[:, 2]
    # R(qn) applied to ct_v (R's columns are the body axes in the parent frame).
    p0 = ((1 - 2 * (y * y + z * z)) * cv0 + 2 * (x * y - z * w) * cv1
          + 2 * (x * z + y * w) * cv2)
    p1 = (2 * (x * y + z * w) * cv0 + (1 - 2 * (x * x + z * z)) * cv1
          + 2 * (y * z - x * w) * cv2)
    p2 = (2 * (x * z - y * w) * cv0 + 2 * (y * z + x * w) * cv1
          + (1 - 2 * (x * x + y * y)) * cv2)
    return [p0, p1, p2, *_quaternion_pullback(q[:, 3:7], ct[:, 3:6], sqrt)]


def _planar_pullback(q: Any, ct: Any, sqrt: Callable[[Any], Any]) -> list[Any]:
    c, s = q[:, 2], q[:, 3]
    square = c * c + s * s
    norm = sqrt(square)
    cn, sn = c / norm, s / norm
    cv0, cv1, cw = ct[:, 0], ct[:, 1], ct[:, 2]
    return [cn * cv0 - sn * cv1, sn * cv0 + cn * cv1, -s * cw / square, c * cw / square]


_BLOCK_PULLBACKS = {"free_flyer": _free_flyer_pullback, "spherical": _quaternion_pullback,
                    "planar": _planar_pullback}
