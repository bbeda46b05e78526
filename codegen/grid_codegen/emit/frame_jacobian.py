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
that move the frame, each times its entry of `G`).

The thread item is one written pass of two `switch`es: the frame index gives the frame's
body and offset (frames of equal body and offset share a case), then the body's case
traces its own chain from `q` (the joint transforms and placements of its ancestors and
their columns only, constants folded) and writes the columns that move it; the others
are zero. So an item holds one chain, not the tree: iiwa14 64 registers, g1 127 and no
spills (ptxas, sm_90, float32), where a first form that traced every body before picking
one held the whole tree (g1: 255 registers, 1 KB of spills). Lanes of a CPU vector that
ask for the same frame run as one vector; on the GPU a lane is an item. On the CPU build
each body's case is a function of its own (`GRID_HOST_NOINLINE`: g++ takes superlinear
time on one function of every case); the GPU build inlines it.

`frame_jacobian_dot_indexed` is the same pass with `qd`: each case also traces its
chain's world twists `ov`, and a column's rate is `ov_j x s` (WORLD; `ov_j` the twist of
the column's own body, as Pinocchio's computeJointJacobiansTimeVariation); about the
frame origin `p` (LOCAL_WORLD_ALIGNED) it is shifted and less `p-dot x w_s`; LOCAL is
`R^T` of the shifted rate less the frame's own twist `x` the LOCAL column.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import emit as symbolic_emit
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.emit import Array, ItemBuilder, lit


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


def _moving_columns(model: RobotModel, body: int, terms) -> tuple[list[int], set[int]]:
    """The output columns that move `body`, and the full dofs of its chain."""
    chain = {d for j in model.ancestors(body)
             for d in range(model.joints[j].idx_v, model.joints[j].idx_v + model.joints[j].nv)}
    return [c for c, pairs in enumerate(terms) if any(d in chain for d, _ in pairs)], chain


def _body_chain(model: RobotModel, placements: list, body: int, terms, qd=None) -> list:
    """`[R (9, row-major), p (3)]` of `body` in the world, then the world motion column
    (6, about the world origin) of each output column that moves it (`_moving_columns`).
    With the velocity `qd` (the rate form): the body's world twist (6) after `p`, and each
    column followed by its rate `ov_j x s` (6), `ov_j` the twist of the column's own body.
    Traced over the whole tree; the trace keeps only what these outputs read (`body`'s
    ancestors)."""
    oX = A.world_poses(model, placements)
    full = [sp.motion_to_parent(oX[j], column)
            for j, joint in enumerate(model.joints) for column in A.subspace(joint)]
    moving, chain = _moving_columns(model, body, terms)
    out = list(oX[body][0]) + list(oX[body][1])
    if qd is not None:
        v = qd if model.coupling is None else model.coupling.expand_v(qd)
        twists: list = []
        for joint in model.joints:
            own: list = [0.0] * 6
            for d in range(joint.idx_v, joint.idx_v + joint.nv):
                own = sp.add(own, sp.scale(full[d], v[d]))
            twists.append(own if joint.parent < 0 else sp.add(twists[joint.parent], own))
        body_of = [j for j, joint in enumerate(model.joints) for _ in range(joint.nv)]
        out += twists[body]
    for c in moving:
        s: list = [0.0] * 6
        ds: list = [0.0] * 6
        for d, coef in terms[c]:
            if d in chain:
                s = [s[r] + coef * full[d][r] for r in range(6)]
                if qd is not None:
                    rate = sp.motion_cross(twists[body_of[d]], full[d])
                    ds = [ds[r] + coef * rate[r] for r in range(6)]
        out += s + (ds if qd is not None else [])
    return out


def _frame_cases(w: Writer, model: RobotModel) -> None:
    """`switch (f)`: the frame's body `b` and offset `o` (R row-major, p) per table index;
    frames of equal body and offset share a case. An index out of the table: `b = -2`."""
    cases: dict[tuple, list[int]] = {}
    for index, (body, R, p) in enumerate(frame_table(model)):
        key = (body, *(float(x) for x in np.asarray(R).reshape(9)),
               *(float(x) for x in p))
        cases.setdefault(key, []).append(index)
    with w.block("switch (f)"):
        for key, indices in cases.items():
            w.line(" ".join(f"case {i}:" for i in indices))
            with w.block("", "}"):
                w.line(f"b = {key[0]};")
                w.line(" ".join(f"o[{k}] = {lit(v)};" for k, v in enumerate(key[1:])))
                w.line("break;")
        w.line("default: b = -2;")


def _cross(a: list[str], b: list[str]) -> list[str]:
    """The C++ expressions of `a x b` (3-vectors of expressions)."""
    return [f"({a[1]} * {b[2]} - {a[2]} * {b[1]})", f"({a[2]} * {b[0]} - {a[0]} * {b[2]})",
            f"({a[0]} * {b[1]} - {a[1]} * {b[0]})"]


def _rotate_t(R: str, v: list[str]) -> list[str]:
    """The C++ expressions of `R^T v` (`R` a row-major 3x3 array, `v` 3 expressions)."""
    return [" + ".join(f"{R}[{3 * k + i}] * {v[k]}" for k in range(3)) for i in range(3)]


def emit_frame_jacobian(plan, kb: ItemBuilder, q: Array, frame: Array, out: Array,
                        qd: Array | None = None) -> None:
    """The pass of `frame_jacobian_indexed` (module doc) into the item `kb`: `q` and the
    selector in, `out` (6 x nv, row-major) written; with `qd`, that of
    `frame_jacobian_dot_indexed`: the Jacobian's time derivative along `qd`."""
    model = plan.model
    terms = _column_terms(model)
    nv = len(terms)
    rate = qd is not None
    table = plan.transform_array()
    q_names = [f"q[{k}]" for k in range(q.size)]
    qd_names = [f"qd[{k}]" for k in range(qd.size)] if rate else []
    t_names = [f"T{{}} + transform[{k}]" for k in range(table[0].size)] if table else []
    head = 18 if rate else 12  # R, p (and the body's twist)
    per = 12 if rate else 6  # a column (and its rate)

    def chain(w: Writer, body: int) -> None:
        """The case of `body`: its chain traced, the frame's pose, its moving columns."""
        def traced(qv, *rest):
            rest = list(rest)
            velocity = rest.pop(0) if rate else None
            placements = plan.placements(qv, rest[0] if rest else None)
            return _body_chain(model, placements, body, terms, velocity)

        moving, _ = _moving_columns(model, body, terms)
        w.line(f"T v[{head + per * len(moving)}];")
        symbolic_emit.emit_straight_line(
            w, traced, [q_names, *([qd_names] if rate else []), *([t_names] if table else [])],
            "v")
        w.line("T R[9], p[3];")
        for i in range(3):
            for j in range(3):
                w.line(f"R[{3 * i + j}] = " + " + ".join(
                    f"v[{3 * i + k}] * o[{3 * k + j}]" for k in range(3)) + ";")
            w.line(f"p[{i}] = " + " + ".join(f"v[{3 * i + k}] * o[{9 + k}]"
                                              for k in range(3)) + f" + v[{9 + i}];")
        if rate:
            w.comment("The frame origin's world velocity v + w x p, and (LOCAL) the frame's "
                      "own twist R^T [v + w x p; w].")
            vb = [f"v[{12 + r}]" for r in range(6)]
            w.line("const T pv[3] = {" + ", ".join(
                f"{vb[r]} + {x}" for r, x in enumerate(_cross(vb[3:], ["p[0]", "p[1]", "p[2]"])))
                + "};")
            w.line("const T vl[6] = {" + ", ".join(
                _rotate_t("R", ["pv[0]", "pv[1]", "pv[2]"]) + _rotate_t("R", vb[3:])) + "};")
        for m, c in enumerate(moving):
            base = head + per * m
            s = [f"v[{base + r}]" for r in range(6)]
            d = [f"v[{base + 6 + r}]" for r in range(6)] if rate else s
            w.comment(f"column {c}")
            with w.block("if (rf == 0)"):
                for r in range(6):
                    store(w, r * nv + c, d[r])
            with w.block("else"):
                w.comment("about the frame origin: [x - p x w; w]")
                lever = _cross(["p[0]", "p[1]", "p[2]"], d[3:])
                w.line("const T l[6] = {" + ", ".join(
                    [f"{d[r]} - {lever[r]}" for r in range(3)] + d[3:]) + "};")
                with w.block("if (rf == 2)"):
                    if rate:  # less the rate of the lever arm: p-dot x w_s
                        turn = _cross(["pv[0]", "pv[1]", "pv[2]"], s[3:])
                        for r in range(3):
                            store(w, r * nv + c, f"l[{r}] - {turn[r]}")
                        for r in range(3, 6):
                            store(w, r * nv + c, f"l[{r}]")
                    else:
                        for r in range(6):
                            store(w, r * nv + c, f"l[{r}]")
                with w.block("else"):
                    local = (_rotate_t("R", ["l[0]", "l[1]", "l[2]"])
                             + _rotate_t("R", ["l[3]", "l[4]", "l[5]"]))
                    if rate:
                        local_rate(w, c, s, local)
                    else:
                        for r in range(6):
                            store(w, r * nv + c, local[r])

    def local_rate(w: Writer, c: int, s: list[str], local: list[str]) -> None:
        """LOCAL's rate column: `local` (`R^T` of the shifted rate) less the frame's twist
        x the column in the frame, `J_l = R^T [s - p x w_s; w_s]`."""
        arm = _cross(["p[0]", "p[1]", "p[2]"], s[3:])
        w.line("const T a[6] = {" + ", ".join(
            [f"{s[r]} - {arm[r]}" for r in range(3)] + s[3:]) + "};")
        w.line("const T j[6] = {" + ", ".join(
            _rotate_t("R", ["a[0]", "a[1]", "a[2]"])
            + _rotate_t("R", ["a[3]", "a[4]", "a[5]"])) + "};")
        wl, vl = ["vl[3]", "vl[4]", "vl[5]"], ["vl[0]", "vl[1]", "vl[2]"]
        jl, ja = ["j[0]", "j[1]", "j[2]"], ["j[3]", "j[4]", "j[5]"]
        lin = [f"{x} + {y}" for x, y in zip(_cross(wl, jl), _cross(vl, ja), strict=True)]
        cross = lin + _cross(wl, ja)  # the motion cross product (twist) x J_l
        for r in range(6):
            store(w, r * nv + c, f"{local[r]} - ({cross[r]})")

    def store(w: Writer, k: int, value: str) -> None:
        w.line(f"store_lanes(out[{k}], {value}, group);")

    def text(w: Writer) -> None:
        w.line("constexpr int W = lanes_per_value<T>();")
        w.line("unsigned done = 0;")
        w.comment("Lanes that ask for the same frame and reference frame run together (on "
                  "the GPU one lane: one pass).")
        with w.block("for (int first = 0; first < W; ++first)"):
            w.line("if (done >> first & 1u) continue;")
            w.line("const S fs = get_lane(frame[0], first), rs = get_lane(frame[1], first);")
            w.line("unsigned group = 1u << first;")
            with w.block("for (int j = first + 1; j < W; ++j)"):
                w.line("if (get_lane(frame[0], j) == fs && get_lane(frame[1], j) == rs) "
                       "group |= 1u << j;")
            w.line("done |= group;")
            w.comment("The index and the code must be whole numbers in range (NaN fails "
                      "both tests).")
            w.line(f"int f = fs >= S(0) && fs < S({len(frame_table(model))}) ? (int)fs : -1;")
            w.line("if (f >= 0 && S(f) != fs) f = -1;")
            w.line("const int rf = rs == S(0) ? 0 : rs == S(1) ? 1 : rs == S(2) ? 2 : -1;")
            w.line("int b = -2;")
            w.line("S o[12];")
            _frame_cases(w, model)
            w.comment("Columns of dofs that do not move the frame are zero (NaN: a bad "
                      "selector); a body's case writes the others.")
            w.line(f"for (int k = 0; k < {6 * nv}; ++k) store_lanes(out[k], T{{}} + "
                   "(b == -2 || rf < 0 ? S(NAN) : S(0)), group);")
            w.line("if (b < 0 || rf < 0) continue;")
            with w.block("switch (b)"):
                for body in range(model.nb):
                    w.line(f"case {body}:")
                    with w.block("", "}"):
                        w.line(f"{case_function(body)}<T, S>("
                               f"{', '.join(a for _, a in case_params)});")
                        w.line("break;")

    def case_function(body: int) -> str:
        """A body's case as a function of its own on the host: g++ takes far longer on
        one function of every case (g1's rate form: 159 s against 26); the GPU build
        inlines it (no stack traffic for the offset)."""
        kernel = "frame_jacobian_dot_indexed" if rate else "frame_jacobian_indexed"
        return kb.define_static(
            f"{kernel}_body{body}", lambda w: chain(w, body),
            f"The columns of `{kernel}` for a frame on body {body}.", case_params,
            (60 if rate else 30) * nv)

    case_params = [("const T* GRID_RESTRICT q", "q")]
    if rate:
        case_params.append(("const T* GRID_RESTRICT qd", "qd"))
    if table:
        case_params.append(("const S* GRID_RESTRICT transform", "transform"))
    case_params += [("const S* o", "o"), ("int rf", "rf"), ("unsigned group", "group"),
                    ("T* GRID_RESTRICT out", "out")]
    params = [("const T* GRID_RESTRICT q", q.name)]
    if rate:
        params.append(("const T* GRID_RESTRICT qd", qd.name))
    params.append(("const T* GRID_RESTRICT frame", frame.name))
    if table:
        params.append(("const S* GRID_RESTRICT transform", "transform"))
    params.append(("T* GRID_RESTRICT out", out.name))
    name = "frame_jacobian_dot_pick" if rate else "frame_jacobian_pick"
    what = "time derivative of the Jacobian along qd" if rate else "Jacobian"
    kb.call_static(name, text, f"The {what} of each lane's frame in its reference frame "
                   "(emit.frame_jacobian).", params, (60 if rate else 30) * nv + 40 * model.nb)
