"""Sphere coverings of collision shapes: deterministic, covering by construction.

`collision_res` (metres) sets the tightness; coverage never depends on it. Per shape,
in its link frame:

* sphere: itself (exact);
* capsule (radius r, length L): equal spheres on the axis, ends included, spacing s with
  radius `R = sqrt(r^2 + (s/2)^2)`, `R - r <= res` (covers the solid capsule; overshoot
  at most res radially and at the ends);
* cylinder: the same chain with the end spheres half a step inside the caps, when its
  overshoot beyond the caps (`R - s/2`) is at most `2 res`; a flat cylinder (a disc)
  falls back to surface clustering;
* box: a grid of cells of edge at most `2 res` per axis, the circumscribed sphere of
  every cell on the box's surface (overshoot at most the half diagonal, `sqrt(3) res`);
* mesh (and the disc fallback): surface samples (`geometry.surface_points`, spacing
  `h = res / 4`), clustered on a voxel grid of edge `2 res` anchored at the link
  origin; one sphere per occupied voxel at the mean of its samples with the radius of
  its farthest sample plus `h` (so every surface point, not only the samples, is
  inside): radius at most `sqrt(3) res + h`.

Spheres cover surfaces (and for capsules, cylinders and box cells, volumes): a geometry
entirely inside another one without touching its surface is not seen (see
docs/collision.md). Centres are rounded to 1e-7 m and radii rounded up (the rounding of
the centre added), so the result is the same bytes on every machine that computes the
same float64 samples.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from grid_codegen.collision.geometry import Shape, surface_points, to_link_frame

QUANTUM = 1e-7


def round_sphere(center: np.ndarray, radius: float) -> tuple[tuple[float, float, float], float]:
    """The centre rounded to QUANTUM and the radius grown by that shift, rounded up: the
    rounded sphere holds the original (module doc)."""
    center = np.asarray(center, dtype=np.float64)
    c = np.array([round(float(x), 7) for x in center])
    r = radius + float(np.linalg.norm(c - center))
    r = round(math.ceil(r / QUANTUM - 1e-6) * QUANTUM, 7)
    return (float(c[0]), float(c[1]), float(c[2])), float(r)


def cluster(points: np.ndarray, res: float, margin: float) -> list[tuple[np.ndarray, float]]:
    """Voxel clustering (module doc): `(centre, radius)` per occupied voxel, sorted by
    voxel index."""
    cells = np.floor(points / (2 * res)).astype(np.int64)
    order = np.lexsort((cells[:, 2], cells[:, 1], cells[:, 0]))
    cells, points = cells[order], points[order]
    starts = np.flatnonzero(np.r_[True, np.any(np.diff(cells, axis=0) != 0, axis=1)])
    out = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(points)
        group = points[start:end]
        centre = group.mean(axis=0)
        radius = float(np.sqrt(((group - centre) ** 2).sum(axis=1).max())) + margin
        out.append((centre, radius))
    return out


def _chain(shape: Shape, res: float) -> list[tuple[np.ndarray, float]] | None:
    r, L = shape.params
    s_max = 2 * math.sqrt((r + res) ** 2 - r * r)
    if shape.kind == "capsule":
        n = max(1, math.ceil(L / s_max))
        s = L / n
        zs = [-L / 2 + k * s for k in range(n + 1)]
    else:
        n = max(1, math.ceil(L / s_max))
        s = L / n
        if math.sqrt(r * r + s * s / 4) - s / 2 > 2 * res:
            return None  # a disc: the chain would bulge past the caps
        zs = [-L / 2 + s / 2 + k * s for k in range(n)]
    R = math.sqrt(r * r + s * s / 4)
    centres = to_link_frame(shape, np.array([[0.0, 0.0, z] for z in zs]))
    return [(c, R) for c in centres]


def _box(shape: Shape, res: float) -> list[tuple[np.ndarray, float]]:
    size = np.asarray(shape.params, dtype=np.float64)
    n = [max(1, math.ceil(x / (2 * res))) for x in size]
    edge = size / np.asarray(n)
    radius = float(np.linalg.norm(edge)) / 2
    local = []
    for i in range(n[0]):
        for j in range(n[1]):
            for k in range(n[2]):
                if 0 < i < n[0] - 1 and 0 < j < n[1] - 1 and 0 < k < n[2] - 1:
                    continue  # interior cell: the surface cells cover the surface
                local.append(-size / 2 + edge * (np.array([i, j, k]) + 0.5))
    return [(c, radius) for c in to_link_frame(shape, np.array(local))]


def fit_shape(shape: Shape, res: float, roots: tuple[Path, ...]
              ) -> list[tuple[tuple[float, float, float], float]]:
    """The covering spheres of one shape, `(centre in the link frame, radius)`."""
    if not (isinstance(res, (int, float)) and math.isfinite(res) and res > 0):
        raise ValueError(f"collision_res must be a positive length in metres, got {res!r}")
    if shape.kind == "sphere":
        raw = [(np.asarray(shape.p), float(shape.params[0]))]
    elif shape.kind == "box":
        raw = _box(shape, res)
    else:
        raw = _chain(shape, res) if shape.kind in ("capsule", "cylinder") else None
        if raw is None:
            h = res / 4
            raw = cluster(surface_points(shape, h, roots), res, h)
    return [round_sphere(c, r) for c, r in raw]
