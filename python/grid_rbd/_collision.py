"""Collision on the handles (docs/collision.md): the sphere model's description, world
(obstacle-sphere) distances and a smooth collision cost, composed from the artifact's
collision kernels (`sphere_positions[_gradient]`, `self_collision_distance[_gradient]`,
the registry's "collision" profile) with array operations of the handle's framework
(numpy, torch or JAX; `grid_rbd._array_ops`), so on torch and JAX they differentiate
through the kernels' analytic backward.

Obstacles are spheres given per call: `centers (M, 3)` and `radii (M,)` shared by the
batch (the common planner case), or `(B, M, 3)` and `(B, M)` per item.
`world_collision_distance` gives, per obstacle, the signed distance to the closest robot
primitive `(B, M)` (its spheres, and with `collision_native` its capsules, whose segment
ends are the positions of their two end spheres); its gradient is that of the active
primitive.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from grid_rbd._array_ops import ArrayOps


class Sphere(NamedTuple):
    """One collision sphere: its link, centre in the link frame (m) and radius (m)."""

    link: str
    center: tuple[float, float, float]
    radius: float


class Capsule(NamedTuple):
    """One capsule primitive (collision_native): its link, segment ends in the link frame
    (m), radius (m) and the indices of its two end spheres in `collision_spheres`."""

    link: str
    a: tuple[float, float, float]
    b: tuple[float, float, float]
    radius: float
    ends: tuple[int, int]


def collision_request(collision: bool, res: Any, native: bool, spherized: Any,
                      allowed: Any, mesh_roots: Any, urdf_path: Any, mimic: bool) -> Any:
    """The `grid_codegen.collision.CollisionRequest` of register_robot's collision
    arguments (None without collision=True); ValueError for bad ones."""
    given = {"collision_res": res is not None, "collision_native": native not in (False, None),
             "spherized_urdf": spherized is not None,
             "allowed_collision_pairs": allowed is not None,
             "mesh_roots": mesh_roots is not None}
    if not collision:
        named = [k for k, v in given.items() if v]
        if named:
            raise ValueError(f"{', '.join(named)} need collision=True")
        return None
    if native and spherized is not None:
        raise ValueError("collision_native applies to the URDF's own geometry; a "
                         "spherized_urdf holds spheres, which are exact already")
    if mimic:
        raise ValueError("collision=True with mimic=True is not supported yet")
    if spherized is not None and res is not None:
        raise ValueError("give collision_res= or spherized_urdf=, not both")
    from grid_codegen.collision import CollisionRequest

    if isinstance(allowed, str):
        raise ValueError("allowed_collision_pairs is a list of (link, link) pairs")
    if isinstance(mesh_roots, (str, os.PathLike)):
        mesh_roots = [mesh_roots]
    roots = [Path(r) for r in (mesh_roots or ())]
    if mesh_roots is None and urdf_path is not None:
        roots = [Path(os.path.realpath(urdf_path)).parent.parent]
    for root in roots:
        if not root.is_dir():
            raise ValueError(f"mesh_roots entry {str(root)!r} is not a folder")
    spherized_bytes = None
    if spherized is not None:
        if isinstance(spherized, str) and spherized.lstrip().startswith("<"):
            spherized_bytes = spherized.encode("utf-8")
        elif isinstance(spherized, bytes):
            spherized_bytes = spherized
        else:
            path = Path(spherized)
            if not path.is_file():
                raise FileNotFoundError(f"no spherized URDF at {spherized}")
            spherized_bytes = path.read_bytes()
    return CollisionRequest.make(res, spherized_bytes, allowed, roots, native)


def _softplus(ops: ArrayOps, x: Any) -> Any:
    m = ops.m
    return ops.where(x > 0, x, 0 * x) + m.log1p(m.exp(-m.abs(x)))


class CollisionMethods:
    """The collision part of the handles (module doc)."""

    def _collision_meta(self) -> dict:
        found = self._meta_dict().get("collision")
        if not found:
            raise RuntimeError(f"{self.name} was registered without collision=True; "
                               "register it with collision=True for the collision methods")
        return found

    @property
    def collision_spheres(self) -> tuple[Sphere, ...]:
        """Per sphere: link name, centre in the link frame, radius (the order of
        `sphere_positions`)."""
        return tuple(Sphere(s["link"], tuple(s["center"]), float(s["radius"]))
                     for s in self._collision_meta()["spheres"])

    @property
    def collision_capsules(self) -> tuple[Capsule, ...]:
        """The capsule primitives (collision_native; empty otherwise): link, segment ends
        in the link frame, radius, and the indices of its end spheres in
        `collision_spheres` (whose `sphere_positions` are the segment's world ends)."""
        return tuple(Capsule(c["link"], tuple(c["a"]), tuple(c["b"]), float(c["radius"]),
                             (int(c["ends"][0]), int(c["ends"][1])))
                     for c in self._collision_meta().get("capsules", ()))

    @property
    def collision_pairs(self) -> tuple[tuple[str, str], ...]:
        """The link pairs `self_collision_distance` checks, in its order."""
        return tuple((a, b) for a, b in self._collision_meta()["pairs"])

    def _obstacles(self, ops: ArrayOps, centers: Any, radii: Any) -> tuple[Any, Any]:
        if type(centers).__module__.startswith("numpy") or isinstance(centers, (list, tuple)):
            centers = ops.const(np.asarray(centers, dtype=np.float64))
        if type(radii).__module__.startswith("numpy") or isinstance(radii, (list, tuple)):
            radii = ops.const(np.asarray(radii, dtype=np.float64))
        if centers.ndim == 2:
            centers = centers[None]
        if radii.ndim == 1:
            radii = radii[None]
        if centers.shape[-1] != 3 or tuple(radii.shape[-1:]) != tuple(centers.shape[1:2]):
            raise ValueError(f"centers must be (M, 3) or (B, M, 3) and radii (M,) or "
                             f"(B, M); got {tuple(centers.shape)} and {tuple(radii.shape)}")
        return centers, radii

    def _world_active(self, q: Any, centers: Any, radii: Any) -> tuple:
        """Per obstacle the active robot primitive: `(ops, p, c, onehot (B, M, K), t
        (B, C, M), points (B, K, M, 3), distance (B, M))`, K = own spheres + capsules."""
        ops = ArrayOps(q)
        m = ops.m
        meta = self._collision_meta()
        own = [k for k, s in enumerate(meta["spheres"]) if s.get("capsule", -1) < 0]
        caps = meta.get("capsules", ())
        p = self.sphere_positions(q)  # (B, S, 3)
        c, rc = self._obstacles(ops, centers, radii)
        radius = [meta["spheres"][k]["radius"] for k in own] + [x["radius"] for x in caps]
        points = p[:, own][:, :, None, :] + 0 * c[:, None, :, :]  # (B, S_own, M, 3)
        t = None
        if caps:
            a = p[:, [x["ends"][0] for x in caps]][:, :, None, :]  # (B, C, 1, 3)
            d = p[:, [x["ends"][1] for x in caps]][:, :, None, :] - a
            dd = (d * d).sum(-1)
            t = ((c[:, None] - a) * d).sum(-1) / ops.where(dd > 0, dd, 1 + 0 * dd)
            t = ops.where(t < 0, 0 * t, ops.where(t > 1, 1 + 0 * t, t))  # (B, C, M)
            points = ops.cat([points, a + t[..., None] * d], 1)
        diff = points - c[:, None]
        dist = m.sqrt((diff * diff).sum(-1)) - ops.const(np.asarray(radius))[None, :, None] \
            - rc[:, None, :]
        onehot = ops.eye(len(radius))[m.argmin(dist, 1)]  # (B, M, K): the first on ties
        return ops, p, c, onehot, t, points, m.einsum("bmk,bkm->bm", onehot, dist)

    def world_collision_distance(self, q: Any, centers: Any, radii: Any) -> Any:
        """`(B, M)`: per obstacle sphere (`centers (M, 3)`, `radii (M,)` shared by the
        batch, or `(B, M, 3)`, `(B, M)`), the signed distance to the closest robot
        primitive (negative: penetration)."""
        return self._world_active(self._batched(q), centers, radii)[-1]

    def world_collision_distance_gradient(self, q: Any, centers: Any, radii: Any) -> Any:
        """`(B, M, nv)`: the tangent gradient of `world_collision_distance` (that of the
        active primitive: `n . J(x)`, `n` the unit vector from the obstacle to its closest
        point `x`, `J(x) = (1 - t) J_a + t J_b` on a capsule's segment)."""
        q = self._batched(q)
        ops, p, c, onehot, t, points, _ = self._world_active(q, centers, radii)
        m = ops.m
        meta = self._collision_meta()
        own = [k for k, s in enumerate(meta["spheres"]) if s.get("capsule", -1) < 0]
        J = self.sphere_positions_gradient(q)  # (B, S, 3, nv)
        x = m.einsum("bmk,bkmi->bmi", onehot, points)
        n = x - c
        n = n / m.sqrt((n * n).sum(-1) + 1e-24)[..., None]
        Js = m.einsum("bmk,bkij->bmij", onehot[:, :, :len(own)], J[:, own])
        if t is not None:
            caps = meta["capsules"]
            pick = onehot[:, :, len(own):]  # (B, M, C)
            tm = m.einsum("bcm->bmc", t)
            Js = Js + m.einsum("bmc,bcij->bmij", pick * (1 - tm),
                               J[:, [x["ends"][0] for x in caps]]) \
                + m.einsum("bmc,bcij->bmij", pick * tm, J[:, [x["ends"][1] for x in caps]])
        return m.einsum("bmk,bmkj->bmj", n, Js)

    def _batched(self, q: Any) -> Any:
        (q,) = self._as_arrays(q)
        if q.ndim != 2:
            raise ValueError(f"q must be (B, nq), got shape {tuple(q.shape)}")
        return q

    def collision_cost(self, q: Any, margin: float = 0.02, weight: Any = 1.0,
                       centers: Any = None, radii: Any = None, sharpness: float = 100.0
                       ) -> tuple[Any, Any, Any]:
        """A smooth collision cost for the plant layer: `1/2 w sum_k r_k^2` over the
        checked self pairs and (when given) the obstacle spheres, `r_k = softplus(beta
        (margin - d_k)) / beta` (a smooth hinge: about `margin - d` inside the margin,
        zero far outside it; beta = sharpness, 1/m). Returns value `(B,)`, gradient
        `(B, 2nv)` (velocity part zero) and the Gauss-Newton Hessian `(B, 2nv, 2nv)`
        (`J_r^T w J_r`), as the plant costs (grid_rbd._plant)."""
        q = self._batched(q)
        ops = ArrayOps(q)
        d = self.self_collision_distance(q)
        Jd = self.self_collision_distance_gradient(q)
        if centers is not None:
            d = ops.cat([d, self.world_collision_distance(q, centers, radii)], 1)
            Jd = ops.cat([Jd, self.world_collision_distance_gradient(q, centers, radii)], 1)
        beta = float(sharpness)
        if not beta > 0 or not float(margin) >= 0:
            raise ValueError("collision_cost needs sharpness > 0 and margin >= 0")
        x = beta * (float(margin) - d)
        r = _softplus(ops, x) / beta
        slope = 0.5 * (1.0 + ops.m.tanh(0.5 * x))  # sigmoid(x) = d r / d margin
        Jr = -slope[:, :, None] * Jd
        return self._configuration_tracking(r, Jr, weight)


__all__: Sequence[str] = ("Capsule", "CollisionMethods", "Sphere", "collision_request")
