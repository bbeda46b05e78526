"""Frame poses as position and unit quaternion, traced without branches.

A rotation matrix has no branch-free quaternion (the stable conversion picks the largest
diagonal term), so the quaternion is composed along the kinematic chain instead: each
joint contributes its constant origin rotation (converted here, in float64, once) times
its motion (`[axis sin(q/2), cos(q/2)]` for a revolute joint, the normalised input for a
free flyer). The result is a unit quaternion whose sign follows the chain continuously
(`q` and `-q` are the same rotation).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grid_codegen.model import Frame, Joint, JointType, RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.dual import (
    atan2,
    cos,
    hessian_entry,
    second_order_seed,
    sin,
    sqrt,
)

Quat = list  # [x, y, z, w]


def rotation_quaternion(R: np.ndarray) -> Quat:
    """`[x, y, z, w]` of a constant rotation (Shepperd's method: the largest of the four
    squared components is taken by a square root, the others by division)."""
    R = np.asarray(R, dtype=np.float64)
    t = np.trace(R)
    squares = [1.0 + t, 1.0 + 2 * R[0, 0] - t, 1.0 + 2 * R[1, 1] - t, 1.0 + 2 * R[2, 2] - t]
    k = int(np.argmax(squares))
    s = 2.0 * np.sqrt(squares[k])
    if k == 0:
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, s / 4]
    elif k == 1:
        q = [s / 4, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s, (R[2, 1] - R[1, 2]) / s]
    elif k == 2:
        q = [(R[0, 1] + R[1, 0]) / s, s / 4, (R[1, 2] + R[2, 1]) / s, (R[0, 2] - R[2, 0]) / s]
    else:
        q = [(R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, s / 4, (R[1, 0] - R[0, 1]) / s]
    return [_clean(x) for x in q]


def _clean(x: float) -> float:
    x = float(x)
    if abs(x) < 1e-15:
        return 0.0
    if abs(abs(x) - 1.0) < 1e-15:
        return 1.0 if x > 0 else -1.0
    return x


def multiply(a: Sequence, b: Sequence) -> Quat:
    """The Hamilton product `a b` of `[x, y, z, w]` quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return [aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz]


def _is_identity(q: Sequence) -> bool:
    return all(isinstance(x, float) for x in q) and list(q) == [0.0, 0.0, 0.0, 1.0]


def _product(a: Sequence, b: Sequence) -> Quat:
    if _is_identity(a):
        return list(b)
    if _is_identity(b):
        return list(a)
    return multiply(a, b)


def joint_quaternion(joint: Joint, q: Sequence, origin: Quat | None = None) -> Quat:
    """The rotation of `liMi(q)` (see `algorithms.joint_transform`) as a quaternion;
    `origin`: the origin's unit quaternion from a runtime table (traced), else the
    model's constant."""
    if origin is None:
        origin = rotation_quaternion(joint.placement.R)
    if joint.type is JointType.REVOLUTE:
        half = q[0] * 0.5
        s = sin(half)
        motion = [float(joint.axis[0]) * s, float(joint.axis[1]) * s,
                  float(joint.axis[2]) * s, cos(half)]
        return _product(origin, [x for x in motion])
    if joint.type is JointType.PRISMATIC:
        return origin
    if joint.type is JointType.FREE_FLYER:
        quat = q[3:7]
        n = 1.0 / sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2]
                       + quat[3] * quat[3])
        return _product(origin, [c * n for c in quat])
    if joint.type is JointType.SPHERICAL:
        n = 1.0 / sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
        return _product(origin, [c * n for c in q[0:4]])
    if joint.type is JointType.PLANAR:
        # Rz(t) as [0, 0, sin(t/2), cos(t/2)], t = atan2(sin, cos) in (-pi, pi]: the sign
        # jumps where t crosses pi (a revolute joint's does where its angle crosses 2 pi).
        n = 1.0 / sqrt(q[2] * q[2] + q[3] * q[3])
        half = atan2(q[3] * n, q[2] * n) * 0.5
        return _product(origin, [0.0, 0.0, sin(half), cos(half)])
    raise NotImplementedError(f"joint type {joint.type}")  # pragma: no cover


def world_quaternions(model: RobotModel, q: Sequence, origins: Sequence | None = None
                      ) -> list[Quat]:
    """Each body's world rotation as a quaternion; `origins`: per joint the origin's
    quaternion from a runtime table, or None (the model's)."""
    out: list[Quat] = []
    for i, joint in enumerate(model.joints):
        local = joint_quaternion(joint, q[joint.idx_q:joint.idx_q + joint.nq],
                                 None if origins is None else origins[i])
        out.append(local if joint.parent < 0 else _product(out[joint.parent], local))
    return out


def frame_position_quaternion(model: RobotModel, frame: Frame, X: list, q: Sequence,
                              origins: Sequence | None = None) -> list:
    """`[x, y, z, qw, qx, qy, qz]` of `frame` in the world; `origins` as
    `world_quaternions` takes them (with `X` traced from the same table)."""
    _, p = A.frame_pose(frame, A.world_poses(model, X))
    placed = rotation_quaternion(frame.placement.R)
    if frame.body < 0:
        quat = placed
    else:
        quat = _product(world_quaternions(model, q, origins)[frame.body], placed)
    return list(p) + [quat[3], quat[0], quat[1], quat[2]]


# -- second derivatives along the chart ---------------------------------------------------
def _axis_rotation(axis: np.ndarray, angle: object) -> list:
    """Rodrigues: `1 + sin(a) K + (1 - cos(a)) K^2` for the unit `axis`."""
    K = [0.0, -float(axis[2]), float(axis[1]), float(axis[2]), 0.0, -float(axis[0]),
         -float(axis[1]), float(axis[0]), 0.0]
    K2 = sp.matmul3(K, K)
    s, c = sin(angle), cos(angle)
    eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    return [eye[k] + s * K[k] + (1.0 - c) * K2[k] for k in range(9)]


def _exp_second_order(lin: Sequence, ang: Sequence) -> sp.Placement:
    """`exp([lin; ang]^)` in SE(3) to second order: `R = 1 + W + W^2/2`,
    `p = lin + W lin / 2` (`W = [ang]`); exact for hyper-dual tangents, whose third powers
    vanish."""
    W = [0.0, -ang[2], ang[1], ang[2], 0.0, -ang[0], -ang[1], ang[0], 0.0]
    W2 = sp.matmul3(W, W)
    eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    Wl = sp.rot(W, lin)
    return [eye[k] + W[k] + 0.5 * W2[k] for k in range(9)], \
        [lin[k] + 0.5 * Wl[k] for k in range(3)]


def move_along_chart(model: RobotModel, X: list, delta: Sequence) -> list:
    """`X_i(q (+) delta)` exactly to second order: a revolute joint turns by its `delta`,
    a prismatic one slides, a free flyer moves by the exponential of its local twist
    (Pinocchio's `integrate`)."""
    out = []
    for joint, Xi in zip(model.joints, X, strict=True):
        d = delta[joint.idx_v:joint.idx_v + joint.nv]
        if joint.type is JointType.REVOLUTE:
            step = (_axis_rotation(joint.axis, d[0]), [0.0, 0.0, 0.0])
        elif joint.type is JointType.PRISMATIC:
            step = ([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                    [float(a) * d[0] for a in joint.axis])
        elif joint.type is JointType.FREE_FLYER:
            step = _exp_second_order(d[:3], d[3:])
        elif joint.type is JointType.SPHERICAL:
            step = (_exp_second_order([0.0, 0.0, 0.0], d)[0], [0.0, 0.0, 0.0])
        elif joint.type is JointType.PLANAR:
            step = _exp_second_order([d[0], d[1], 0.0], [0.0, 0.0, d[2]])
        else:  # pragma: no cover
            raise NotImplementedError(f"joint type {joint.type}")
        out.append(sp.compose(Xi, step))
    return out


def end_effector_pose_hessian(model: RobotModel, frames: Sequence[Frame], X: list) -> list:
    """`H[k, i, j] = d2 f_k(q (+) eps) / d eps_i d eps_j` at `eps = 0` (flat, `6 * len(frames)
    * nv * nv`), `f` the `[xyz, rpy]` coordinates of `end_effector_pose`: hyper-dual
    tangents through the chart. The upper triangle is traced and mirrored (symmetric)."""
    nv = model.nv
    moved = move_along_chart(model, X, [second_order_seed(k) for k in range(nv)])
    out: list = []
    for y in A.end_effector_pose(model, frames, moved):
        H = [[0.0] * nv for _ in range(nv)]
        for i in range(nv):
            for j in range(i, nv):
                H[i][j] = H[j][i] = hessian_entry(y, i, j)
        out += [v for row in H for v in row]
    return out


def world_kinematics(model: RobotModel, X: list, qd: Sequence) -> list:
    """`[R_i (9, row-major) for every body, p_i (3) for every body, oS (6 x nv, row-major),
    ov_i (6) for every body]`: world placements, the world motion subspace (twists about
    the world origin, `[linear; angular]`) and the bodies' world twists `sum oS qd`."""
    oX = A.world_poses(model, X)
    columns = [sp.motion_to_parent(oX[i], column)
               for i, joint in enumerate(model.joints) for column in A.subspace(joint)]
    twists: list = []
    for joint in model.joints:
        own = [0.0] * 6
        for d in range(joint.nv):
            own = sp.add(own, sp.scale(columns[joint.idx_v + d], qd[joint.idx_v + d]))
        twists.append(own if joint.parent < 0 else sp.add(twists[joint.parent], own))
    out = [x for R, _ in oX for x in R] + [x for _, p in oX for x in p]
    out += [columns[c][r] for r in range(6) for c in range(model.nv)]
    return out + [x for v in twists for x in v]
