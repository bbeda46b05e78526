"""Mimic coupling: the reduced coordinates of a robot whose `<mimic>` joints follow their
leaders (`parse_urdf(..., mimic=True)`, Pinocchio's `buildModelFromUrdf(..., mimic=True)`).

The joints of the model stay those of the independent reading (`Joint.idx_q`, `idx_v`,
`RobotModel.nq`, `nv`: the "full" coordinates); the coupling maps the reduced
coordinates the kernels and handles take onto them, affinely:

    q_full = G q + b,   qd_full = G qd,   qdd_full = G qdd,

`G` (full x reduced) holding a 1 per independent coordinate and the multiplier of each
mimic joint in its leader's column, `b` the mimic offsets. Mimic joints and leaders are
revolute or prismatic (one coordinate that adds along the tangent), so the same `G` maps
configuration and tangent coordinates and every derivative in reduced coordinates is
the full one composed with `G`, exactly. What each algorithm becomes (the principle of
virtual work, `tau_red = G^T tau_full`):

    inverse dynamics   G^T ID(q_full, G qd, G qdd)
    mass matrix        G^T M G               (the coupling is holonomic: no dG/dt term)
    forward dynamics   (G^T M G)^-1 (u - G^T c(q_full, G qd))
    gradients          G^T [dtau/dq G | dtau/dqd G],  FD: -(G^T M G)^-1 of that
    kinematics         Jacobians J G, Hessians G^T H G (the map is affine).

The tree recursions (ABA, the direct M^-1) do not hold for the reduced system, whose
mass matrix is not the tree's; forward dynamics and M^-1 go through the Cholesky
factorisation of `G^T M G` instead (exact, like any direct solve).

The functions here are written over any scalar (floats, the symbolic `Sym`, `Dual`) on
plain lists, with the exact ones and zeros of `G` folded (an independent coordinate is
passed through untouched), plus numpy forms for the reference oracle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MimicCoupling:
    """`q_full = G q + b` for the model's full coordinates (see the module doc).

    nq, nv: the reduced widths. source: per full coordinate (joint order; the coupled
    joints all have nq = nv = 1, so the configuration and tangent maps share it) its
    reduced coordinate, multiplier and offset: independent ones `(k, 1.0, 0.0)`.
    mimics: `(joint, leader, multiplier, offset)` of every coupled joint, for messages
    and metadata. q_source, v_source: per full coordinate of q and of the tangent, the
    index into `source` (configuration and tangent indices differ on a free flyer)."""

    nq: int
    nv: int
    q_source: tuple[tuple[int, float, float], ...]
    v_source: tuple[tuple[int, float], ...]
    mimics: tuple[tuple[str, str, float, float], ...]

    @property
    def nq_full(self) -> int:
        return len(self.q_source)

    @property
    def nv_full(self) -> int:
        return len(self.v_source)

    # -- on lists (any scalar) -----------------------------------------------------------
    def expand_q(self, q: Sequence) -> list:
        """`G q + b` (full nq)."""
        out = []
        for k, m, b in self.q_source:
            out.append(q[k] if (m == 1.0 and b == 0.0) else m * q[k] + b)
        return out

    def expand_v(self, v: Sequence | None) -> list | None:
        """`G v` (full nv); None stays None (an absent optional input)."""
        if v is None:
            return None
        return [v[k] if m == 1.0 else m * v[k] for k, m in self.v_source]

    def project(self, f: Sequence) -> list:
        """`G^T f` (reduced nv) for a full-width generalized force `f`."""
        out: list = [0.0] * self.nv
        for (k, m), value in zip(self.v_source, f, strict=True):
            if m == 0.0:
                continue
            term = value if m == 1.0 else m * value
            out[k] = term if _is_zero(out[k]) else out[k] + term
        return out

    def project_rows(self, A: Sequence[Sequence]) -> list[list]:
        """`G^T A` for a full-height matrix given as rows."""
        columns = list(zip(*A, strict=True))
        return [list(r) for r in zip(*(self.project(c) for c in columns), strict=True)]

    def project_columns(self, A: Sequence[Sequence]) -> list[list]:
        """`A G` for a matrix given as rows of full width."""
        return [self.project(row) for row in A]

    def full_columns(self, reduced: Sequence[int]) -> list[int]:
        """The full tangent coordinates that move with the reduced ones `reduced`."""
        wanted = set(reduced)
        return [i for i, (k, m) in enumerate(self.v_source) if k in wanted and m != 0.0]

    # -- numpy (the reference) ------------------------------------------------------------
    def matrix(self) -> np.ndarray:
        """`G` (nv_full x nv)."""
        G = np.zeros((self.nv_full, self.nv))
        for i, (k, m) in enumerate(self.v_source):
            G[i, k] = m
        return G

    def expand_q_array(self, q: np.ndarray) -> np.ndarray:
        """`(B, nq_full)` from `(B, nq)`."""
        index = np.array([k for k, _, _ in self.q_source], dtype=np.intp)
        scale = np.array([m for _, m, _ in self.q_source])
        offset = np.array([b for _, _, b in self.q_source])
        return q[:, index] * scale + offset


def _is_zero(x: object) -> bool:
    return isinstance(x, float) and x == 0.0


def build_coupling(joints: Sequence, mimics: dict[int, tuple[int, float, float]]
                   ) -> MimicCoupling:
    """The coupling of `joints` (a model's, full coordinates) where `mimics[i] =
    (leader, multiplier, offset)` for each coupled joint index `i` (checked by the
    caller: scalar joints, leaders independent)."""
    reduced_q: dict[int, int] = {}  # full q index of an independent coordinate -> reduced
    reduced_v: dict[int, int] = {}
    nq = nv = 0
    for i, joint in enumerate(joints):
        if i in mimics:
            continue
        for d in range(joint.nq):
            reduced_q[joint.idx_q + d] = nq + d
        for d in range(joint.nv):
            reduced_v[joint.idx_v + d] = nv + d
        nq += joint.nq
        nv += joint.nv
    q_source: list[tuple[int, float, float]] = []
    v_source: list[tuple[int, float]] = []
    named = []
    for i, joint in enumerate(joints):
        if i in mimics:
            leader, m, b = mimics[i]
            q_source.append((reduced_q[joints[leader].idx_q], float(m), float(b)))
            v_source.append((reduced_v[joints[leader].idx_v], float(m)))
            named.append((joint.name, joints[leader].name, float(m), float(b)))
            continue
        q_source += [(reduced_q[joint.idx_q + d], 1.0, 0.0) for d in range(joint.nq)]
        v_source += [(reduced_v[joint.idx_v + d], 1.0) for d in range(joint.nv)]
    return MimicCoupling(nq, nv, tuple(q_source), tuple(v_source), tuple(named))
