"""Float64 reference of the collision methods (docs/collision.md): sphere centres and
their Jacobians from the reference kinematics, self and world sphere distances with
the gradient of the active sphere pair (argmin, the first in order on ties), and the
smooth collision cost. `spheres` is a `grid_codegen.collision.SphereModel` (or the
`collision` dict of a handle's meta.json)."""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_codegen.model import RobotModel
from grid_rbd.reference.kinematics import forward_pass, point_jacobian, world_motion_subspace


def _model(spheres: Any):
    from grid_codegen.collision import SphereModel

    return spheres if isinstance(spheres, SphereModel) else SphereModel.from_dict(spheres)


def sphere_positions(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, S, 3)` world centres."""
    spheres = _model(spheres)
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    kin = forward_pass(model, q)
    out = np.zeros((q.shape[0], len(spheres.spheres), 3))
    for k, s in enumerate(spheres.spheres):
        c = np.asarray(s.body_center)
        out[:, k] = c if s.body < 0 else kin.oR[s.body] @ c + kin.op[s.body]
    return out


def sphere_positions_gradient(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, S, 3, nv)`."""
    spheres = _model(spheres)
    q = np.atleast_2d(np.asarray(q, dtype=np.float64))
    kin = forward_pass(model, q)
    oS = world_motion_subspace(model, kin)
    P = sphere_positions(model, spheres, q)
    out = np.zeros((q.shape[0], len(spheres.spheres), 3, model.nv))
    for k, s in enumerate(spheres.spheres):
        if s.body >= 0:
            out[:, k] = point_jacobian(model, oS, s.body, P[:, k])
    return out


def _pairs(spheres, P, J=None):
    r = np.asarray([s.radius for s in spheres.spheres])
    d_out, g_out = [], []
    for a, b in spheres.pairs:
        ia, ib = spheres.of_link(a), spheres.of_link(b)
        diff = P[:, ia][:, :, None] - P[:, ib][:, None]  # (B, na, nb, 3)
        dist = np.linalg.norm(diff, axis=-1)
        d = (dist - r[ia][:, None] - r[ib][None]).reshape(len(P), -1)
        k = np.argmin(d, axis=1)
        d_out.append(d[np.arange(len(P)), k])
        if J is not None:
            i, j = np.asarray(ia)[k // len(ib)], np.asarray(ib)[k % len(ib)]
            rows = np.arange(len(P))
            n = P[rows, i] - P[rows, j]
            n = n / np.linalg.norm(n, axis=1, keepdims=True)
            g_out.append(np.einsum("bk,bkj->bj", n, J[rows, i] - J[rows, j]))
    d_out = np.stack(d_out, 1) if d_out else np.zeros((len(P), 0))
    if J is None:
        return d_out
    return d_out, (np.stack(g_out, 1) if g_out else np.zeros((len(P), 0, J.shape[-1])))


def self_collision_distance(model: RobotModel, spheres: Any, q: np.ndarray) -> np.ndarray:
    """`(B, P)`."""
    spheres = _model(spheres)
    return _pairs(spheres, sphere_positions(model, spheres, q))


def self_collision_distance_gradient(model: RobotModel, spheres: Any, q: np.ndarray
                                     ) -> np.ndarray:
    """`(B, P, nv)`."""
    spheres = _model(spheres)
    P = sphere_positions(model, spheres, q)
    return _pairs(spheres, P, sphere_positions_gradient(model, spheres, q))[1]


def world_collision_distance(model: RobotModel, spheres: Any, q: np.ndarray,
                             centers: np.ndarray, radii: np.ndarray,
                             with_gradient: bool = False):
    """`(B, M)` (and `(B, M, nv)`): per obstacle, the closest robot sphere."""
    spheres = _model(spheres)
    P = sphere_positions(model, spheres, q)
    r = np.asarray([s.radius for s in spheres.spheres])
    c = np.asarray(centers, dtype=np.float64)
    rc = np.asarray(radii, dtype=np.float64)
    c = np.broadcast_to(c if c.ndim == 3 else c[None], (len(P), *c.shape[-2:]))
    rc = np.broadcast_to(rc if rc.ndim == 2 else rc[None], (len(P), rc.shape[-1]))
    diff = P[:, :, None] - c[:, None]
    dist = np.linalg.norm(diff, axis=-1) - r[None, :, None] - rc[:, None]  # (B, S, M)
    k = np.argmin(dist, axis=1)  # (B, M)
    rows = np.arange(len(P))[:, None]
    d = dist[rows, k, np.arange(c.shape[1])[None]]
    if not with_gradient:
        return d
    J = sphere_positions_gradient(model, spheres, q)
    n = P[rows, k] - c
    n = n / np.linalg.norm(n, axis=-1, keepdims=True)
    return d, np.einsum("bmk,bmkj->bmj", n, J[rows, k])


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
