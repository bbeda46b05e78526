"""Thread-strategy passes of the plant profile: the fused step gradients.

One euler or semi-implicit euler step on a vector configuration (`nq == nv`, an additive
chart) has the Jacobian, with `D = [dqdd/dq | dqdd/dqd] = -M^-1 [dtau/dq | dtau/dqd]` at
`qdd = FD(q, qd, u)`:

    both:                dqd'/dz = V = [dt D + [0, I], dt M^-1]
    euler:               dq'/dz  = [I, dt I, 0]
    semi-implicit euler: dq'/dz  = [I, 0, 0] + dt V

so the step gradient is the forward-dynamics gradient's passes (`aba_minv`, then RNEA's
derivatives column group by column group, multiplied by `-M^-1` in registers) with `dt`
and the identity folded into the velocity rows `V` (`velocity_rows`): no `(B, nv, 2nv)`
intermediate, no second launch. The position rows are not traced: they are `V` again
(semi-implicit euler) or constants (euler), so the item computes the `nv x 3nv` block `V`
only (`<alg>_rows_thread`, one item's "compact row") and the position rows are written
from it where the output is stored:

* `<alg>_thread` (the item function every caller sees: the CPU tiles, the device API)
  computes `V` into the second half of its output, then the first half from it;
* the CUDA kernel of the thread strategy (`emit.kernels`, staged stores) keeps only `V`
  in each thread's row and stages it through shared memory; `<alg>_store` writes both
  halves of an item's output from one staged scalar of `V`. That halves the row each
  thread holds in local memory (iiwa14: 294 -> 147 scalars), and with it the stack that
  spilled out of L2 on a large batch.

The kernels take the state `x = [q, qd]` (one `(B, nq + nv)` port, as the plant methods
are given it) rather than `q` and `qd`: the item reads `q` and `qd` as views of `x`
(`emit.thread.state_views`), so no call copies `x` into two arrays first.

On a free-flyer root (over revolute and prismatic joints) the root's six position rows
go through the Jacobians of its SE(3) move (`position_rows`, `symbolic.lie`): the item
traces the whole `2nv x 3nv` output and the kernel has no compact row. Both forms also
have the tangents strategy, one column per thread (`step_tangent`, `emit.tangents`).

`emit.thread` wires the passes (joint dynamics included, as in the FD gradient); this
module holds the Jacobian's assembly and the position rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import lie

PREFIX = "plant_step_gradient_"
INTEGRATORS = ("euler", "semi_implicit_euler")


def velocity_rows(nv: int, D: list[list] | None, columns: list[int], Minv: list[list],
                  dt: object) -> list:
    """The `nv x 3nv` block `V = dqd'/d(dq, dqd, u)` (row-major) from `D = dqdd/d(q, qd)`
    traced on `columns` (of `0..2nv-1`; None when no such column is wanted) and `M^-1`."""
    rows = []
    for r in range(nv):
        for c in range(3 * nv):
            if c >= 2 * nv:
                rows.append(dt * Minv[r][c - 2 * nv])
            else:
                value = dt * D[r][c] if D is not None and c in columns else 0.0
                rows.append(value + 1.0 if c == nv + r else value)
    return rows


def _chart(model: RobotModel, integrator: str, qd: list, qdd: list, dt: object):
    """The free-flyer root's `(J0, J1)` at `xi = dt w` (`symbolic.lie`), `w = qd` (euler)
    or `qd'` (semi-implicit euler); None on a vector configuration (the identity)."""
    if model.nq == model.nv:
        return None
    semi = integrator == "semi_implicit_euler"
    return lie.integrate_jacobians([dt * (qd[k] + dt * qdd[k] if semi else qd[k])
                                    for k in range(6)])


def _position_column(nv: int, integrator: str, chart, dt: object, seed: list,
                     v: list) -> list:
    """Column `dq'/dz . seed` (nv) from the velocity rows' column `v = dqd'/dz . seed`:
    `q' = q (+) dt w`, so `seed_q + dt dw` on scalar joints and `J0 seed_q + dt J1 dw` on
    a free-flyer root (`chart`), `dw` being `seed_qd` (euler) or `v` (semi-implicit)."""
    moved = v if integrator == "semi_implicit_euler" else seed[nv:2 * nv]
    p = [seed[k] + dt * moved[k] for k in range(nv)]
    if chart is not None:
        J0, J1 = chart
        for r in range(6):
            p[r] = (sum((J0[r][k] * seed[k] for k in range(6)), 0.0)
                    + dt * sum((J1[r][k] * moved[k] for k in range(6)), 0.0))
    return p


def position_rows(model: RobotModel, integrator: str, V: list, qd: list, qdd: list,
                  dt: object) -> list:
    """The `nv x 3nv` block `dq'/d(dq, dqd, u)` (row-major) of a free-flyer-root robot,
    traced from the velocity rows `V` (`velocity_rows`) column by column
    (`_position_column` with unit seeds):

        euler:               dq'/dz = [J0, dt J1, 0]
        semi-implicit euler: dq'/dz = [J0, 0, 0] + dt J1 V."""
    nv, width = model.nv, 3 * model.nv
    chart = _chart(model, integrator, qd, qdd, dt)
    columns = [_position_column(nv, integrator, chart, dt,
                                [1.0 if k == c else 0.0 for k in range(width)],
                                [V[r * width + c] for r in range(nv)])
               for c in range(width)]
    return [columns[c][r] for r in range(nv) for c in range(width)]


def step_tangent(model: RobotModel, integrator: str, X: list, I, qd: list, u: list,
                 gravity: object, dt: object, seed: list) -> list:
    """Column `[dq'; dqd'] / dz . seed` (2 nv) of one step's gradient, `z = [dq, dqd, du]`
    (`seed`: 3 nv entries, a unit vector given at run time): the forward-mode FD tangent
    (`algorithms.fd_tangent`), then `dqd' = seed_qd + dt dqdd` and the position column
    (`_position_column`)."""
    nv = model.nv
    qdd, dqdd = A.fd_tangent(model, X, I, qd, u, None, gravity, seed)
    v = [seed[nv + k] + dt * dqdd[k] for k in range(nv)]
    chart = _chart(model, integrator, qd, qdd, dt)
    return _position_column(nv, integrator, chart, dt, seed, v) + v


@dataclass(frozen=True)
class StagedRow:
    """What the CUDA kernel of a fused step gradient stages (`emit.kernels`): the item
    function that writes the compact row, its width, and the store that writes an item's
    output from one scalar of it."""

    item: str
    width: int
    store: str


def integrator_of(algorithm: Algorithm) -> str | None:
    """The integrator of a fused step gradient, None for other algorithms."""
    name = algorithm.name
    if not name.startswith(PREFIX) or name[len(PREFIX):] not in INTEGRATORS:
        return None
    return name[len(PREFIX):]


def staged_row(algorithm: Algorithm, dims: Dims) -> StagedRow | None:
    """The compact row of `algorithm`'s thread kernel, None where it has none (every
    algorithm but the fused step gradients: their items write their output in full)."""
    if integrator_of(algorithm) is None or dims.nq != dims.nv:
        return None
    return StagedRow(f"{algorithm.name}_rows_thread", dims.nv * 3 * dims.nv,
                     f"{algorithm.name}_store")


def _dt_port(algorithm: Algorithm) -> int:
    return [p.name for p in algorithm.inputs].index("dt")


def _position_value(integrator: str, nv: int, r: int, c: int, dt: str, v: str) -> str:
    """Entry `(r, c)` of `dq'/dz` as C++ (`dt`: the step, `v`: entry `(r, c)` of `V`)."""
    if integrator == "euler":
        return dt if c == nv + r else "T{} + S(1.0)" if c == r else "T{} + S(0.0)"
    return f"T{{}} + S(1.0) + {dt} * {v}" if c == r else f"{dt} * {v}"


def emit_items(w: Writer, algorithm: Algorithm, dims: Dims, params: list[str],
               args: list[str], ops: int) -> int:
    """Write `<alg>_thread` (the full `2nv x 3nv` output: `V` from `<alg>_rows_thread`,
    then the position rows) and `<alg>_store` (module doc) after the rows item, which
    takes the same `params` (`args`: their names). Returns the full item's operation
    count (`ops`: the rows item's)."""
    integrator, nv = integrator_of(algorithm), dims.nv
    row = staged_row(algorithm, dims)
    width = row.width
    name = algorithm.name
    added = nv * 3 * nv if integrator == "semi_implicit_euler" else 0
    w.line()
    w.doc(f"`{name}` of one item: {algorithm.doc} The velocity rows `V` come from "
          f"`{row.item}` into `out + {width}`, the position rows from them.")
    w.comment(f"Operations: {ops + added}.")
    w.line("template <typename T, typename S>")
    with w.block(f"GRID_INLINE void {name}_thread({', '.join(params)})"):
        call = [f"out + {width}" if a == "out" else a for a in args]
        w.line(f"{row.item}<T, S>({', '.join(call)});")
        if integrator != "euler":
            w.line(f"const T* GRID_RESTRICT V = out + {width};")
        w.line("const T h = dt[0];")
        for r in range(nv):
            for c in range(3 * nv):
                k = r * 3 * nv + c
                w.line(f"out[{k}] = {_position_value(integrator, nv, r, c, 'h', f'V[{k}]')};")
    w.line()
    w.doc(f"The staged store of `{name}`'s CUDA kernel: scalar `k` of item `it`'s "
          f"velocity rows `V` (of `{row.item}`) and the position-row entry `k` made from "
          "it, both at consecutive addresses across the warp's lanes.")
    w.line("template <typename T>")
    with w.block(f"GRID_INLINE void {row.store}(const Args<T>& args, size_t it, int k, T v)"):
        w.line(f"T* GRID_RESTRICT out = args.out + it * {2 * width};")
        w.line(f"store_once(out + {width} + k, v);")
        w.line("typedef T S;")
        w.line(f"const T h = args.in[{_dt_port(algorithm)}][it];")
        if integrator == "euler":
            w.line(f"const int r = k / {3 * nv}, c = k - {3 * nv} * r;")
            w.line("store_once(out + k, c == r ? T{} + S(1.0) : "
                   f"c == {nv} + r ? h : T{{}} + S(0.0));")
        else:
            w.line(f"const int r = k / {3 * nv}, c = k - {3 * nv} * r;")
            w.line("store_once(out + k, c == r ? T{} + S(1.0) + h * v : h * v);")
    return ops + added
