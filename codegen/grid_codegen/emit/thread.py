"""The thread-per-item strategy: straight-line code traced from the algorithms of
`grid_codegen.symbolic`, one batch item per thread (GPU) or per SIMD lane (CPU).

Every kernel is an item function that chains passes (`symbolic.emit`): the joint
transforms first, then the algorithm's passes, each emitted once and shared by the
kernels that call it (the forward-dynamics gradient calls the articulated-body pass of
`aba`, the derivative pass of `inverse_dynamics_gradient` and a product pass):

    joint_transforms(q) -> X
    inverse_dynamics:  rnea(X, qd, qdd, f_ext) -> out
    crba / minv:       crba(X) / minv(X) -> out
    forward_dynamics, aba: aba(X, qd, u, f_ext) -> out
    end_effector_pose[_gradient]: end_effector_pose[_derivatives](X) -> out
    inverse_dynamics_gradient: rnea_derivatives(X, qd, qdd, f_ext) -> out
    forward_dynamics_gradient: aba_minv(X, qd, u, f_ext) -> qdd_minv;
        rnea_derivatives(X, qd, qdd_minv, f_ext) -> dtau; fd_product(qdd_minv, dtau) -> out

Jacobian outputs are scheduled column by column (one column's working set live at a
time). Inertias are constants folded into the code, or entries of the run-time table
(`runtime_inertia`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic.emit import RUNTIME, Array, ItemBuilder, PassLibrary


@dataclass(frozen=True)
class ThreadItem:
    """An item function of the thread strategy: its name, parameter list (in the order
    `item_params` gives) and traced operation count."""

    name: str
    ops: int


def item_params(algorithm: Algorithm, dims: Dims) -> list[str]:
    """The C++ parameters of every item function: the algorithm's inputs (per-item
    pointers of T), the shared inertia table and gravity (of S), the output."""
    params = [f"const T* GRID_RESTRICT {p.name}" for p in algorithm.inputs]
    params += ["const S* GRID_RESTRICT inertia", "S gravity", "T* GRID_RESTRICT out"]
    return params


def _flat_transforms(X: Sequence[tuple]) -> list:
    return [x for R, p in X for x in list(R) + list(p)]


def _unflatten(x: Sequence, nb: int) -> list[tuple]:
    return [(list(x[12 * i:12 * i + 9]), list(x[12 * i + 9:12 * i + 12])) for i in range(nb)]


def _column_major(rows: int, cols: int) -> list[int]:
    return [r * cols + c for c in range(cols) for r in range(rows)]


class _Plan:
    """What the traced passes of one artifact share: the model, the end-effector frames,
    the inertia source and the pass library."""

    def __init__(self, model: RobotModel, ee_frames: tuple, runtime_inertia: bool,
                 library: PassLibrary) -> None:
        self.model = model
        self.ee_frames = ee_frames
        self.runtime_inertia = runtime_inertia
        self.library = library
        self.baked = [[float(x) for x in b.inertia.dynamic_parameters()] for b in model.bodies]

    def inertias(self, table: Sequence | None) -> list[list]:
        if table is None:
            return self.baked
        return [list(table[10 * i:10 * i + 10]) for i in range(self.model.nb)]

    def inertia_array(self) -> list[Array]:
        if not self.runtime_inertia:
            return []
        return [Array.runtime("inertia", 10 * self.model.nb, "table")]

    def dynamics_call(self, kb: ItemBuilder, name: str, doc: str, fn: Callable,
                      arrays: list[Array], output: Array | str, **kw) -> Array:
        """A pass over `arrays` plus the inertias and gravity: `fn(*arrays, I, g)`."""
        inertia = self.inertia_array()

        def traced(*values):
            values = list(values)
            gravity = values.pop()
            table = values.pop() if inertia else None
            return fn(*values, self.inertias(table), gravity)

        return kb.call(name, doc, traced, arrays + inertia, output, scalars=["gravity"], **kw)

    def transforms(self, kb: ItemBuilder, q: Array) -> Array:
        model = self.model
        return kb.call("joint_transforms",
                       "Parent -> body placements X_i = liMi(q): R row-major (9), p (3).",
                       lambda q: _flat_transforms(A.joint_transforms(model, q)), [q], "X")


def build_thread_item(w_library: PassLibrary, model: RobotModel, ee_frames: tuple,
                      runtime_inertia: bool, algorithm: Algorithm, dims: Dims,
                      w: Writer) -> ThreadItem:
    """Trace the passes of `algorithm`, register them in the library and write the item
    function `<algorithm>_thread` into `w`."""
    plan = _Plan(model, ee_frames, runtime_inertia, w_library)
    kb = ItemBuilder(w_library)
    nb, nv = model.nb, model.nv
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    out = Array.runtime("out", algorithm.output_size(dims), "out")
    X = plan.transforms(kb, ports["q"])
    name = algorithm.name

    def unX(x: Sequence) -> list[tuple]:
        return _unflatten(x, nb)

    if name == "inverse_dynamics":
        plan.dynamics_call(
            kb, "rnea", "Inverse dynamics by RNEA (forward and backward passes).",
            lambda x, qd, qdd, f, I, g: A.rnea(model, unX(x), I, qd, qdd, f, g),
            [X, ports["qd"], ports["qdd"], ports["f_ext"]], out)
    elif name == "crba":
        plan.dynamics_call(
            kb, "crba", "The mass matrix by CRBA (composite inertias, then columns).",
            lambda x, I, g: [v for row in A.crba(model, unX(x), I) for v in row], [X], out)
    elif name == "minv":
        plan.dynamics_call(
            kb, "minv", "M^-1 by the articulated-body recursion on unit torques.",
            lambda x, I, g: [v for row in A.minv(model, unX(x), I) for v in row], [X], out)
    elif name in ("forward_dynamics", "aba"):
        plan.dynamics_call(
            kb, "aba", "Forward dynamics by the articulated-body algorithm.",
            lambda x, qd, u, f, I, g: A.aba(model, unX(x), I, qd, u, f, g),
            [X, ports["qd"], ports["u"], ports["f_ext"]], out)
    elif name == "end_effector_pose":
        kb.call("end_effector_pose", "World poses, then [xyz, rpy] per end effector.",
                lambda x: A.end_effector_pose(model, ee_frames, unX(x)), [X], out)
    elif name == "end_effector_pose_gradient":
        kb.call("end_effector_pose_derivatives",
                "d [xyz, rpy] / d tangent per end effector (forward-mode derivatives).",
                lambda x: [v for row in A.end_effector_pose_derivatives(
                    model, ee_frames, unX(x)) for v in row], [X], out,
                schedule_order=_column_major(6 * len(ee_frames), nv))
    elif name == "inverse_dynamics_gradient":
        _rnea_derivatives(plan, kb, X, ports["qd"], ports["qdd"], ports["f_ext"], out)
    elif name == "forward_dynamics_gradient":
        solved = plan.dynamics_call(
            kb, "aba_minv", "qdd = FD(q, qd, u) (entries 0..nv-1) and M^-1 (row-major, "
            "then), sharing the articulated inertias.",
            lambda x, qd, u, f, I, g: _aba_minv(model, unX(x), I, qd, u, f, g),
            [X, ports["qd"], ports["u"], ports["f_ext"]], "qdd_minv")
        if nv <= DENSE_PRODUCT_NV:
            dtau = _rnea_derivatives(plan, kb, X, ports["qd"], solved, ports["f_ext"], "dtau")
            kb.call("fd_product", "-M^-1 [dtau/dq | dtau/dqd] (the FD gradient).",
                    lambda s, d: _fd_product(nv, s, d), [solved, dtau], out,
                    schedule_order=_column_major(nv, 2 * nv))
        else:
            _rnea_derivatives(plan, kb, X, ports["qd"], solved, ports["f_ext"], "dtau",
                              dense=True)
            _dense_fd_product(kb, nv)
    else:
        raise KeyError(f"the thread strategy has no plan for {name!r}")
    item = f"{name}_thread"
    kb.emit_item_function(w, item, f"`{name}` of one item: {algorithm.doc}",
                          item_params(algorithm, dims))
    return ThreadItem(item, kb.total_ops)


def _aba_minv(model: RobotModel, X: list, I: list, qd: list, u: list, f: list | None,
              g: object) -> list:
    art = A.Articulated(model, X, I)
    qdd = A.aba(model, X, I, qd, u, f, g, art)
    Minv = A.minv(model, X, I, art)
    return list(qdd) + [v for row in Minv for v in row]


def _rnea_derivatives(plan: _Plan, kb: ItemBuilder, X: Array, qd: Array, qdd: Array,
                      fext: Array, output: Array | str, dense: bool = False) -> Array:
    model = plan.model
    nv = model.nv

    def fn(x, qd_, qdd_, f, I, g):
        return [v for row in A.rnea_derivatives(model, _unflatten(x, model.nb), I, qd_,
                                                list(qdd_[:nv]), f, g) for v in row]

    return plan.dynamics_call(
        kb, "rnea_derivatives", "[dtau/dq | dtau/dqd] by forward-mode derivatives of RNEA "
        "(the q directions in the local chart).", fn, [X, qd, qdd, fext], output,
        schedule_order=_column_major(nv, 2 * nv), dense=dense)


DENSE_PRODUCT_NV = 12
"""Above this tangent width the FD gradient's product `-M^-1 dtau` is a loop (nv^2 x 2nv
multiply-adds in a few lines of code) instead of straight-line code: the sparsity the
trace would exploit is small next to the code size (and compile time) it costs."""


def _dense_fd_product(kb: ItemBuilder, nv: int) -> None:
    def text(w: Writer) -> None:
        w.line(f"const T* GRID_RESTRICT Minv = qdd_minv + {nv};")
        with w.block(f"for (int r = 0; r < {nv}; ++r)"):
            with w.block(f"for (int c = 0; c < {2 * nv}; ++c)"):
                w.line("T acc = T{};")
                w.line(f"for (int k = 0; k < {nv}; ++k) "
                       f"acc = acc - Minv[r * {nv} + k] * dtau[k * {2 * nv} + c];")
                w.line(f"out[r * {2 * nv} + c] = acc;")

    kb.call_static(f"fd_product_dense_{nv}", text,
                   "-M^-1 [dtau/dq | dtau/dqd] as a dense loop (the FD gradient).",
                   [("const T* GRID_RESTRICT qdd_minv", "qdd_minv"),
                    ("const T* GRID_RESTRICT dtau", "dtau"), ("T* GRID_RESTRICT out", "out")],
                   2 * nv * nv * 2 * nv)


def _fd_product(nv: int, solved: Sequence, dtau: Sequence) -> list:
    Minv = [list(solved[nv + r * nv:nv + (r + 1) * nv]) for r in range(nv)]
    D = [list(dtau[r * 2 * nv:(r + 1) * 2 * nv]) for r in range(nv)]
    return [v for row in A.neg_product(Minv, D) for v in row]


__all__ = ["RUNTIME", "ThreadItem", "build_thread_item", "item_params"]
