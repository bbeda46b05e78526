"""Frame Jacobians, their time variation and the operational-space inertia.

A frame is fixed to a body with a constant placement (`Frame`). Reference frames have
Pinocchio's meanings, for a frame with world pose `(R, p)`:

* `WORLD`: the frame's spatial velocity in world coordinates, about the world origin;
* `LOCAL`: its spatial velocity in the frame's own coordinates;
* `LOCAL_WORLD_ALIGNED`: the velocity of the frame origin and the angular velocity,
  both in world coordinates.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import Frame, Placement, RobotModel
from grid_rbd.reference import spatial, world
from grid_rbd.reference.kinematics import Kinematics, frame_pose

REFERENCE_FRAMES = ("LOCAL", "WORLD", "LOCAL_WORLD_ALIGNED")


FRAME_KINDS = ("joint", "fixed_joint", "link")


def resolve_frame(model: RobotModel, frame: str | int | Frame) -> Frame:
    """A frame by body index, or by name: a moving joint (its body frame), a fixed joint or
    a URDF link. A name that is more than one of these (anymal's `LF_HAA` is a link and a
    joint) is refused, as Pinocchio's `getFrameId` does; qualify it as `"joint:NAME"`,
    `"fixed_joint:NAME"` or `"link:NAME"`."""
    if isinstance(frame, Frame):
        return frame
    if isinstance(frame, (int, np.integer)) and not isinstance(frame, bool):
        if not 0 <= frame < model.nb:
            raise IndexError(f"body index {frame} is out of range; {model.name} has "
                             f"{model.nb} bodies")
        return Frame(model.bodies[frame].name, "body", int(frame), Placement.identity())
    if not isinstance(frame, str):
        raise TypeError(f"frame must be a frame name or a body index; got "
                        f"{type(frame).__name__}")
    kind, _, name = frame.partition(":")
    if kind in FRAME_KINDS and name:
        found = _frames_named(model, name, kind)
        if found:
            return found[0]
    found = _frames_named(model, frame, None)
    if len(found) > 1:
        kinds = ", ".join(f"'{'joint' if f.kind == 'body' else f.kind}:{frame}'"
                          for f in found)
        raise ValueError(f"frame name '{frame}' of {model.name} is ambiguous; pass one of "
                         f"{kinds}")
    if not found:
        raise KeyError(f"{model.name} has no frame '{frame}'; expected a URDF link, a fixed "
                       f"or moving joint name, or a body index in [0, {model.nb})")
    return found[0]


def _frames_named(model: RobotModel, name: str, kind: str | None) -> list[Frame]:
    out = []
    if kind in (None, "joint") and name in model.joint_names:
        out.append(Frame(name, "body", model.joint_index(name), Placement.identity()))
    out.extend(f for f in model.frames
               if f.name == name and kind in (None, f.kind))
    return out


def check_reference_frame(reference_frame: str) -> str:
    rf = str(reference_frame).upper()
    if rf not in REFERENCE_FRAMES:
        raise ValueError(f"reference_frame '{reference_frame}' is not one of "
                         f"{', '.join(REFERENCE_FRAMES)}")
    return rf


def _origin_shift(p: np.ndarray) -> np.ndarray:
    """`(B, 6, 6)`: re-expresses a world twist about the point `p` (world-aligned axes)."""
    return spatial.act_inv(np.broadcast_to(np.eye(3), p.shape[:-1] + (3, 3)), p)


def frame_jacobian(model: RobotModel, kin: Kinematics, oS: np.ndarray, frame: Frame,
                   reference_frame: str) -> np.ndarray:
    """`(B, 6, nv)`: the geometric Jacobian of `frame`. In `WORLD` it is `oS` restricted to
    the dofs that move the frame's body; the others re-express those columns."""
    J = oS * world.support(model, frame.body)
    if reference_frame == "WORLD":
        return J
    R, p = frame_pose(kin, frame, oS.shape[0])
    if reference_frame == "LOCAL":
        return spatial.act_inv(R, p) @ J
    return _origin_shift(p) @ J


def frame_jacobian_time_variation(model: RobotModel, kin: Kinematics, oS: np.ndarray,
                                  qd: np.ndarray, frame: Frame, reference_frame: str
                                  ) -> np.ndarray:
    """`(B, 6, nv)`: `d/dt` of `frame_jacobian` along `qd` (Pinocchio's
    `getFrameJacobianTimeVariation`).

    `WORLD`: column a is `ov_{joint(a)} × oS_a` on the frame's support (`ov_k` the world
    twist of body k); with `ov` the twist of the frame's body, `LOCAL`:
    `X dJ_world - v_f × J_local` (`X` world -> frame, `v_f = X ov`);
    `LOCAL_WORLD_ALIGNED`: `A(p) dJ_world` with `p_dot × J_ang` removed from the linear
    rows, `p_dot = ov_lin + ov_ang × p` the frame origin's velocity."""
    batch = oS.shape[0]
    mask = world.support(model, frame.body)
    ov = world.body_twists(model, oS, qd)
    J = oS * mask
    dJ = world.motion_subspace_rate(model, oS, ov) * mask
    if reference_frame == "WORLD":
        return dJ
    R, p = frame_pose(kin, frame, batch)
    ov_body = ov[:, frame.body] if frame.body >= 0 else np.zeros((batch, 6))
    if reference_frame == "LOCAL":
        X = spatial.act_inv(R, p)
        J_local = X @ J
        v_frame = spatial.apply(X, ov_body)
        return X @ dJ - spatial.motion_cross(v_frame) @ J_local
    p_dot = ov_body[:, :3] + np.cross(ov_body[:, 3:], p)
    out = _origin_shift(p) @ dJ
    out[:, :3] -= spatial.skew(p_dot) @ J[:, 3:]
    return out


def operational_space_inertia(model: RobotModel, J: np.ndarray, M: np.ndarray,
                              frame: Frame) -> np.ndarray:
    """`(B, 6, 6)`: `Lambda = (J M^-1 J^T)^-1`, symmetrised. Needs `J` of full row rank,
    so at least six dofs must move the frame."""
    moved_by = int(world.support(model, frame.body).sum())
    if moved_by < 6:
        raise ValueError(f"frame '{frame.name}' is moved by {moved_by} dofs; the "
                         f"operational-space inertia of a 6-D frame needs at least 6")
    JMinvJt = J @ np.linalg.solve(M, np.swapaxes(J, -1, -2))
    Lam = np.linalg.inv(JMinvJt)
    return 0.5 * (Lam + np.swapaxes(Lam, -1, -2))
