"""Float64 reference of the collision methods (docs/collision.md): sphere centres and
their Jacobians from the reference kinematics, self and world distances of the spheres
and (with `collision_native`) the exact capsule primitives, the gradient of the active
primitive pair (argmin, the first in order on ties), and the smooth collision cost.
`spheres` is a `grid_codegen.collision.SphereModel` (or the `collision` dict of a
handle's meta.json).

Candidates, in the order the kernels take them: per link pair, the spheres of their own
of both links (A's spheres outer), A's capsules against B's spheres, A's spheres
against B's capsules, then capsule against capsule; per obstacle, the robot's spheres of
their own, then its capsules. Capsule end spheres (the carriers of the segment ends) are
not candidates: they lie inside their capsule. A candidate's distance is `|x_a - x_b| -
r_a - r_b` at the closest points of the two segments
(`grid_codegen.collision.primitives`) and its gradient `n . (J_a(x_a) - J_b(x_b))`,
`J(x)` the world Jacobian of the point `x` fixed to the link's body, and `n = (x_a -
x_b) / |x_a - x_b|`, zero where the points coincide (crossing segments: a kink).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_codegen.collision.primitives import segment_point, segment_segment
from grid_codegen.model import RobotModel
from grid_rbd.reference.kinematics import forward_pass, point_jacobian, world_motion_subspace


def _model(spheres: Any):
    from grid_codegen.collision import SphereModel

    return spheres if isinstance(spheres, SphereModel) else SphereModel.from_dict(spheres)


def _batch(q: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(q, dtype=np.float64))


def _positions(model: RobotModel, spheres, kin, batch: int) -> np.ndarray:
    out = np.zeros((batch, len(spheres.spheres), 3))
    for k, s in enumerate(spheres.spheres):
        c = np.asarray(s.body_center)
        out[:, k] = c if s.body < 0 else kin.oR[s.body] @ c + kin.op[s.body]
    return out


def sphere_positions(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, S, 3)` world centres (capsule end spheres included)."""
    spheres, q = _model(spheres), _batch(q)
    return _positions(model, spheres, forward_pass(model, q), len(q))


def sphere_positions_gradient(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, S, 3, nv)`."""
    spheres, q = _model(spheres), _batch(q)
    kin = forward_pass(model, q)
    oS = world_motion_subspace(model, kin)
    P = _positions(model, spheres, kin, len(q))
    out = np.zeros((len(q), len(spheres.spheres), 3, model.nv))
    for k, s in enumerate(spheres.spheres):
        if s.body >= 0:
            out[:, k] = point_jacobian(model, oS, s.body, P[:, k])
    return out


def _primitives(spheres, P: np.ndarray, link: str) -> tuple[list, list]:
    """`(spheres, capsules)` of `link`: `(centre (B, 3), radius)` and `(a, b, radius)`."""
    own = [(P[:, k], spheres.spheres[k].radius) for k in spheres.plain_of_link(link)]
    caps = [(P[:, c.ends[0]], P[:, c.ends[1]], c.radius)
            for c in (spheres.capsules[k] for k in spheres.capsules_of_link(link))]
    return own, caps


def _pair_candidates(spheres, P: np.ndarray, a: str, b: str) -> tuple[list, list, list]:
    """Distances `(B,)` and closest points `(B, 3)` of every candidate (module doc)."""
    sa, ca = _primitives(spheres, P, a)
    sb, cb = _primitives(spheres, P, b)
    d, xa, xb = [], [], []

    def add(x: np.ndarray, y: np.ndarray, radii: float) -> None:
        d.append(np.linalg.norm(x - y, axis=-1) - radii)
        xa.append(x)
        xb.append(y)

    for x, rx in sa:
        for y, ry in sb:
            add(x, y, rx + ry)
    for x0, x1, rx in ca:
        for y, ry in sb:
            add(segment_point(x0, x1, y)[0], y, rx + ry)
    for x, rx in sa:
        for y0, y1, ry in cb:
            add(x, segment_point(y0, y1, x)[0], rx + ry)
    for x0, x1, rx in ca:
        for y0, y1, ry in cb:
            add(*segment_segment(x0, x1, y0, y1), rx + ry)
    return d, xa, xb


def _active(d: list, xa: list, xb: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    D = np.stack(d, 1)
    k = np.argmin(D, axis=1)
    rows = np.arange(len(D))
    return D[rows, k], np.stack(xa, 1)[rows, k], np.stack(xb, 1)[rows, k]


def _point_gradient(model: RobotModel, oS, body: int, x: np.ndarray) -> np.ndarray:
    if body < 0:
        return np.zeros((len(x), 3, model.nv))
    return point_jacobian(model, oS, body, x)


COINCIDENT = 64 * np.finfo(np.float64).eps
"""Closest points nearer than this (m) have no direction: zero gradient (grid/collision.h)."""


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > COINCIDENT, v / np.where(n > COINCIDENT, n, 1.0), 0.0)


def _self(model: RobotModel, spheres, q: np.ndarray, gradient: bool):
    kin = forward_pass(model, q)
    P = _positions(model, spheres, kin, len(q))
    oS = world_motion_subspace(model, kin) if gradient else None
    body = {s.link: s.body for s in spheres.spheres}
    dist = np.zeros((len(q), len(spheres.pairs)))
    grad = np.zeros((len(q), len(spheres.pairs), model.nv))
    for p, (a, b) in enumerate(spheres.pairs):
        dist[:, p], xa, xb = _active(*_pair_candidates(spheres, P, a, b))
        if gradient:
            J = _point_gradient(model, oS, body[a], xa) - _point_gradient(model, oS, body[b], xb)
            grad[:, p] = np.einsum("bk,bkj->bj", _unit(xa - xb), J)
    return dist, grad


def self_collision_distance(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, P)`."""
    return _self(model, _model(spheres), _batch(q), False)[0]


def self_collision_distance_gradient(model: RobotModel, spheres: Any, q: np.ndarray
                                     ) -> np.ndarray:
    """`(B, P, nv)`."""
    return _self(model, _model(spheres), _batch(q), True)[1]


def world_collision_distance(model: RobotModel, spheres: Any, q: np.ndarray,
                             centers: np.ndarray, radii: np.ndarray,
                             with_gradient: bool = False):
    """`(B, M)` (and `(B, M, nv)`): per obstacle sphere (`centers (M, 3)` / `(B, M, 3)`,
    `radii (M,)` / `(B, M)`), the closest robot primitive."""
    spheres, q = _model(spheres), _batch(q)
    kin = forward_pass(model, q)
    P = _positions(model, spheres, kin, len(q))
    c = np.asarray(centers, dtype=np.float64)
    rc = np.asarray(radii, dtype=np.float64)
    c = np.broadcast_to(c if c.ndim == 3 else c[None], (len(q), *c.shape[-2:]))
    rc = np.broadcast_to(rc if rc.ndim == 2 else rc[None], (len(q), rc.shape[-1]))
    own = [k for k, s in enumerate(spheres.spheres) if s.capsule < 0]
    bodies = [spheres.spheres[k].body for k in own] + [cap.body for cap in spheres.capsules]
    oS = world_motion_subspace(model, kin) if with_gradient else None
    dist = np.zeros(rc.shape)
    grad = np.zeros((*rc.shape, model.nv))
    for m in range(c.shape[1]):
        cm = c[:, m]
        points = [P[:, k] for k in own]
        points += [segment_point(P[:, cap.ends[0]], P[:, cap.ends[1]], cm)[0]
                   for cap in spheres.capsules]
        radius = [spheres.spheres[k].radius for k in own] + [cap.radius
                                                               for cap in spheres.capsules]
        D = np.stack([np.linalg.norm(x - cm, axis=-1) - r for x, r in zip(points, radius,
                                                                          strict=True)], 1)
        k = np.argmin(D, axis=1)
        rows = np.arange(len(q))
        dist[:, m] = D[rows, k] - rc[:, m]
        if with_gradient:
            X = np.stack(points, 1)[rows, k]
            n = _unit(X - cm)
            active = np.asarray(bodies)[k]  # (B,): the active primitive's body
            for body in set(bodies) - {-1}:
                g = np.einsum("bk,bkj->bj", n, point_jacobian(model, oS, body, X))
                grad[:, m] += np.where((active == body)[:, None], g, 0.0)
    return (dist, grad) if with_gradient else dist


def collision_cost(model: RobotModel, spheres: Any, q: np.ndarray, margin: float = 0.02,
                   weight: float = 1.0, centers=None, radii=None, sharpness: float = 100.0):
    """`1/2 w sum r_k^2`, `r_k = softplus(beta (margin - d_k)) / beta`: value `(B,)`,
    gradient `(B, 2nv)` and Gauss-Newton Hessian `(B, 2nv, 2nv)`."""
    d = self_collision_distance(model, spheres, q)
    Jd = self_collision_distance_gradient(model, spheres, q)
    if centers is not None:
        dw, Jw = world_collision_distance(model, spheres, q, centers, radii, True)
        d, Jd = np.concatenate([d, dw], 1), np.concatenate([Jd, Jw], 1)
    x = sharpness * (margin - d)
    r = np.logaddexp(0.0, x) / sharpness
    Jr = -(0.5 * (1 + np.tanh(0.5 * x)))[:, :, None] * Jd
    J = np.concatenate([Jr, np.zeros_like(Jr)], 2)
    value = 0.5 * weight * (r * r).sum(1)
    grad = weight * np.einsum("bk,bkj->bj", r, J)
    hess = weight * np.einsum("bki,bkj->bij", J, J)
    return value, grad, hess
