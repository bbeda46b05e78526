"""`frame_jacobian_indexed`: the geometric Jacobian of any frame of the robot, chosen per
item at run time, in any of Pinocchio's three reference frames, straight from `q`.

The frame table of an artifact (`frame_table`): index `b < nb` is body `b`'s own frame
(its moving joint's), index `nb + k` is `model.frames[k]` (the URDF's links and fixed
joints, in meta.json's "frames" order). The kernel's second input, two scalars per item,
is `[frame index, reference frame]` with Pinocchio's codes: 0 WORLD, 1 LOCAL,
2 LOCAL_WORLD_ALIGNED. An index outside the table, a fractional one or another code
gives NaN (nothing is read out of bounds).

For a frame at world `(R, p)` and a world motion column `s = [v; w]` (about the world
origin) of a dof that moves it, the column is `s` (WORLD), `[v - p x w; w]`
(LOCAL_WORLD_ALIGNED) or `R^T` of that (LOCAL); columns of dofs that do not move the
frame are zero (on a mimic-coupled robot, a reduced column sums its full dofs' columns
that move the frame, each times its entry of `G`). The thread item is one traced pass
(every body's world placement and the world columns, as `world_kinematics` without
twists) and one written pass that picks the frame: a `switch` on the index gives
`(R, p)` with the frame's offset folded in at generation, and each column tests the
frame's body against the bodies it moves. On the GPU the item's own scalars stay in
registers (every index is a constant); on the CPU the written pass runs lane by lane,
each SIMD lane an item with its own frame.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.emit.tree_ldlt import index_runs
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.emit import RUNTIME, Array, ItemBuilder, lit


def frame_table(model: RobotModel) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """`(body, R, p)` of every frame the kernel knows, in index order (module doc)."""
    own = [(b, np.eye(3), np.zeros(3)) for b in range(model.nb)]
    return own + [(f.body, f.placement.R, f.placement.p) for f in model.frames]


def _column_terms(model: RobotModel) -> list[list[tuple[int, float]]]:
    """Per output column: the `(full dof, coefficient)` pairs it sums (one `(c, 1.0)` on a
    tree; a leader and its mimics on a coupled robot, the columns of `G`)."""
    if model.coupling is None:
        return [[(c, 1.0)] for c in range(model.nv)]
    G = model.coupling.matrix()
    return [[(d, float(G[d, c])) for d in range(G.shape[0]) if G[d, c] != 0.0]
            for c in range(G.shape[1])]


def _dof_bodies(model: RobotModel) -> list[list[int]]:
    """Per full dof: the bodies whose frames it moves (its body's subtree)."""
    subtrees = model.subtrees
    return [sorted(subtrees[b]) for b, j in enumerate(model.joints) for _ in range(j.nv)]


def _world_frames(model: RobotModel, X: list) -> list:
    """Every body's `R` (9, row-major), then every body's `p`, then the world motion
    columns of the full tree (6 x nv, row-major)."""
    oX = A.world_poses(model, X)
    columns = [sp.motion_to_parent(oX[i], column)
               for i, joint in enumerate(model.joints) for column in A.subspace(joint)]
    out = [x for R, _ in oX for x in R] + [x for _, p in oX for x in p]
    return out + [columns[c][r] for r in range(6) for c in range(len(columns))]


# -- a few folded expressions for the written pass ----------------------------------------
Value = "float | str"


def _neg(a) -> Value:
    """`-a`; a leading minus is taken off rather than doubled (`--x` is a decrement)."""
    if isinstance(a, float):
        return -a
    return a[1:] if a.startswith("-") else f"-{a}"


def _mul(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a * b
    if isinstance(a, str) and isinstance(b, str):
        return f"{a} * {b}"
    c, x = (a, b) if isinstance(a, float) else (b, a)
    return 0.0 if c == 0.0 else x if c == 1.0 else _neg(x) if c == -1.0 else f"{lit(c)} * {x}"


def _sum(terms) -> Value:
    """`t0 + t1 + ...` with constants folded together and zeros dropped."""
    const, parts = 0.0, []
    for t in terms:
        if isinstance(t, float):
            const += t
        elif parts and t.startswith("-"):
            parts.append(f"- {t[1:]}")
        else:
            parts.append(f"+ {t}" if parts else t)
    if not parts:
        return const
    if const:
        parts.append(f"+ {lit(const)}")
    return "(" + " ".join(parts) + ")"


def _text(v) -> str:
    return lit(v) if isinstance(v, float) else v


def _cross(a, b) -> list:
    return [_sum([_mul(a[1], b[2]), _neg(_mul(a[2], b[1]))]),
            _sum([_mul(a[2], b[0]), _neg(_mul(a[0], b[2]))]),
            _sum([_mul(a[0], b[1]), _neg(_mul(a[1], b[0]))])]


def _frame_case(w: Writer, wk: list, nb: int, body: int, R: np.ndarray, p: np.ndarray
                ) -> None:
    """Assign `b`, `R[9]`, `p[3]` of one frame: `oX_body * offset` (its offset's zeros and
    ones folded), or the offset itself for a frame welded to the world."""
    R = [[float(x) for x in row] for row in R]
    p = [float(x) for x in p]
    if body < 0:
        Rw = [R[i][j] for i in range(3) for j in range(3)]
        pw = p
    else:
        Rb = [[wk[9 * body + 3 * i + j] for j in range(3)] for i in range(3)]
        pb = [wk[9 * nb + 3 * body + i] for i in range(3)]
        Rw = [_sum([_mul(Rb[i][k], R[k][j]) for k in range(3)])
              for i in range(3) for j in range(3)]
        pw = [_sum([_mul(Rb[i][k], p[k]) for k in range(3)] + [pb[i]]) for i in range(3)]
    w.line(f"b = {body};")
    w.line(" ".join(f"R[{k}] = {_text(v)};" for k, v in enumerate(Rw)))
    w.line(" ".join(f"p[{k}] = {_text(v)};" for k, v in enumerate(pw)))


def _membership(bodies: list[int]) -> str:
    """The C++ condition `b` is in `bodies` (merged into ranges)."""
    runs = index_runs(bodies)
    tests = [f"b == {a}" if hi == a + 1 else f"(b >= {a} && b < {hi})" for a, hi in runs]
    return " || ".join(tests) or "false"


def emit_frame_jacobian(model: RobotModel, kb: ItemBuilder, X: Array, frame: Array,
                        out: Array, unX) -> None:
    """The passes of `frame_jacobian_indexed` (module doc) into the item `kb`."""
    wk_array = kb.call("frame_world_columns",
                       "Every body's world placement (R row-major, then p) and the world "
                       "motion columns (6 x nv, about the world origin).",
                       lambda x: _world_frames(model, unX(x)), [X], "wk")
    nb = model.nb
    table = frame_table(model)
    terms, moved = _column_terms(model), _dof_bodies(model)
    nv, nv_full = len(terms), len(moved)
    runtime = [k for k, v in enumerate(wk_array.pattern) if v is RUNTIME]
    # Per lane, the traced values by name (a constant entry is its literal).
    wk = [f"w[{k}]" if v is RUNTIME else float(v) for k, v in enumerate(wk_array.pattern)]

    def full_column(d: int) -> list:
        return [wk[12 * nb + r * nv_full + d] for r in range(6)]

    def store(w: Writer, c: int, values: list) -> None:
        for r, v in enumerate(values):
            w.line(f"set_lane(out[{r * nv + c}], lane, {_text(v) if v != 'zero' else 'S(0)'});")

    def column(w: Writer, c: int) -> None:
        """Output column `c`: its world column `s` (a tree's own, or a coupled robot's sum
        of the columns that move the frame), then the reference frame's form of it."""
        w.comment(f"column {c}")
        if len(terms[c]) == 1 and terms[c][0][1] == 1.0:
            d = terms[c][0][0]
            s = full_column(d)
            with w.block(f"if (!({_membership(moved[d])}))"):
                store(w, c, ["zero"] * 6)
            open_block = w.block("else")
        else:
            w.line("S s[6] = {S(0), S(0), S(0), S(0), S(0), S(0)};")
            for d, coef in terms[c]:
                with w.block(f"if ({_membership(moved[d])})"):
                    for r, v in enumerate(full_column(d)):
                        if v != 0.0:
                            w.line(f"s[{r}] += {_text(_mul(coef, v))};")
            s = [f"s[{r}]" for r in range(6)]
            open_block = w.block()
        with open_block:
            lin = [_sum([s[i], _neg(v)]) for i, v in
                   enumerate(_cross(["p[0]", "p[1]", "p[2]"], s[3:]))]
            with w.block("if (rf == 0)"):
                store(w, c, s)
            with w.block("else"):
                w.line("const S l[6] = {" + ", ".join(_text(v) for v in lin + s[3:]) + "};")
                with w.block("if (rf == 2)"):
                    store(w, c, [f"l[{r}]" for r in range(6)])
                with w.block("else"):
                    store(w, c, [" + ".join(f"R[{3 * k + r % 3}] * l[{3 * (r // 3) + k}]"
                                            for k in range(3)) for r in range(6)])

    def text(w: Writer) -> None:
        w.line("const S nan = S(NAN);")
        with w.block("for (int lane = 0; lane < lanes_per_value<T>(); ++lane)"):
            w.line(f"S w[{max(1, len(wk))}];")
            for k in runtime:
                w.line(f"w[{k}] = get_lane(wk[{k}], lane);")
            w.line("const S fs = get_lane(frame[0], lane);")
            w.line("const S rs = get_lane(frame[1], lane);")
            w.comment("The index and the code must be whole numbers in range (NaN fails "
                      "both tests).")
            w.line(f"int f = fs >= S(0) && fs < S({len(table)}) ? (int)fs : -1;")
            w.line("if (f >= 0 && S(f) != fs) f = -1;")
            w.line("const int rf = rs == S(0) ? 0 : rs == S(1) ? 1 : rs == S(2) ? 2 : -1;")
            w.line("int b = -1;")
            w.line("S R[9], p[3];")
            with w.block("switch (rf < 0 ? -1 : f)"):
                for index, (body, R, p) in enumerate(table):
                    with w.block(f"case {index}:", "}"):
                        _frame_case(w, wk, nb, body, R, p)
                        w.line("break;")
                with w.block("default:", "}"):
                    w.line(f"for (int k = 0; k < {6 * nv}; ++k) set_lane(out[k], lane, nan);")
                    w.line("continue;")
            for c in range(nv):
                with w.block():
                    column(w, c)

    kb.call_static("frame_jacobian_pick", text,
                   "The Jacobian of each lane's frame in its reference frame "
                   "(emit.frame_jacobian).",
                   [("const T* GRID_RESTRICT wk", "wk"),
                    ("const T* GRID_RESTRICT frame", frame.name),
                    ("T* GRID_RESTRICT out", out.name)], 30 * nv + 20)
