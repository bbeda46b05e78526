"""Second-order derivatives of inverse and forward dynamics at trace time (hyper-duals).

Directions are the tangent of `z = (q, qd)`: `0..nv-1` the configuration (local chart),
`nv..2nv-1` the velocity. A traced value is a nested `Dual`: the outer level carries the
first-derivative direction `a`, the inner level the second `b`, so that
`tangent(tangent(tau_i, a), b) = d/dz_b (dtau_i/dz_a)`.

The chart is iterated as Pinocchio's `ComputeRNEASecondOrderDerivatives` iterates it: a
placement moves as `X(q (+) e_b (+) e_a) = X Exp(S e_b) Exp(S e_a)`, i.e. first by the
inner seeds, then by the outer ones. On a free flyer the result is not symmetric in
`(a, b)`; on revolute and prismatic joints it is. Zero tangents never become nodes, so
only the ancestor pairs of each body are traced (the O(n d^2) structure of the
analytic second-order algorithms comes out of the tree).

`dM/dq` is RNEA's first derivative along `q` at `qd = 0`, `qdd = e_j`, without gravity
or external forces, one column `j` of the mass matrix at a time.

For large trees the fully unrolled trace (every outer direction in the code) is too much
code; `rnea_second_order_joint` traces one pass per joint whose outer direction is a
run-time input, run once per direction of the joint: the same operations at run time,
about half the code on revolute chains and a twelfth on the free flyer.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.dual import Dual


def _nested(value: object, direction: int, outer: bool, inner: bool) -> object:
    """`value` perturbed along `direction` at the levels asked for."""
    if not (outer or inner):
        return value
    v = Dual(value, {direction: 1.0}) if inner else Dual(value)
    return Dual(v, {direction: Dual(1.0)} if outer else {})


def _entry(x: object, a: int, b: int) -> object:
    """`d2 x / dz_a dz_b` of a nested dual (outer `a`, inner `b`)."""
    if not isinstance(x, Dual):
        return 0.0
    da = x.d.get(a)
    if not isinstance(da, Dual):
        return 0.0
    return da.d.get(b, 0.0)


def rnea_second_order(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                      qd: Sequence, qdd: Sequence, fext: Sequence | None, gravity: object,
                      outer: Sequence[int]) -> list[list[list]]:
    """`H[i][a][b] = d/dz_b (dtau_i/dz_a)` for the outer directions `a` in `outer` (all
    `2 nv` inner directions `b`), at the given `qdd` and `fext`."""
    nv = model.nv
    wanted = set(outer)
    inner_q = [Dual(Dual(0.0, {k: 1.0})) for k in range(nv)]
    outer_q = [Dual(Dual(0.0), {k: Dual(1.0)}) if k in wanted else 0.0 for k in range(nv)]
    Xd = A.perturb_transforms(model, A.perturb_transforms(model, X, inner_q), outer_q)
    qd_d = [_nested(qd[k], nv + k, nv + k in wanted, True) for k in range(nv)]
    tau = A.rnea(model, Xd, I, qd_d, qdd, fext, gravity)
    return [[[_entry(t, a, b) for b in range(2 * nv)] for a in outer] for t in tau]


def mass_matrix_derivative(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                           columns: Sequence[int]) -> list[list[list]]:
    """`dM[i][j][k] = dM_ij / dq_k` for the columns `j` in `columns` (local chart)."""
    nv = model.nv
    zero = [0.0] * nv
    out = []
    for j in columns:
        unit = [1.0 if k == j else 0.0 for k in range(nv)]
        D = A.rnea_derivatives(model, X, I, zero, unit, None, 0.0, range(nv))
        out.append([row[:nv] for row in D])
    return [[out[c][i] for c in range(len(columns))] for i in range(nv)]


def rnea_second_order_joint(model: RobotModel, X: list[sp.Placement], I: Sequence[Sequence],
                            qd: Sequence, qdd: Sequence, fext: Sequence | None,
                            gravity: object, joint: int, seed: Sequence) -> list[list]:
    """`H[i][b] = d/dz_b (dtau_i/dz . s)` along one outer direction `s` of joint `joint`
    given at run time: `seed` holds its `2 nv_j` entries (the joint's configuration
    directions, then its velocity directions), typically a unit vector. Only what the
    joint moves carries the outer tangent, as in `rnea_second_order`; the directions of
    one joint share one pass, run once per direction."""
    nv = model.nv
    jt = model.joints[joint]
    lo, n = jt.idx_v, jt.nv

    def mine(k: int) -> bool:
        return lo <= k < lo + n

    inner_q = [Dual(Dual(0.0, {k: 1.0})) for k in range(nv)]
    outer_q = [Dual(Dual(0.0), {0: Dual(seed[k - lo])}) if mine(k) else 0.0
               for k in range(nv)]
    Xd = A.perturb_transforms(model, A.perturb_transforms(model, X, inner_q), outer_q)
    qd_d = [Dual(Dual(qd[k], {nv + k: 1.0}), {0: Dual(seed[n + k - lo])} if mine(k) else {})
            for k in range(nv)]
    tau = A.rnea(model, Xd, I, qd_d, qdd, fext, gravity)
    return [[_entry(t, 0, b) for b in range(2 * nv)] for t in tau]
