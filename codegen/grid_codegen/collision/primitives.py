"""Closest points of the exact primitives (float64, vectorised over leading axes).

A capsule is the set of points within `r` of its segment `[a, b]`; a sphere is a
capsule of zero length. The signed distance of two such primitives is
`|x_1 - x_2| - r_1 - r_2` with `x_1`, `x_2` the closest points of their segments, and its
gradient is `n . (dx_1 - dx_2)` at those points (`n` the unit vector from `x_2` to `x_1`;
the envelope theorem: the parameters' own motion does not enter at a minimum), so only
the closest points are needed.

Segment to segment is computed as the smallest of five candidate pairs: the interior
stationary point of `|p_1 + s d_1 - p_2 - t d_2|^2` (when the segments are not parallel
and it lies inside `[0, 1]^2`), and each of the four end points against the other
segment. Whenever the interior point is not the minimum, the minimum lies on the
boundary of the square, where one parameter is 0 or 1: one of the four end-point
candidates. So the result is exact for every configuration, parallel and crossing ones
included, and a badly conditioned interior point (nearly parallel segments) can only
lose against an accurate boundary candidate, never report a distance below the true
one. Ties go to the first candidate in that order (interior, then a_1, b_1 against the
second segment, then a_2, b_2 against the first): at exactly parallel, overlapping
segments the distance has a kink and the gradient returned is that candidate's.
The generated kernels (`grid/collision.h`) follow the same candidate order.
"""

from __future__ import annotations

import numpy as np

PARALLEL = 1e-10
"""`a e - b^2 <= PARALLEL a e` (sin^2 of the angle): no interior candidate."""


def _dot(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.einsum("...k,...k->...", x, y)


def segment_point(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(x, t)`: the point `x = a + t (b - a)` of segment `[a, b]` closest to `p`,
    `t` in `[0, 1]` (0 for a degenerate segment)."""
    a, b, p = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, p)))
    d = b - a
    dd = _dot(d, d)
    t = np.clip(_dot(p - a, d) / np.where(dd > 0, dd, 1.0), 0.0, 1.0)
    t = np.where(dd > 0, t, 0.0)
    return a + t[..., None] * d, t


def segment_segment(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """`(x1, x2)`: closest points of segments `[a1, b1]` and `[a2, b2]` (module doc)."""
    a1, b1, a2, b2 = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (a1, b1, a2, b2)))
    d1, d2, r = b1 - a1, b2 - a2, a1 - a2
    a, e, b = _dot(d1, d1), _dot(d2, d2), _dot(d1, d2)
    c, f = _dot(d1, r), _dot(d2, r)
    denom = a * e - b * b
    interior = denom > PARALLEL * a * e
    safe = np.where(interior, denom, 1.0)
    s = (b * f - c * e) / safe
    t = (a * f - b * c) / safe
    interior &= (s >= 0) & (s <= 1) & (t >= 0) & (t <= 1)
    candidates = [(a1 + s[..., None] * d1, a2 + t[..., None] * d2)]
    for end in (a1, b1):
        candidates.append((end, segment_point(a2, b2, end)[0]))
    for end in (a2, b2):
        candidates.append((segment_point(a1, b1, end)[0], end))
    dist = np.stack([np.linalg.norm(x - y, axis=-1) for x, y in candidates])
    dist[0] = np.where(interior, dist[0], np.inf)
    pick = np.argmin(dist, axis=0)  # the first of equal candidates
    x1 = np.choose(pick[..., None], [x for x, _ in candidates])
    x2 = np.choose(pick[..., None], [y for _, y in candidates])
    return x1, x2


__all__ = ["PARALLEL", "segment_point", "segment_segment"]
