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

`collision_native` (`NATIVE_MODES`) keeps the primitives the kernels treat exactly as
themselves: a `<sphere>` is always one sphere; with "capsules" (`collision_native=True`)
a `<capsule>` becomes a capsule primitive (segment and radius, distances by exact
closest points, `primitives`); with "capsules+cylinders" a `<cylinder>` too becomes the
capsule of the same axis, length and radius, which holds it (a conservative bound, not
its exact distance: it overshoots by up to the radius past each cap). Everything else
is covered by spheres. Each capsule also contributes its two end spheres (centre an end
of the segment, its radius) to the sphere list: they lie inside the capsule, so they
never lower a distance, and they carry the segment's world positions and Jacobians
through `sphere_positions[_gradient]` (the handles' world distances use them).

Links without collision geometry get no spheres; links welded to the world keep theirs
(their positions are constants). Spheres are ordered by link (the URDF's order of
links), then the fitted spheres in shape and fit order, then the end spheres of the
link's capsules (capsule order); pairs by the first link's sphere order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grid_codegen.collision.fit import fit_shape, round_sphere
from grid_codegen.collision.geometry import (
    Shape,
    read_shapes,
    read_spherized,
    resolve_mesh,
    to_link_frame,
)
from grid_codegen.collision.primitives import segment_point, segment_segment
from grid_codegen.model import JointType, RobotModel

DEFAULT_RES = 0.05
NATIVE_MODES = {"capsules": ("capsule",), "capsules+cylinders": ("capsule", "cylinder")}
"""collision_native modes -> the URDF shapes kept as capsule primitives (module doc)."""


@dataclass(frozen=True)
class CollisionSphere:
    link: str
    body: int  # -1: welded to the world
    center: tuple[float, float, float]  # in the link frame
    radius: float
    body_center: tuple[float, float, float]  # in the body frame (what kernels use)
    capsule: int = -1  # the capsule this sphere ends (-1: a sphere of its own)


@dataclass(frozen=True)
class CollisionCapsule:
    """A capsule primitive: the points within `radius` of the segment `[a, b]`."""

    link: str
    body: int  # -1: welded to the world
    a: tuple[float, float, float]  # segment ends in the link frame
    b: tuple[float, float, float]
    radius: float
    ends: tuple[int, int]  # its end spheres (indices into SphereModel.spheres)


def _floats(v) -> tuple[float, ...]:
    return tuple(float(x) for x in v)


@dataclass(frozen=True)
class SphereModel:
    spheres: tuple[CollisionSphere, ...]
    pairs: tuple[tuple[str, str], ...]
    capsules: tuple[CollisionCapsule, ...] = ()

    @property
    def links(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.link for s in self.spheres))

    def of_link(self, link: str) -> list[int]:
        """Every sphere of `link` (end spheres of its capsules included)."""
        return [k for k, s in enumerate(self.spheres) if s.link == link]

    def plain_of_link(self, link: str) -> list[int]:
        """The spheres of `link` that are primitives of their own (not capsule ends)."""
        return [k for k, s in enumerate(self.spheres) if s.link == link and s.capsule < 0]

    def capsules_of_link(self, link: str) -> list[int]:
        return [k for k, c in enumerate(self.capsules) if c.link == link]

    def sphere_pair_count(self) -> int:
        """Primitive pairs the checked link pairs hold (what the kernels evaluate)."""
        return sum((len(self.plain_of_link(a)) + len(self.capsules_of_link(a)))
                   * (len(self.plain_of_link(b)) + len(self.capsules_of_link(b)))
                   for a, b in self.pairs)

    def to_dict(self) -> dict:
        def sphere(s: CollisionSphere) -> dict:
            out = {"link": s.link, "body": s.body, "center": list(s.center),
                   "radius": s.radius, "body_center": list(s.body_center)}
            if s.capsule >= 0:
                out["capsule"] = s.capsule
            return out

        out = {"spheres": [sphere(s) for s in self.spheres],
               "pairs": [list(p) for p in self.pairs]}
        if self.capsules:
            out["capsules"] = [{"link": c.link, "body": c.body, "a": list(c.a),
                                "b": list(c.b), "radius": c.radius, "ends": list(c.ends)}
                               for c in self.capsules]
        return out

    @staticmethod
    def from_dict(d: Mapping) -> SphereModel:
        return SphereModel(
            tuple(CollisionSphere(str(s["link"]), int(s["body"]), _floats(s["center"]),
                                  float(s["radius"]), _floats(s["body_center"]),
                                  int(s.get("capsule", -1)))
                  for s in d["spheres"]),
            tuple((str(a), str(b)) for a, b in d["pairs"]),
            tuple(CollisionCapsule(str(c["link"]), int(c["body"]), _floats(c["a"]),
                                   _floats(c["b"]), float(c["radius"]),
                                   (int(c["ends"][0]), int(c["ends"][1])))
                  for c in d.get("capsules", ())))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class CollisionRequest:
    """What `register_robot(collision=True, ...)` asks for (module doc)."""

    res: float | tuple[tuple[str, float], ...] = DEFAULT_RES
    spherized: bytes | None = None
    allowed: tuple[tuple[str, str], ...] = ()
    roots: tuple[Path, ...] = field(default=(), compare=False)
    native: str = ""  # "" or a key of NATIVE_MODES

    @staticmethod
    def make(res: object = None, spherized: bytes | None = None,
             allowed: Sequence | None = None, roots: Sequence = (),
             native: object = False) -> CollisionRequest:
        """native: False, True ("capsules") or a NATIVE_MODES key."""
        if native is True:
            native = "capsules"
        elif native is False or native is None:
            native = ""
        elif native not in NATIVE_MODES:
            raise ValueError(f"collision_native must be True, False or one of "
                             f"{', '.join(map(repr, NATIVE_MODES))}; got {native!r}")
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
                                tuple(Path(r) for r in roots), str(native))

    def res_of(self, link: str) -> float:
        if isinstance(self.res, tuple):
            return dict(self.res).get(link, DEFAULT_RES)
        return float(self.res)

    def key(self, urdf_bytes: bytes, source: str) -> dict:
        """The store-key part of this request (module doc)."""
        out: dict = {"version": 1, "allowed": [list(p) for p in self.allowed]}
        if self.native:  # keyed only when set: other keys unchanged
            out["native"] = self.native
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


def _capsule_ends(shape: Shape) -> tuple[tuple, tuple, float]:
    """The segment ends (link frame) and radius of a capsule or cylinder shape, rounded
    as the fitted spheres are (the radius grown by the ends' rounding)."""
    radius, length = shape.params
    ends = to_link_frame(shape, np.array([[0.0, 0.0, -length / 2], [0.0, 0.0, length / 2]]))
    (a, ra), (b, rb) = round_sphere(ends[0], radius), round_sphere(ends[1], radius)
    return a, b, max(ra, rb)


def _raw_primitives(model: RobotModel, request: CollisionRequest, urdf_bytes: bytes,
                    source: str) -> tuple[list[tuple[str, tuple, float]], list[tuple]]:
    """`(spheres, capsules)` in link order: `(link, centre, radius)` and `(link, a, b,
    radius)`, link frame."""
    links = _link_frames(model)
    capsules = []
    if request.spherized is not None:
        found = read_spherized(request.spherized, "spherized_urdf")
    else:
        if isinstance(request.res, tuple):
            unknown = sorted(k for k, _ in request.res if k not in links)
            if unknown:
                raise ValueError(f"collision_res names unknown links {unknown}; links are "
                                 f"{', '.join(links)}")
        exact = NATIVE_MODES.get(request.native, ())
        found = []
        for shape in read_shapes(urdf_bytes, source):
            if shape.kind in exact:
                capsules.append((shape.link, *_capsule_ends(shape)))
                continue
            found += [(shape.link, c, r) for c, r in
                      fit_shape(shape, request.res_of(shape.link), request.roots)]
    unknown = sorted({item[0] for item in found + capsules if item[0] not in links})
    if unknown:
        raise ValueError(f"spherized_urdf names links the robot does not have: {unknown}")
    order = {name: k for k, name in enumerate(links)}
    # stable sorts: fit order within a link
    return (sorted(found, key=lambda s: order[s[0]]),
            sorted(capsules, key=lambda c: order[c[0]]))


def build_sphere_model(model: RobotModel, request: CollisionRequest, urdf_bytes: bytes,
                       source: str) -> SphereModel:
    """The spheres, capsules and checked pairs of `model` (module doc)."""
    links = _link_frames(model)

    def in_body(link: str, c) -> tuple[float, float, float]:
        frame = links[link]
        x = np.asarray(frame.placement.R, dtype=np.float64) @ np.asarray(c) \
            + np.asarray(frame.placement.p)
        return tuple(float(v) for v in x)

    raw_spheres, raw_capsules = _raw_primitives(model, request, urdf_bytes, source)
    spheres: list[CollisionSphere] = []
    capsules: list[CollisionCapsule] = []
    holding = {item[0] for item in raw_spheres + raw_capsules}
    for link in (name for name in links if name in holding):  # the URDF's link order
        body = int(links[link].body)
        for _, c, r in (s for s in raw_spheres if s[0] == link):
            spheres.append(CollisionSphere(link, body, tuple(float(x) for x in c), float(r),
                                           in_body(link, c)))
        for _, a, b, r in (c for c in raw_capsules if c[0] == link):
            k = len(capsules)
            ends = (len(spheres), len(spheres) + 1)
            for end in (a, b):
                spheres.append(CollisionSphere(link, body, tuple(end), float(r),
                                               in_body(link, end), k))
            capsules.append(CollisionCapsule(link, body, tuple(a), tuple(b), float(r), ends))
    if not spheres:
        raise ValueError(f"{model.name} has no collision geometry (no <collision> "
                         "elements); give spherized_urdf= with spheres per link")
    for a, b in request.allowed:
        for link in (a, b):
            if link not in links:
                raise ValueError(f"allowed_collision_pairs names unknown link {link!r}; "
                                 f"links are {', '.join(links)}")
    partial = SphereModel(tuple(spheres), (), tuple(capsules))
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
    return SphereModel(tuple(spheres), tuple(pairs), tuple(capsules))


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
    """The signed distance of links `a` and `b` at the body `poses`: the smallest over
    their primitives (spheres of their own and capsules)."""
    c = world_centers(model, poses)

    def primitives(link: str) -> list[tuple[np.ndarray, np.ndarray | None, float]]:
        out = [(c[k], None, model.spheres[k].radius) for k in model.plain_of_link(link)]
        for k in model.capsules_of_link(link):
            cap = model.capsules[k]
            out.append((c[cap.ends[0]], c[cap.ends[1]], cap.radius))
        return out

    best = np.inf
    for a0, a1, ra in primitives(a):
        for b0, b1, rb in primitives(b):
            if a1 is None and b1 is None:
                x, y = a0, b0
            elif b1 is None:
                x, y = segment_point(a0, a1, b0)[0], b0
            elif a1 is None:
                x, y = a0, segment_point(b0, b1, a0)[0]
            else:
                x, y = segment_segment(a0, a1, b0, b1)
            best = min(best, float(np.linalg.norm(x - y)) - ra - rb)
    return best
