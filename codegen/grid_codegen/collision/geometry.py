"""A URDF's collision geometry: `<collision>` elements, mesh files and surface samples.

Mesh paths are untrusted input. `resolve_mesh` finds a `package://`, `file://` or
relative filename only inside the allowed roots (`mesh_roots`): every candidate path is
resolved (symbolic links followed) and refused unless it lies inside a root, so no
filename (`../../etc/passwd`, an absolute path, a link pointing out) reaches a file
outside them. A mesh that cannot be found is an error naming the link, the filename and
the roots searched. Meshes are read with trimesh (STL, OBJ, PLY and OFF need nothing
else).

Surface samples are deterministic (no random numbers): triangles are subdivided on a
barycentric grid, primitives sampled on regular grids, each with a spacing `h` such that
every point of the surface lies within `h` of a sample.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grid_codegen.urdf import rpy_to_matrix
from grid_codegen.urdf_xml import URDFError, parse_xml, quoted

KINDS = ("box", "cylinder", "sphere", "capsule", "mesh")
MAX_MESH_BYTES = 256 * 2**20
"""Mesh files larger than this are refused (a URDF may name any file)."""


@dataclass(frozen=True)
class Shape:
    """One `<collision>` element: its link, kind, size and origin in the link frame.

    params: box (sx, sy, sz); cylinder and capsule (radius, length); sphere (radius,);
    mesh (scale x, y, z). filename: the mesh filename as the URDF writes it."""

    link: str
    kind: str
    params: tuple[float, ...]
    R: tuple[float, ...]  # row-major 3x3, link frame <- geometry frame
    p: tuple[float, float, float]
    filename: str = ""


def _origin(doc, element, what: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    origin = element.find("origin")
    if origin is None:
        return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0)
    xyz = doc.floats(origin, "xyz", what, 3, (0.0, 0.0, 0.0))
    rpy = doc.floats(origin, "rpy", what, 3, (0.0, 0.0, 0.0))
    R = rpy_to_matrix(*rpy)
    return tuple(float(x) for x in R.reshape(9)), tuple(float(x) for x in xyz)


def _positive(doc, element, attr: str, what: str) -> float:
    value = doc.number(element, attr, what)
    if not value > 0:
        raise doc.error(element, what, f"{attr}={value:g} must be positive")
    return value


def read_shapes(urdf_bytes: bytes, source: str) -> list[Shape]:
    """Every `<collision>` element of every link, in document order."""
    doc = parse_xml(urdf_bytes, source)
    shapes: list[Shape] = []
    for link in doc.root.findall("link"):
        name = doc.name(link, "name", "<link> name")
        for collision in link.findall("collision"):
            what = f"link {quoted(name)} <collision>"
            geometry = collision.find("geometry")
            if geometry is None or len(geometry) != 1:
                raise doc.error(collision, what, "needs one <geometry> with one shape")
            g = geometry[0]
            R, p = _origin(doc, collision, what)
            if g.tag == "box":
                size = doc.floats(g, "size", what, 3)
                if not min(size) > 0:
                    raise doc.error(g, what, f"box size {size} must be positive")
                shapes.append(Shape(name, "box", size, R, p))
            elif g.tag in ("cylinder", "capsule"):
                shapes.append(Shape(name, g.tag, (_positive(doc, g, "radius", what),
                                                  _positive(doc, g, "length", what)), R, p))
            elif g.tag == "sphere":
                shapes.append(Shape(name, "sphere", (_positive(doc, g, "radius", what),),
                                    R, p))
            elif g.tag == "mesh":
                filename = g.get("filename")
                if not filename:
                    raise doc.error(g, what, "<mesh> has no filename")
                scale = doc.floats(g, "scale", what, 3, (1.0, 1.0, 1.0))
                if not min(abs(s) for s in scale) > 0:
                    raise doc.error(g, what, f"mesh scale {scale} must be non-zero")
                shapes.append(Shape(name, "mesh", scale, R, p, filename))
            else:
                raise doc.error(g, what, f"unknown geometry <{g.tag}>; expected one of "
                                f"{', '.join(KINDS)}")
    return shapes


def read_spherized(urdf_bytes: bytes, source: str) -> list[tuple[str, tuple, float]]:
    """The spheres of a spherized URDF: `(link, centre in the link frame, radius)` per
    `<collision>` element, each of which must be a `<sphere>`."""
    out = []
    for shape in read_shapes(urdf_bytes, source):
        if shape.kind != "sphere":
            raise URDFError(source, f"link {quoted(shape.link)} <collision>",
                            f"a spherized URDF holds spheres only; found a {shape.kind}")
        out.append((shape.link, shape.p, shape.params[0]))
    if not out:
        raise URDFError(source, "spherized URDF", "holds no <collision> spheres")
    return out


# -- mesh files -------------------------------------------------------------------------
def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def resolve_mesh(filename: str, roots: tuple[Path, ...], link: str = "") -> Path:
    """The file `filename` names, found inside one of `roots` (module doc)."""
    where = f"link {quoted(link)}: mesh {quoted(filename)}"
    if "\0" in filename:
        raise ValueError(f"{where} holds a NUL character")
    if not roots:
        raise FileNotFoundError(f"{where}: no mesh roots to search (register with "
                                "urdf_path=, or pass mesh_roots=)")
    resolved_roots = [Path(os.path.realpath(r)) for r in roots]
    if filename.startswith("package://"):
        parts = [p for p in filename[len("package://"):].split("/") if p]
        # package://pkg/a/b: root/pkg/a/b, root/a/b, ... down to root/b (a robot's
        # folder is usually a root, and its package name one of the path's heads).
        tails = [parts[k:] for k in range(len(parts))]
        relative = True
    elif filename.startswith("file://"):
        tails, relative = [[filename[len("file://"):]]], False
    else:
        tails, relative = [[filename]], not os.path.isabs(filename)
    searched = ", ".join(str(r) for r in resolved_roots)
    found = None
    if not relative:  # an absolute path: inside one of the roots, or refused
        real = Path(os.path.realpath(tails[0][0]))
        if not any(_inside(real, root) for root in resolved_roots):
            raise ValueError(f"{where} resolves outside the allowed mesh roots ({searched}); "
                             "mesh paths must stay inside them (add a root with mesh_roots=)")
        resolved_roots = [r for r in resolved_roots if _inside(real, r)]
    for root in resolved_roots:
        for tail in tails:
            candidate = root.joinpath(*tail) if relative else Path(tail[0])
            real = Path(os.path.realpath(candidate))
            if not _inside(real, root):  # "..", an absolute path or a link out: refused
                raise ValueError(f"{where} resolves outside the allowed mesh roots "
                                 f"({searched}); mesh paths must stay inside them (add a "
                                 "root with mesh_roots=)")
            if found is None and real.is_file():
                found = real
    if found is not None:
        return found
    raise FileNotFoundError(f"{where} is not a file inside the mesh roots ({searched}); "
                            "pass mesh_roots= naming the folder that holds it")


def load_mesh(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """`(vertices (n, 3), faces (m, 3))` of the mesh file at `path` (trimesh)."""
    if path.stat().st_size > MAX_MESH_BYTES:
        raise ValueError(f"mesh {path} is larger than {MAX_MESH_BYTES >> 20} MiB")
    try:
        import trimesh
    except ModuleNotFoundError as exc:  # pragma: no cover - trimesh is a core dependency
        raise ImportError("collision geometry from meshes needs trimesh "
                          "(pip install trimesh)") from exc
    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as exc:  # trimesh raises many kinds for a bad file
        raise ValueError(f"mesh {path} could not be read: {exc}") from None
    vertices = np.asarray(getattr(mesh, "vertices", ()), dtype=np.float64).reshape(-1, 3)
    faces = np.asarray(getattr(mesh, "faces", ()), dtype=np.int64).reshape(-1, 3)
    if not len(vertices) or not np.isfinite(vertices).all():
        raise ValueError(f"mesh {path} has no (finite) vertices")
    return vertices, faces


# -- surface samples --------------------------------------------------------------------
def sample_triangles(V: np.ndarray, F: np.ndarray, h: float) -> np.ndarray:
    """Points on the triangles `F` of `V`: each triangle on a barycentric grid of `n`
    steps per edge, `n = ceil(longest edge / h)`, so every point of a triangle lies
    within `h` of a sample; the vertices always."""
    out = [V]
    if len(F):
        a, b, c = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
        longest = np.maximum.reduce([np.linalg.norm(b - a, axis=1),
                                     np.linalg.norm(c - b, axis=1),
                                     np.linalg.norm(a - c, axis=1)])
        steps = np.maximum(1, np.ceil(longest / h)).astype(np.int64)
        for n in np.unique(steps[steps > 1]):
            pick = steps == n
            i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
            keep = (i + j) <= n
            u, v = (i[keep] / n)[:, None], (j[keep] / n)[:, None]
            pa, pb, pc = a[pick][:, None], b[pick][:, None], c[pick][:, None]
            out.append((pa + u.T[..., None] * (pb - pa) + v.T[..., None] * (pc - pa))
                       .reshape(-1, 3))
    return np.concatenate(out)


def _circle(radius: float, h: float) -> np.ndarray:
    n = max(8, math.ceil(2 * math.pi * radius / h))
    t = 2 * math.pi * np.arange(n) / n
    return np.stack([radius * np.cos(t), radius * np.sin(t)], 1)


def sample_primitive(shape: Shape, h: float) -> np.ndarray:
    """Surface points of a box, cylinder or capsule in its own frame (spacing `h`)."""
    if shape.kind == "box":
        half = np.asarray(shape.params) / 2
        grids = [np.linspace(-x, x, max(2, math.ceil(2 * x / h) + 1)) for x in half]
        faces = []
        for axis in range(3):
            u, v = [grids[k] for k in range(3) if k != axis]
            U, W = np.meshgrid(u, v, indexing="ij")
            for sign in (-1.0, 1.0):
                P = np.zeros((U.size, 3))
                others = [k for k in range(3) if k != axis]
                P[:, others[0]], P[:, others[1]] = U.ravel(), W.ravel()
                P[:, axis] = sign * half[axis]
                faces.append(P)
        return np.concatenate(faces)
    radius, length = shape.params
    zs = np.linspace(-length / 2, length / 2, max(2, math.ceil(length / h) + 1))
    ring = _circle(radius, h)
    side = np.concatenate([np.column_stack([ring, np.full(len(ring), z)]) for z in zs])
    ends = []
    if shape.kind == "cylinder":
        for rho in np.linspace(0, radius, max(2, math.ceil(radius / h) + 1)):
            disc = _circle(rho, h) if rho > 0 else np.zeros((1, 2))
            for z in (-length / 2, length / 2):
                ends.append(np.column_stack([disc, np.full(len(disc), z)]))
    else:  # capsule: hemispheres by latitude rings
        for phi in np.linspace(0, math.pi / 2, max(2, math.ceil(radius * math.pi / 2 / h) + 1)):
            rho, dz = radius * math.cos(phi), radius * math.sin(phi)
            disc = _circle(rho, h) if rho > 1e-12 else np.zeros((1, 2))
            for sign in (-1.0, 1.0):
                ends.append(np.column_stack([disc, np.full(len(disc), sign * (length / 2 + dz))]))
    return np.concatenate([side, *ends])


def to_link_frame(shape: Shape, points: np.ndarray) -> np.ndarray:
    """Points of the geometry frame in the link frame."""
    R = np.asarray(shape.R).reshape(3, 3)
    return points @ R.T + np.asarray(shape.p)


def surface_points(shape: Shape, h: float, roots: tuple[Path, ...]) -> np.ndarray:
    """The surface samples of `shape` in its link frame (spacing `h`)."""
    if shape.kind == "mesh":
        V, F = load_mesh(resolve_mesh(shape.filename, roots, shape.link))
        V = V * np.asarray(shape.params)
        return to_link_frame(shape, sample_triangles(V, F, h))
    if shape.kind == "sphere":  # pragma: no cover - spheres are fitted exactly
        raise ValueError("spheres need no samples")
    return to_link_frame(shape, sample_primitive(shape, h))
