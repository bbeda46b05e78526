"""The rigid-body algorithms, written once over any scalar (float, `Sym`, `Dual`).

Run on floats they compute numbers (the tests check them against the float64 reference
this way, before any code is emitted); run on `Sym`s they trace the robot-specialised
expression graph that becomes straight-line C++; run on `Dual`s they trace derivatives.

Inputs are plain lists: `q` (nq), `qd`, `qdd`, `tau` (nv), `fext` (6 nb, or None),
`I` per body (10-vectors, constants or run-time table entries), `gravity` (the signed z
component). Conventions are the project's (Pinocchio's): local body frames, `[lin; ang]`,
`a_root = -g`, a free flyer's tangent is its local twist.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from grid_codegen.model import Frame, Joint, JointType, RobotModel
from grid_codegen.model import skew as skew3
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.dual import Dual, atan2, cos, sin, sqrt


# -- joints -----------------------------------------------------------------------------
def subspace(joint: Joint) -> list[list[float]]:
    """The joint's motion-subspace columns `S` (nv of them, each a 6-list) in its frame."""
    S = joint.motion_subspace()
    return [[float(S[r, d]) for r in range(6)] for d in range(joint.nv)]


def subspace_times(joint: Joint, x: Sequence) -> list:
    """`S x` for the joint's dof values `x` (a 6-list)."""
    out: list = [0.0] * 6
    for column, value in zip(subspace(joint), x, strict=True):
        for r in range(6):
            if column[r] != 0.0:
                out[r] = out[r] + column[r] * value
    return out


def subspace_transpose(joint: Joint, f: Sequence) -> list:
    """`S^T f` (one entry per dof)."""
    return [_sparse_dot(column, f) for column in subspace(joint)]


def _sparse_dot(column: Sequence[float], f: Sequence) -> object:
    acc: object = 0.0
    for r in range(6):
        if column[r] != 0.0:
            acc = acc + column[r] * f[r]
    return acc


@lru_cache(maxsize=4096)
def _revolute_coefficients(R0: bytes, axis: bytes) -> tuple[tuple[float, ...], ...]:
    """`R0 Rj(q) = A + B sin q + C cos q` (Rodrigues, `Rj = 1 + s K + (1 - c) K^2`)."""
    R = np.frombuffer(R0).reshape(3, 3)
    K = skew3(np.frombuffer(axis))
    A, B, C = R @ (np.eye(3) + K @ K), R @ K, -R @ K @ K
    return tuple(tuple(_clean(x) for x in M.reshape(9)) for M in (A, B, C))


def _clean(x: float) -> float:
    """Drop products of round-off (|x| < 1e-14 on unit-scale coefficients)."""
    x = float(x)
    return 0.0 if abs(x) < 1e-14 else x


def joint_transform(joint: Joint, q: Sequence, origin: sp.Placement | None = None
                    ) -> sp.Placement:
    """`liMi(q)`: the joint's constant placement, then its motion; `q` its nq values.
    `origin`: the placement `(R0, p0)` as traced values (a runtime transform table,
    `grid_codegen.transforms`) instead of the model's constants."""
    if origin is not None:
        return _runtime_joint_transform(joint, q, origin)
    R0, p0 = joint.placement.R, joint.placement.p
    if joint.type is JointType.REVOLUTE:
        A, B, C = _revolute_coefficients(R0.tobytes(), joint.axis.tobytes())
        s, c = sin(q[0]), cos(q[0])
        R = [A[k] + B[k] * s + C[k] * c for k in range(9)]
        return R, [float(x) for x in p0]
    if joint.type is JointType.PRISMATIC:
        d = R0 @ joint.axis
        return [float(x) for x in R0.reshape(9)], [float(p0[k]) + float(d[k]) * q[0]
                                                  for k in range(3)]
    if joint.type is JointType.FREE_FLYER:
        motion = (sp.quat_to_rotation(q[3:7]), list(q[0:3]))
        placement = ([float(x) for x in R0.reshape(9)], [float(x) for x in p0])
        if np.array_equal(R0, np.eye(3)) and not p0.any():
            return motion
        return sp.compose(placement, motion)
    if joint.type in (JointType.SPHERICAL, JointType.PLANAR):
        motion = (planar_motion(q) if joint.type is JointType.PLANAR else
                  (sp.quat_to_rotation(q[0:4]), [0.0, 0.0, 0.0]))
        if np.array_equal(R0, np.eye(3)) and not p0.any():
            return motion
        return sp.compose(([float(x) for x in R0.reshape(9)], [float(x) for x in p0]), motion)
    raise NotImplementedError(f"joint type {joint.type}")  # pragma: no cover


def _runtime_joint_transform(joint: Joint, q: Sequence, origin: sp.Placement
                             ) -> sp.Placement:
    """`origin * motion(q)` with the origin's entries traced (nothing to fold in them)."""
    R0, p0 = list(origin[0]), list(origin[1])
    if joint.type is JointType.REVOLUTE:
        # Rj = 1 + s K + (1 - c) K^2 (Rodrigues), K the constant axis' skew matrix.
        K = skew3(joint.axis)
        KK = K @ K
        s, c = sin(q[0]), cos(q[0])
        Rj = [_clean(float(np.eye(3)[r, k] + KK[r, k])) + _clean(float(K[r, k])) * s
              - _clean(float(KK[r, k])) * c for r in range(3) for k in range(3)]
        return sp.matmul3(R0, Rj), p0
    if joint.type is JointType.PRISMATIC:
        d = sp.rot(R0, [float(a) for a in joint.axis])
        return R0, [p0[k] + d[k] * q[0] for k in range(3)]
    if joint.type is JointType.FREE_FLYER:
        motion = (sp.quat_to_rotation(q[3:7]), list(q[0:3]))
    elif joint.type is JointType.PLANAR:
        motion = planar_motion(q)
    elif joint.type is JointType.SPHERICAL:
        motion = (sp.quat_to_rotation(q[0:4]), [0.0, 0.0, 0.0])
    else:  # pragma: no cover
        raise NotImplementedError(f"joint type {joint.type}")
    return sp.compose((R0, p0), motion)


def planar_motion(q: Sequence) -> sp.Placement:
    """The motion of a planar joint `[x, y, cos t, sin t]`: `(Rz(t), [x, y, 0])`, the
    `(cos, sin)` pair normalised first (as a free flyer's quaternion)."""
    n = 1.0 / sqrt(q[2] * q[2] + q[3] * q[3])
    c, s = q[2] * n, q[3] * n
    return [c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0], [q[0], q[1], 0.0]


def joint_transforms(model: RobotModel, q: Sequence, origins: Sequence | None = None
                     ) -> list[sp.Placement]:
    """Every `liMi(q)`; `origins`: per joint `(R0, p0)` from a runtime table, or None."""
    if origins is None:
        return [joint_transform(j, q[j.idx_q:j.idx_q + j.nq]) for j in model.joints]
    return [joint_transform(j, q[j.idx_q:j.idx_q + j.nq], o)
            for j, o in zip(model.joints, origins, strict=True)]


def perturb_transforms(model: RobotModel, X: list[sp.Placement], delta: Sequence
                       ) -> list[sp.Placement]:
    """`X_i(q (+) delta)`: each transform moved by its joint's tangent `delta` (nv),
    `X_i * Exp(S_i delta_i)` to first order (a revolute turns about its axis, a free
    flyer moves by its local twist)."""
    out = []
    for joint, Xi in zip(model.joints, X, strict=True):
        twist = subspace_times(joint, delta[joint.idx_v:joint.idx_v + joint.nv])
        if all(isinstance(t, float) and t == 0.0 for t in twist):
            out.append(Xi)
        else:
            out.append(sp.perturb(Xi, twist[:3], twist[3:]))
    return out


# -- inverse dynamics -------------------------------------------------------------------
def _root_acceleration(gravity: object) -> list:
    return [0.0, 0.0, -gravity, 0.0, 0.0, 0.0]


def rnea(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence], qd: Sequence,
         qdd: Sequence, fext: Sequence | None, gravity: object) -> list:
    """`tau = M qdd + C qd + g - J^T fext` (recursive Newton-Euler, local frames)."""
    v, a, f = rnea_forward(model, X, I, qd, qdd, fext, gravity)
    return rnea_backward(model, X, f)[0]


def rnea_forward(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                 qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object
                 ) -> tuple[list, list, list]:
    """Body velocities, accelerations and net forces
    `f_i = I_i a_i + v_i x* (I_i v_i) - fext_i`."""
    v: list = []
    a: list = []
    f: list = []
    a_root = _root_acceleration(gravity)
    for i, joint in enumerate(model.joints):
        dofs = slice(joint.idx_v, joint.idx_v + joint.nv)
        vj = subspace_times(joint, qd[dofs])
        if joint.parent < 0:
            vi = vj
            ai = sp.motion_to_child(X[i], a_root)
        else:
            vi = sp.add(sp.motion_to_child(X[i], v[joint.parent]), vj)
            ai = sp.motion_to_child(X[i], a[joint.parent])
        ai = sp.add(sp.add(ai, subspace_times(joint, qdd[dofs])), sp.motion_cross(vi, vj))
        fi = sp.add(sp.inertia_apply(I[i], ai), sp.force_cross(vi, sp.inertia_apply(I[i], vi)))
        if fext is not None:
            fi = sp.sub(fi, fext[6 * i:6 * i + 6])
        v.append(vi)
        a.append(ai)
        f.append(fi)
    return v, a, f


def rnea_backward(model: RobotModel, X: list[sp.Placement], f: list
                  ) -> tuple[list, list]:
    """`tau_i = S_i^T F_i` with `F_i = f_i + sum_children X_c^T F_c`; returns (tau, F)."""
    F = list(f)
    tau: list = [0.0] * model.nv
    for i in reversed(range(model.nb)):
        joint = model.joints[i]
        tau[joint.idx_v:joint.idx_v + joint.nv] = subspace_transpose(joint, F[i])
        if joint.parent >= 0:
            F[joint.parent] = sp.add(F[joint.parent], sp.force_to_parent(X[i], F[i]))
    return tau, F


# -- the mass matrix --------------------------------------------------------------------
def crba(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence]) -> list[list]:
    """`M(q)` (nv x nv, full and symmetric: mirrored entries are the same value)."""
    nv = model.nv
    Ic = [list(x) for x in I]
    for i in reversed(range(model.nb)):
        parent = model.joints[i].parent
        if parent >= 0:
            Ic[parent] = sp.add(Ic[parent], sp.inertia_to_parent(X[i], Ic[i]))
    M: list[list] = [[0.0] * nv for _ in range(nv)]
    for i, joint in enumerate(model.joints):
        for d, column in enumerate(subspace(joint)):
            k = joint.idx_v + d
            F = sp.inertia_apply(Ic[i], column)
            for r, value in enumerate(subspace_transpose(joint, F)):
                M[joint.idx_v + r][k] = value
            j = i
            while model.joints[j].parent >= 0:
                F = sp.force_to_parent(X[j], F)
                j = model.joints[j].parent
                ancestor = model.joints[j]
                for r, value in enumerate(subspace_transpose(ancestor, F)):
                    M[ancestor.idx_v + r][k] = M[k][ancestor.idx_v + r] = value
    return M


# -- articulated bodies -----------------------------------------------------------------
class Articulated:
    """The velocity-independent half of ABA, shared by forward dynamics and M^-1:
    per body `IA` (articulated inertia with its children), `U = IA S`, `Dinv =
    (S^T U)^-1` and `Ia = IA - U Dinv U^T` (what the parent receives)."""

    def __init__(self, model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence]):
        nb = model.nb
        self.IA: list = [sp.inertia_matrix(I[i]) for i in range(nb)]
        self.U: list = [None] * nb
        self.Dinv: list = [None] * nb
        self.UDinv: list = [None] * nb
        self.Ia: list = [None] * nb
        for i in reversed(range(nb)):
            joint = model.joints[i]
            IA = self.IA[i]
            U = [sp.mat_vec(IA, column) for column in subspace(joint)]  # nv_i 6-vectors
            D = [[_sparse_dot(column, u) for u in U] for column in subspace(joint)]
            Dinv = sp.spd_inverse(D)
            n = joint.nv
            # UDinv[k] is the 6-vector column k of U Dinv.
            UDinv = [[_sum(U[m][r] * Dinv[m][k] for m in range(n)) for r in range(6)]
                     for k in range(n)]
            self.U[i], self.Dinv[i], self.UDinv[i] = U, Dinv, UDinv
            if joint.parent >= 0:
                Ia = sp.sym6(lambda r, c, IA=IA, U=U, UDinv=UDinv, n=n:
                             IA[r][c] - _sum(UDinv[k][r] * U[k][c] for k in range(n)))
                self.Ia[i] = Ia
                p = joint.parent
                self.IA[p] = sp.sym6_add(self.IA[p], sp.sym6_congruence_to_parent(X[i], Ia))


def _sum(terms) -> object:
    acc: object = 0.0
    for t in terms:
        acc = acc + t
    return acc


def aba(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence], qd: Sequence,
        tau: Sequence, fext: Sequence | None, gravity: object,
        art: Articulated | None = None) -> list:
    """Forward dynamics `qdd` by the articulated-body algorithm (three passes)."""
    art = art or Articulated(model, X, I)
    nb = model.nb
    v: list = [None] * nb
    c: list = [None] * nb
    pA: list = [None] * nb
    for i, joint in enumerate(model.joints):
        vj = subspace_times(joint, qd[joint.idx_v:joint.idx_v + joint.nv])
        vi = vj if joint.parent < 0 else sp.add(sp.motion_to_child(X[i], v[joint.parent]), vj)
        v[i] = vi
        c[i] = sp.motion_cross(vi, vj)
        pA[i] = sp.force_cross(vi, sp.inertia_apply(I[i], vi))
        if fext is not None:
            pA[i] = sp.sub(pA[i], fext[6 * i:6 * i + 6])
    u: list = [None] * nb
    for i in reversed(range(nb)):
        joint = model.joints[i]
        u[i] = sp.sub(tau[joint.idx_v:joint.idx_v + joint.nv], subspace_transpose(joint, pA[i]))
        if joint.parent >= 0:
            pa = sp.add(sp.add(pA[i], sp.mat_vec(art.Ia[i], c[i])),
                        [_sum(art.UDinv[i][k][r] * u[i][k] for k in range(joint.nv))
                         for r in range(6)])
            p = joint.parent
            pA[p] = sp.add(pA[p], sp.force_to_parent(X[i], pa))
    qdd: list = [0.0] * model.nv
    a: list = [None] * nb
    a_root = _root_acceleration(gravity)
    for i, joint in enumerate(model.joints):
        ai = sp.motion_to_child(X[i], a_root if joint.parent < 0 else a[joint.parent])
        ai = sp.add(ai, c[i])
        rhs = sp.sub(u[i], [sp.dot(Uk, ai) for Uk in art.U[i]])
        qdd_i = sp.mat_vec(art.Dinv[i], rhs)
        qdd[joint.idx_v:joint.idx_v + joint.nv] = qdd_i
        a[i] = sp.add(ai, subspace_times(joint, qdd_i))
    return qdd


def minv(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
         art: Articulated | None = None) -> list[list]:
    """`M^-1` (full, symmetric) directly from the articulated-body recursion: ABA on the
    nv unit torques with zero velocity and gravity (Carpentier's analytical inverse). Only
    the columns at or right of a body's first dof are carried forward (the upper
    triangle); the rest is mirrored."""
    art = art or Articulated(model, X, I)
    nb, nv = model.nb, model.nv
    zero6 = [0.0] * 6
    # pA[i][col]: bias force on body i from the unit torque at dof `col` (6-vector).
    pA: list = [[zero6] * nv for _ in range(nb)]
    u: list = [None] * nb
    for i in reversed(range(nb)):
        joint = model.joints[i]
        n = joint.nv
        cols = range(nv)
        ui = [[(1.0 if col == joint.idx_v + k else 0.0) - _sparse_dot(S, pA[i][col])
               for col in cols] for k, S in enumerate(subspace(joint))]  # n x nv
        u[i] = ui
        if joint.parent >= 0:
            p = joint.parent
            for col in cols:
                if all(isinstance(x, float) and x == 0.0 for x in (ui[k][col] for k in range(n))) \
                        and pA[i][col] is zero6:
                    continue
                pa = sp.add(pA[i][col], [_sum(art.UDinv[i][k][r] * ui[k][col] for k in range(n))
                                        for r in range(6)])
                pA[p][col] = sp.add(pA[p][col], sp.force_to_parent(X[i], pa))
    out: list[list] = [[None] * nv for _ in range(nv)]
    a: list = [None] * nb
    for i, joint in enumerate(model.joints):
        first = joint.idx_v
        cols = range(first, nv)
        if joint.parent < 0:
            a_parent = {col: zero6 for col in cols}
        else:
            a_parent = a[joint.parent]
        ai = {col: sp.motion_to_child(X[i], a_parent[col]) if a_parent[col] is not zero6
              else zero6 for col in cols}
        rows = []
        for col in cols:
            rhs = [u[i][k][col] - sp.dot(Uk, ai[col]) for k, Uk in enumerate(art.U[i])]
            rows.append(sp.mat_vec(art.Dinv[i], rhs))
        for idx, col in enumerate(cols):
            for k in range(joint.nv):
                r = first + k
                if col >= r:
                    out[r][col] = out[col][r] = rows[idx][k]
        a[i] = {col: sp.add(ai[col], subspace_times(joint, rows[idx]))
                for idx, col in enumerate(cols)}
    return out


# -- kinematics -------------------------------------------------------------------------
def aba_minv(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence], qd: Sequence,
             u: Sequence, fext: Sequence | None, gravity: object) -> list:
    """`[qdd, M^-1 (row-major)]`: forward dynamics and the inverse mass matrix sharing the
    articulated inertias (what the FD gradient and the second-order FD kernels consume)."""
    art = Articulated(model, X, I)
    qdd = aba(model, X, I, qd, u, fext, gravity, art)
    return list(qdd) + [v for row in minv(model, X, I, art) for v in row]


def unflatten_placements(x: Sequence, nb: int) -> list[sp.Placement]:
    """The `nb` placements of a flat `[R row-major (9), p (3)]` per body array (the layout
    of the `joint_transforms` pass)."""
    return [(list(x[12 * i:12 * i + 9]), list(x[12 * i + 9:12 * i + 12])) for i in range(nb)]


def world_poses(model: RobotModel, X: list[sp.Placement]) -> list[sp.Placement]:
    oX: list = []
    for i, joint in enumerate(model.joints):
        oX.append(X[i] if joint.parent < 0 else sp.compose(oX[joint.parent], X[i]))
    return oX


def frame_pose(frame: Frame, oX: list[sp.Placement]) -> sp.Placement:
    placement = ([float(x) for x in frame.placement.R.reshape(9)],
                 [float(x) for x in frame.placement.p])
    if frame.body < 0:
        return placement
    if np.array_equal(frame.placement.R, np.eye(3)) and not frame.placement.p.any():
        return oX[frame.body]
    return sp.compose(oX[frame.body], placement)


def rotation_to_rpy(R: Sequence) -> list:
    """Roll, pitch, yaw of `R = Rz(yaw) Ry(pitch) Rx(roll)`, pitch in [-pi/2, pi/2]."""
    return [atan2(R[7], R[8]), atan2(-R[6], sqrt(R[0] * R[0] + R[3] * R[3])),
            atan2(R[3], R[0])]


def end_effector_pose(model: RobotModel, frames: Sequence[Frame], X: list[sp.Placement]
                      ) -> list:
    """`[x, y, z, roll, pitch, yaw]` per frame (6 * len(frames))."""
    oX = world_poses(model, X)
    out: list = []
    for frame in frames:
        R, p = frame_pose(frame, oX)
        out += list(p) + rotation_to_rpy(R)
    return out


# -- derivatives (forward mode on duals) ------------------------------------------------
def tangent_seeds(model: RobotModel, offset: int = 0) -> list[Dual]:
    """One unit tangent per dof: direction `offset + k` for dof k (zero primal)."""
    return [Dual(0.0, {offset + k: 1.0}) for k in range(model.nv)]


def jacobian(outputs: Sequence, directions: int) -> list[list]:
    """`out[r][c]`: the derivative of output r along direction c (0.0 when absent)."""
    rows = []
    for y in outputs:
        d = y.d if isinstance(y, Dual) else {}
        rows.append([d.get(c, 0.0) for c in range(directions)])
    return rows


def rnea_derivatives(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                     qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object,
                     columns: Sequence[int] | None = None) -> list[list]:
    """`[dtau/dq | dtau/dqd]` (nv x 2nv) at the given `qdd` and `fext` (local chart).
    `columns`: only these directions are traced (the other columns come out zero)."""
    nv = model.nv
    wanted = set(range(2 * nv) if columns is None else columns)
    delta = [Dual(0.0, {k: 1.0}) if k in wanted else 0.0 for k in range(nv)]
    Xd = perturb_transforms(model, X, delta)
    qd_d = [Dual(qd[k], {nv + k: 1.0}) if nv + k in wanted else qd[k] for k in range(nv)]
    tau = rnea(model, Xd, I, qd_d, qdd, fext, gravity)
    return jacobian(tau, 2 * nv)


def fd_derivatives(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                   qd: Sequence, u: Sequence, fext: Sequence | None, gravity: object
                   ) -> list[list]:
    """`[dqdd/dq | dqdd/dqd] = -M^-1 [dtau/dq | dtau/dqd]` at `qdd = FD(q, qd, u)`."""
    art = Articulated(model, X, I)
    qdd = aba(model, X, I, qd, u, fext, gravity, art)
    Minv = minv(model, X, I, art)
    dtau = rnea_derivatives(model, X, I, qd, qdd, fext, gravity)
    return neg_product(Minv, dtau)


def fd_tangent(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
               qd: Sequence, u: Sequence, fext: Sequence | None, gravity: object,
               seed: Sequence) -> tuple[list, list]:
    """`(qdd, dqdd)`: `qdd = FD(q, qd, u)` and `dqdd/dz . seed`, `z = (q, qd)` (`seed`:
    2 nv entries, typically a unit vector given at run time), q's directions in the local
    chart; a seed of 3 nv entries adds `dqdd/du . seed_u = M^-1 seed_u`. Forward mode
    only: ABA gives `qdd` and the articulated inertias, RNEA's derivative along the seed
    at that `qdd` gives `dtau`, and ABA's solve with the same inertias (no velocity, no
    gravity) gives `M^-1 (seed_u - dtau)`."""
    nv = model.nv
    art = Articulated(model, X, I)
    qdd = aba(model, X, I, qd, u, fext, gravity, art)
    Xd = perturb_transforms(model, X, [Dual(0.0, {0: seed[k]}) for k in range(nv)])
    qd_d = [Dual(qd[k], {0: seed[nv + k]}) for k in range(nv)]
    tau = rnea(model, Xd, I, qd_d, qdd, fext, gravity)
    dtau = [t.d.get(0, 0.0) if isinstance(t, Dual) else 0.0 for t in tau]
    if len(seed) > 2 * nv:
        dtau = [d - seed[2 * nv + k] for k, d in enumerate(dtau)]
    return qdd, [-x for x in aba(model, X, I, [0.0] * nv, dtau, None, 0.0, art)]


def neg_product(A: Sequence[Sequence], B: Sequence[Sequence]) -> list[list]:
    """`-A B` with exact zeros of `B` skipped."""
    n, m = len(B), len(B[0])
    out = []
    for row in A:
        out.append([-_sum(row[k] * B[k][c] for k in range(n)
                          if not (isinstance(B[k][c], float) and B[k][c] == 0.0))
                    for c in range(m)])
    return out


def end_effector_pose_derivatives(model: RobotModel, frames: Sequence[Frame],
                                  X: list[sp.Placement]) -> list[list]:
    """`d [xyz, rpy] / d tangent` (6 * len(frames) x nv), coordinate derivatives."""
    Xd = perturb_transforms(model, X, tangent_seeds(model, 0))
    return jacobian(end_effector_pose(model, frames, Xd), model.nv)
