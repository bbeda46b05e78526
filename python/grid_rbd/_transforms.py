"""The runtime joint-origin table (`register_robot(runtime_transform=True)`).

Each joint's origin, the placement from its parent body's frame to its joint frame
(Pinocchio's `jointPlacements`: the URDF `<origin>`, composed with the fixed joints
between the joint and its parent body), is a row of a per-context table that every
kernel of the build reads: inverse and forward dynamics and their gradients, the
second-order and centroidal profiles, the end-effector poses and their derivatives,
`fk_batched`, `world_kinematics` (hence the frame and contact methods). The table is
(nb, 7), one row per joint in body order (a floating base's free flyer first):

    [x, y, z, qx, qy, qz, qw]   (translation, unit quaternion of the rotation)

Frames welded to a body by fixed joints keep their placement in that body (they move
with it), as do the inertias of welded links; so a table row equals what editing that
joint's `<origin>` in the URDF gives. See docs/numpy.md "Runtime joint origins".
"""

from __future__ import annotations

from typing import Any

import numpy as np

TRANSFORM_WIDTH = 7
_MIN_NORM = 1e-6  # a quaternion shorter than this has no direction to normalise to


class TransformParams:
    """`set_transform_params` / `get_transform_params` of the numpy handle (a mixin over
    `RobotHandle`: `_artifact`, `_ctx_id`, `_info`, `_dtype`, `_name`, `nb`)."""

    @property
    def runtime_transform(self) -> bool:
        """Whether `set_transform_params` is available (a runtime_transform=True build)."""
        return bool(self._info.get("runtime_transform", False))

    def set_transform_params(self, table: Any) -> int:
        """Replace this context's joint origins: `table` is (nb, 7) (or flat, 7 nb), per
        joint `[x, y, z, qx, qy, qz, qw]`, the parent body -> joint frame placement. Each
        quaternion is normalised (a zero one is refused); NaN / inf are refused.
        Serialised against every in-flight call (exclusive admission); bumps
        `model_version`, so a deferred torch / JAX backward of an older forward is
        refused. Returns the new model version."""
        self._check_open()
        if not self.runtime_transform:
            raise RuntimeError(f"{self._name} was built without runtime_transform; register "
                               "it with runtime_transform=True to set joint origins")
        arr = np.asarray(table)
        shape = (self.nb, TRANSFORM_WIDTH)
        if arr.shape not in (shape, (TRANSFORM_WIDTH * self.nb,)):
            raise ValueError(f"transform table has shape {arr.shape}; this robot's is "
                             f"(nb, 7) = {shape}: [x, y, z, qx, qy, qz, qw] per joint")
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"transform table has dtype {arr.dtype}; expected real numbers")
        arr = arr.reshape(shape).astype(np.float64)
        bad = ~np.isfinite(arr).all(axis=1)
        if bad.any():
            raise ValueError(f"transform table: joint(s) {np.flatnonzero(bad).tolist()} "
                             "hold NaN or inf; every entry must be finite")
        norms = np.linalg.norm(arr[:, 3:], axis=1)
        short = norms < _MIN_NORM
        if short.any():
            raise ValueError(f"transform table: the quaternion of joint(s) "
                             f"{np.flatnonzero(short).tolist()} is zero; expected a "
                             "rotation [qx, qy, qz, qw] (normalised here)")
        arr[:, 3:] /= norms[:, None]
        table = np.ascontiguousarray(arr, dtype=self._dtype)
        return int(self._artifact.set_transform_params(self._ctx_id, table.tobytes()))

    def get_transform_params(self) -> np.ndarray:
        """This context's joint origins, (nb, 7) `[x, y, z, qx, qy, qz, qw]` per joint
        (the URDF's until `set_transform_params`); (0, 7) on a build without the table."""
        self._check_open()
        table = np.frombuffer(self._artifact.get_transform_params(self._ctx_id),
                              dtype=self._dtype).copy()
        return table.reshape(-1, TRANSFORM_WIDTH)


class FrameworkTransformParams:
    """The same two methods on the JAX / torch handles (a mixin over `FrameworkHandle`,
    delegating to its numpy handle `_base`)."""

    runtime_transform = property(lambda self: self._base.runtime_transform)

    def set_transform_params(self, table: Any) -> int:
        """Replace the context's (nb, 7) joint origins (see the numpy handle); returns the
        new model version. A backward whose forward ran before this call is refused."""
        if hasattr(table, "detach"):  # a torch tensor, possibly on the GPU
            table = table.detach().cpu().numpy()
        return self._base.set_transform_params(np.asarray(table))

    def get_transform_params(self) -> np.ndarray:
        return self._base.get_transform_params()


def placement_rows(R: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Table rows `[p, quat xyzw]` of placements `(R (n, 3, 3), p (n, 3))`: a helper to
    build a table from rotation matrices (each must be orthonormal with det +1 within
    1e-6)."""
    R = np.asarray(R, dtype=np.float64).reshape(-1, 3, 3)
    p = np.asarray(p, dtype=np.float64).reshape(-1, 3)
    if len(R) != len(p):
        raise ValueError(f"{len(R)} rotations and {len(p)} translations")
    from grid_codegen.symbolic.frames import rotation_quaternion

    rows = []
    for k, Rk in enumerate(R):
        if not np.all(np.isfinite(Rk)) or np.abs(Rk @ Rk.T - np.eye(3)).max() > 1e-6 \
                or np.linalg.det(Rk) < 0:
            raise ValueError(f"rotation {k} is not a rotation matrix (orthonormal, det +1, "
                             "within 1e-6)")
        rows.append(list(p[k]) + list(rotation_quaternion(Rk)))
    return np.asarray(rows, dtype=np.float64).reshape(-1, TRANSFORM_WIDTH)
