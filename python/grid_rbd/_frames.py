"""Frames chosen at call time: Jacobians, their time variation, the operational-space
inertia and end-effector poses of any link, joint or fixed frame, on every handle.

One kernel, `world_kinematics(q, qd)`, gives every body's world placement, the world
motion subspace `oS` (twists about the world origin, one column per dof) and the bodies'
world twists; the frame asked for is then assembled with a few batched array operations
(numpy, torch or jax alike, on the arrays' own device), so no frame has to be baked into
the build. Reference frames have Pinocchio's meanings for a frame at world `(R, p)`:
`WORLD` (the twist about the world origin, world axes), `LOCAL` (the frame's own axes
and origin), `LOCAL_WORLD_ALIGNED` (the frame origin's velocity and the angular velocity,
world axes). A frame is named as in Pinocchio: a moving joint (its body frame), a fixed
joint or a URDF link, or `"joint:NAME"` / `"fixed_joint:NAME"` / `"link:NAME"` where a
name is ambiguous; or a body index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grid_codegen.model import listing
from grid_codegen.registry import REFERENCE_FRAME_CODES
from grid_rbd._array_ops import ArrayOps as _Ops
from grid_rbd.reference.frames import REFERENCE_FRAMES, check_reference_frame

_KINDS = ("joint", "fixed_joint", "link")


@dataclass(frozen=True)
class FrameInfo:
    """A frame as the handle knows it: the body it is fixed to (-1: the world), its
    placement in that body's frame, the dofs that move it (`support`, nv 0/1) and its
    index in the artifact's frame table (`frame_jacobian_indexed`; -1 for a frame made
    at run time, which the kernel does not know)."""

    name: str
    kind: str
    body: int
    R: np.ndarray
    p: np.ndarray
    support: np.ndarray
    index: int = -1


class FrameTable:
    """The frames of a robot from its entry's meta.json ("frames", "tree")."""

    def __init__(self, meta: dict[str, Any], nv: int) -> None:
        if "frames" not in meta or "tree" not in meta:
            raise RuntimeError("this store entry predates frame lookups (its meta.json has "
                               "no frame table); register again with force_rebuild=True")
        self.nv = nv
        self.tree = [(int(t["parent"]), int(t["idx_v"]), int(t["nv"])) for t in meta["tree"]]
        self.body_names = list(meta.get("body_names", ()))
        self.joint_names = list(meta.get("joint_names", ()))
        self.frames = [(str(f["name"]), str(f["kind"]), int(f["body"]),
                        np.asarray(f["R"], np.float64).reshape(3, 3),
                        np.asarray(f["p"], np.float64)) for f in meta["frames"]]
        self.extra: dict[str, FrameInfo] = {}  # frames added at run time ("tool_tip")
        self._resolved: dict[Any, FrameInfo] = {}  # the table's own frames, by the key asked
        self.dof_body = np.zeros(nv, dtype=np.int64)
        for body, (_, idx_v, n) in enumerate(self.tree):
            self.dof_body[idx_v:idx_v + n] = body

    def support(self, body: int) -> np.ndarray:
        mask = np.zeros(self.nv)
        while body >= 0:
            parent, idx_v, n = self.tree[body]
            mask[idx_v:idx_v + n] = 1.0
            body = parent
        return mask

    def _body_frame(self, body: int, name: str) -> FrameInfo:
        return FrameInfo(name, "joint", body, np.eye(3), np.zeros(3), self.support(body),
                         body)

    def resolve(self, frame: Any) -> FrameInfo:
        if isinstance(frame, str) and frame in self.extra:
            return self.extra[frame]
        key = (type(frame), frame) if isinstance(frame, (str, int)) else None
        found = self._resolved.get(key) if key is not None else None
        if found is None:
            found = self._resolve(frame)
            if key is not None and found.index >= 0:
                self._resolved[key] = found
        return found

    def _resolve(self, frame: Any) -> FrameInfo:
        if isinstance(frame, (int, np.integer)) and not isinstance(frame, bool):
            if not 0 <= frame < len(self.tree):
                raise IndexError(f"body index {frame} is out of range; the robot has "
                                 f"{len(self.tree)} bodies")
            return self._body_frame(int(frame), self.body_names[frame])
        if not isinstance(frame, str):
            raise TypeError(f"frame must be a frame name or a body index; got "
                            f"{type(frame).__name__}")
        kind, _, name = frame.partition(":")
        found = self._named(name, kind) if kind in _KINDS and name else []
        if not found:
            found = self._named(frame, None)
        if len(found) > 1:
            kinds = ", ".join(f"'{f.kind}:{frame}'" for f in found)
            raise ValueError(f"frame name '{frame}' is ambiguous; pass one of {kinds}")
        if not found:
            links = [f[0] for f in self.frames if f[1] == "link"]
            fixed = [f[0] for f in self.frames if f[1] == "fixed_joint"]
            raise KeyError(f"no frame '{frame}'; name a link ({listing(links)}), a fixed "
                           f"joint ({listing(fixed)}), a moving joint "
                           f"({listing(self.joint_names)}) or a body index")
        return found[0]

    def _named(self, name: str, kind: str | None) -> list[FrameInfo]:
        out = []
        if kind in (None, "joint") and name in self.joint_names:
            out.append(self._body_frame(self.joint_names.index(name), name))
        for k, (fname, fkind, body, R, p) in enumerate(self.frames):
            if fname == name and kind in (None, fkind):
                out.append(FrameInfo(fname, fkind, body, R, p,
                                     self.support(body) if body >= 0 else np.zeros(self.nv),
                                     len(self.tree) + k))
        return out


def _one_of(ee_names: Any, ee_joint_names: Any) -> Any:
    if ee_names is not None and ee_joint_names is not None:
        raise TypeError("pass ee_names or ee_joint_names, not both")
    return ee_names if ee_names is not None else ee_joint_names


# -- the assembly -------------------------------------------------------------------------
def frame_pose(ops: _Ops, R_all: Any, p_all: Any, f: FrameInfo) -> tuple[Any, Any]:
    """`(R (B, 3, 3), p (B, 3))` of frame `f` in the world."""
    Rf, pf = ops.const(f.R), ops.const(f.p)
    if f.body < 0:
        return Rf[None] + 0 * R_all[:, 0], pf[None] + 0 * p_all[:, 0]
    Rb, pb = R_all[:, f.body], p_all[:, f.body]
    # A body's own frame (a moving joint) has no offset: no arithmetic at all.
    R = Rb if np.array_equal(f.R, np.eye(3)) else ops.apply3(Rb, Rf[None])
    p = pb if not f.p.any() else ops.apply3(Rb, pf[None, :, None])[..., 0] + pb
    return R, p


def _shift(ops: _Ops, J: Any, p: Any) -> Any:
    """Twists about the world origin to twists about the point `p` (world axes):
    `[v - p × w; w]`, columns on the last axis."""
    lin = J[:, :3] - ops.cross(p[:, :, None], J[:, 3:], 1)
    return ops.cat([lin, J[:, 3:]], 1)


def _rotate_t(ops: _Ops, R: Any, J: Any) -> Any:
    """`[R^T lin; R^T ang]` column by column."""
    return ops.cat([ops.apply3(R, J[:, :3], True), ops.apply3(R, J[:, 3:], True)], 1)


def frame_jacobian(ops: _Ops, kin: tuple, f: FrameInfo, rf: str) -> Any:
    R_all, p_all, oS, _ = kin
    J = oS * ops.const(f.support)
    if rf == "WORLD":
        return J
    R, p = frame_pose(ops, R_all, p_all, f)
    J = _shift(ops, J, p)
    return J if rf == "LOCAL_WORLD_ALIGNED" else _rotate_t(ops, R, J)


def _motion_cross(ops: _Ops, v: Any, m: Any) -> Any:
    """`v × m` for twists `v (B, 6, 1 or n)` and `m (B, 6, n)`, along axis 1."""
    lin = ops.cross(v[:, 3:], m[:, :3], 1) + ops.cross(v[:, :3], m[:, 3:], 1)
    return ops.cat([lin, ops.cross(v[:, 3:], m[:, 3:], 1)], 1)


def frame_jacobian_dot(ops: _Ops, kin: tuple, table: FrameTable, f: FrameInfo, rf: str
                       ) -> Any:
    """`d/dt frame_jacobian` (Pinocchio's `getFrameJacobianTimeVariation`): `WORLD`
    columns `ov_{body(a)} × oS_a`; the other frames add the rate of their transform."""
    R_all, p_all, oS, ov = kin
    mask = ops.const(f.support)
    twists = ops.swap(ov[:, table.dof_body])  # (B, 6, nv): the twist of each dof's body
    dJ = _motion_cross(ops, twists, oS) * mask
    if rf == "WORLD":
        return dJ
    J = oS * mask
    R, p = frame_pose(ops, R_all, p_all, f)
    body_twist = ov[:, f.body] if f.body >= 0 else 0 * ov[:, 0]
    if rf == "LOCAL":
        J_local = _rotate_t(ops, R, _shift(ops, J, p))
        v_frame = _rotate_t(ops, R, _shift(ops, body_twist[:, :, None], p))
        return _rotate_t(ops, R, _shift(ops, dJ, p)) - _motion_cross(ops, v_frame, J_local)
    p_dot = body_twist[:, :3] + ops.cross(body_twist[:, 3:], p, 1)
    out = _shift(ops, dJ, p)
    lin = out[:, :3] - ops.cross(p_dot[:, :, None], J[:, 3:], 1)
    return ops.cat([lin, out[:, 3:]], 1)


def rpy(ops: _Ops, R: Any) -> Any:
    """Roll, pitch, yaw of `R = Rz(yaw) Ry(pitch) Rx(roll)` (Pinocchio's matrixToRpy)."""
    m = ops.m
    return ops.stack([ops.atan2(R[:, 2, 1], R[:, 2, 2]),
                      ops.atan2(-R[:, 2, 0], m.sqrt(R[:, 0, 0] ** 2 + R[:, 1, 0] ** 2)),
                      ops.atan2(R[:, 1, 0], R[:, 0, 0])], 1)


def rpy_rate_inverse(ops: _Ops, angles: Any) -> Any:
    """`E^-1 (B, 3, 3)` with `rpy_dot = E^-1 w` (w the world angular velocity)."""
    m = ops.m
    cp, sp_, cy, sy = (m.cos(angles[:, 1]), m.sin(angles[:, 1]), m.cos(angles[:, 2]),
                       m.sin(angles[:, 2]))
    zero, one = 0 * cp, 0 * cp + 1
    return ops.stack([ops.stack([cy / cp, sy / cp, zero], 1),
                      ops.stack([-sy, cy, zero], 1),
                      ops.stack([cy * sp_ / cp, sy * sp_ / cp, one], 1)], 1)


def offset_frame(f: FrameInfo, offset: Any) -> FrameInfo:
    """`f` with its origin moved by `offset` (3, in `f`'s own axes)."""
    offset = np.asarray(offset, dtype=np.float64).reshape(3)
    if not np.all(np.isfinite(offset)):
        raise ValueError(f"ee_offsets for '{f.name}' must be finite; got {offset}")
    return FrameInfo(f.name, f.kind, f.body, f.R, f.p + f.R @ offset, f.support)  # no index


def end_effector_targets(table: FrameTable, names: Any, offsets: Any, default: list[str]
                         ) -> list[FrameInfo]:
    names = list(default if names is None else ([names] if isinstance(names, str) else names))
    if not names:
        raise ValueError("ee_names must name at least one frame")
    frames = [table.resolve(n) for n in names]
    if offsets is None:
        return frames
    offsets = np.asarray(offsets, dtype=np.float64)
    if offsets.shape != (len(frames), 3):
        raise ValueError(f"ee_offsets has shape {offsets.shape}; expected ({len(frames)}, 3), "
                         "one translation per target in its frame's axes")
    return [offset_frame(f, o) for f, o in zip(frames, offsets, strict=True)]


def poses(ops: _Ops, kin: tuple, frames: list[FrameInfo]) -> Any:
    R_all, p_all, _, _ = kin
    out = []
    for f in frames:
        R, p = frame_pose(ops, R_all, p_all, f)
        out.append(ops.cat([p, rpy(ops, R)], 1))
    return ops.cat(out, 1)


def pose_gradients(ops: _Ops, kin: tuple, frames: list[FrameInfo]) -> Any:
    R_all, p_all, oS, _ = kin
    out = []
    for f in frames:
        R, p = frame_pose(ops, R_all, p_all, f)
        J = _shift(ops, oS * ops.const(f.support), p)
        out.append(ops.cat([J[:, :3], rpy_rate_inverse(ops, rpy(ops, R)) @ J[:, 3:]], 1))
    return ops.cat(out, 1)


def operational_space_inertia(ops: _Ops, J: Any, Minv: Any, f: FrameInfo) -> Any:
    moved_by = int(f.support.sum())
    if moved_by < 6:
        raise ValueError(f"frame '{f.name}' is moved by {moved_by} dofs; the operational-"
                         "space inertia of a 6-D frame needs at least 6")
    Lam = ops.inv(J @ Minv @ ops.swap(J))
    return 0.5 * (Lam + ops.swap(Lam))


class FrameMethods:
    """Mixin of the three handles: the frame methods over `world_kinematics` (and `minv`
    for `osc_inertia`). The handle supplies `_meta_dict()`, `nv`, `ee_names` and the
    kernel methods."""

    def _frame_table(self) -> FrameTable:
        table = self.__dict__.get("_frames_cache")
        if table is None:
            table = FrameTable(self._meta_dict(), self.nv)
            self.__dict__["_frames_cache"] = table
        return table

    def _kinematics(self, q: Any, qd: Any = None) -> tuple[tuple, bool]:
        if "world_kinematics" not in self.algorithms:
            raise RuntimeError("frame methods need world_kinematics, which was not built "
                               "into this artifact; register with its profile "
                               "'kinematics' in algorithm_list")
        single = len(q.shape) == 1
        if single:
            q = q[None]
            qd = None if qd is None else qd[None]
        ops = _Ops(q)
        return self.world_kinematics(ops.contiguous(q),
                                     None if qd is None else ops.contiguous(qd)), single

    def _jacobian(self, q: Any, f: FrameInfo, rf: str) -> Any:
        """`(B, 6, nv)` of a batch `q`: by the `frame_jacobian_indexed` kernel where it
        was built and knows the frame, else assembled from `world_kinematics`."""
        J = self._indexed("frame_jacobian_indexed", f, rf, q)
        if J is None:
            kin, _ = self._kinematics(q)
            J = frame_jacobian(_Ops(kin[0]), kin, f, rf)
        return J

    def _indexed(self, kernel: str, f: FrameInfo, rf: str, q: Any, *rest: Any) -> Any:
        """`kernel(q, *rest, selector)` of a batch for a table frame where it was built;
        None for a frame made at run time or a build without it."""
        if f.index < 0 or kernel not in self.algorithms:
            return None
        ops = _Ops(q)
        selector = self._frame_selector(ops, q.shape[0], f.index, REFERENCE_FRAME_CODES[rf])
        return getattr(self, kernel)(ops.contiguous(q), *map(ops.contiguous, rest), selector)

    def _frame_selector(self, ops: _Ops, batch: int, index: int, code: int) -> Any:
        """The kernel's `(B, 2)` input `[index, code]`, made where `q` lives; numpy and
        torch ones are kept (a few) so that a control loop's calls make none."""
        if ops.kind == "jax":
            return ops.m.broadcast_to(ops.const([index, code]), (batch, 2))
        like = ops.like
        key = (ops.kind, getattr(like, "device", None), like.dtype, batch, index, code)
        kept = self.__dict__.setdefault("_frame_selectors", {})
        selector = kept.get(key)
        if selector is None:
            if len(kept) >= 16:
                kept.clear()  # (no iteration: another thread may be adding one)
            selector = ops.full((batch, 2), float(index))
            selector[:, 1] = code
            kept[key] = selector
        return selector

    def frame_jacobian(self, q: Any, frame: Any, reference_frame: str = "LOCAL_WORLD_ALIGNED"
                       ) -> Any:
        """`(B, 6, nv)`: the geometric Jacobian of `frame`, `[linear; angular]` rows, in
        `reference_frame` (Pinocchio's `getFrameJacobian`). Forward-only."""
        f, rf = self._frame_table().resolve(frame), check_reference_frame(reference_frame)
        single = len(q.shape) == 1
        J = self._jacobian(q[None] if single else q, f, rf)
        return J[0] if single else J

    def frame_jacobian_dot(self, q: Any, qd: Any, frame: Any,
                           reference_frame: str = "LOCAL_WORLD_ALIGNED") -> Any:
        """`(B, 6, nv)`: `d/dt frame_jacobian` along `qd` (Pinocchio's
        `getFrameJacobianTimeVariation`): by the `frame_jacobian_dot_indexed` kernel where
        it was built and knows the frame, else assembled from `world_kinematics`.
        Forward-only."""
        table = self._frame_table()
        f, rf = table.resolve(frame), check_reference_frame(reference_frame)
        single = len(q.shape) == 1
        dJ = self._indexed("frame_jacobian_dot_indexed", f, rf, *((q[None], qd[None])
                                                                   if single else (q, qd)))
        if dJ is None:
            kin, _ = self._kinematics(q, qd)
            dJ = frame_jacobian_dot(_Ops(kin[0]), kin, table, f, rf)
        return dJ[0] if single else dJ

    def osc_inertia(self, q: Any, frame: Any = None,
                    reference_frame: str = "LOCAL_WORLD_ALIGNED") -> Any:
        """`(B, 6, 6)`: the operational-space inertia `(J M^-1 J^T)^-1` of `frame` (default:
        the first end effector); needs `minv` and `world_kinematics`. Forward-only."""
        if "minv" not in self.algorithms:
            raise RuntimeError("osc_inertia needs minv, which was not built into this "
                               "artifact; register with algorithm_list=['core', 'kinematics']")
        table = self._frame_table()
        f = table.resolve(self.ee_names[0] if frame is None else frame)
        rf = check_reference_frame(reference_frame)
        single = len(q.shape) == 1
        q = q[None] if single else q
        J = self._jacobian(q, f, rf)
        Lam = operational_space_inertia(_Ops(J), J, self.minv(_Ops(q).contiguous(q)), f)
        return Lam[0] if single else Lam

    def end_effector_pose_runtime(self, q: Any, ee_names: Any = None, ee_offsets: Any = None,
                                  *, ee_joint_names: Any = None) -> Any:
        """`(B, 6 * len(ee_names))`: `[x, y, z, roll, pitch, yaw]` of each named frame
        (default: the build's end effectors; `ee_joint_names=` is the same argument under
        the registration's name), each origin moved by its row of `ee_offsets` (`(n, 3)`,
        in that frame's axes): targets chosen per call."""
        frames = end_effector_targets(self._frame_table(),
                                      _one_of(ee_names, ee_joint_names), ee_offsets,
                                      list(self.ee_names))
        kin, single = self._kinematics(q)
        out = poses(_Ops(kin[0]), kin, frames)
        return out[0] if single else out

    def end_effector_pose_gradient_runtime(self, q: Any, ee_names: Any = None,
                                           ee_offsets: Any = None, *,
                                           ee_joint_names: Any = None) -> Any:
        """`(B, 6 * len(ee_names), nv)`: the coordinate derivatives of
        `end_effector_pose_runtime` along the tangent chart."""
        frames = end_effector_targets(self._frame_table(),
                                      _one_of(ee_names, ee_joint_names), ee_offsets,
                                      list(self.ee_names))
        kin, single = self._kinematics(q)
        out = pose_gradients(_Ops(kin[0]), kin, frames)
        return out[0] if single else out


__all__ = ["REFERENCE_FRAMES", "FrameMethods", "FrameTable"]
