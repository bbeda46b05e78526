"""The sphere model of a robot: spheres per link and the link pairs checked.

`CollisionRequest` is what a registration asks for (resolution, a spherized URDF, an
allowed-collision list, the mesh roots); its `key()` is what enters the store key: the
options as given, the SHA-256 of the spherized URDF and of every mesh file the URDF
names (so a changed mesh is a new entry), never a path. `build_sphere_model` fits the
spheres (`fit`) and filters the pairs:

* links on one body (welded by fixed joints) and links of a body and its parent body
  (adjacent through one moving joint) are never checked;
* pairs whose spheres intersect at the neutral configuration (joints at zero, identity
  quaternions) are excluded, as robotics users expect (links that always touch);
* pairs named in `allowed_collision_pairs` are excluded (any order; unknown links
  refused).

Links without collision geometry get no spheres; links welded to the world keep theirs
(their positions are constants). Spheres are ordered by link (the URDF's order of
links), then by shape and fit order; pairs by the first link's sphere order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grid_codegen.collision.fit import fit_shape
from grid_codegen.collision.geometry import read_shapes, read_spherized, resolve_mesh
from grid_codegen.model import JointType, RobotModel

DEFAULT_RES = 0.05


@dataclass(frozen=True)
class CollisionSphere:
    link: str
    body: int  # -1: welded to the world
    center: tuple[float, float, float]  # in the link frame
    radius: float
    body_center: tuple[float, float, float]  # in the body frame (what kernels use)


@dataclass(frozen=True)
class SphereModel:
    spheres: tuple[CollisionSphere, ...]
    pairs: tuple[tuple[str, str], ...]

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.link for s in self.spheres))

    def of_link(self, link: str) -> list[int]:
        return [k for k, s in enumerate(self.spheres) if s.link == link]

    def to_dict(self) -> dict:
        return {"spheres": [{"link": s.link, "body": s.body, "center": list(s.center),
                             "radius": s.radius, "body_center": list(s.body_center)}
                            for s in self.spheres],
                "pairs": [list(p) for p in self.pairs]}

    @staticmethod
    def from_dict(d: Mapping) -> SphereModel:
        return SphereModel(
            tuple(CollisionSphere(str(s["link"]), int(s["body"]),
                                  tuple(float(x) for x in s["center"]), float(s["radius"]),
                                  tuple(float(x) for x in s["body_center"]))
                  for s in d["spheres"]),
            tuple((str(a), str(b)) for a, b in d["pairs"]))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CollisionRequest:
    """What `register_robot(collision=True, ...)` asks for (module doc)."""

    res: float | tuple[tuple[str, float], ...] = DEFAULT_RES
    spherized: bytes | None = None
    allowed: tuple[tuple[str, str], ...] = ()
    roots: tuple[Path, ...] = field(default=(), compare=False)

    @staticmethod
    def make(res: object = None, spherized: bytes | None = None,
             allowed: Sequence | None = None, roots: Sequence = ()) -> CollisionRequest:
        if res is None:
            res = DEFAULT_RES
        if isinstance(res, Mapping):
            items = []
            for link, value in res.items():
                items.append((str(link), _check_res(value, f"collision_res[{link!r}]")))
            res = tuple(sorted(items))
            if not res:
                raise ValueError("collision_res as a mapping must name at least one link")
        else:
            res = _check_res(res, "collision_res")
        pairs = []
        for pair in allowed or ():
            if isinstance(pair, str) or len(pair) != 2:
                raise ValueError(f"allowed_collision_pairs entries are (link, link) pairs, "
                                 f"got {pair!r}")
            a, b = (str(x) for x in pair)
            pairs.append((a, b) if a <= b else (b, a))
        return CollisionRequest(res, spherized, tuple(sorted(set(pairs))),
                                tuple(Path(r) for r in roots))

    def res_of(self, link: str) -> float:
        if isinstance(self.res, tuple):
            return dict(self.res).get(link, DEFAULT_RES)
        return float(self.res)

    def key(self, urdf_bytes: bytes, source: str) -> dict:
        """The store-key part of this request (module doc)."""
        out: dict = {"version": 1, "allowed": [list(p) for p in self.allowed]}
        if self.spherized is not None:
            out["spherized_sha256"] = _sha(self.spherized)
            return out
        out["res"] = ([[k, v] for k, v in self.res] if isinstance(self.res, tuple)
                      else self.res)
        meshes = {}
        for shape in read_shapes(urdf_bytes, source):
            if shape.kind == "mesh" and shape.filename not in meshes:
                path = resolve_mesh(shape.filename, self.roots, shape.link)
                meshes[shape.filename] = _sha(path.read_bytes())
        if meshes:
            out["mesh_sha256"] = dict(sorted(meshes.items()))
        return out


def _check_res(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 1e-4 <= value <= 10.0:
        raise ValueError(f"{what} must be a length in metres in [1e-4, 10], got {value!r}")
    return float(value)


def neutral(model: RobotModel) -> list[float]:
    """Joints at zero, identity quaternions (Pinocchio's neutral)."""
    q: list[float] = []
    for j in model.joints:
        if j.type is JointType.FREE_FLYER:
            q += [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
        elif j.type is JointType.SPHERICAL:
            q += [0.0, 0.0, 0.0, 1.0]
        elif j.type is JointType.PLANAR:
            q += [0.0, 0.0, 1.0, 0.0]
        else:
            q += [0.0] * j.nq
    return q


def body_poses(model: RobotModel, q: Sequence[float]) -> list[tuple[np.ndarray, np.ndarray]]:
    """World `(R, p)` of every body at the full configuration `q` (float64)."""
    from grid_codegen.symbolic import algorithms as A

    oX = A.world_poses(model, A.joint_transforms(model, [float(x) for x in q]))
    return [(np.asarray(R, dtype=np.float64).reshape(3, 3), np.asarray(p, dtype=np.float64))
            for R, p in oX]


def _link_frames(model: RobotModel) -> dict:
    return {f.name: f for f in model.frames if f.kind == "link"}


def _raw_spheres(model: RobotModel, request: CollisionRequest, urdf_bytes: bytes,
                 source: str) -> list[tuple[str, tuple, float]]:
    links = _link_frames(model)
    if request.spherized is not None:
        found = read_spherized(request.spherized, "spherized_urdf")
    else:
        if isinstance(request.res, tuple):
            unknown = sorted(k for k, _ in request.res if k not in links)
            if unknown:
                raise ValueError(f"collision_res names unknown links {unknown}; links are "
                                 f"{', '.join(links)}")
        found = []
        for shape in read_shapes(urdf_bytes, source):
            found += [(shape.link, c, r) for c, r in
                      fit_shape(shape, request.res_of(shape.link), request.roots)]
    unknown = sorted({link for link, _, _ in found if link not in links})
    if unknown:
        raise ValueError(f"spherized_urdf names links the robot does not have: {unknown}")
    order = {name: k for k, name in enumerate(links)}
    return sorted(found, key=lambda s: order[s[0]])  # stable: fit order within a link


def build_sphere_model(model: RobotModel, request: CollisionRequest, urdf_bytes: bytes,
                       source: str) -> SphereModel:
    """The spheres and checked pairs of `model` (module doc)."""
    links = _link_frames(model)
    spheres = []
    for link, c, r in _raw_spheres(model, request, urdf_bytes, source):
        frame = links[link]
        R, p = frame.placement.R, frame.placement.p
        bc = np.asarray(R, dtype=np.float64) @ np.asarray(c) + np.asarray(p)
        spheres.append(CollisionSphere(link, int(frame.body), tuple(float(x) for x in c),
                                       float(r), tuple(float(x) for x in bc)))
    if not spheres:
        raise ValueError(f"{model.name} has no collision geometry (no <collision> "
                         "elements); give spherized_urdf= with spheres per link")
    for a, b in request.allowed:
        for link in (a, b):
            if link not in links:
                raise ValueError(f"allowed_collision_pairs names unknown link {link!r}; "
                                 f"links are {', '.join(links)}")
    partial = SphereModel(tuple(spheres), ())
    poses = body_poses(model, neutral(model))
    allowed = set(request.allowed)
    pairs = []
    names = partial.links
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ba, bb = links[a].body, links[b].body
            if ba == bb or (ba >= 0 and model.parents[ba] == bb) \
                    or (bb >= 0 and model.parents[bb] == ba):
                continue
            if (min(a, b), max(a, b)) in allowed:
                continue
            if pair_distance(partial, poses, a, b) <= 0.0:
                continue
            pairs.append((a, b))
    return SphereModel(tuple(spheres), tuple(pairs))


def world_centers(model: SphereModel, poses: list) -> np.ndarray:
    out = []
    for s in model.spheres:
        if s.body < 0:
            out.append(np.asarray(s.body_center))
        else:
            R, p = poses[s.body]
            out.append(R @ np.asarray(s.body_center) + p)
    return np.asarray(out)


def pair_distance(model: SphereModel, poses: list, a: str, b: str) -> float:
    c = world_centers(model, poses)
    r = np.asarray([s.radius for s in model.spheres])
    ia, ib = model.of_link(a), model.of_link(b)
    d = np.linalg.norm(c[ia][:, None] - c[ib][None], axis=2) - r[ia][:, None] - r[ib][None]
    return float(d.min())
