"""The fused step gradients of the plant profile on the level-synchronous strategies
(warp, block): one item per warp or block, for the robots whose straight-line thread
form is too long to run well one item per thread (a floating base: go2, g1).

The item runs the forward-dynamics gradient's passes (`rnea_gradient`: FD, the tree
factor of M, `dID = dtau/d(q, qd)` at `qdd`) and then writes the `2nv x 3nv` output
`[dq'; dqd'] / d(dq, dqd, u)` one column per lane (`emit.plant` has the math):

* column `j` solves `M x = b` in the lane's registers (`tree_ldlt`), with `b` column `j`
  of `-dID` (`j < 2nv`) or the unit vector `e_(j - 2nv)` (`u`'s columns), so
  `x = dqdd/dz_j`; the velocity rows are `V[:, j] = dt x + [j == nv + r]`;
* the position rows of a scalar joint's dof `r` are `[j == r] + dt [j == nv + r]` (euler)
  or `[j == r] + dt V[r, j]` (semi-implicit euler);
* a free flyer's six rows at tangent `o` go through the Jacobians `(J0, J1)` of its
  SE(3) move `q (+) xi`, `xi = dt w` (`symbolic.lie`): `J0 [j in o..o+5] + dt J1 seed`
  with `seed` the column's unit `qd` entries (euler) or `V[o..o+5, j]` (semi-implicit).
  `(J0, J1)` are computed once per item on one lane right after `qdd` is known (`w` is
  `qd` or `qd + dt qdd`), straight-line code traced from `symbolic.lie`.

Each of column `j`'s rows is stored as soon as the solve has its value, so the lane holds
no more than the solve itself (ptxas, sm_90, float32, g1: 128 registers and a 136 B stack,
as the FD gradient's warp kernel), and consecutive lanes write consecutive columns of a
row, so each row's stores coalesce.
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port
from grid_codegen.emit.plant import INTEGRATORS, PREFIX
from grid_codegen.emit.rnea_gradient import emit_fd_gradient_passes, fd_gradient_layout
from grid_codegen.emit.tree_ldlt import emit_tree_ldlt_solve
from grid_codegen.emit.writer import Writer
from grid_codegen.model import JointType

# The module, not its function: symbolic.emit imports this package (its Writer), so a
# program that imports symbolic.emit first reaches here before emit_straight_line exists.
from grid_codegen.symbolic import emit as symbolic_emit
from grid_codegen.symbolic import lie


def _free_flyer_offsets(ctx: EmitContext) -> list[int]:
    """The tangent offset of every free flyer's six dofs."""
    return [j.idx_v for j in ctx.model.joints if j.type is JointType.FREE_FLYER]


def _chart_jacobians(xi: list) -> list:
    J0, J1 = lie.integrate_jacobians(xi)
    return [x for row in J0 for x in row] + [x for row in J1 for x in row]


def plant_step_gradient(integrator: str) -> Callable[[EmitContext], AlgorithmSpec]:
    """The builder of `plant_step_gradient_<integrator>` (module doc)."""
    if integrator not in INTEGRATORS:
        raise ValueError(f"no fused step gradient for integrator {integrator!r}")
    semi = integrator == "semi_implicit_euler"

    def build(ctx: EmitContext) -> AlgorithmSpec:
        model = ctx.model
        nq, nv = model.nq, model.nv
        n2, n3 = 2 * nv, 3 * nv
        name = PREFIX + integrator
        L = fd_gradient_layout(ctx, name)
        flyers = _free_flyer_offsets(ctx)
        chart = L.add("chart", 72, len(flyers), doc="per free flyer: J0 then J1 of its "
                      "move (6 x 6 each, row-major)") if flyers else None
        q, qd, u, qdd = L["q"], L["qd"], L["u"], L["qdd"]
        M, dinv, dID = L["M"], L["dinv"], L["dID"]
        ports = (Port("x", nq + nv), Port("u", nv), Port("dt", 1))

        def charts(w: Writer) -> None:
            """(J0, J1) of every free flyer (on one lane, `qdd` known)."""
            w.line("typedef T S;")
            for f, o in enumerate(flyers):
                with w.block():
                    moved = [f"(h * ({qd[o + k]} + h * {qdd[o + k]}))" if semi
                             else f"(h * {qd[o + k]})" for k in range(6)]
                    w.line(f"const T xi[6] = {{{', '.join(moved)}}};")
                    w.line(f"T* GRID_RESTRICT J = {chart.at(f)};")
                    symbolic_emit.emit_straight_line(
                        w, _chart_jacobians, [[f"xi[{k}]" for k in range(6)]], "J")

        # dof -> (its free flyer's index, the flyer's first dof), for the flyers' rows
        flyer_of = {o + a: (f, o) for f, o in enumerate(flyers) for a in range(6)}

        def position(r: int) -> str:
            """Entry `(r, j)` of `dq'/dz` in lane `j` (`V<k>`: the velocity rows)."""
            if r in flyer_of:
                f, o = flyer_of[r]
                a, J = r - o, chart.at(f)
                own = f"(j >= {o} && j < {o + 6} ? {J}[{6 * a} - {o} + j] : T(0))"
                if semi:
                    terms = " + ".join(f"{J}[{36 + 6 * a + b}] * V{o + b}" for b in range(6))
                    return f"{own} + h * ({terms})"
                return (f"{own} + (j >= {nv + o} && j < {nv + o + 6} ? "
                        f"h * {J}[{36 + 6 * a} - {nv + o} + j] : T(0))")
            if semi:
                return f"(j == {r} ? T(1) : T(0)) + h * V{r}"
            return f"(j == {r} ? T(1) : T(0)) + (j == {nv + r} ? h : T(0))"

        def body(w: Writer) -> None:
            s = ctx.strategy
            w.line("const T h = in_dt[0];")
            with s.parallel(w, "k", nq):
                w.line(f"{q['k']} = in_x[k];")
            with s.parallel(w, "k", nv):
                w.line(f"{qd['k']} = in_x[{nq} + k];")
                w.line(f"{u['k']} = in_u[k];")
            s.barrier(w)
            emit_fd_gradient_passes(ctx, w, L, None, charts if flyers else None)
            def store(r: int, v: str) -> list[str]:
                """Column `j`'s rows of dof `r` as soon as `x_r` is solved (registers); a
                free flyer's six position rows once its last velocity row is."""
                rows = [f"const T V{r} = h * {v} + (j == {nv + r} ? T(1) : T(0));",
                        f"out[{(nv + r) * n3} + j] = V{r};"]
                if r not in flyer_of:
                    rows.append(f"out[{r * n3} + j] = {position(r)};")
                elif r == flyer_of[r][1] + 5:
                    rows += [f"out[{k * n3} + j] = {position(k)};" for k in range(r - 5, r + 1)]
                return rows

            with s.parallel(w, "j", n3):  # column j of the output on one lane
                emit_tree_ldlt_solve(
                    ctx, w, M, nv, nv, dinv,
                    lambda r: (f"(j < {n2} ? -{dID[f'{r * n2} + j']} : "
                               f"j == {n2 + r} ? T(1) : T(0))"), store)
            s.barrier(w)

        return AlgorithmSpec(
            name=name,
            doc=(f"[A | B] = d[q'; qd'] / d(dq, dqd, u) of one {integrator.replace('_', ' ')} "
                 f"step: out ({n2} x {n3}), row-major (`emit.plant_level`)."),
            inputs=ports, output_shape=(n2, n3), uses_gravity=True, layout=L, emit_body=body)

    return build
