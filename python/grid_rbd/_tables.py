"""The per-context inertia and joint-dynamics tables of the numpy handle
(`register_robot(runtime_inertia=True)`, `runtime_joint_dynamics=True`).

Each replaces a table that every kernel of the build reads, on this context only,
serialised against every in-flight call (exclusive admission), and bumps the model
version, so a deferred torch / JAX backward of an older forward is refused. The
joint-origin table is `_transforms.TransformParams`.
"""

from __future__ import annotations

import numpy as np


class RuntimeTables:
    """`set_inertia_params` / `get_inertia_params` and `set_joint_dynamics` /
    `get_joint_dynamics` of the numpy handle (a mixin over `RobotHandle`: `_artifact`,
    `_ctx_id`, `_check_open`, `_info`, `_dtype`, `_name`, `nb`, `runtime_inertia`)."""

    def set_inertia_params(self, table: np.ndarray) -> int:
        """Replace this context's inertia table: `table` is (nb, 10), per body Pinocchio's
        dynamic parameters [m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz]. Only this context
        sees it. Returns the new model version."""
        self._check_open()
        if not self.runtime_inertia:
            raise RuntimeError(f"{self._name} was built without runtime_inertia; register "
                               "it with runtime_inertia=True to set inertia parameters")
        arr = np.asarray(table)
        shape = (self.nb, 10)
        if arr.shape not in (shape, (10 * self.nb,)):
            raise ValueError(f"inertia table has shape {arr.shape}; this robot's is "
                             f"(nb, 10) = {shape}")
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(np.isfinite(arr)):
            raise ValueError("inertia table must hold finite floating-point values")
        arr = np.ascontiguousarray(arr.reshape(shape), dtype=self._dtype)
        return int(self._artifact.set_inertia_params(self._ctx_id, arr))

    @property
    def runtime_joint_dynamics(self) -> bool:
        """Whether `set_joint_dynamics` is available (a runtime_joint_dynamics=True build)."""
        return bool(self._info.get("runtime_joint_dynamics", False))

    def set_joint_dynamics(self, damping=None, friction=None) -> int:
        """Replace this context's joint damping and Coulomb friction coefficients (each
        `(n,)`, n = the tangent dofs less a free flyer's 6; None keeps the current
        values); finite and non-negative. Serialised against every in-flight call; bumps
        `model_version` (a deferred torch / JAX backward of an older forward is refused).
        Returns the new model version."""
        self._check_open()
        if not self.runtime_joint_dynamics:
            raise RuntimeError(f"{self._name} was built without runtime_joint_dynamics; "
                               "register it with runtime_joint_dynamics=True to set joint "
                               "damping and friction")
        current = self.get_joint_dynamics()
        n = len(current["damping"])
        values = []
        for what, given in (("damping", damping), ("friction", friction)):
            if given is None:
                values.append(current[what])
                continue
            arr = np.asarray(given)
            if arr.shape != (n,):
                raise ValueError(f"{what} has shape {arr.shape}; this robot has ({n},) "
                                 "joint-dynamics dofs (its tangent dofs less a free flyer's)")
            if arr.dtype.kind not in "fiu":
                raise ValueError(f"{what} has dtype {arr.dtype}; expected real numbers")
            arr = arr.astype(np.float64)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                raise ValueError(f"{what} must be finite and non-negative, got {arr}")
            values.append(arr)
        table = np.ascontiguousarray(np.concatenate(values), dtype=self._dtype)
        return int(self._artifact.set_joint_dynamics(self._ctx_id, table.tobytes()))

    def get_joint_dynamics(self) -> dict[str, np.ndarray]:
        """This context's `{"damping": (n,), "friction": (n,)}` (empty arrays on a build
        without joint dynamics)."""
        self._check_open()
        table = np.frombuffer(self._artifact.get_joint_dynamics(self._ctx_id),
                              dtype=self._dtype).copy()
        n = len(table) // 2
        return {"damping": table[:n], "friction": table[n:]}

    def get_inertia_params(self) -> np.ndarray:
        """This context's current inertia table, (nb, 10)."""
        self._check_open()
        return np.asarray(self._artifact.get_inertia_params(self._ctx_id)).reshape(self.nb,
                                                                                   10)
