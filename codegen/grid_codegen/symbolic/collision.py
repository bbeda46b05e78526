"""The collision passes: sphere centres, their Jacobians and self-collision distances.

Sphere centres are constants of their body frames (`SphereModel.spheres[k].body_center`),
so every quantity here is a kinematics pass over the world poses `oX` and the world
motion-subspace columns `oS_j = [v_j; w_j]` (about the world origin, `[linear;
angular]`, as `frames.world_kinematics`):

* centre `p = R_b c + t_b`; its Jacobian column `j` is `v_j + w_j x p` for the dofs that
  move body `b` (its support), zero otherwise (the local chart of a free flyer, as every
  Jacobian of the artifact);
* pair distance `d(A, B) = min over spheres a of A, b of B of |p_a - p_b| - r_a - r_b`.
  The minimum is traced branch-free (`min(x, y) = (x + y - |x - y|) / 2`, `|x| = x
  sign(x)`); its gradient is that of the active sphere pair (a subgradient where two
  pairs tie: the first in order wins), `n . (J_a - J_b)` with `n = (p_a - p_b) / |p_a -
  p_b|`; the dofs that move both links contribute `n . (w x (p_a - p_b)) = 0` exactly
  and are skipped.

This traced form unrolls every sphere pair; models with capsules (`collision_native`),
many pairs or a large Jacobian take the loop form of `grid_codegen.collision.emit`.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.collision.model import SphereModel
from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import graph as G
from grid_codegen.symbolic import spatial as sp

TINY = 1e-24
"""Added under the square root of a unit direction (coincident centres give a zero
gradient, not a NaN)."""


def _columns(model: RobotModel, oX: list) -> list[list]:
    return [sp.motion_to_parent(oX[i], column)
            for i, joint in enumerate(model.joints) for column in A.subspace(joint)]


def _support(model: RobotModel, body: int) -> list[int]:
    """The dofs that move `body` (none for the world)."""
    if body < 0:
        return []
    dofs = []
    for b in model.ancestors(body):
        j = model.joints[b]
        dofs += range(j.idx_v, j.idx_v + j.nv)
    return sorted(dofs)


def centres(model: RobotModel, spheres: SphereModel, oX: list) -> list[list]:
    """World centre of every sphere (constants for spheres welded to the world)."""
    out = []
    for s in spheres.spheres:
        c = [float(x) for x in s.body_center]
        if s.body < 0:
            out.append(c)
        else:
            R, t = oX[s.body]
            out.append([a + b for a, b in zip(sp.rot(R, c), t, strict=True)])
    return out


def _cross(w: Sequence, p: Sequence) -> list:
    return [w[1] * p[2] - w[2] * p[1], w[2] * p[0] - w[0] * p[2], w[0] * p[1] - w[1] * p[0]]


def _point_column(column: Sequence, p: Sequence) -> list:
    """`v + w x p` of a world motion-subspace column `[v; w]`."""
    wx = _cross(column[3:], p)
    return [column[k] + wx[k] for k in range(3)]


def sphere_positions(model: RobotModel, spheres: SphereModel, X: list) -> list:
    """`(S, 3)` row-major."""
    return [x for c in centres(model, spheres, A.world_poses(model, X)) for x in c]


def sphere_positions_gradient(model: RobotModel, spheres: SphereModel, X: list) -> list:
    """`(S, 3, nv)` row-major: `d p_s[k] / d eps_j`."""
    oX = A.world_poses(model, X)
    cols = _columns(model, oX)
    nv = model.nv
    out: list = []
    for s, p in zip(spheres.spheres, centres(model, spheres, oX), strict=True):
        J = [[0.0] * nv for _ in range(3)]
        for j in _support(model, s.body):
            v = _point_column(cols[j], p)
            for k in range(3):
                J[k][j] = v[k]
        out += [x for row in J for x in row]
    return out


def _min(a: object, b: object) -> object:
    d = a - b
    return 0.5 * (a + b - d * G.sign(d))


def _select(w: object, new: object, old: object) -> object:
    return old + w * (new - old)


def _pair(spheres: SphereModel, P: list, a: str, b: str, with_points: bool):
    """The distance of links `a` and `b` (and the selected centres)."""
    r = [s.radius for s in spheres.spheres]
    best = None
    for i in spheres.of_link(a):
        for j in spheres.of_link(b):
            diff = [P[i][k] - P[j][k] for k in range(3)]
            d = G.sqrt(diff[0] * diff[0] + diff[1] * diff[1] + diff[2] * diff[2]) \
                if not all(isinstance(x, float) for x in diff) else \
                float(sum(x * x for x in diff)) ** 0.5
            d = d - (r[i] + r[j])
            if best is None:
                best = (d, list(P[i]), list(P[j]))
                continue
            if not with_points:
                best = (_min(d, best[0]), None, None)
                continue
            s = G.sign(d - best[0])
            w = 0.5 * (s * s - s)  # 1 where d < best, else 0
            pa = [_select(w, x, y) for x, y in zip(P[i], best[1], strict=True)]
            pb = [_select(w, x, y) for x, y in zip(P[j], best[2], strict=True)]
            best = (_select(w, d, best[0]), pa, pb)
    return best


def self_collision_distance(model: RobotModel, spheres: SphereModel, X: list) -> list:
    """`(P,)`: the distance of every checked link pair."""
    P = centres(model, spheres, A.world_poses(model, X))
    return [_pair(spheres, P, a, b, False)[0] for a, b in spheres.pairs]


def self_collision_distance_gradient(model: RobotModel, spheres: SphereModel, X: list
                                     ) -> list:
    """`(P, nv)` row-major: the gradient of the active sphere pair of every link pair."""
    oX = A.world_poses(model, X)
    cols = _columns(model, oX)
    P = centres(model, spheres, oX)
    body = {s.link: s.body for s in spheres.spheres}
    nv = model.nv
    out: list = []
    for a, b in spheres.pairs:
        _, pa, pb = _pair(spheres, P, a, b, True)
        diff = [pa[k] - pb[k] for k in range(3)]
        inv = 1.0 / G.sqrt(diff[0] * diff[0] + diff[1] * diff[1] + diff[2] * diff[2] + TINY)
        n = [x * inv for x in diff]
        sa, sb = set(_support(model, body[a])), set(_support(model, body[b]))
        row: list = [0.0] * nv
        for j in sorted(sa ^ sb):
            v = _point_column(cols[j], pa if j in sa else pb)
            g = n[0] * v[0] + n[1] * v[1] + n[2] * v[2]
            row[j] = g if j in sa else -g
        out += row
    return out


PASSES = {
    "sphere_positions": ("World centres of the collision spheres.", sphere_positions),
    "sphere_positions_gradient": ("d(sphere centres)/d tangent: v_j + w_j x p over each "
                                  "sphere's support.", sphere_positions_gradient),
    "self_collision_distance": ("Per checked link pair, the smallest sphere-pair signed "
                                "distance (branch-free min).", self_collision_distance),
    "self_collision_distance_gradient": ("Per checked link pair, n . (J_a - J_b) of the "
                                         "active sphere pair.",
                                         self_collision_distance_gradient),
}
"""The thread passes of the collision profile: name -> (doc, body(model, spheres, X))."""


def emit(kb, model: RobotModel, spheres: SphereModel | None, name: str, X, out, unX,
         nv: int) -> None:
    """Emit the pass of collision algorithm `name` into the item builder `kb`."""
    if spheres is None:
        raise ValueError(f"{name} needs a sphere model: register with collision=True")
    from grid_codegen.collision.emit import emit_loops, use_loops

    if use_loops(spheres, name, nv):  # capsules, or too many pairs or entries to unroll
        emit_loops(kb, model, spheres, name, X, out, unX)
        return
    doc, body = PASSES[name]
    order = None
    if name == "sphere_positions_gradient":
        rows = 3 * len(spheres.spheres)
        order = [r * nv + c for c in range(nv) for r in range(rows)]
    kb.call(name, doc, lambda x: body(model, spheres, unX(x)), [X], out,
            schedule_order=order)
