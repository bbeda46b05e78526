"""Interoperation with Pinocchio: configurations and frames as a Pinocchio user names them.

Configurations. grid-rbd and Pinocchio (`buildModelFromUrdf`, with
`JointModelFreeFlyer()` for a floating base) order joints alike and agree on every
tangent quantity (`qd`, `qdd`, `tau`, `nv`-wide, index for index). They differ in one
configuration encoding:

    joint            grid-rbd q                 Pinocchio q
    revolute         angle (1)                  angle (1)
    prismatic        offset (1)                 offset (1)
    continuous       angle (1)                  (cos, sin) (2)
    free flyer       [p(3), quat xyzw(4)]       [p(3), quat xyzw(4)]  (the same)

so `to_pinocchio(robot, q)` writes each continuous angle as (cos, sin) and
`from_pinocchio(robot, q_pin)` takes it back with atan2 (a (cos, sin) pair need not be
unit length: its direction is the angle, as Pinocchio's integrate/normalize treat it).
A continuous joint is a revolute joint without position limits (the URDF type
`continuous`; the parser gives it unbounded limits). `layout(robot)` lists each joint's
slices in both vectors.

Frames. `find_frame(robot, name)` takes any name Pinocchio gives a frame: a URDF link, a
moving joint or a fixed joint (`"link:NAME"`, `"joint:NAME"`, `"fixed_joint:NAME"` settle a
name that is more than one, as Pinocchio's `getFrameId` with a frame type does);
`frame_placement(robot, q, name)` is its world pose (`oMf`); `ee_joint_names(robot,
names)` turns link, joint or frame names into the `ee_joint_names=` that
`grid_rbd.register_robot` takes, so `end_effector_pose` reports those frames.

`robot` is a `grid_codegen.RobotModel`, anything with a `.model` (a
`grid_rbd.reference` robot), or a URDF path (parsed with `floating_base`).

Inputs may be a single state (1-D, `(nq,)`) or a batch (`(B, nq)`); the result has the
same number of dimensions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from grid_codegen.model import Frame, JointType, Placement, RobotModel

__all__ = [
    "JointSlot",
    "ee_joint_names",
    "find_frame",
    "frame_placement",
    "from_pinocchio",
    "layout",
    "pinocchio_nq",
    "to_pinocchio",
]

RobotLike = Any  # RobotModel | an object with .model | str | os.PathLike


@dataclass(frozen=True)
class JointSlot:
    """One joint's place in both configuration vectors.

    kind: "revolute", "continuous", "prismatic" or "free_flyer". `q` / `q_pin`: the
    (start, width) of the joint in grid-rbd's and Pinocchio's configuration; `v`: its
    (start, width) in the tangent, the same in both."""

    name: str
    kind: str
    q: tuple[int, int]
    q_pin: tuple[int, int]
    v: tuple[int, int]


def _model(robot: RobotLike, floating_base: bool = False) -> RobotModel:
    if isinstance(robot, RobotModel):
        return robot
    model = getattr(robot, "model", None)
    if isinstance(model, RobotModel):
        return model
    if isinstance(robot, (str, os.PathLike)):
        from grid_codegen import parse_urdf

        return parse_urdf(robot, floating_base=floating_base)
    raise TypeError(f"robot must be a RobotModel, a grid_rbd.reference robot or a URDF "
                    f"path; got {type(robot).__name__}")


def _kind(joint: Any) -> str:
    if joint.type is JointType.REVOLUTE and math.isinf(joint.limits.lower) \
            and math.isinf(joint.limits.upper):
        return "continuous"
    return joint.type.value


def layout(robot: RobotLike, floating_base: bool = False) -> tuple[JointSlot, ...]:
    """Each joint's slices in grid-rbd's and Pinocchio's configuration (see module doc)."""
    model = _model(robot, floating_base)
    out, pin = [], 0
    for joint in model.joints:
        kind = _kind(joint)
        width = 2 if kind == "continuous" else joint.nq
        out.append(JointSlot(joint.name, kind, (joint.idx_q, joint.nq), (pin, width),
                             (joint.idx_v, joint.nv)))
        pin += width
    return tuple(out)


def pinocchio_nq(robot: RobotLike, floating_base: bool = False) -> int:
    """Pinocchio's configuration width `model.nq` for this robot."""
    return sum(slot.q_pin[1] for slot in layout(robot, floating_base))


def _batched(x: Any, width: int, what: str) -> tuple[np.ndarray, bool]:
    """(x as a (B, width) float array, whether it was a single 1-D state)."""
    a = np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise TypeError(f"{what} must be a real array; got dtype {a.dtype}")
    single = a.ndim == 1
    if single:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{what} has shape {np.shape(x)}; expected ({width},) or "
                         f"(B, {width})")
    return a, single


def to_pinocchio(robot: RobotLike, q: Any, floating_base: bool = False) -> np.ndarray:
    """grid-rbd's `q` `(B, nq)` or `(nq,)` as Pinocchio's `(B, nq_pin)` or `(nq_pin,)`:
    each continuous angle becomes `(cos, sin)`; everything else is copied."""
    model = _model(robot, floating_base)
    slots = layout(model)
    a, single = _batched(q, model.nq, "q")
    dtype = a.dtype if a.dtype.kind == "f" else np.float64
    out = np.empty((a.shape[0], sum(s.q_pin[1] for s in slots)), dtype=dtype)
    for s in slots:
        (i, n), (j, m) = s.q, s.q_pin
        if s.kind == "continuous":
            out[:, j] = np.cos(a[:, i])
            out[:, j + 1] = np.sin(a[:, i])
        else:
            out[:, j:j + m] = a[:, i:i + n]
    return out[0] if single else out


def from_pinocchio(robot: RobotLike, q_pin: Any, floating_base: bool = False) -> np.ndarray:
    """Pinocchio's `q` `(B, nq_pin)` or `(nq_pin,)` as grid-rbd's: each continuous joint's
    `(cos, sin)` becomes `atan2(sin, cos)` in (-pi, pi]; a zero pair is refused."""
    model = _model(robot, floating_base)
    slots = layout(model)
    a, single = _batched(q_pin, sum(s.q_pin[1] for s in slots), "q_pin")
    dtype = a.dtype if a.dtype.kind == "f" else np.float64
    out = np.empty((a.shape[0], model.nq), dtype=dtype)
    for s in slots:
        (i, n), (j, m) = s.q, s.q_pin
        if s.kind == "continuous":
            c, sn = a[:, j], a[:, j + 1]
            if np.any((c == 0) & (sn == 0)):
                raise ValueError(f"continuous joint '{s.name}' has (cos, sin) = (0, 0) in "
                                 "q_pin: no angle; expected a point on the unit circle")
            out[:, i] = np.arctan2(sn, c)
        else:
            out[:, i:i + n] = a[:, j:j + m]
    return out[0] if single else out


def find_frame(robot: RobotLike, name: str, floating_base: bool = False) -> Frame:
    """The frame Pinocchio calls `name`: a URDF link, a moving joint (its body frame) or a
    fixed joint; `"link:NAME"`, `"joint:NAME"` or `"fixed_joint:NAME"` picks one kind.
    Raises KeyError for an unknown name and ValueError for an ambiguous one (naming the
    qualified forms)."""
    from grid_rbd.reference.frames import resolve_frame

    if not isinstance(name, str):
        raise TypeError(f"a frame name is a str; got {type(name).__name__}")
    return resolve_frame(_model(robot, floating_base), name)


def frame_placement(robot: RobotLike, q: Any, name: str, floating_base: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """World pose `(R, p)` of frame `name` at grid-rbd configuration `q` (Pinocchio's
    `data.oMf[frame_id]` after `framesForwardKinematics`): `R` `(B, 3, 3)` or `(3, 3)`, `p`
    `(B, 3)` or `(3,)`."""
    from grid_rbd.reference.kinematics import forward_pass, frame_pose

    model = _model(robot, floating_base)
    frame = find_frame(model, name)
    a, single = _batched(q, model.nq, "q")
    R, p = frame_pose(forward_pass(model, a.astype(np.float64)), frame, a.shape[0])
    return (R[0], p[0]) if single else (R, p)


def _same(a: Placement, b: Placement) -> bool:
    return bool(np.allclose(a.R, b.R, atol=1e-12) and np.allclose(a.p, b.p, atol=1e-12))


def ee_joint_names(robot: RobotLike, names: list[str] | tuple[str, ...],
                   floating_base: bool = False) -> list[str]:
    """The `ee_joint_names=` of `register_robot` that make `end_effector_pose` report the
    frames `names` (links, moving or fixed joints, as `find_frame` reads them), in order.
    A frame welded to the world (a fixed base's root link) moves with nothing and has no
    such name: ValueError."""
    model = _model(robot, floating_base)
    if isinstance(names, str):
        raise TypeError("names is a list of frame names, not a str")
    out = []
    for name in names:
        frame = find_frame(model, name)
        if frame.body < 0:
            raise ValueError(f"frame '{name}' of {model.name} is welded to the world; an end "
                             "effector must move with a body")
        if frame.kind == "body":  # a moving joint
            out.append(model.joint_names[frame.body])
            continue
        if frame.kind == "fixed_joint":
            out.append(frame.name)
            continue
        # A link: its body's joint when it is the body's own frame, else the fixed joint
        # that welds it (a URDF child link's frame is its joint's frame).
        if _same(frame.placement, Placement.identity()) and \
                model.bodies[frame.body].name == frame.name:
            out.append(model.joint_names[frame.body])
            continue
        welds = [f for f in model.frames if f.kind == "fixed_joint" and f.body == frame.body
                 and _same(f.placement, frame.placement)]
        if not welds:
            raise ValueError(f"link '{name}' of {model.name} has no joint frame at its "
                             "origin to use as an end effector")
        out.append(welds[0].name)
    return out
