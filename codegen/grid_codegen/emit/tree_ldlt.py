"""Dense solves with the mass matrix through its tree-sparse factorisation `M = L^T D L`.

The level strategies' M^-1, forward dynamics and forward-dynamics gradient solve with
M. A kinematic tree makes M sparse: `M[i, j]` can be non-zero only when dof `i` is an
ancestor of dof `j` or the reverse (a multi-dof joint's dofs form a chain, first to
last). Eliminating from the last dof up to the root (Featherstone's LTDL, RBDA
chapter 6 on branch-induced sparsity) keeps that pattern with no fill-in: `L` is unit
lower triangular and `L[k, i]` is non-zero only for the ancestors `i` of `k`. Against
Gauss-Jordan on the dense M (three barriers per pivot, n^2 work in each) this is one
barrier per dof and `depth(k)^2 / 2` work in it.

* `emit_tree_ldlt`: in place on the lower triangle of M, one barrier per dof with
  ancestors. Step k subtracts the rank-one term of dof k from the rows of its
  ancestors: `M[i, j] -= M[k, i] M[k, j] / M[k, k]` for ancestors `j <= i` of `k`; lanes
  run across the rows. Row k is final once step k runs (later steps write only rows
  below k), so the unscaled `M[k, i] = L[k, i] D[k]` stays in place and `D^-1` is kept
  beside it.
* `emit_tree_ldlt_solve`: solves `M x = b` for one right-hand side per lane, the vector
  in registers: `L^T D` upwards (`w[k] = z[k] / D[k]`, `z[i] -= M[k, i] w[k]` for
  the ancestors `i` of `k`), then `L` downwards
  (`x[k] = w[k] - D^-1[k] sum_i M[k, i] x[i]`). The factor is read by every lane at the
  same address (a broadcast).

The dofs are numbered parents first (`idx_v` in joint order), so a dof's ancestors
have smaller indices; the level strategies only run such models (no mimic coupling).
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.algorithm import EmitContext
from grid_codegen.emit.layout import Buffer
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel


def dof_ancestors(model: RobotModel) -> list[tuple[int, ...]]:
    """For each dof, its ancestor dofs in ascending order: the earlier dofs of its own
    joint and every dof of the joints above it."""
    first_dof = [joint.idx_v for joint in model.joints]
    out: list[tuple[int, ...]] = []
    for i, joint in enumerate(model.joints):
        above: list[int] = []
        for j in model.ancestors(i):
            if j != i:
                above.extend(range(first_dof[j], first_dof[j] + model.joints[j].nv))
        for d in range(joint.nv):
            chain = tuple(sorted(above + list(range(first_dof[i], first_dof[i] + d))))
            if chain and chain[-1] >= first_dof[i] + d:
                raise ValueError("the tree factorisation needs parents' dofs before "
                                 "their children's")
            out.append(chain)
    return out


def index_runs(indices: tuple[int, ...] | list[int]) -> list[tuple[int, int]]:
    """Ascending indices as half-open runs of consecutive ones."""
    runs: list[tuple[int, int]] = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


def _nth_index(runs: list[tuple[int, int]], var: str) -> str:
    """The C++ expression of the `var`-th index (0-based) of the runs."""
    offsets = [0]
    for start, stop in runs:
        offsets.append(offsets[-1] + stop - start)
    expr = _plus(var, runs[-1][0] - offsets[-2])
    for m in range(len(runs) - 2, -1, -1):
        expr = f"({var} < {offsets[m + 1]} ? {_plus(var, runs[m][0] - offsets[m])} : {expr})"
    return expr


def _plus(var: str, shift: int) -> str:
    if shift == 0:
        return var
    return f"{var} + {shift}" if shift > 0 else f"{var} - {-shift}"


def emit_tree_ldlt(ctx: EmitContext, w: Writer, A: Buffer, n: int, stride: int,
                   dinv: Buffer) -> None:
    """Factor the SPD tree mass matrix in `A` (`A[r * stride + c]`, r, c < n; only the
    lower triangle is read and written) into `L^T D L` in place, and `dinv[k] = 1/D[k]`."""
    s = ctx.strategy
    ancestors = dof_ancestors(ctx.model)
    for k in range(n - 1, 0, -1):
        chain = ancestors[k]
        if not chain:
            continue
        runs = index_runs(chain)
        s.note_width(len(chain))
        w.comment(f"dof {k}: its {len(chain)} ancestors' rows")
        with w.block():
            w.line(f"const T rk = T(1) / {A[f'{k * stride + k}']};")
            with s.parallel(w, "a", len(chain)):
                w.line(f"const int i = {_nth_index(runs, 'a')};")
                w.line(f"const T l = {A[f'{k * stride} + i']} * rk;")
                w.line(f"T* GRID_RESTRICT row = &{A['i * ' + str(stride)]};")
                for start, stop in runs:
                    w.line(f"for (int j = {start}; j < {stop} && j <= i; ++j) "
                           f"row[j] -= l * {A[f'{k * stride} + j']};")
        s.barrier(w)
    with s.parallel(w, "k", n):
        w.line(f"{dinv['k']} = T(1) / {A[f'k * {stride + 1}']};")
    s.barrier(w)


def emit_tree_ldlt_solve(ctx: EmitContext, w: Writer, A: Buffer, n: int, stride: int,
                         dinv: Buffer, load: Callable[[int], str],
                         store: Callable[[int, str], str | list[str]]) -> None:
    """Inside a lane's scope: `x = M^-1 b` from the factor of `emit_tree_ldlt`, with
    `b[r]` read as `load(r)` and `x[r]` written by the statement (or statements)
    `store(r, value)`, emitted as soon as `x[r]` is final."""
    ancestors = dof_ancestors(ctx.model)
    for r in range(n):
        w.line(f"T v{r} = {load(r)};")
    for k in range(n - 1, -1, -1):  # L^T D, from the leaves up
        w.line(f"v{k} *= {dinv[k]};")
        for i in ancestors[k]:
            w.line(f"v{i} -= {A[k * stride + i]} * v{k};")
        w.line("GRID_ORDER();")
    for k in range(n):  # L, from the root down
        if ancestors[k]:
            terms = " + ".join(f"{A[k * stride + i]} * v{i}" for i in ancestors[k])
            w.line(f"v{k} -= {dinv[k]} * ({terms});")
        stored = store(k, f"v{k}")
        w.lines(*([stored] if isinstance(stored, str) else stored))
        w.line("GRID_ORDER();")
