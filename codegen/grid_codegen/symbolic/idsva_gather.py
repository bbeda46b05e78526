"""The gather form of the IDSVA sweep: every output entry read off a table.

The sweep of `symbolic.idsva` writes each entry of the four blocks as a dot product (or
the sum of two) of one of a few vectors of a *turn* (a pair of a joint column `ip` and
an ancestor column `jq`) with a motion of a third column `kr`. Once the composites are
known the turns are independent, so a GPU can share an item among many threads in three
steps: the turns' vectors, one turn per thread; then the entries in memory order, one
per thread, each from a per-robot table that names its turn, its column `kr` and its
formula. The stores are then consecutive addresses across a warp (whole sectors, and
the structural zeros written in the same pass) instead of one scattered scalar per
entry, which is what a thread that runs the sweep does.

This module holds the tables: `TURN_VECTORS` (which of the sweep's vectors a turn keeps),
`FORMULAS` (the sixteen ways an entry combines them with a column's motions), `RULES`
(which entries a turn writes for each `kr`, in the sweep's order), and `plan(model)`
(the turns and every entry's descriptor, the last write standing as in the sweep). The
sweep writes some entries from two turns (go2: 360 of 7,720, g1: 870 of 37,128); the two
values agree to round-off (checked in tests/test_symbolic_idsva.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grid_codegen.model import RobotModel
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic import spatial as sp

TURN_VECTORS = ("u9", "u58", "u1", "u2", "u3", "u6", "u7", "u4")
"""The vectors a turn keeps, 6 each, in this order (`u58 = u5 + u8`, which is also the
sweep's `u8 - u12`; `u10 = u2 + u9` and `u11 = u2 - u9` are left to the formulas)."""

MOTIONS = ("S", "psid", "psidd", "psid + phid")
"""A column's motions as the loop form's table K keeps them (`forward_table`)."""

U9, U58, U1, U2, U3, U6, U7, U4 = range(8)
S, PSID, PSIDD, PSPHI = range(4)

FORMULAS: tuple[tuple[tuple[int, int, int], tuple[int, int, int]], ...] = (
    ((1, U9, PSIDD), (1, U58, PSID)),   # 0  p2 = u9.psidd + (u8 - u12).psid
    ((-1, U2, PSID), (1, U9, PSID)),    # 1  -p1 = -u11.psid
    ((1, U1, PSID), (1, U2, PSIDD)),    # 2  u1.psid + u2.psidd
    ((1, U2, PSID), (-1, U9, PSID)),    # 3  p1 = u11.psid
    ((1, U1, S), (1, U2, PSPHI)),       # 4  u1.S + u2.(psid + phid)
    ((1, U2, S), (-1, U9, S)),          # 5  -p3 = u11.S
    ((1, U2, S), (0, 0, 0)),            # 6  p4 = u2.S
    ((1, U3, S), (0, 0, 0)),            # 7  u3.S
    ((-1, U2, S), (1, U9, S)),          # 8  p3 = -u11.S
    ((1, U58, S), (1, U9, PSPHI)),      # 9  (u5 + u8).S + u9.(psid + phid)
    ((1, U6, S), (0, 0, 0)),            # 10 u6.S
    ((1, U9, S), (0, 0, 0)),            # 11 p5 = u9.S
    ((1, U2, S), (1, U9, S)),           # 12 p6 = u10.S
    ((1, U7, S), (0, 0, 0)),            # 13 u7.S
    ((1, U4, S), (0, 0, 0)),            # 14 u4.S
    ((-1, U2, S), (0, 0, 0)),           # 15 -u2.S
)
"""Entry = s_a (U[a] . V[m_a]) + s_b (U[b] . V[m_b]), `((s_a, a, m_a), (s_b, b, m_b))`
with `U` the turn's vectors and `V` the motions of the entry's column `kr`; `s_b = 0`
where one product is enough."""

D2Q, D2V, DQDV, DM = range(4)

# (when, block, index order, formula): the index order permutes (ip, jq, kr) as "ijk";
# when: "" always, "ij" if ip and jq are on different bodies, "jk" likewise for jq, kr,
# "ij+jk" both, "ij=jk" (jq, kr apart, ip and jq on one body), "=jk" (jq, kr on one body).
RULES: tuple[tuple[str, int, str, int], ...] = (
    ("", D2Q, "ijk", 0), ("", DQDV, "ikj", 1),
    ("ij", D2Q, "jki", 2), ("ij", D2Q, "jik", 2), ("ij", DQDV, "jki", 3),
    ("ij", DQDV, "jik", 4), ("ij", D2V, "jki", 5), ("ij", D2V, "jik", 5),
    ("ij", DM, "kji", 6), ("ij", DM, "jki", 6),
    ("jk", D2Q, "ikj", 0), ("jk", D2Q, "kij", 7), ("jk", D2V, "ijk", 8),
    ("jk", D2V, "ikj", 8), ("jk", DQDV, "ijk", 9), ("jk", DQDV, "kji", 10),
    ("jk", DM, "kij", 11), ("jk", DM, "ikj", 11),
    ("ij+jk", D2Q, "kji", 7), ("ij+jk", D2V, "kij", 12), ("ij+jk", D2V, "kji", 12),
    ("ij+jk", DQDV, "kij", 13),
    ("ij=jk", D2V, "kji", 14),
    ("=jk", D2V, "ijk", 15),
)
"""What a turn writes for each column `kr` of `jq`'s body and its ancestors, in the
order `idsva.idsva_blocks` writes it (a later write of an entry stands)."""

KR_BITS = 8
FORMULA_BITS = 4
MAX_DOFS = (1 << KR_BITS) - 1


def _applies(when: str, same_ij: bool, same_jk: bool) -> bool:
    return {"": True, "ij": not same_ij, "jk": not same_jk,
            "ij+jk": not same_ij and not same_jk, "ij=jk": same_ij and not same_jk,
            "=jk": same_jk}[when]


@dataclass(frozen=True)
class Plan:
    """The gather form's tables of one robot.

    turns: `(ip, jq)` per turn, in the sweep's order.
    entries: per output index of the four blocks (`4 nv^3`), 0 for a structural zero,
    else `1 + (turn << 12 | kr << 4 | formula)`.
    """

    turns: tuple[tuple[int, int], ...]
    entries: tuple[int, ...]


def decode(descriptor: int) -> tuple[int, int, int]:
    """`(turn, kr, formula)` of a nonzero entry descriptor."""
    e = descriptor - 1
    return (e >> (KR_BITS + FORMULA_BITS), (e >> FORMULA_BITS) & MAX_DOFS,
            e & ((1 << FORMULA_BITS) - 1))


def body_of(model: RobotModel) -> list[int]:
    out = [0] * model.nv
    for b, joint in enumerate(model.joints):
        out[joint.idx_v:joint.idx_v + joint.nv] = [b] * joint.nv
    return out


def writes(model: RobotModel):
    """The sweep's writes in its order: `(turn, (ip, jq), kr, rule, entry)` per rule of
    `RULES` that applies, `entry` the index in the four blocks (`4 nv^3`)."""
    nv = model.nv
    if nv > MAX_DOFS:
        raise ValueError(f"the gather form encodes a column in {KR_BITS} bits "
                         f"({nv} dofs > {MAX_DOFS})")
    n3 = nv ** 3
    owner = body_of(model)
    t = 0
    for b in reversed(range(model.nb)):
        joint = model.joints[b]
        for ip in range(joint.idx_v, joint.idx_v + joint.nv):
            for jq in idsva._ancestor_dofs(model, b):
                same_ij = owner[jq] == b
                for kr in idsva._ancestor_dofs(model, owner[jq]):
                    same_jk = owner[kr] == owner[jq]
                    index = {"i": ip, "j": jq, "k": kr}
                    for r, (when, block, order, _) in enumerate(RULES):
                        if _applies(when, same_ij, same_jk):
                            a, c, d = (index[x] for x in order)
                            yield t, (ip, jq), kr, r, block * n3 + (a * nv + c) * nv + d
                t += 1


def descriptor(turn: int, kr: int, formula: int) -> int:
    return 1 + ((turn << (KR_BITS + FORMULA_BITS)) | (kr << FORMULA_BITS) | formula)


def plan(model: RobotModel) -> Plan:
    """Every turn of the sweep and every entry's descriptor (the structure alone)."""
    entries = [0] * (4 * model.nv ** 3)
    turns: list[tuple[int, int]] = []
    for t, pair, kr, r, entry in writes(model):
        if t == len(turns):
            turns.append(pair)
        entries[entry] = descriptor(t, kr, RULES[r][3])
    return Plan(tuple(turns), tuple(entries))


def pair_masks(model: RobotModel, the_plan: Plan) -> list[tuple[int, int, int]]:
    """`(turn, kr, mask)` for every (turn, column) whose writes stand in `the_plan`: bit r
    of `mask` when its write by rule r of `RULES` is the entry's last (the tile form of
    the entry step, `emit.idsva_gather`, writes exactly these)."""
    masks: dict[tuple[int, int], int] = {}
    for t, _, kr, r, entry in writes(model):
        if the_plan.entries[entry] == descriptor(t, kr, RULES[r][3]):
            masks[(t, kr)] = masks.get((t, kr), 0) | 1 << r
    return [(t, kr, m) for (t, kr), m in masks.items()]


def turn_vectors(model: RobotModel, K: Sequence, ip: int, jq: int) -> list:
    """The `TURN_VECTORS` of turn `(ip, jq)` (48 values) from `K` (`forward_table`'s
    layout) with the composites in its body entries (`composites`)."""
    owner = body_of(model)
    base = 24 * model.nv + 52 * owner[ip]
    Y = list(K[base:base + 10])
    B = [list(K[base + 10 + 6 * r:base + 16 + 6 * r]) for r in range(6)]
    F = list(K[base + 46:base + 52])
    ci, cj = _column(K, ip), _column(K, jq)
    u1, u2, u3, u4, u5, u6, u7, u8, u9, *_ = idsva._pair_vectors(
        Y, B, ci, idsva._column_terms(Y, B, F, ci), cj)
    out: list = []
    for u in (u9, sp.add(u5, u8), u1, u2, u3, u6, u7, u4):
        out += u
    return out


def _column(K: Sequence, d: int) -> idsva._Column:
    """Column `d` of `K` (whose fourth motion is psid + phid) as `idsva._Column`."""
    S, psid, psidd, psphi = (list(K[24 * d + 6 * m:24 * d + 6 * m + 6]) for m in range(4))
    return idsva._Column(S, psid, psidd, sp.sub(psphi, psid))


def composites(model: RobotModel, K: Sequence) -> list:
    """`K` with every body's entries (rigid inertia, BC, net force) replaced by its
    subtree's sums (bodies are numbered parents first)."""
    out = list(K)
    base = 24 * model.nv
    for b in reversed(range(model.nb)):
        p = model.joints[b].parent
        if p >= 0:
            for k in range(52):
                out[base + 52 * p + k] = out[base + 52 * p + k] + out[base + 52 * b + k]
    return out


def gather_values(model: RobotModel, K: Sequence, the_plan: Plan) -> list:
    """The four blocks from `K` by the gather form, as the kernels compute them (a
    check of the tables against `idsva.idsva_blocks`)."""
    K = composites(model, K)
    U = [turn_vectors(model, K, ip, jq) for ip, jq in the_plan.turns]
    out: list = []
    for e in the_plan.entries:
        if e == 0:
            out.append(0.0)
            continue
        t, kr, formula = decode(e)
        value = 0.0
        for sign, u, m in FORMULAS[formula]:
            if sign:
                V = K[24 * kr + 6 * m:24 * kr + 6 * m + 6]
                value = value + sign * sp.dot(U[t][6 * u:6 * u + 6], V)
        out.append(value)
    return out


__all__ = ["FORMULAS", "MOTIONS", "Plan", "RULES", "TURN_VECTORS", "composites", "decode",
           "descriptor", "gather_values", "pair_masks", "plan", "turn_vectors", "writes"]
