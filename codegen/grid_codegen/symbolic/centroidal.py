"""Centroidal quantities, energy, the Coriolis matrix and the inertial-parameter
regressors, traced like the rest of `grid_codegen.symbolic` (floats, `Sym`s or `Dual`s).

Inputs are the parent -> body placements `X` of the joint transforms and the 10-vector
inertias `I` (Pinocchio's dynamic parameters about each body origin). World quantities
come from the placements `oX_i = X_0 ... X_i` (`algorithms.world_poses`); a force in body
i's frame reaches the world by `force_to_parent(oX_i, f)`, a motion by
`motion_to_parent(oX_i, m)`. Derivatives along the tangent chart are forward-mode duals
over the perturbed placements (`algorithms.perturb_transforms`), as the pose Jacobians are.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.dual import Dual, tangent

# -- bias forces --------------------------------------------------------------------------


def generalized_gravity(model: RobotModel, X: list, I: Sequence, gravity: object) -> list:
    """`g(q)`: RNEA at rest."""
    zeros = [0.0] * model.nv
    return A.rnea(model, X, I, zeros, zeros, None, gravity)


def nonlinear_effects(model: RobotModel, X: list, I: Sequence, qd: Sequence,
                      gravity: object) -> list:
    """`C(q, qd) qd + g(q)`: RNEA at zero acceleration."""
    return A.rnea(model, X, I, qd, [0.0] * model.nv, None, gravity)


# -- kinematic helpers --------------------------------------------------------------------
def body_velocities(model: RobotModel, X: list, qd: Sequence) -> list:
    """Body twists in body frames: `v_i = X_i v_parent + S_i qd_i`."""
    v: list = []
    for i, joint in enumerate(model.joints):
        vj = A.subspace_times(joint, qd[joint.idx_v:joint.idx_v + joint.nv])
        v.append(vj if joint.parent < 0 else sp.add(sp.motion_to_child(X[i], v[joint.parent]),
                                                       vj))
    return v


def _world_first_moment(oX: sp.Placement, Ii: Sequence) -> list:
    """`m c` of a body in world coordinates: `R h + m p`."""
    R, p = oX
    h = sp.rot(R, Ii[1:4])
    return [h[k] + Ii[0] * p[k] for k in range(3)]


def _total_mass(I: Sequence) -> object:
    return A._sum(Ii[0] for Ii in I)


def _is_zero_mass(mass: object) -> bool:
    return isinstance(mass, float) and mass == 0.0


def _center_of_mass(model: RobotModel, oX: list, I: Sequence) -> list:
    mass = _total_mass(I)
    if _is_zero_mass(mass):
        return [0.0, 0.0, 0.0]
    first = [0.0, 0.0, 0.0]
    for i in range(model.nb):
        first = sp.add(first, _world_first_moment(oX[i], I[i]))
    inv = 1.0 / mass
    return [x * inv for x in first]


def _subtree_sums(model: RobotModel, values: list, add) -> list:
    """Per body the sum of `values` over its subtree (children after parents)."""
    out = list(values)
    for i in reversed(range(model.nb)):
        parent = model.joints[i].parent
        if parent >= 0:
            out[parent] = add(out[parent], out[i])
    return out


def _dof_joints(model: RobotModel) -> list[int]:
    return [i for i, joint in enumerate(model.joints) for _ in range(joint.nv)]


def _ancestors(model: RobotModel) -> list[set[int]]:
    """Per body the set of bodies on its path to the root, itself included."""
    out: list[set[int]] = []
    for joint in model.joints:
        above = set() if joint.parent < 0 else set(out[joint.parent])
        out.append(above | {len(out)})
    return out


def _world_subspace(model: RobotModel, oX: list) -> list:
    """Per dof its world motion-subspace column `oS`."""
    return [sp.motion_to_parent(oX[i], column)
            for i, joint in enumerate(model.joints) for column in A.subspace(joint)]


# -- centre of mass and energy ------------------------------------------------------------
def com(model: RobotModel, X: list, I: Sequence) -> list:
    """`[c (3), J_c (3 x nv, row-major)]`: the centre of mass and its Jacobian."""
    c = _center_of_mass(model, A.world_poses(model, X), I)
    Xd = A.perturb_transforms(model, X, A.tangent_seeds(model))
    moved = _center_of_mass(model, A.world_poses(model, Xd), I)
    J = A.jacobian(moved, model.nv)
    return list(c) + [v for row in J for v in row]


def energy(model: RobotModel, X: list, I: Sequence, qd: Sequence, gravity: object) -> list:
    """`[kinetic, potential, kinetic + potential]`, potential `-sum m g . c` with
    `g = (0, 0, gravity)`."""
    v = body_velocities(model, X, qd)
    kinetic = A._sum(0.5 * sp.dot(vi, sp.inertia_apply(Ii, vi)) for vi, Ii in zip(v, I,
                                                                               strict=True))
    oX = A.world_poses(model, X)
    height = A._sum(_world_first_moment(oX[i], I[i])[2] for i in range(model.nb))
    potential = -(gravity * height)
    return [kinetic, potential, kinetic + potential]


# -- the centroidal momentum matrix -------------------------------------------------------
def _composites(model: RobotModel, X: list, I: Sequence) -> list:
    """Composite inertias in body frames (the CRBA recursion)."""
    Ic = [list(x) for x in I]
    for i in reversed(range(model.nb)):
        parent = model.joints[i].parent
        if parent >= 0:
            Ic[parent] = sp.add(Ic[parent], sp.inertia_to_parent(X[i], Ic[i]))
    return Ic


def centroidal_map(model: RobotModel, X: list, I: Sequence) -> list[list]:
    """`A` (6 x nv): column b is the momentum of the subtree dof b moves, `Ic_j S_b`,
    carried to the world and taken about the centre of mass."""
    oX = A.world_poses(model, X)
    Ic = _composites(model, X, I)
    c = _center_of_mass(model, oX, I)
    columns = []
    for i, joint in enumerate(model.joints):
        for column in A.subspace(joint):
            F = sp.force_to_parent(oX[i], sp.inertia_apply(Ic[i], column))
            t = sp.cross3(c, F[:3])
            columns.append(F[:3] + [F[3 + k] - t[k] for k in range(3)])
    return [[columns[b][r] for b in range(model.nv)] for r in range(6)]


def ccrba(model: RobotModel, X: list, I: Sequence, qd: Sequence) -> list:
    """`[A (6 x nv, row-major), h = A qd (6)]`."""
    Amat = centroidal_map(model, X, I)
    h = [A._sum(row[b] * qd[b] for b in range(model.nv)) for row in Amat]
    return [v for row in Amat for v in row] + h


def dccrba(model: RobotModel, X: list, I: Sequence) -> list:
    """`dA[r, c, i] = d A[r, c] / d eps_i`, flat (6 * nv * nv), derivative index last."""
    Xd = A.perturb_transforms(model, X, A.tangent_seeds(model))
    moved = [v for row in centroidal_map(model, Xd, I) for v in row]
    return [v for row in A.jacobian(moved, model.nv) for v in row]


def cmm_time_variation(model: RobotModel, X: list, I: Sequence, qd: Sequence) -> list:
    """`dA/dt` (6 x nv, row-major): the derivative of `A` along the one direction `qd`."""
    direction = [Dual(0.0, {0: qd[k]}) for k in range(model.nv)]
    moved = centroidal_map(model, A.perturb_transforms(model, X, direction), I)
    return [tangent(v, 0) for row in moved for v in row]


# -- the Coriolis matrix ------------------------------------------------------------------
def _unit(c: int) -> list:
    return [1.0 if k == c else 0.0 for k in range(6)]


def _coriolis_body_matrix(oI: Sequence, ov: Sequence) -> list[list]:
    """`B` (6x6, rows of lists) with `B m = 1/2 (ov x* (oI m) - oI (ov x m) + m x* (oI
    ov))`: `B + B^T` is the rate of the world inertia and `B ov = ov x* oI ov`."""
    h = sp.inertia_apply(oI, ov)
    columns = []
    for c in range(6):
        e = _unit(c)
        col = sp.add(sp.sub(sp.force_cross(ov, sp.inertia_apply(oI, e)),
                            sp.inertia_apply(oI, sp.motion_cross(ov, e))),
                     sp.force_cross(e, h))
        columns.append([0.5 * x for x in col])
    return [[columns[c][r] for c in range(6)] for r in range(6)]


def _mat_add(a: list[list], b: list[list]) -> list[list]:
    return [[x + y for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def coriolis_matrix(model: RobotModel, X: list, I: Sequence, qd: Sequence) -> list:
    """`C` (nv x nv, row-major) of Pinocchio's `computeCoriolisMatrix` (Echeandia and
    Wensing's form): per body `B_k` (above) and the world inertia `oI_k`, summed over
    subtrees (`Ic_j`, `Bc_j`); with `oS_dot_b = ov_{joint(b)} x oS_b`,

        C[a, b] = oS_a . (Ic_j oS_dot_b + Bc_j oS_b),  j the deeper of joint(a), joint(b),

    when one joint is on the other's path to the root, and 0 otherwise."""
    nv = model.nv
    oX = A.world_poses(model, X)
    v = body_velocities(model, X, qd)
    ov = [sp.motion_to_parent(oX[i], v[i]) for i in range(model.nb)]
    oI = [sp.inertia_to_parent(oX[i], I[i]) for i in range(model.nb)]
    Bk = [_coriolis_body_matrix(oI[i], ov[i]) for i in range(model.nb)]
    Ic = _subtree_sums(model, oI, sp.add)
    Bc = _subtree_sums(model, Bk, _mat_add)
    oS = _world_subspace(model, oX)
    joint_of = _dof_joints(model)
    dS = [sp.motion_cross(ov[joint_of[b]], oS[b]) for b in range(nv)]
    ancestors = _ancestors(model)
    C: list[list] = [[0.0] * nv for _ in range(nv)]
    for b in range(nv):
        jb = joint_of[b]
        F = sp.add(sp.inertia_apply(Ic[jb], dS[b]), sp.mat_vec(Bc[jb], oS[b]))
        for a in range(nv):
            if joint_of[a] in ancestors[jb]:
                C[a][b] = sp.dot(oS[a], F)
    for a in range(nv):
        ja = joint_of[a]
        below = [b for b in range(nv) if joint_of[b] in ancestors[ja] and joint_of[b] != ja]
        if not below:
            continue
        Ga = sp.inertia_apply(Ic[ja], oS[a])
        Ha = [sp.dot([Bc[ja][r][k] for r in range(6)], oS[a]) for k in range(6)]
        for b in below:
            C[a][b] = sp.dot(Ga, dS[b]) + sp.dot(Ha, oS[b])
    return [x for row in C for x in row]


# -- regressors ---------------------------------------------------------------------------
def kinetic_energy_regressor(model: RobotModel, X: list, qd: Sequence) -> list:
    """`y` (10 nb) with `T = y . pi`: per body `[1/2 |u|^2, u x w, 1/2 wx^2, wx wy,
    1/2 wy^2, wx wz, wy wz, 1/2 wz^2]` of its twist `[u; w]` (body frame)."""
    out: list = []
    for vi in body_velocities(model, X, qd):
        u, w = vi[:3], vi[3:]
        out += [0.5 * sp.dot(u, u), *sp.cross3(u, w), 0.5 * w[0] * w[0], w[0] * w[1],
                0.5 * w[1] * w[1], w[0] * w[2], w[1] * w[2], 0.5 * w[2] * w[2]]
    return out


def potential_energy_regressor(model: RobotModel, X: list, gravity: object) -> list:
    """`y` (10 nb) with `V = y . pi`: `V_k = -gravity (m p_z + (R h)_z)`."""
    out: list = []
    for R, p in A.world_poses(model, X):
        out += [-(gravity * p[2]), -(gravity * R[6]), -(gravity * R[7]), -(gravity * R[8])]
        out += [0.0] * 6
    return out


def _unit_parameters(c: int) -> list:
    return [1.0 if k == c else 0.0 for k in range(10)]


def inverse_dynamics_regressor(model: RobotModel, X: list, qd: Sequence, qdd: Sequence,
                               gravity: object) -> list:
    """`Y` (nv x 10 nb, row-major) with `tau = Y pi`: body k's net force is linear in its
    parameters, `f_k = I_k a_k + v_k x* (I_k v_k)`; its column for parameter c is that
    force at the unit parameter vector, carried up the tree as RNEA's backward pass does."""
    nv, cols = model.nv, 10 * model.nb
    unit = [_unit_parameters(c) for c in range(10)]
    v, a, _ = A.rnea_forward(model, X, [unit[0]] * model.nb, qd, qdd, None, gravity)
    Y: list[list] = [[0.0] * cols for _ in range(nv)]
    for k in range(model.nb):
        for c in range(10):
            F = sp.add(sp.inertia_apply(unit[c], a[k]),
                       sp.force_cross(v[k], sp.inertia_apply(unit[c], v[k])))
            j = k
            while True:
                joint = model.joints[j]
                for r, value in enumerate(A.subspace_transpose(joint, F)):
                    Y[joint.idx_v + r][10 * k + c] = value
                if joint.parent < 0:
                    break
                F = sp.force_to_parent(X[j], F)
                j = joint.parent
    return [x for row in Y for x in row]


REGRESSOR_BODY_TERMS = 24
"""Per body in `regressor_world_terms`: world placement R (9, row-major), p (3), then the
body-frame twist v (6) and acceleration a (6, gravity included)."""


def regressor_world_terms(model: RobotModel, X: list, qd: Sequence, qdd: Sequence,
                          gravity: object) -> list:
    """What the regressor's warp strategy (`emit.regressor_warp`) builds its rows from:
    `[oS (6 per dof, world twists about the origin), then REGRESSOR_BODY_TERMS per body]`.
    Row r of `inverse_dynamics_regressor` is `oS_r . force_to_parent(oX_k, F_kc)` over the
    bodies k below dof r's joint: the pairing of a motion with a force does not depend on
    the frame both are taken in."""
    v, a, _ = A.rnea_forward(model, X, [_unit_parameters(0)] * model.nb, qd, qdd, None,
                             gravity)
    oX = A.world_poses(model, X)
    oS: list = [None] * model.nv
    for i, joint in enumerate(model.joints):
        for d, column in enumerate(A.subspace(joint)):
            oS[joint.idx_v + d] = sp.motion_to_parent(oX[i], column)
    out = [x for column in oS for x in column]
    for k in range(model.nb):
        out += list(oX[k][0]) + list(oX[k][1]) + list(v[k]) + list(a[k])
    return out
