"""Joint-specialised code: transforms with the robot's constants baked in, and the
sparse motion subspace `S` of each joint.

A revolute joint about the unit axis `a` rotates by Rodrigues'
`Rj = (1 + K^2) + sin(q) K - cos(q) K^2` (`K = [a]`), so the joint placement
`liMi = placement * (Rj, 0)` has every entry an affine combination of `1, sin q, cos q`
whose float64 coefficients are folded here, at generation time. A prismatic joint
translates by `q a`; a free flyer reads `[p, quat xyzw]` and normalises the quaternion.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from grid_codegen.emit.writer import Writer, linear_combination, lit
from grid_codegen.model import Joint, JointType, Placement
from grid_codegen.model import skew as skew3


def subspace_terms(joint: Joint) -> list[list[tuple[int, float]]]:
    """Per dof, the nonzero `(row, coefficient)` entries of its column of `S`."""
    S = joint.motion_subspace()
    return [[(r, float(S[r, d])) for r in range(6) if S[r, d] != 0.0]
            for d in range(joint.nv)]


def subspace_transpose_times(joint: Joint, dof: int, vec: str) -> str:
    """C++ expression `S_dof^T vec` for a 6-vector pointer `vec`."""
    return linear_combination([(c, f"{vec}[{r}]") for r, c in subspace_terms(joint)[dof]])


def emit_subspace_add(w: Writer, joint: Joint, dof_value: Callable[[int], str], out: str
                      ) -> None:
    """`out += S x` with `x_d = dof_value(d)`."""
    for d, terms in enumerate(subspace_terms(joint)):
        for r, c in terms:
            w.line(f"{out}[{r}] += {linear_combination([(c, dof_value(d))])};")


def emit_subspace_column(w: Writer, joint: Joint, dof: int, name: str) -> None:
    """`const T name[6]`: column `dof` of `S` as a literal 6-vector."""
    column = [0.0] * 6
    for r, c in subspace_terms(joint)[dof]:
        column[r] = c
    w.line(f"const T {name}[6] = {{{', '.join(lit(x) for x in column)}}};")


def placement_literal(placement: Placement) -> str:
    """`{R row-major, p}` as 12 literals, the compact transform layout."""
    values = list(placement.R.reshape(9)) + list(placement.p)
    return "{" + ", ".join(lit(x) for x in values) + "}"


def is_identity(placement: Placement) -> bool:
    return bool(np.array_equal(placement.R, np.eye(3)) and not placement.p.any())


def emit_joint_transform(w: Writer, joint: Joint, q: Callable[[int], str], out: str) -> None:
    """Write `liMi(q)` of `joint` into the compact transform `out[12]`; `q(k)` is the
    C++ expression of the joint's k-th configuration coordinate."""
    R0, p0 = joint.placement.R, joint.placement.p
    if joint.type is JointType.REVOLUTE:
        K = skew3(joint.axis)
        A, B, C = R0 @ (np.eye(3) + K @ K), R0 @ K, -R0 @ K @ K
        w.line(f"const auto angle = sincos_({q(0)});")
        w.line("const T sq = angle.s, cq = angle.c;")
        for i in range(3):
            for j in range(3):
                expr = linear_combination([(B[i, j], "sq"), (C[i, j], "cq")], A[i, j])
                w.line(f"{out}[{3 * i + j}] = {expr};")
        for i in range(3):
            w.line(f"{out}[{9 + i}] = {lit(p0[i])};")
    elif joint.type is JointType.PRISMATIC:
        d = R0 @ joint.axis
        for i in range(3):
            for j in range(3):
                w.line(f"{out}[{3 * i + j}] = {lit(R0[i, j])};")
        for i in range(3):
            w.line(f"{out}[{9 + i}] = {linear_combination([(d[i], q(0))], p0[i])};")
    elif joint.type is JointType.FREE_FLYER:
        w.line(f"const T quat[4] = {{{q(3)}, {q(4)}, {q(5)}, {q(6)}}};")
        if is_identity(joint.placement):
            w.line(f"quat_to_rotation(quat, {out});")
            for i in range(3):
                w.line(f"{out}[{9 + i}] = {q(i)};")
        else:
            w.line("T motion[12];")
            w.line("quat_to_rotation(quat, motion);")
            for i in range(3):
                w.line(f"motion[{9 + i}] = {q(i)};")
            w.line(f"const T placement[12] = {placement_literal(joint.placement)};")
            w.line(f"compose(placement, motion, {out});")
    else:  # pragma: no cover - the model has no other joint types
        raise NotImplementedError(f"joint type {joint.type} of {joint.name}")


def emit_runtime_joint_transform(w: Writer, joint: Joint, q: Callable[[int], str],
                                 origin: str, out: str) -> None:
    """Write `liMi(q) = origin * motion(q)` into `out[12]`, the origin read from a row of
    the runtime transform table (`origin`: a pointer to its `[p (3), quat xyzw (4)]`,
    `grid_codegen.transforms`); only the joint's motion keeps its constants."""
    w.line("T placement[12];")
    w.line(f"quat_to_rotation({origin} + 3, placement);")
    for i in range(3):
        w.line(f"placement[{9 + i}] = {origin}[{i}];")
    w.line("T motion[12];")
    if joint.type is JointType.REVOLUTE:
        K = skew3(joint.axis)
        KK = K @ K
        w.line(f"const auto angle = sincos_({q(0)});")
        w.line("const T sq = angle.s, cq = angle.c;")
        for i in range(3):
            for j in range(3):
                expr = linear_combination([(K[i, j], "sq"), (-KK[i, j], "cq")],
                                          float(i == j) + KK[i, j])
                w.line(f"motion[{3 * i + j}] = {expr};")
        for i in range(3):
            w.line(f"motion[{9 + i}] = T(0);")
    elif joint.type is JointType.PRISMATIC:
        for i in range(3):
            for j in range(3):
                w.line(f"motion[{3 * i + j}] = T({1 if i == j else 0});")
        for i in range(3):
            w.line(f"motion[{9 + i}] = {linear_combination([(joint.axis[i], q(0))])};")
    elif joint.type is JointType.FREE_FLYER:
        w.line(f"const T quat[4] = {{{q(3)}, {q(4)}, {q(5)}, {q(6)}}};")
        w.line("quat_to_rotation(quat, motion);")
        for i in range(3):
            w.line(f"motion[{9 + i}] = {q(i)};")
    else:  # pragma: no cover - the level strategies cover no other joint types
        raise NotImplementedError(f"joint type {joint.type} of {joint.name}")
    w.line(f"compose(placement, motion, {out});")
