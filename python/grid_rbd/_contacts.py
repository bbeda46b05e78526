"""Contact frames and welded tools on every handle, over the `world_kinematics` kernel.

Contact frames (`register_robot(contact_frames=[...])`, fixed-joint or link names) are
points on the robot where a consumer's contact model applies wrenches. `contact_fext(q,
f_c)` maps one wrench per contact, `[force; torque]` in world-aligned axes about the
contact point, to the per-body `f_ext` the dynamics take (`[force; torque]` in each
body's own frame, about its origin, Pinocchio's convention); the wrenches of contacts on
one body add up. `contact_positions` and `contact_jacobians` give the points and their
world-aligned linear Jacobians.

A welded tool (`register_robot(enable_tool=True)`, which implies `runtime_inertia`) is a
payload composed into the context's inertia table with no recompile: `attach_tool(frame,
mass=, com=, inertia=, tip=)` adds its inertial parameters to the body `frame` is fixed
to (`com` and `tip` in `frame`'s coordinates, `inertia` about the centre of mass in its
axes), so every dynamics kernel and gradient follows; the tip becomes the frame
`"tool_tip"` of the frame methods, and `tool_fext(q, wrench)` maps a wrench at the tip.
`detach_tool()` restores the table as it was. Both take the context's exclusive
admission and bump its model version (`set_inertia_params`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_rbd import _frames as F
from grid_rbd._array_ops import ArrayOps
from grid_rbd._frames import FrameInfo


def payload_parameters(mass: float, com: np.ndarray, inertia: np.ndarray, R: np.ndarray,
                       p: np.ndarray) -> np.ndarray:
    """Pinocchio's 10 dynamic parameters, in the body frame, of a payload of `mass` with
    its centre `com` and rotational `inertia` (about that centre) given in a frame at
    `(R, p)` in the body."""
    c = R @ com + p
    I_c = R @ inertia @ R.T
    I0 = I_c + mass * (c @ c * np.eye(3) - np.outer(c, c))
    return np.array([mass, *(mass * c), I0[0, 0], I0[0, 1], I0[1, 1], I0[0, 2], I0[1, 2],
                     I0[2, 2]])


def _vector3(x: Any, what: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be 3 finite numbers; got {x!r}")
    return arr


def _inertia3(x: Any) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.shape == (3,):
        arr = np.diag(arr)
    if arr.shape != (3, 3) or not np.all(np.isfinite(arr)):
        raise ValueError(f"inertia must be a (3, 3) matrix or its (3,) diagonal; got shape "
                         f"{arr.shape}")
    if not np.allclose(arr, arr.T, atol=1e-12 * max(1.0, np.abs(arr).max())):
        raise ValueError("inertia must be symmetric")
    if np.linalg.eigvalsh(0.5 * (arr + arr.T)).min() < -1e-12:
        raise ValueError("inertia must be positive semi-definite")
    return 0.5 * (arr + arr.T)


class ContactMethods:
    """Mixin of the three handles (module doc); needs the frame methods' table and
    `world_kinematics`."""

    def _tool_owner(self) -> Any:
        return self  # the numpy handle; the framework views answer their base

    @property
    def contact_frames(self) -> tuple[str, ...]:
        """The contact frames of the build, in `contact_fext` order."""
        return tuple(self._meta_dict().get("contact_frames", ()))

    def _contacts(self) -> list[FrameInfo]:
        names = self.contact_frames
        if not names:
            raise RuntimeError("this robot was registered without contact frames; register "
                               "it with contact_frames=[...] (fixed-joint or link names)")
        table = self._frame_table()
        return [table.resolve(n) for n in names]

    def _points(self, q: Any, frames: list[FrameInfo]) -> tuple[Any, Any, bool]:
        q = self._as_array(q)
        kin, single = self._kinematics(q)
        ops = ArrayOps(kin[0])
        points = ops.stack([F.frame_pose(ops, kin[0], kin[1], f)[1] for f in frames], 1)
        return kin, points, single

    def contact_positions(self, q: Any) -> Any:
        """`(B, n_contacts, 3)`: the contact points in the world."""
        _, points, single = self._points(q, self._contacts())
        return points[0] if single else points

    def contact_jacobians(self, q: Any) -> Any:
        """`(B, n_contacts, 3, nv)`: `d point / d tangent` (world-aligned, Pinocchio's
        `LOCAL_WORLD_ALIGNED` linear rows)."""
        q = self._as_array(q)
        kin, single = self._kinematics(q)
        ops = ArrayOps(kin[0])
        J = ops.stack([F.frame_jacobian(ops, kin, f, "LOCAL_WORLD_ALIGNED")[:, :3]
                       for f in self._contacts()], 1)
        return J[0] if single else J

    def _wrenches_to_fext(self, q: Any, frames: list[FrameInfo], wrenches: Any) -> Any:
        q, wrenches = self._as_array(q), self._as_array(wrenches)
        kin, points, single = self._points(q, frames)
        ops = ArrayOps(kin[0])
        n = len(frames)
        if single:
            wrenches = wrenches[None]
        if tuple(wrenches.shape[1:]) == (6 * n,):
            wrenches = wrenches.reshape(wrenches.shape[0], n, 6)
        if tuple(wrenches.shape[1:]) != (n, 6):
            raise ValueError(f"wrenches have shape {tuple(wrenches.shape)}; expected (B, {n}, 6) "
                             f"or (B, {6 * n}), one [force; torque] per frame")
        bodies = [f.body for f in frames]
        R_b, p_b = kin[0][:, bodies], kin[1][:, bodies]  # (B, n, 3, 3), (B, n, 3)
        force, torque = wrenches[:, :, :3], wrenches[:, :, 3:]
        about_origin = torque + ops.cross(points - p_b, force, 2)
        RT = ops.swap(R_b)
        local = ops.cat([(RT @ force[..., None])[..., 0], (RT @ about_origin[..., None])[..., 0]],
                        2)  # (B, n, 6)
        scatter = np.zeros((self.nb, n))
        for k, b in enumerate(bodies):
            scatter[b, k] = 1.0
        fext = ops.const(scatter)[None] @ local  # (B, nb, 6)
        fext = fext.reshape(fext.shape[0], -1)
        return fext[0] if single else fext

    def contact_fext(self, q: Any, f_c: Any) -> Any:
        """`(B, 6*nb)`: `f_ext` of the contact wrenches `f_c` (`(B, n_contacts, 6)` or
        `(B, 6*n_contacts)`, `[force; torque]` world-aligned about each contact point)."""
        return self._wrenches_to_fext(q, self._contacts(), f_c)

    # -- a welded tool -------------------------------------------------------------------
    @property
    def tool(self) -> dict[str, Any] | None:
        """The attached tool (frame, mass, com, inertia, tip), or None."""
        state = self._tool_owner().__dict__.get("_tool_state")
        return None if state is None else dict(state["tool"])

    def attach_tool(self, frame: Any, mass: float, com: Any = (0.0, 0.0, 0.0),
                    inertia: Any = (0.0, 0.0, 0.0), tip: Any = (0.0, 0.0, 0.0)) -> int:
        """Weld a tool to `frame` (module doc); returns the new model version. A tool
        already attached is replaced."""
        owner = self._tool_owner()
        if not owner._meta_dict().get("enable_tool"):
            raise RuntimeError("this robot was registered without enable_tool=True; register "
                               "it with enable_tool=True to attach tools at run time")
        mass = float(mass)
        if not np.isfinite(mass) or mass < 0.0:
            raise ValueError(f"tool mass must be finite and >= 0; got {mass}")
        com, tip = _vector3(com, "com"), _vector3(tip, "tip")
        inertia = _inertia3(inertia)
        f = owner._frame_table().resolve(frame)
        if f.body < 0:
            raise ValueError(f"frame '{f.name}' is welded to the world; a tool must move "
                             "with the robot")
        state = owner.__dict__.get("_tool_state")
        base = state["table"] if state is not None else owner.get_inertia_params()
        table = np.array(base, dtype=np.float64)
        table[f.body] += payload_parameters(mass, com, inertia, f.R, f.p)
        version = owner.set_inertia_params(table)
        tip_frame = FrameInfo("tool_tip", "tool", f.body, f.R, f.p + f.R @ tip, f.support)
        owner.__dict__["_tool_state"] = {
            "table": base, "frame": tip_frame,
            "tool": {"frame": f.name, "mass": mass, "com": com.tolist(),
                     "inertia": inertia.tolist(), "tip": tip.tolist()}}
        owner._frame_table().extra["tool_tip"] = tip_frame
        return version

    def detach_tool(self) -> int:
        """Remove the tool: the inertia table as it was before `attach_tool`."""
        owner = self._tool_owner()
        state = owner.__dict__.get("_tool_state")
        if state is None:
            raise RuntimeError("no tool is attached")
        version = owner.set_inertia_params(state["table"])
        del owner.__dict__["_tool_state"]
        owner._frame_table().extra.pop("tool_tip", None)
        return version

    def tool_fext(self, q: Any, wrench: Any) -> Any:
        """`(B, 6*nb)`: `f_ext` of a wrench `(B, 6)` at the tool tip (`[force; torque]`
        world-aligned about the tip)."""
        state = self._tool_owner().__dict__.get("_tool_state")
        if state is None:
            raise RuntimeError("no tool is attached (attach_tool first)")
        wrench = self._as_array(wrench)
        shaped = wrench[..., None, :]
        return self._wrenches_to_fext(q, [state["frame"]], shaped)
