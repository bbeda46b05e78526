"""Second-order inverse-dynamics sensitivities in world-frame spatial algebra (IDSVA).

The four `(nv, nv, nv)` blocks of `idsva_so` (`d2tau/dq2`, `d2tau/dqd2`, `d2tau/dq dqd`,
`dM/dq`, Pinocchio's layout and chart) from the structure of the analytic algorithm of
Singh, Russell and Wensing (the one Pinocchio's `ComputeRNEASecondOrderDerivatives`
runs), rather than from hyper-dual numbers pushed through RNEA (`symbolic.second_order`).

Why both exist: the hyper-dual trace carries every first-order tangent of every body
through the whole pass (iiwa14: about 2,300 values live at once in its schedule), which on
a GPU thread is a stack frame of 10 KB that lives in HBM. Here the per-body quantities
are few and world-frame: per joint column the motion `S`, `psid = v_parent x S`,
`psidd = a_parent x S + v_parent x psid` and `phid = v x S`; per body the composite
rigid inertia `IC` (a 10-vector, composites of rigid inertias about the world origin
being rigid inertias), the composite `BC = sum(v x* Y - Y v x + (Y v) x*bar)` and the
composite net force. One backward sweep then forms every entry from dot products of a
few 6-vectors per pair of joint columns (`_Pair`), so the working set at any point is
one pair's vectors and the columns' motions.

Notation (matrices never formed, only applied): for a rigid inertia `Y` and motions
`v, x`, `var(Y, v) x = v x* (Y x) - Y (v x)` (the inertia's rate, a symmetric matrix);
`cmfbar(f) x = x x* f` (so `cmfbar(f)^T = -cmfbar(f)`); `(S x)^T = -(S x*)`.

External forces are fixed in their body's frame, so in world frame they turn with the
body exactly as the body's own net force does: they enter the composite net force.
Joints: revolute, prismatic and a free flyer (constant motion subspace, no bias
acceleration); `supported` says whether a model qualifies.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.model import JointType, RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp

_SUPPORTED = (JointType.REVOLUTE, JointType.PRISMATIC, JointType.FREE_FLYER)


def supported(model: RobotModel) -> bool:
    """Whether `idsva_blocks` covers `model`: no mimic coupling, and every joint
    revolute, prismatic or a free flyer."""
    return model.coupling is None and all(j.type in _SUPPORTED for j in model.joints)


def _var(Y: Sequence, v: Sequence, x: Sequence) -> list:
    """`var(Y, v) x = v x* (Y x) - Y (v x)`."""
    return sp.sub(sp.force_cross(v, sp.inertia_apply(Y, x)),
                  sp.inertia_apply(Y, sp.motion_cross(v, x)))


def _mat(M: Sequence[Sequence], x: Sequence) -> list:
    return [sp.dot(row, x) for row in M]


def _mat_t(M: Sequence[Sequence], x: Sequence) -> list:
    return [sp.dot([M[r][c] for r in range(6)], x) for c in range(6)]


def _unit(k: int) -> list:
    return [1.0 if r == k else 0.0 for r in range(6)]


class _Column:
    """One joint column's world-frame motions: `S`, `psid`, `psidd`, `phid`."""

    __slots__ = ("S", "psid", "psidd", "phid")

    def __init__(self, S: list, psid: list, psidd: list, phid: list) -> None:
        self.S, self.psid, self.psidd, self.phid = S, psid, psidd, phid


def _forward(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
             qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object):
    """World-frame columns per dof, and per body its rigid inertia (10-vector), `BC`
    term (6x6) and net force, root to leaf."""
    columns: list[_Column] = [None] * model.nv  # type: ignore[list-item]
    Y, B, f = [], [], []
    oX: list = []
    ov: list = []
    oa: list = []
    a_root = [0.0, 0.0, -gravity, 0.0, 0.0, 0.0]  # gravity as a root acceleration
    for b, joint in enumerate(model.joints):
        p = joint.parent
        oXb = X[b] if p < 0 else sp.compose(oX[p], X[b])
        v_p = [0.0] * 6 if p < 0 else ov[p]
        a_p = a_root if p < 0 else oa[p]
        S = [sp.motion_to_parent(oXb, s) for s in A.subspace(joint)]
        dofs = range(joint.idx_v, joint.idx_v + joint.nv)
        vJ = [0.0] * 6
        aJ = [0.0] * 6
        for s, d in zip(S, dofs, strict=True):
            vJ = sp.add(vJ, sp.scale(s, qd[d]))
            aJ = sp.add(aJ, sp.scale(s, qdd[d]))
        v = sp.add(v_p, vJ)
        a = sp.add(sp.add(a_p, sp.motion_cross(v, vJ)), aJ)
        for s, d in zip(S, dofs, strict=True):
            psid = sp.motion_cross(v_p, s)
            psidd = sp.add(sp.motion_cross(a_p, s), sp.motion_cross(v_p, psid))
            columns[d] = _Column(s, psid, psidd, sp.motion_cross(v, s))
        Yb = sp.inertia_to_parent(oXb, I[b])
        h = sp.inertia_apply(Yb, v)
        fb = sp.add(sp.inertia_apply(Yb, a), sp.force_cross(v, h))
        if fext is not None:
            fb = sp.sub(fb, sp.force_to_parent(oXb, fext[6 * b:6 * b + 6]))
        # BC of the body: var(Y, v) + cmfbar(Y v), column by column.
        cols = [sp.add(_var(Yb, v, _unit(m)), sp.force_cross(_unit(m), h)) for m in range(6)]
        B.append([[cols[m][r] for m in range(6)] for r in range(6)])
        Y.append(Yb)
        f.append(fb)
        oX.append(oXb)
        ov.append(v)
        oa.append(a)
    return columns, Y, B, f


def forward_table(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                  qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object
                  ) -> list:
    """The forward pass for the loop form of the sweep (`grid/idsva.h`), flat: per dof
    `S, psid, psidd, psid + phid` (24; the sweep reads `phid` only in that sum), then per
    body its world rigid inertia (10), `BC` term (36, row-major) and net force (6)."""
    col, Y, B, f = _forward(model, X, I, qd, qdd, fext, gravity)
    K: list = []
    for c in col:
        K += [*c.S, *c.psid, *c.psidd, *sp.add(c.psid, c.phid)]
    for b in range(model.nb):
        K += [*Y[b], *(B[b][r][m] for r in range(6) for m in range(6)), *f[b]]
    return K


def tree_tables(model: RobotModel) -> dict[str, list[int]]:
    """The integer tables of the loop form (`grid/idsva.h`)."""
    chain_start, chain = [0], []
    for b in range(model.nb):
        chain += _ancestor_dofs(model, b)
        chain_start.append(len(chain))
    body_of = [0] * model.nv
    for b, joint in enumerate(model.joints):
        body_of[joint.idx_v:joint.idx_v + joint.nv] = [b] * joint.nv
    return {"parent": [j.parent for j in model.joints],
            "dof_start": [j.idx_v for j in model.joints],
            "dof_count": [j.nv for j in model.joints],
            "body_of": body_of, "chain_start": chain_start, "chain": chain}


def sweep_operations(model: RobotModel) -> int:
    """About how many arithmetic operations the loop form's sweep runs (the dispatch cost
    model's figure): per column about 200, per pair of columns about 700, per triple
    about 60."""
    tables = tree_tables(model)
    start, body_of = tables["chain_start"], tables["body_of"]
    ops = 0
    for b in range(model.nb):
        for _ in range(model.joints[b].nv):
            ops += 200
            for jq in tables["chain"][start[b]:start[b + 1]]:
                bj = body_of[jq]
                ops += 700 + 60 * (start[bj + 1] - start[bj])
    return ops


def write_plan(model: RobotModel) -> tuple[list[int], dict[int, int]]:
    """`idsva_blocks`'s `order` and `owners`. Which entries the sweep writes, and when,
    follows from the tree alone, so one evaluation on plain numbers (the neutral
    configuration, the baked inertias) gives them without a trace."""
    q = [0.0] * model.nq
    for joint in model.joints:
        if joint.type is JointType.FREE_FLYER:
            q[joint.idx_q + 6] = 1.0  # the identity quaternion [x, y, z, w]
    inertias = [[float(x) for x in body.inertia.dynamic_parameters()]
                for body in model.bodies]
    order: list[int] = []
    owners: dict[int, int] = {}
    zero = [0.0] * model.nv
    idsva_blocks(model, A.joint_transforms(model, q), inertias, zero, zero, None, 0.0, order,
                 owners)
    return order, owners


def _ancestor_dofs(model: RobotModel, b: int) -> list[int]:
    """The dofs of body `b` and of its ancestors, `b`'s own first, then toward the root
    (the order of the algorithm's sweeps)."""
    out: list[int] = []
    while b >= 0:
        joint = model.joints[b]
        out.extend(range(joint.idx_v, joint.idx_v + joint.nv))
        b = joint.parent
    return out


def _column_terms(Yc: Sequence, Bc: Sequence[Sequence], Fc: Sequence, ci: _Column) -> tuple:
    """What every pair of column `ci` (of a body with composites `Yc`, `Bc`, `Fc`)
    reads: `IC S`, `IC psid`, `f5 = BC psid + S x* F + IC psidd`,
    `f7 = BC S + IC (psid + phid)` and `BC^T S`."""
    Si = ci.S
    ICS = sp.inertia_apply(Yc, Si)
    ICpsid = sp.inertia_apply(Yc, ci.psid)
    f5 = sp.add(sp.add(_mat(Bc, ci.psid), sp.force_cross(Si, Fc)),
                sp.inertia_apply(Yc, ci.psidd))
    f7 = sp.add(_mat(Bc, Si), sp.inertia_apply(Yc, sp.add(ci.psid, ci.phid)))
    return ICS, ICpsid, f5, f7, _mat_t(Bc, Si)


def _pair_vectors(Yc: Sequence, Bc: Sequence[Sequence], ci: _Column, terms: tuple,
                  cj: _Column) -> tuple:
    """The vectors `u1 .. u12` of the pair (column `ci`, ancestor column `cj`): every
    entry of the pair is a dot product of one of them with a column's motion."""
    ICS, ICpsid, f5, f7, BtS = terms
    Si = ci.S
    Sj, psj = cj.S, cj.psid
    u2 = _var(Yc, Si, Sj)
    u9 = sp.force_cross(Sj, ICS)
    varS_psj = _var(Yc, Si, psj)
    SixSj = sp.motion_cross(Si, Sj)
    u1 = sp.add(sp.sub(sp.sub(_var(Yc, ci.psid, Sj), sp.force_cross(Sj, ICpsid)),
                       _mat_t(Bc, SixSj)),
                sp.force_cross(Si, _mat_t(Bc, Sj)))
    u3 = sp.add(sp.add(sp.add(_var(Yc, ci.psid, psj), sp.force_cross(psj, ICpsid)),
                       sp.sub(sp.force_cross(Si, _mat(Bc, psj)),
                              _mat(Bc, sp.motion_cross(Si, psj)))),
                sp.add(_var(Yc, Si, cj.psidd), sp.force_cross(Sj, f5)))
    u4 = sp.add(u9, sp.force_cross(Si, sp.inertia_apply(Yc, Sj)))
    psj_ICS = sp.force_cross(psj, ICS)
    u5 = sp.sub(psj_ICS, varS_psj)
    u6 = sp.add(sp.add(varS_psj, psj_ICS), sp.force_cross(Sj, f7))
    u7 = sp.add(sp.add(sp.add(_var(Yc, ci.psid, Sj), sp.force_cross(Sj, ICpsid)),
                       sp.sub(sp.force_cross(Si, _mat(Bc, Sj)), _mat(Bc, SixSj))),
                _var(Yc, Si, sp.add(psj, cj.phid)))
    u8 = sp.force_cross(Sj, BtS)
    return (u1, u2, u3, u4, u5, u6, u7, u8, u9, sp.add(u2, u9), sp.sub(u2, u9),
            sp.sub(varS_psj, psj_ICS))


def idsva_blocks(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                 qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object,
                 order: list[int] | None = None, owners: dict[int, int] | None = None
                 ) -> list:
    """The four blocks of `idsva_so`, flat `[d2q | d2v | dqdv | dM]`, each row-major
    `[i][j][k]` (`emit.second_order.output_index`), entries not reached 0.0.

    order: if given, filled with every output index in the order the sweep finishes
    them, the entries it never reaches last: computed in that order, each pair's vectors
    die as soon as its entries are out (iiwa14: at most 419 values live, against 1,429
    in index order).
    owners: if given, filled with output index -> the turn of the sweep that writes it
    last, turns numbered 0, 1, ... in sweep order, one per (column `ip`, ancestor column
    `jq`) pair; entries the sweep never reaches are absent. Any partition of the entries
    is a valid split of the work (each entry's traced value is its final one); splitting
    by turns keeps what a group recomputes small."""
    nv = model.nv
    n3 = nv ** 3
    values: list = [0.0] * (4 * n3)
    finished: dict[int, int] = {}  # output index -> its writer, in last-write order
    writer = [-1]  # the current turn of the sweep

    class _Out:
        """The blocks, written more than once where two branches of the sweep reach an
        entry (the last write stands, as in the algorithm)."""

        def __setitem__(self, k: int, value: object) -> None:
            values[k] = value
            finished.pop(k, None)
            finished[k] = writer[0]

    out = _Out()
    col, Y, B, f = _forward(model, X, I, qd, qdd, fext, gravity)

    def at(block: int, i: int, j: int, k: int) -> int:
        return block * n3 + (i * nv + j) * nv + k

    D2Q, D2V, DQDV, DM = 0, 1, 2, 3
    IC = list(Y)
    BC = [[list(row) for row in m] for m in B]
    F = list(f)
    body_of = [0] * nv
    for b, joint in enumerate(model.joints):
        for d in range(joint.idx_v, joint.idx_v + joint.nv):
            body_of[d] = b
    for b in reversed(range(model.nb)):
        joint = model.joints[b]
        Yc, Bc, Fc = IC[b], BC[b], F[b]
        chain = _ancestor_dofs(model, b)  # j over every column of b and its ancestors
        for ip in range(joint.idx_v, joint.idx_v + joint.nv):
            ci = col[ip]
            terms = _column_terms(Yc, Bc, Fc, ci)
            for jq in chain:
                writer[0] += 1
                same_ij = body_of[jq] == b
                u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12 = _pair_vectors(
                    Yc, Bc, ci, terms, col[jq])
                for kr in _ancestor_dofs(model, body_of[jq]):
                    ck = col[kr]
                    Sk, psk = ck.S, ck.psid
                    same_jk = body_of[kr] == body_of[jq]
                    p1 = sp.dot(u11, psk)
                    p2 = sp.dot(u9, ck.psidd) + sp.dot(sp.sub(u8, u12), psk)
                    out[at(D2Q, ip, jq, kr)] = p2
                    out[at(DQDV, ip, kr, jq)] = -p1
                    psk_phk = sp.add(psk, ck.phid)
                    if not same_ij:
                        p3 = -sp.dot(u11, Sk)
                        p4 = sp.dot(Sk, u2)
                        v = sp.dot(u1, psk) + sp.dot(u2, ck.psidd)
                        out[at(D2Q, jq, kr, ip)] = v
                        out[at(D2Q, jq, ip, kr)] = v
                        out[at(DQDV, jq, kr, ip)] = p1
                        out[at(DQDV, jq, ip, kr)] = sp.dot(u1, Sk) + sp.dot(u2, psk_phk)
                        out[at(D2V, jq, kr, ip)] = -p3
                        out[at(D2V, jq, ip, kr)] = -p3
                        out[at(DM, kr, jq, ip)] = p4
                        out[at(DM, jq, kr, ip)] = p4
                    if not same_jk:
                        p3 = -sp.dot(u11, Sk)
                        p5 = sp.dot(Sk, u9)
                        out[at(D2Q, ip, kr, jq)] = p2
                        v = sp.dot(Sk, u3)
                        out[at(D2Q, kr, ip, jq)] = v
                        out[at(D2V, ip, jq, kr)] = p3
                        out[at(D2V, ip, kr, jq)] = p3
                        out[at(DQDV, ip, jq, kr)] = (sp.dot(Sk, sp.add(u5, u8))
                                                     + sp.dot(u9, psk_phk))
                        out[at(DQDV, kr, jq, ip)] = sp.dot(Sk, u6)
                        out[at(DM, kr, ip, jq)] = p5
                        out[at(DM, ip, kr, jq)] = p5
                        if not same_ij:
                            p6 = sp.dot(Sk, u10)
                            out[at(D2Q, kr, jq, ip)] = v
                            out[at(D2V, kr, ip, jq)] = p6
                            out[at(D2V, kr, jq, ip)] = p6
                            out[at(DQDV, kr, ip, jq)] = sp.dot(Sk, u7)
                        else:
                            out[at(D2V, kr, jq, ip)] = sp.dot(Sk, u4)
                    else:
                        out[at(D2V, ip, jq, kr)] = -sp.dot(u2, Sk)
        p = joint.parent
        if p >= 0:
            IC[p] = sp.add(IC[p], Yc)
            BC[p] = [sp.add(BC[p][r], Bc[r]) for r in range(6)]
            F[p] = sp.add(F[p], Fc)
    if owners is not None:
        owners.update(finished)
    if order is not None:
        order.extend(finished)
        order.extend(k for k in range(4 * n3) if k not in finished)
    return values


__all__ = ["forward_table", "idsva_blocks", "supported", "sweep_operations", "tree_tables",
           "write_plan"]
