"""The thread strategy of a robot with mimic couplings (`RobotModel.coupling`): every
algorithm in the reduced coordinates (`grid_codegen.coupling` gives the equations).

The passes trace the algorithms of the independent tree (`symbolic.algorithms`,
`centroidal`, `frames`) at the expanded inputs `q_full = G q + b`, `qd_full = G qd`,
`qdd_full = G qdd`, and contract every tangent axis of the result with `G` (an
independent coordinate passes through; a mimic joint's term is folded in with its
multiplier, so the generated code is the tree's plus a few multiply-adds). Forward
dynamics and M^-1 solve with the reduced mass matrix `G^T M G` (its Cholesky
factorisation, traced like the rest): the articulated-body recursion does not hold for a
coupled tree. Jacobians are one pass each (no column groups): coupled robots are hands
and grippers, small trees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from grid_codegen.coupling import MimicCoupling
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import frames as F
from grid_codegen.symbolic import spatial as sp

Axes = list  # per axis: an int (a fixed size) or "v" (a tangent axis, contracted with G)

_SOLVED = ("minv", "forward_dynamics", "aba", "forward_dynamics_gradient")
UNSUPPORTED = frozenset({"idsva_so", "fdsva_so"})
"""Algorithms a coupled robot cannot build yet (the second-order tensors)."""


def output_axes(algorithm: Algorithm, dims: Dims) -> list[Axes]:
    """The axes of each part of `algorithm`'s output, tangent axes marked "v" (a width
    `k * nv` is the axes `[k, "v"]`)."""
    parts = algorithm.parts or (("", algorithm.output),)
    out = []
    for _, shape in parts:
        axes: Axes = []
        for d in shape:
            if d.name == "nv":
                if d.plus:
                    raise AssertionError(f"{algorithm.name}: width {d} has no tangent axes")
                axes += ([d.factor] if d.factor > 1 else []) + ["v"]
            else:
                axes.append(d(dims))
        out.append(axes)
    return out


def contract(c: MimicCoupling, values: Sequence, axes: Axes) -> list:
    """`values` (row-major over `axes` at full width) with every "v" axis contracted
    with `G` (a force row: `G^T f`; a Jacobian column: `J G`)."""
    shape = [c.nv_full if a == "v" else a for a in axes]
    flat = list(values)
    for ax, a in enumerate(axes):
        if a != "v":
            continue
        outer, n, inner = math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:])
        new: list = []
        for o in range(outer):
            base = o * n * inner
            reduced = [c.project([flat[base + k * inner + i] for k in range(n)])
                       for i in range(inner)]
            new += [reduced[i][r] for r in range(c.nv) for i in range(inner)]
        shape[ax] = c.nv
        flat = new
    return flat


def contract_parts(c: MimicCoupling, values: Sequence, parts: list[Axes]) -> list:
    out: list = []
    start = 0
    for axes in parts:
        size = math.prod(c.nv_full if a == "v" else a for a in axes)
        out += contract(c, values[start:start + size], axes)
        start += size
    if start != len(values):
        raise AssertionError(f"{len(values)} outputs for parts of {start} entries")
    return out


def reduced_mass_matrix(c: MimicCoupling, M: Sequence[Sequence]) -> list[list]:
    """`G^T M G` (rows)."""
    return c.project_rows(c.project_columns(M))


def build_coupled(plan, kb, algorithm: Algorithm, dims: Dims, ports: dict, out,
                  X, transformed: Callable, centroidal: dict) -> None:
    """The passes of `algorithm` for the coupled `plan.model` (see the module doc).
    `transformed(x)`: the placements of the flat transforms `x`; `centroidal`: the
    thread strategy's table of centroidal passes."""
    model = plan.model
    c: MimicCoupling = model.coupling
    nv = c.nv
    name = algorithm.name
    frames = plan.ee_frames
    ev = c.expand_v

    if name in UNSUPPORTED:
        raise NotImplementedError(
            f"{name} has no reduced-coordinate form for mimic-coupled robots yet "
            f"({model.name}: {len(c.mimics)} mimic joints); leave it out of algorithm_list, "
            "or register with mimic=False (the independent reading)")
    if name not in _SOLVED:
        parts = output_axes(algorithm, dims)

        def full(x, *rest):
            return _full_output(model, frames, name, transformed(x), rest, centroidal, ev)

        if name in ("end_effector_pose", "end_effector_pose_gradient",
                    "end_effector_pose_hessian", "world_kinematics", "fk_batched"):
            inputs = [X] + [ports[p.name] for p in algorithm.inputs if p.name != "q"]
            if name == "fk_batched":
                inputs = [X, ports["q"]]
            kb.call(name, f"{algorithm.doc} Reduced (mimic-coupled) coordinates.",
                    lambda *v: contract_parts(c, full(*v, None, None), parts), inputs, out)
            return
        inputs = [X] + [ports[p.name] for p in algorithm.inputs if p.name != "q"]
        plan.dynamics_call(kb, name, f"{algorithm.doc} Reduced (mimic-coupled) coordinates.",
                           lambda *v: contract_parts(c, full(*v), parts), inputs, out)
        return

    if name == "minv":
        plan.dynamics_call(kb, "minv", "(G^T M G)^-1: the reduced mass matrix inverted "
                           "by its Cholesky factorisation.",
                           lambda x, I, g: [v for row in _reduced_minv(model, transformed(x), I)
                                            for v in row], [X], out)
        return
    if name in ("forward_dynamics", "aba"):
        plan.dynamics_call(kb, "forward_dynamics", "qdd = (G^T M G)^-1 (u - G^T c(q, G qd)) "
                           "in the reduced coordinates.",
                           lambda x, qd, u, f, I, g: _reduced_fd(model, transformed(x), I, qd,
                                                                 u, f, g)[0],
                           [X, ports["qd"], ports["u"], ports["f_ext"]], out)
        return
    # forward_dynamics_gradient: -(G^T M G)^-1 G^T [dtau/dq G | dtau/dqd G] at qdd = FD.

    def dqdd(x, qd, u, f, I, g):
        X_ = transformed(x)
        qdd, Minv = _reduced_fd(model, X_, I, qd, u, f, g)
        D = A.rnea_derivatives(model, X_, I, ev(qd), ev(qdd), f, g)
        D = contract(c, [v for row in D for v in row], ["v", 2, "v"])
        rows = [D[r * 2 * nv:(r + 1) * 2 * nv] for r in range(nv)]
        return [v for row in A.neg_product(Minv, rows) for v in row]

    plan.dynamics_call(kb, "fd_derivatives", "[dqdd/dq | dqdd/dqd] = -(G^T M G)^-1 "
                       "G^T [dtau/dq G | dtau/dqd G] at qdd = FD (reduced coordinates).",
                       dqdd, [X, ports["qd"], ports["u"], ports["f_ext"]], out)


def _full_output(model, frames, name: str, X, rest: Sequence, centroidal: dict,
                 ev: Callable) -> list:
    """The output of `name` on the independent tree at the expanded inputs; `rest`: the
    algorithm's inputs after q (tangent ones in reduced width), then I and gravity."""
    *inputs, I, g = rest
    if name == "inverse_dynamics":
        qd, qdd, f = inputs
        return A.rnea(model, X, I, ev(qd), ev(qdd), f, g)
    if name == "crba":
        return [v for row in A.crba(model, X, I) for v in row]
    if name == "inverse_dynamics_gradient":
        qd, qdd, f = inputs
        return [v for row in A.rnea_derivatives(model, X, I, ev(qd), ev(qdd), f, g)
                for v in row]
    if name == "end_effector_pose":
        return A.end_effector_pose(model, frames, X)
    if name == "end_effector_pose_gradient":
        return [v for row in A.end_effector_pose_derivatives(model, frames, X) for v in row]
    if name == "end_effector_pose_hessian":
        return F.end_effector_pose_hessian(model, frames, X)
    if name == "world_kinematics":
        return F.world_kinematics(model, X, ev(inputs[0]))
    if name == "fk_batched":
        return F.frame_position_quaternion(model, frames[0], X,
                                           model.coupling.expand_q(inputs[0]))
    if name in centroidal:
        _, fn, port_names = centroidal[name]
        expanded = [ev(v) if p in ("qd", "qdd") else v for p, v in zip(port_names, inputs,
                                                                        strict=True)]
        return list(fn(model, X, *expanded, I, g))
    raise KeyError(f"the coupled thread strategy has no plan for {name!r}")


def _reduced_minv(model, X, I) -> list[list]:
    return sp.spd_inverse(reduced_mass_matrix(model.coupling, A.crba(model, X, I)))


def _reduced_fd(model, X, I, qd, u, f, g) -> tuple[list, list[list]]:
    """`(qdd, (G^T M G)^-1)` in the reduced coordinates."""
    c: MimicCoupling = model.coupling
    bias = c.project(A.rnea(model, X, I, c.expand_v(qd), [0.0] * c.nv_full, f, g))
    Minv = _reduced_minv(model, X, I)
    rhs = [u[k] - bias[k] for k in range(c.nv)]
    return sp.mat_vec(Minv, rhs), Minv
