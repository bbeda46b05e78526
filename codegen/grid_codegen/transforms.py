"""The runtime transform table: each joint's origin read at run time (`runtime_transform`).

A joint's origin is its constant placement `Joint.placement`, parent body frame -> joint
frame (`x_parent = R0 x_joint + p0`, Pinocchio's `jointPlacements`): the URDF `<origin>`
of the joint, composed with the fixed joints between it and its parent body when the
URDF hangs it from a welded link. The table holds one row per joint of the model (body
order, a floating base's free flyer first), 7 scalars per row:

    [p0 (x, y, z), quaternion of R0 (x, y, z, w)]

the project's `[xyz, quat xyzw]` order (a free flyer's `q`). The quaternion is unit:
the handles normalise what they are given and the runtime refuses a row whose norm is
off by more than TRANSFORM_UNIT_TOLERANCE. The default table is the URDF's, with the
quaternion of `symbolic.frames.rotation_quaternion` (the sign the baked `fk_batched`
uses, so a default table reproduces the baked outputs).

What the table does not cover stays as parsed: the placement of a frame in its body
(fixed joints welded at parse time: end-effector offsets of `ee_joint_names`, contact
and cost frames, `frame_jacobian`'s frames) and the inertias of welded links, which are
expressed in their body's frame. Moving a joint's origin therefore moves its body and
everything welded to it, exactly as editing that joint's `<origin>` in the URDF does.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.model import RobotModel

TRANSFORM_WIDTH = 7
"""Scalars per joint in the table: `[x, y, z, qx, qy, qz, qw]`."""

TRANSFORM_UNIT_TOLERANCE = 1e-4
"""How far from 1 the norm of a table quaternion may be (float32 rounding of a unit
quaternion is ~1e-7); the handles normalise before they send a table."""


def table_size(model: RobotModel) -> int:
    return TRANSFORM_WIDTH * model.nb


def default_table(model: RobotModel) -> list[float]:
    """The URDF's origins, one 7-row per joint (see the module doc)."""
    from grid_codegen.symbolic.frames import rotation_quaternion

    out: list[float] = []
    for joint in model.joints:
        out += [float(x) for x in joint.placement.p]
        out += [float(x) for x in rotation_quaternion(joint.placement.R)]
    return out


def unit_quaternion_rotation(quat: Sequence) -> list:
    """Row-major R of a unit quaternion `[x, y, z, w]` (not normalised again: the table's
    quaternions are unit)."""
    x, y, z, w = quat
    return [1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - z * w), 2.0 * (x * z + y * w),
            2.0 * (x * y + z * w), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - x * w),
            2.0 * (x * z - y * w), 2.0 * (y * z + x * w), 1.0 - 2.0 * (x * x + y * y)]


def origin_quaternion(table: Sequence, body: int) -> list:
    """Row `body`'s quaternion `[x, y, z, w]` (traced values)."""
    row = TRANSFORM_WIDTH * body
    return list(table[row + 3:row + 7])


def origin_placement(table: Sequence, body: int) -> tuple[list, list]:
    """Row `body` as a placement `(R0 row-major, p0)` (traced values)."""
    row = TRANSFORM_WIDTH * body
    return unit_quaternion_rotation(origin_quaternion(table, body)), list(table[row:row + 3])


def origins(model: RobotModel, table: Sequence | None) -> list | None:
    """Every joint's `(R0, p0)` from the table, or None (baked) without one."""
    if table is None:
        return None
    return [origin_placement(table, i) for i in range(model.nb)]
