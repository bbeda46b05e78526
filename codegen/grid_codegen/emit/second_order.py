"""Thread-strategy passes of the second-order profile: `idsva_so` and `fdsva_so`.

Both write four `(nv, nv, nv)` blocks per item, row-major `[i][j][k]`, in the registry's
part order. The second derivatives of RNEA are traced on hyper-duals
(`symbolic.second_order`) in groups of outer directions, each group one pass that writes
its entries straight to the output (the structural zeros included), so that no
intermediate of the size of the output exists:

    idsva_so:  joint_transforms(q) -> X;  acceleration(qdd) -> acc
               rnea_second_order[_g<k>](X, qd, acc, f_ext) -> out  (the four blocks)
    fdsva_so:  aba_minv(X, qd, u, f_ext) -> qdd_minv;  acceleration_at_fd -> acc
               rnea_derivatives_dense(X, qd, acc, f_ext) -> dtau   (nv x 2nv)
               the passes of idsva_so (the same functions) -> out
               fdsva_combine(qdd_minv, dtau, out) -> out           (dense loops, in place)

Above UNROLLED_OPS the Hessian blocks come from one pass per joint with its outer
direction a run-time seed (`rnea_second_order_joint<j>`), called by a loop over the
joint's directions that scatters each column (`rnea_second_order_loops`): g1's unrolled
trace is about a million operations, the per-joint passes half of it in code.

`fdsva_combine` applies the implicit-function theorem of `ID(q, qd, FD(q, qd, u)) = u`
differentiated twice (with `dqdd = -Minv dtau`):

    d2qdd/dz dz' = -Minv (d2tau/dz dz' + dM/dz dqdd/dz' + dM/dz' dqdd/dz),
    dMinv/dq_k   = -Minv (dM/dq_k) Minv.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import graph as G
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic import second_order as SO
from grid_codegen.symbolic.emit import Array, ItemBuilder

UNROLLED_OPS = 300000
"""Above this many traced operations (all outer directions unrolled), the Hessian blocks
are traced one pass per joint with a run-time outer direction (`_emit_joint_loops`)."""

SINGLE_PASS_OPS = 60000
"""Up to this many traced operations the second derivatives are one pass (segmented by
the emitter); above it, groups of outer directions (each recomputes what it needs)."""

GROUP_OPS = 40000
"""Traced operations per group of outer directions above SINGLE_PASS_OPS."""


def output_index(nv: int, i: int, a: int, b: int) -> int | None:
    """Where `d/dz_b (dtau_i/dz_a)` goes in the four blocks (None: not an output)."""
    n3 = nv ** 3
    if a < nv and b < nv:
        return (i * nv + a) * nv + b
    if a >= nv and b >= nv:
        return n3 + (i * nv + a - nv) * nv + b - nv
    if a < nv <= b:
        return 2 * n3 + (i * nv + a) * nv + b - nv
    return None


def _unit_outputs(nv: int, unit: tuple[str, int]) -> list[int]:
    kind, a = unit
    if kind == "M":
        return [3 * nv ** 3 + (i * nv + a) * nv + k for i in range(nv) for k in range(nv)]
    bs = range(nv, 2 * nv) if a >= nv else range(2 * nv)
    return [k for i in range(nv) for b in bs
            if (k := output_index(nv, i, a, b)) is not None]


def second_order_values(model: RobotModel, X: list, I: Sequence, qd: Sequence,
                        qdd: Sequence, fext: Sequence | None, gravity: object,
                        units: Sequence[tuple[str, int]]) -> list:
    """The four blocks (flat), the entries of `units` traced, the others 0.0."""
    nv = model.nv
    out: list = [0.0] * (4 * nv ** 3)
    outer = [a for kind, a in units if kind == "H"]
    if outer:
        H = SO.rnea_second_order(model, X, I, qd, qdd, fext, gravity, outer)
        for i in range(nv):
            for r, a in enumerate(outer):
                for b in range(2 * nv):
                    k = output_index(nv, i, a, b)
                    if k is not None:
                        out[k] = H[i][r][b]
    columns = [j for kind, j in units if kind == "M"]
    if columns:
        dM = SO.mass_matrix_derivative(model, X, I, columns)
        for i in range(nv):
            for c, j in enumerate(columns):
                for k in range(nv):
                    out[3 * nv ** 3 + (i * nv + j) * nv + k] = dM[i][c][k]
    return out


def plan_units(trace: Callable[[G.Graph, list], list], units: list[tuple[str, int]],
               nv: int, single_pass_ops: int | None = None,
               group_ops: int | None = None) -> tuple[list[list[tuple[str, int]]], int]:
    """Groups of `units` and their traced operation count in all: one group when they
    trace to at most `single_pass_ops` (default SINGLE_PASS_OPS) operations, else
    consecutive units of at most `group_ops` (default GROUP_OPS) each (from one trace)."""
    single_pass_ops = SINGLE_PASS_OPS if single_pass_ops is None else single_pass_ops
    group_ops = GROUP_OPS if group_ops is None else group_ops
    g = G.Graph()
    result = trace(g, units)
    total = sum(1 for i in G.reachable(g, result) if g.nodes[i][0] != "in")
    if total <= single_pass_ops:
        return [units], total
    groups: list[list[tuple[str, int]]] = []
    current: list[tuple[str, int]] = []
    seen: set[int] = set()
    for unit in units:
        reach = [i for i in G.reachable(g, [result[k] for k in _unit_outputs(nv, unit)])
                 if g.nodes[i][0] != "in"]
        new = [i for i in reach if i not in seen]
        if current and len(seen) + len(new) > group_ops:
            groups.append(current)
            current, seen, new = [], set(), reach
        current.append(unit)
        seen.update(new)
    groups.append(current)
    return groups, total


def _tracer(plan, arrays: list[Array]):
    """`values(x, qd, acc, f_ext, I, g, units)` (the four blocks, `units` traced) and
    `trace(graph, units)` (the same on `arrays`' patterns, for plan_units)."""
    model: RobotModel = plan.model

    def values(x, v, a, f, I, g, units):
        return second_order_values(model, A.unflatten_placements(x, model.nb), I, v, a, f, g, units)

    def trace(g: G.Graph, units):
        inputs = [[g.input(f"{a.name}[{k}]") if p is None else p
                   for k, p in enumerate(a.pattern)] for a in arrays + plan.inertia_array()]
        gravity = g.input("gravity")
        table = inputs.pop() if plan.runtime_inertia else None
        return values(*inputs, plan.inertias(table), gravity, units)

    return values, trace


def _all_units(nv: int) -> list[tuple[str, int]]:
    return [("H", a) for a in range(2 * nv)] + [("M", j) for j in range(nv)]


def _emit_group(plan, kb: ItemBuilder, values, arrays: list[Array], out: Array, name: str,
                units: list[tuple[str, int]]) -> None:
    nv = plan.model.nv
    written = sorted(i for u in units for i in _unit_outputs(nv, u))
    plan.dynamics_call(
        kb, name, f"Second derivatives of RNEA (hyper-duals): {_describe(units, nv)}.",
        lambda *v, units=units: values(*v, units), arrays, out, write=written,
        schedule_order=written)


def emit_second_order(plan, kb: ItemBuilder, X: Array, qd: Array, acc: Array,
                      fext: Array, out: Array) -> None:
    """The passes writing the four blocks of `idsva_so` at the acceleration `acc` (a
    dense local array) into `out`: the world-frame sweep (`symbolic.idsva`) where it
    covers the model and stays within UNROLLED_OPS traced operations; else hyper-duals,
    unrolled up to UNROLLED_OPS, beyond that one run-time-seeded pass per joint for the
    Hessian blocks."""
    nv = plan.model.nv
    arrays = [X, qd, acc, fext]
    if _emit_idsva(plan, kb, arrays, out):
        return
    values, trace = _tracer(plan, arrays)
    mass = [("M", j) for j in range(nv)]
    groups, total = plan_units(trace, _all_units(nv), nv)
    if total > UNROLLED_OPS:
        _emit_joint_loops(plan, kb, arrays, out)
        groups, _ = plan_units(trace, mass, nv)
    for k, units in enumerate(groups):
        name = "rnea_second_order" if len(groups) == 1 else f"rnea_second_order_g{k}"
        _emit_group(plan, kb, values, arrays, out, name, units)


def _sweep_blocks(model: RobotModel) -> Callable:
    """The traced function of the world-frame sweep's four blocks."""
    def blocks(x, v, a, f, I, g):
        return idsva.idsva_blocks(model, A.unflatten_placements(x, model.nb), I, v, a, f, g)
    return blocks


def _entries(plan_of_writes: tuple[list[int], dict[int, int]], turns: set[int] | None,
             first: bool = False) -> list[int]:
    """The entries `turns` of the sweep write (None: every entry), in emission order
    (`first`: with the entries no turn reaches, zeros); `idsva.write_plan`."""
    order, owners = plan_of_writes
    if turns is None:
        return list(order)
    return [k for k in order if owners.get(k, -1) in turns or (first and k not in owners)]


class _SweepTrace:
    """A pass `fn(*arrays, I, g)` (default: the world-frame sweep) traced on `arrays`'
    patterns, to count the operations a set of its entries reaches (the graph is kept
    only for that)."""

    def __init__(self, plan, arrays: list[Array], fn: Callable | None = None) -> None:
        self.graph = G.Graph()
        inputs = [[self.graph.input(f"{a.name}[{k}]") if p is None else p
                   for k, p in enumerate(a.pattern)] for a in arrays + plan.inertia_array()]
        table = inputs.pop() if plan.runtime_inertia else None
        fn = fn or _sweep_blocks(plan.model)
        self.values = fn(*inputs, plan.inertias(table), self.graph.input("gravity"))

    def count(self, entries: Sequence[int]) -> int:
        """The traced operations the output `entries` reach."""
        g = self.graph
        return sum(1 for i in G.reachable(g, [self.values[k] for k in entries])
                   if g.nodes[i][0] != "in")


def _emit_idsva(plan, kb: ItemBuilder, arrays: list[Array], out: Array) -> bool:
    """The four blocks by the world-frame sweep, one pass computed in the sweep's own
    order (`idsva.idsva_blocks`), or its loop form above UNROLLED_OPS; False (nothing
    emitted) where the sweep does not cover the model."""
    model: RobotModel = plan.model
    if not idsva.supported(model):
        return False
    order = _entries(idsva.write_plan(model), None)
    if _SweepTrace(plan, arrays).count(order) > UNROLLED_OPS:
        _emit_idsva_loops(plan, kb, arrays, out)
        return True
    plan.dynamics_call(
        kb, "idsva", "The four blocks of idsva_so by the world-frame sweep of IDSVA "
        "(symbolic/idsva.py), computed in the order the sweep finishes them.",
        _sweep_blocks(model), arrays, out, schedule_order=order)
    return True


def _sweep_groups(plan, arrays: list[Array], budget: int) -> list[list[tuple[str, int]]]:
    """The directions strategy's groups on the sweep: consecutive turns of the sweep
    (units `("T", turn)`, `idsva.idsva_blocks`'s owners) of at most `budget` traced
    operations each, every group recomputing the forward pass and the composites its
    turns read; `[]` above UNROLLED_OPS."""
    writes = idsva.write_plan(plan.model)
    sweep = _SweepTrace(plan, arrays)
    if sweep.count(_entries(writes, None)) > UNROLLED_OPS:
        return []
    groups: list[list[tuple[str, int]]] = []
    current: list[int] = []
    for turn in sorted(set(writes[1].values())):
        trial = current + [turn]
        if current and sweep.count(_entries(writes, set(trial), not groups)) > budget:
            groups.append([("T", t) for t in current])
            trial = [turn]
        current = trial
    groups.append([("T", t) for t in current])
    return groups


def _emit_idsva_loops(plan, kb: ItemBuilder, arrays: list[Array], out: Array) -> None:
    """The loop form of the sweep (`grid/idsva.h`): the forward pass traced into a local
    `K`, then the backward sweep as loops over the robot's tree tables (code independent
    of the number of pairs of columns)."""
    model: RobotModel = plan.model
    K = forward_table_call(plan, kb, arrays)
    tables = idsva.tree_tables(model)
    kb.call_static(f"idsva_sweep_{model.nv}", lambda w: _sweep_body(w, model, tables),
                   "The four blocks of idsva_so by the IDSVA sweep as loops over the tree "
                   "(grid/idsva.h), from the forward pass's K.",
                   [(f"T* GRID_RESTRICT {K.name}", K.name),
                    (f"T* GRID_RESTRICT {out.name}", out.name)],
                   idsva.sweep_operations(model))


def forward_table_call(plan, kb: ItemBuilder, arrays: list[Array]) -> Array:
    """The forward pass of the sweep's loop forms into the local `K` (`grid/idsva.h`;
    also the gather strategy's, which shares the pass)."""
    model: RobotModel = plan.model
    return plan.dynamics_call(
        kb, "idsva_forward", "World-frame columns and bodies for the loop form of the "
        "IDSVA sweep (grid/idsva.h K).",
        lambda x, v, a, f, I, g: idsva.forward_table(
            model, A.unflatten_placements(x, model.nb), I, v, a, f, g),
        arrays, "K", dense=True)


def _sweep_body(w: Writer, model: RobotModel, tables: dict[str, list[int]]) -> None:
    """The robot's tree tables (a function-local static copy: nvcc lets device code
    index those, not namespace-scope constexpr arrays), then the sweep."""
    with w.block("struct Tables", "};"):
        for name, values in tables.items():
            w.line(f"int {name}[{max(1, len(values))}];")
    w.line("static constexpr Tables t = {")
    for name, values in tables.items():
        w.line(f"    {{{', '.join(str(v) for v in values) or '0'}}},  // {name}")
    w.line("};")
    w.line(f"idsva_sweep<T>({model.nb}, {model.nv}, t.parent, t.dof_start, t.dof_count, "
           "t.body_of, t.chain_start, t.chain, K, out);")


DIRECTION_GROUP_OPS = 8000
"""Traced operations per group in idsva_so's directions strategy (`emit.directions`).
On hyper-duals (groups of outer directions) iiwa14 gave 9 groups (83,700 operations
against 48,100 for the whole item), 5.2x faster than the thread kernel at B = 1,024 on an
H200, 1.7x slower at 65,536 (tools/bench/second_order_probe). On the sweep (groups of its
turns) iiwa14 gets 7 groups, 46,969 operations against 33,148 whole; go2 15 groups,
107,888 against 82,835 (not yet timed on a GPU)."""


def direction_groups(plan, X: Array, ports: dict) -> list[list[tuple[str, int]]]:
    """The groups of idsva_so's directions strategy, each at most DIRECTION_GROUP_OPS
    traced operations: turns of the world-frame sweep where it covers the model
    (`_sweep_groups`), else outer directions (then dM/dq columns) on hyper-duals; `[]`
    where the strategy does not apply (fewer than two groups, or an item above
    UNROLLED_OPS)."""
    nv = plan.model.nv
    acc = _acceleration(ItemBuilder(plan.library), ports)  # its pattern, for the trace
    if idsva.supported(plan.model):
        groups = _sweep_groups(plan, [X, ports["qd"], acc, ports["f_ext"]],
                               DIRECTION_GROUP_OPS)
        return groups if len(groups) >= 2 else []
    _, trace = _tracer(plan, [X, ports["qd"], acc, ports["f_ext"]])
    groups, total = plan_units(trace, _all_units(nv), nv, 0, DIRECTION_GROUP_OPS)
    return groups if total <= UNROLLED_OPS and len(groups) >= 2 else []


def emit_idsva_so_group(plan, kb: ItemBuilder, X: Array, ports: dict, out: Array,
                        k: int, units: list[tuple[str, int]]) -> None:
    """Group `k` of idsva_so's directions strategy: the acceleration, then the one pass
    writing the entries of `units` into `out` (`idsva_d<k>` for turns of the sweep,
    `rnea_second_order_d<k>` for outer directions on hyper-duals)."""
    arrays = [X, ports["qd"], _acceleration(kb, ports), ports["f_ext"]]
    if units[0][0] == "T":  # turns of the sweep (the first group writes the zeros too)
        written = _entries(idsva.write_plan(plan.model), {t for _, t in units}, k == 0)
        plan.dynamics_call(
            kb, f"idsva_d{k}", f"The entries of idsva_so that turns {units[0][1]}.."
            f"{units[-1][1]} of the sweep write (symbolic/idsva.py).",
            _sweep_blocks(plan.model), arrays, out, write=written, schedule_order=written)
        return
    values, _ = _tracer(plan, arrays)
    _emit_group(plan, kb, values, arrays, out, f"rnea_second_order_d{k}", units)


def _emit_joint_loops(plan, kb: ItemBuilder, arrays: list[Array], out: Array) -> None:
    """The Hessian blocks by one pass per joint (`rnea_second_order_joint`), each run for
    every direction of its joint from a dense loop that scatters the column it writes."""
    model: RobotModel = plan.model
    nv = model.nv
    side = ItemBuilder(plan.library)  # registers the passes; the loop calls them
    calls = []
    for j, joint in enumerate(model.joints):
        if joint.nv == 0:
            continue
        seed = Array.runtime("seed", 2 * joint.nv, "item")

        def column(x, v, a, f, s, I, g, j=j):
            H = SO.rnea_second_order_joint(model, A.unflatten_placements(x, model.nb), I, v,
                                           a, f, g, j, s)
            return [h for row in H for h in row]

        plan.dynamics_call(side, f"rnea_second_order_joint{j}",
                           f"d/dz_b (dtau/dz . seed) for a direction of joint {j} "
                           f"({joint.name}) given in `seed` (hyper-duals).", column,
                           arrays + [seed], "column", dense=True)
        calls.append((joint, side.calls[-1]))
    params: dict[str, str] = {}
    for _, call in calls:
        for decl, name in plan.library.passes[call.pass_name].params:
            if name not in ("seed", "column"):
                params.setdefault(name, decl)
    params[out.name] = f"T* GRID_RESTRICT {out.name}"
    ops = sum(plan.library.passes[c.pass_name].op_count * 2 * jt.nv for jt, c in calls)
    kb.call_static(f"rnea_second_order_loops_{model.nv}",
                   lambda w: _joint_loops_body(w, nv, calls, out.name),
                   "The Hessian blocks of idsva_so, joint by joint and direction by "
                   "direction (run-time seeds), scattered into the output.",
                   [(decl, name) for name, decl in params.items()], ops)


def _joint_loops_body(w: Writer, nv: int, calls: list, out: str) -> None:
    n3 = nv ** 3
    w.line(f"constexpr int n = {nv};")
    w.line(f"T seed[{2 * max(jt.nv for jt, _ in calls)}];")
    w.line("T column[n * 2 * n];")
    for joint, call in calls:
        m = joint.nv
        w.comment(f"Joint {joint.name}: outer directions q {joint.idx_v}.."
                  f"{joint.idx_v + m - 1} and their velocities.")
        with w.block(f"for (int d = 0; d < {2 * m}; ++d)"):
            w.line(f"for (int e = 0; e < {2 * m}; ++e) seed[e] = T{{}};")
            w.line("seed[d] = T{} + S(1);")
            w.line(f"{call.pass_name}<T, S>({call.args});")
            w.line(f"const bool velocity = d >= {m};")
            w.line(f"const int a = velocity ? d - {m} + {joint.idx_v} : d + {joint.idx_v};")
            with w.block("for (int i = 0; i < n; ++i)"):
                with w.block("for (int b = 0; b < n; ++b)"):
                    with w.block("if (velocity)"):
                        w.line(f"{out}[{n3} + (i * n + a) * n + b] = "
                               "column[i * 2 * n + n + b];")
                    with w.block("else"):
                        w.line(f"{out}[(i * n + a) * n + b] = column[i * 2 * n + b];")
                        w.line(f"{out}[{2 * n3} + (i * n + a) * n + b] = "
                               "column[i * 2 * n + n + b];")


def _describe(units: Sequence[tuple[str, int]], nv: int) -> str:
    outer = [a for kind, a in units if kind == "H"]
    columns = [j for kind, j in units if kind == "M"]
    parts = []
    if outer:
        parts.append(f"outer directions {outer[0]}..{outer[-1]} of 2nv = {2 * nv}")
    if columns:
        parts.append(f"dM/dq columns {columns[0]}..{columns[-1]}")
    return ", ".join(parts)


def _acceleration(kb: ItemBuilder, ports: dict) -> Array:
    return kb.call("acceleration", "qdd (zero when not given), for the second-order passes.",
                   lambda a: list(a), [ports["qdd"]], "acc", dense=True)


def emit_idsva_so(plan, kb: ItemBuilder, X: Array, ports: dict, out: Array) -> None:
    """`idsva_so`: the acceleration (None is zero) into a local, then the passes."""
    emit_second_order(plan, kb, X, ports["qd"], _acceleration(kb, ports), ports["f_ext"], out)


def emit_fdsva_so(plan, kb: ItemBuilder, X: Array, ports: dict, out: Array) -> None:
    """`fdsva_so`: FD and M^-1, RNEA's first and second derivatives there (the passes of
    `idsva_so`, shared), then the implicit-function combination in place."""
    nv = plan.model.nv
    solved, acc, derivative = fd_first_order(plan, kb, X, ports)
    emit_second_order(plan, kb, X, ports["qd"], acc, ports["f_ext"], out)
    kb.call_static(f"fdsva_combine_{nv}", lambda w: _combine_body(w, nv),
                   "d2qdd = -Minv (d2tau + dM dqdd + (dM dqdd)^T) and dMinv = -Minv dM "
                   "Minv, in place over the four blocks (dense loops).",
                   [(f"const T* GRID_RESTRICT {solved.name}", solved.name),
                    (f"T* GRID_RESTRICT {derivative.name}", derivative.name),
                    (f"T* GRID_RESTRICT {out.name}", out.name)], 8 * nv ** 4)


def fd_first_order(plan, kb: ItemBuilder, X: Array, ports: dict) -> tuple[Array, Array, Array]:
    """fdsva_so's first-order passes (also its gather strategy's, which shares them):
    `qdd_minv` (FD and M^-1), `acc` (FD's qdd) and `dtau` (RNEA's first derivatives
    there, nv x 2nv), dense locals."""
    model: RobotModel = plan.model
    nv = model.nv
    solved = plan.dynamics_call(
        kb, "aba_minv", "qdd = FD(q, qd, u) (entries 0..nv-1) and M^-1 (row-major, "
        "then), sharing the articulated inertias.",
        lambda x, qd, u, f, I, g: A.aba_minv(model, A.unflatten_placements(x, model.nb),
                                             I, qd, u, f, g),
        [X, ports["qd"], ports["u"], ports["f_ext"]], "qdd_minv", dense=True)
    acc = kb.call("acceleration_at_fd", "qdd = FD(q, qd, u), for the second-order passes.",
                  lambda s: list(s[:nv]), [solved], "acc", dense=True)

    def dtau(x, qd, a, f, I, g):
        D = A.rnea_derivatives(model, A.unflatten_placements(x, model.nb), I, qd, a, f, g)
        return [v for row in D for v in row]

    derivative = plan.dynamics_call(
        kb, "rnea_derivatives_dense", "[dtau/dq | dtau/dqd] (dense).", dtau,
        [X, ports["qd"], acc, ports["f_ext"]], "dtau", dense=True)
    return solved, acc, derivative


def _combine_body(w: Writer, nv: int) -> None:
    """The loops of `fdsva_combine`: `qdd_minv` holds qdd (nv) then Minv (row-major),
    `dtau` the first derivatives (nv x 2nv, turned into dqdd in place), `out` the
    blocks."""
    n3 = nv ** 3
    w.line(f"constexpr int n = {nv};")
    w.line("const T* Minv = qdd_minv + n;")
    w.line("T t[n];")
    w.comment("dqdd = -Minv dtau, column by column, in place.")
    with w.block("for (int c = 0; c < 2 * n; ++c)"):
        w.line("for (int l = 0; l < n; ++l) t[l] = dtau[l * 2 * n + c];")
        with w.block("for (int i = 0; i < n; ++i)"):
            w.line("T acc{};")
            w.line("for (int l = 0; l < n; ++l) acc += Minv[i * n + l] * t[l];")
            w.line("dtau[i * 2 * n + c] = -acc;")
    w.line(f"T* qq = out; T* vv = out + {n3}; T* qv = out + {2 * n3};")
    w.line(f"const T* dM = out + {3 * n3};")
    w.comment("dM[l][m][j] = dM_lm / dq_j; dqdd_dq[m][k] = dtau[m * 2n + k], dqdd_dqd at "
              "+ n.")
    with w.block("for (int j = 0; j < n; ++j)"):
        with w.block("for (int k = 0; k < n; ++k)"):
            w.comment("The q-q block.")
            with w.block("for (int l = 0; l < n; ++l)"):
                w.line("T acc = qq[(l * n + j) * n + k];")
                with w.block("for (int m = 0; m < n; ++m)"):
                    w.line("acc += dM[(l * n + m) * n + j] * dtau[m * 2 * n + k]"
                           " + dM[(l * n + m) * n + k] * dtau[m * 2 * n + j];")
                w.line("t[l] = acc;")
            _apply_minv(w, "qq")
            w.comment("The q-qd block.")
            with w.block("for (int l = 0; l < n; ++l)"):
                w.line("T acc = qv[(l * n + j) * n + k];")
                w.line("for (int m = 0; m < n; ++m) "
                       "acc += dM[(l * n + m) * n + j] * dtau[m * 2 * n + n + k];")
                w.line("t[l] = acc;")
            _apply_minv(w, "qv")
            w.comment("The qd-qd block (dM/dqd = 0).")
            w.line("for (int l = 0; l < n; ++l) t[l] = vv[(l * n + j) * n + k];")
            _apply_minv(w, "vv")
    w.comment("dMinv/dq_k = -Minv (dM/dq_k) Minv, slice by slice in place.")
    w.line("T W[n * n];")
    w.line(f"T* dMinv = out + {3 * n3};")
    with w.block("for (int k = 0; k < n; ++k)"):
        with w.block("for (int l = 0; l < n; ++l)"):
            with w.block("for (int j = 0; j < n; ++j)"):
                w.line("T acc{};")
                w.line("for (int m = 0; m < n; ++m) "
                       "acc += dMinv[(l * n + m) * n + k] * Minv[m * n + j];")
                w.line("W[l * n + j] = acc;")
        with w.block("for (int i = 0; i < n; ++i)"):
            with w.block("for (int j = 0; j < n; ++j)"):
                w.line("T acc{};")
                w.line("for (int l = 0; l < n; ++l) acc += Minv[i * n + l] * W[l * n + j];")
                w.line("dMinv[(i * n + j) * n + k] = -acc;")


def _apply_minv(w: Writer, block: str) -> None:
    """`block[i][j][k] = -(Minv t)_i` for the current `(j, k)`."""
    with w.block("for (int i = 0; i < n; ++i)"):
        w.line("T acc{};")
        w.line("for (int l = 0; l < n; ++l) acc += Minv[i * n + l] * t[l];")
        w.line(f"{block}[(i * n + j) * n + k] = -acc;")
