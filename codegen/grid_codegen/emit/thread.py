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
    inverse_dynamics_gradient: rnea_derivatives[_g<k>](X, qd, qdd, f_ext) -> out
    forward_dynamics_gradient: aba_minv(X, qd, u, f_ext) -> qdd_minv;
        fd_derivatives[_g<k>](X, qd, qdd_minv, f_ext) -> out

Jacobians are computed in groups of consecutive columns (`emit.column_groups`), each group
one register-resident pass that writes its columns of the output directly, and within a
group column by column (one column's working set live at a time). Inertias are constants
folded into the code, or entries of the run-time table (`runtime_inertia`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from grid_codegen import transforms as T
from grid_codegen.emit import plant as PL
from grid_codegen.emit import second_order as SO
from grid_codegen.emit.column_groups import TooLarge, column_groups
from grid_codegen.emit.frame_jacobian import emit_frame_jacobian
from grid_codegen.emit.thread_parts import Part, cuttable
from grid_codegen.emit.thread_vjp import VJP_OF, emit_vjp
from grid_codegen.emit.writer import Writer
from grid_codegen.joint_dynamics import JointDynamics
from grid_codegen.model import JointType, RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import centroidal as C
from grid_codegen.symbolic import frames as F
from grid_codegen.symbolic.emit import RUNTIME, Array, ItemBuilder, PassLibrary


@dataclass(frozen=True)
class ThreadItem:
    """An item function of the thread strategy: its name, parameter list (in the order
    `item_params` gives) and traced operation count."""

    name: str
    ops: int


def item_params(algorithm: Algorithm, dims: Dims, joint_table: bool = False,
                transform_table: bool = False) -> list[str]:
    """The C++ parameters of every item function: the algorithm's inputs (per-item
    pointers of T), the shared inertia table and gravity (of S), the output; the shared
    joint-dynamics table (of S) on a `runtime_joint_dynamics` build, then the shared
    transform table (of S, `grid_codegen.transforms`) on a `runtime_transform` build."""
    params = [f"const T* GRID_RESTRICT {p.name}" for p in algorithm.inputs]
    params += ["const S* GRID_RESTRICT inertia", "S gravity", "T* GRID_RESTRICT out"]
    if joint_table:
        params.append("const S* GRID_RESTRICT joint_dynamics")
    if transform_table:
        params.append("const S* GRID_RESTRICT transform")
    return params


def _flat_transforms(X: Sequence[tuple]) -> list:
    return [x for R, p in X for x in list(R) + list(p)]




def _column_major(rows: int, cols: int) -> list[int]:
    return [r * cols + c for c in range(cols) for r in range(rows)]


class _Plan:
    """What the traced passes of one artifact share: the model, the end-effector frames,
    the inertia source and the pass library."""

    def __init__(self, model: RobotModel, ee_frames: tuple, runtime_inertia: bool,
                 library: PassLibrary, joint_dynamics: JointDynamics | None = None,
                 runtime_transform: bool = False) -> None:
        self.model = model
        self.runtime_transform = runtime_transform
        self.jd = joint_dynamics
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

    def joint_array(self, passive: bool) -> list[Array]:
        if not passive or self.jd is None or not self.jd.runtime:
            return []
        return [Array.runtime("joint_dynamics", self.jd.table_size, "table")]

    def dynamics_call(self, kb: ItemBuilder, name: str, doc: str, fn: Callable,
                      arrays: list[Array], output: Array | str, passive: bool = False,
                      **kw) -> Array:
        """A pass over `arrays` plus the inertias and gravity: `fn(*arrays, I, g)`;
        `passive`: the pass gains the joint dynamics, `fn(*arrays, I, g, P)` with `P`
        a `Passive` (None on a build without them)."""
        inertia = self.inertia_array()
        joint = self.joint_array(passive)

        def traced(*values):
            values = list(values)
            gravity = values.pop()
            joint_table = values.pop() if joint else None
            table = values.pop() if inertia else None
            if not passive:
                return fn(*values, self.inertias(table), gravity)
            return fn(*values, self.inertias(table), gravity, self.passive(joint_table))

        return kb.call(name, doc, traced, arrays + inertia + joint, output,
                       scalars=["gravity"], **kw)

    def passive(self, table: Sequence | None) -> Passive | None:
        return None if self.jd is None else Passive(self.jd, table)

    def transform_array(self) -> list[Array]:
        """The runtime transform table (`grid_codegen.transforms`), when the build has one."""
        if not self.runtime_transform:
            return []
        return [Array.runtime("transform", T.table_size(self.model), "table")]

    def placements(self, q: Sequence, table: Sequence | None = None) -> list:
        """Every parent -> body placement `liMi(q)` traced on `q` (mimic joints follow
        their leaders), the origins from the runtime transform `table` on a build with
        one."""
        model = self.model
        if self.runtime_transform:
            if model.coupling is not None:
                raise ValueError("runtime_transform with mimic=True coupling is not "
                                 "supported yet")
            return A.joint_transforms(model, q, T.origins(model, table))
        if model.coupling is not None:
            return A.joint_transforms(model, model.coupling.expand_q(q))
        return A.joint_transforms(model, q)

    def transforms(self, kb: ItemBuilder, q: Array) -> Array:
        if self.runtime_transform:
            return kb.call("joint_transforms",
                           "Parent -> body placements X_i = origin_i liMi(q), the origins "
                           "from the runtime transform table: R row-major (9), p (3).",
                           lambda q, t: _flat_transforms(self.placements(q, t)),
                           [q, *self.transform_array()], "X")
        if self.model.coupling is not None:
            return kb.call("joint_transforms", "Parent -> body placements X_i = "
                           "liMi(G q + b) (mimic joints follow their leaders): R row-major "
                           "(9), p (3).",
                           lambda q: _flat_transforms(self.placements(q)), [q], "X")
        return kb.call("joint_transforms",
                       "Parent -> body placements X_i = liMi(q): R row-major (9), p (3).",
                       lambda q: _flat_transforms(self.placements(q)), [q], "X")


@dataclass(frozen=True)
class Passive:
    """The joint-dynamics terms bound to their coefficient source (baked or a table)."""

    jd: JointDynamics
    table: Sequence | None

    def add(self, tau: Sequence, qd: Sequence) -> list:
        """`tau + tau_passive(qd)`."""
        return [t + p for t, p in zip(tau, self.jd.torque(qd, self.table), strict=True)]

    def sub(self, u: Sequence, qd: Sequence) -> list:
        """`u - tau_passive(qd)`."""
        return [x - p for x, p in zip(u, self.jd.torque(qd, self.table), strict=True)]

    def add_slope(self, D: list[list], qd: Sequence, columns: Sequence[int] | None
                  ) -> list[list]:
        """`D (nv x 2nv) + [0 | diag(d tau_passive / d qd)]` on the traced columns."""
        nv = self.jd.nv
        wanted = set(range(2 * nv) if columns is None else columns)
        slope = self.jd.slope(qd, self.table)
        for k in self.jd.dofs:
            if nv + k in wanted:
                D[k][nv + k] = D[k][nv + k] + slope[k]
        return D


def _passive_torque(P: Passive | None, tau: Sequence, qd: Sequence) -> Sequence:
    return tau if P is None else P.add(tau, qd)


def _passive_input(P: Passive | None, u: Sequence, qd: Sequence) -> Sequence:
    return u if P is None else P.sub(u, qd)


def _passive_slope(P: Passive | None, D: list[list], qd: Sequence,
                   columns: Sequence[int] | None) -> list[list]:
    return D if P is None else P.add_slope(D, qd, columns)


def _with_inertia(fn: Callable) -> Callable:
    """`fn(model, X, I, *inputs, gravity)` as a pass body `(model, X, *inputs, I, g)`."""
    def body(model, X, *rest):
        *inputs, I, g = rest
        return fn(model, X, I, *inputs, g)
    return body


def _with_inertia_no_gravity(fn: Callable) -> Callable:
    def body(model, X, *rest):
        *inputs, I, _ = rest
        return fn(model, X, I, *inputs)
    return body


def _kinematic(fn: Callable) -> Callable:
    """A pass that needs neither inertias nor gravity."""
    def body(model, X, *rest):
        return fn(model, X, *rest[:-2])
    return body


def _kinematic_with_gravity(fn: Callable) -> Callable:
    def body(model, X, *rest):
        *inputs, _, g = rest
        return fn(model, X, *inputs, g)
    return body


CENTROIDAL_PASSES: dict[str, tuple[str, Callable, tuple[str, ...]]] = {
    # name: (doc, body(model, X, *inputs, I, gravity), the inputs after q)
    "generalized_gravity": ("g(q): RNEA at rest.",
                            _with_inertia(C.generalized_gravity), ()),
    "nonlinear_effects": ("C(q, qd) qd + g(q): RNEA at zero acceleration.",
                          _with_inertia(C.nonlinear_effects), ("qd",)),
    "coriolis_matrix": ("The Coriolis matrix from world composites (Echeandia-Wensing form).",
                        _with_inertia_no_gravity(C.coriolis_matrix), ("qd",)),
    "com": ("The centre of mass, then its Jacobian (forward-mode derivatives).",
            _with_inertia_no_gravity(C.com), ()),
    "ccrba": ("The centroidal momentum matrix A, then h = A qd.",
              _with_inertia_no_gravity(C.ccrba), ("qd",)),
    "dccrba": ("dA/d eps (forward-mode derivatives of the centroidal map).",
               _with_inertia_no_gravity(C.dccrba), ()),
    "cmm_time_variation": ("dA/dt: the centroidal map's derivative along qd.",
                           _with_inertia_no_gravity(C.cmm_time_variation), ("qd",)),
    "energy": ("Kinetic, potential and mechanical energy.", _with_inertia(C.energy), ("qd",)),
    "kinetic_energy_regressor": ("The kinetic-energy regressor from the body twists.",
                                 _kinematic(C.kinetic_energy_regressor), ("qd",)),
    "potential_energy_regressor": ("The potential-energy regressor from the world poses.",
                                   _kinematic_with_gravity(C.potential_energy_regressor), ()),
    "inverse_dynamics_regressor": ("The joint-torque regressor: unit-parameter body forces "
                                   "carried up the tree.",
                                   _kinematic_with_gravity(C.inverse_dynamics_regressor),
                                   ("qd", "qdd")),
}
"""The thread passes of the centroidal profile (one pass per algorithm)."""


def build_thread_item(w_library: PassLibrary, model: RobotModel, ee_frames: tuple,
                      runtime_inertia: bool, algorithm: Algorithm, dims: Dims,
                      w: Writer, max_ops: int | None = None,
                      joint_dynamics: JointDynamics | None = None,
                      runtime_transform: bool = False,
                      collision: object = None,
                      part: Part | None = None) -> ThreadItem:
    """Trace the passes of `algorithm`, register them in the library and write the item
    function `<algorithm>_thread` into `w`. Raises `TooLarge` as soon as its Jacobian
    is known to need more than `max_ops` operations (the caller rolls the library back).

    part: the item function `part.item` of the output entries `part.offset ..
    part.offset + part.width` only, written to `out[0 .. width]` (`emit.thread_parts`);
    the passes are traced whole and cut to what the part reads."""
    plan = _Plan(model, ee_frames, runtime_inertia, w_library, joint_dynamics,
                 runtime_transform)
    out_map = None if part is None else {part.offset + j: j for j in range(part.width)}
    kb = ItemBuilder(w_library, out_map)
    nb, nv = model.nb, model.nv
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    views = state_views(ports, dims)
    out = Array.runtime("out", algorithm.output_size(dims), "out")
    name = algorithm.name
    if part is not None and not cuttable(algorithm):
        raise ValueError(f"{name}: its thread item is not cut into parts")
    if name in VJP_OF:  # one pass from q itself: no transforms pass of its own
        emit_vjp(plan, kb, algorithm, ports, out)
        return _finish(kb, w, algorithm, dims, joint_dynamics, runtime_transform)
    if name in ("frame_jacobian_indexed", "frame_jacobian_dot_indexed"):  # own chains
        emit_frame_jacobian(plan, kb, ports["q"], ports["frame"], out, ports.get("qd"))
        return _finish(kb, w, algorithm, dims, joint_dynamics, runtime_transform, part)
    X = plan.transforms(kb, ports["q"])

    def unX(x: Sequence) -> list[tuple]:
        return A.unflatten_placements(x, nb)

    if model.coupling is not None:
        from grid_codegen.emit.thread_coupled import build_coupled

        build_coupled(plan, kb, algorithm, dims, ports, out, X, unX, CENTROIDAL_PASSES)
    elif name == "inverse_dynamics":
        plan.dynamics_call(
            kb, "rnea", "Inverse dynamics by RNEA (forward and backward passes).",
            lambda x, qd, qdd, f, I, g, P: _passive_torque(
                P, A.rnea(model, unX(x), I, qd, qdd, f, g), qd),
            [X, ports["qd"], ports["qdd"], ports["f_ext"]], out, passive=True)
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
            lambda x, qd, u, f, I, g, P: A.aba(model, unX(x), I, qd,
                                               _passive_input(P, u, qd), f, g),
            [X, ports["qd"], ports["u"], ports["f_ext"]], out, passive=True)
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
        def dtau(x, qd, qdd, f, I, g, P, columns=None):
            D = A.rnea_derivatives(model, unX(x), I, qd, qdd, f, g, columns)
            return [v for row in _passive_slope(P, D, qd, columns) for v in row]

        column_groups(plan, kb, "rnea_derivatives", "[dtau/dq | dtau/dqd] by forward-mode "
                      "derivatives of RNEA (q directions in the local chart)", dtau,
                      [X, ports["qd"], ports["qdd"], ports["f_ext"]], out, nv, 2 * nv,
                      max_ops)
    elif name == "forward_dynamics_gradient":
        solved = plan.dynamics_call(
            kb, "aba_minv", "qdd = FD(q, qd, u) (entries 0..nv-1) and M^-1 (row-major, "
            "then), sharing the articulated inertias.",
            lambda x, qd, u, f, I, g, P: A.aba_minv(model, unX(x), I, qd,
                                                   _passive_input(P, u, qd), f, g),
            [X, ports["qd"], ports["u"], ports["f_ext"]], "qdd_minv", passive=True)

        def dqdd(x, qd, s, f, I, g, P, columns=None):
            D = A.rnea_derivatives(model, unX(x), I, qd, list(s[:nv]), f, g, columns)
            D = _passive_slope(P, D, qd, columns)
            Minv = [list(s[nv + r * nv:nv + (r + 1) * nv]) for r in range(nv)]
            return [v for row in A.neg_product(Minv, D) for v in row]

        column_groups(plan, kb, "fd_derivatives", "[dqdd/dq | dqdd/dqd] = -M^-1 "
                      "[dtau/dq | dtau/dqd] at qdd = FD: RNEA's derivatives and the "
                      "product, column by column", dqdd,
                      [X, ports["qd"], solved, ports["f_ext"]], out, nv, 2 * nv, max_ops)
    elif name == "fk_batched":
        frame = ee_frames[0]
        if plan.runtime_transform:
            kb.call("fk_batched", "Position and quaternion of the first end-effector frame "
                    "(joint origins from the runtime transform table).",
                    lambda x, q, t: F.frame_position_quaternion(
                        model, frame, unX(x), q,
                        [T.origin_quaternion(t, i) for i in range(nb)]),
                    [X, ports["q"], *plan.transform_array()], out)
        else:
            kb.call("fk_batched", "Position and quaternion of the first end-effector frame.",
                    lambda x, q: F.frame_position_quaternion(model, frame, unX(x), q),
                    [X, ports["q"]], out)
    elif name == "world_kinematics":
        kb.call("world_kinematics", "World placements, motion subspace and body twists.",
                lambda x, qd: F.world_kinematics(model, unX(x), qd), [X, ports["qd"]], out)
    elif name == "end_effector_pose_hessian":
        kb.call("end_effector_pose_hessian", "Second derivatives of the end-effector "
                "coordinates (hyper-dual tangents through the chart).",
                lambda x: F.end_effector_pose_hessian(model, ee_frames, unX(x)), [X], out)
    elif name == "idsva_so":
        SO.emit_idsva_so(plan, kb, X, ports, out)
    elif name == "fdsva_so":
        SO.emit_fdsva_so(plan, kb, X, ports, out)
    elif name.startswith(PL.PREFIX):
        return _plant_step_gradient(plan, kb, w, algorithm, dims, ports, views, X, unX,
                                    max_ops, joint_dynamics, runtime_transform)
    elif algorithm.profile == "collision":  # the sphere model's passes (collision=True)
        from grid_codegen.symbolic import collision as CO

        CO.emit(kb, model, collision, name, X, out, unX, nv)
    elif name in CENTROIDAL_PASSES:
        doc, fn, port_names = CENTROIDAL_PASSES[name]
        plan.dynamics_call(kb, name, doc,
                           lambda x, *rest: fn(model, unX(x), *rest),
                           [X, *(ports[p] for p in port_names)], out)
    else:
        raise KeyError(f"the thread strategy has no plan for {name!r}")
    return _finish(kb, w, algorithm, dims, joint_dynamics, runtime_transform, part)


def build_direction_items(w_library: PassLibrary, model: RobotModel, ee_frames: tuple,
                          runtime_inertia: bool, algorithm: Algorithm, dims: Dims,
                          w: Writer, runtime_transform: bool = False) -> list[ThreadItem]:
    """The item functions of idsva_so's directions strategy (`emit.directions`), one per
    group of outer directions (`second_order.direction_groups`): `<name>_thread_d<k>`
    writes that group's entries of the item's output. `[]` where it does not apply."""
    items: list[ThreadItem] = []
    groups: list | None = None
    k = 0
    while groups is None or k < len(groups):
        plan = _Plan(model, ee_frames, runtime_inertia, w_library, None, runtime_transform)
        kb = ItemBuilder(w_library)
        ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
                 for p in algorithm.inputs}
        X = plan.transforms(kb, ports["q"])
        if groups is None:
            groups = SO.direction_groups(plan, X, ports)
            if not groups:
                return []
        out = Array.runtime("out", algorithm.output_size(dims), "out")
        SO.emit_idsva_so_group(plan, kb, X, ports, out, k, groups[k])
        name = f"{algorithm.name}_thread_d{k}"
        kb.emit_item_function(w, name, f"Group {k} of the outer directions of "
                              f"`{algorithm.name}` of one item (`emit.directions`).",
                              item_params(algorithm, dims, False, runtime_transform))
        items.append(ThreadItem(name, kb.total_ops))
        k += 1
    return items


def build_tangent_item(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                       runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                       runtime_transform: bool = False) -> ThreadItem:
    """The item function of a tangents strategy (`emit.tangents`):
    `<name>_tangent_thread(..., out, [transform,] seed)` writes one column of the
    algorithm's Jacobian, the derivative along `seed`, to `out` by forward mode: the FD
    gradient's `dqdd/dz . seed` (nv; `symbolic.algorithms.fd_tangent`) or a fused step
    gradient's `[dq'; dqd']/dz . seed` (2 nv; `emit.plant.step_tangent`)."""
    nv = model.nv
    plan = _Plan(model, ee_frames, runtime_inertia, library, None, runtime_transform)
    kb = ItemBuilder(library)
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    views = state_views(ports, dims)
    X = plan.transforms(kb, ports["q"])
    integrator = PL.integrator_of(algorithm)
    if integrator is None:
        plan.dynamics_call(
            kb, "fd_tangent", "dqdd/dz . seed at qdd = FD(q, qd, u): ABA, RNEA's derivative "
            "along the seed there, and ABA's solve with the same articulated inertias.",
            lambda x, qd, u, f, s, I, g: A.fd_tangent(
                model, A.unflatten_placements(x, model.nb), I, qd, u, f, g, s)[1],
            [X, ports["qd"], ports["u"], ports["f_ext"], Array.runtime("seed", 2 * nv, "item")],
            Array.runtime("out", nv, "out"))
    else:
        plan.dynamics_call(
            kb, f"step_tangent_{integrator}", f"[dq'; dqd']/d(dq, dqd, du) . seed of one "
            f"{integrator} step: FD's tangent, then the chart's.",
            lambda x, qd, u, dt, s, I, g: PL.step_tangent(
                model, integrator, A.unflatten_placements(x, model.nb), I, qd, u, g, dt[0],
                s),
            [X, ports["qd"], ports["u"], ports["dt"], Array.runtime("seed", 3 * nv, "item")],
            Array.runtime("out", 2 * nv, "out"))
    name = f"{algorithm.name}_tangent_thread"
    kb.emit_item_function(w, name, f"One direction of `{algorithm.name}` of one item: "
                          "the column along `seed` (`emit.tangents`).",
                          [*item_params(algorithm, dims, False, runtime_transform),
                           "const T* GRID_RESTRICT seed"], views=views)
    return ThreadItem(name, kb.total_ops)


def state_views(ports: dict[str, Array], dims: Dims) -> list[tuple[str, str]]:
    """For an algorithm whose input is the state `x = [q, qd]` (the fused step
    gradients, which take what the plant methods are given, so that no call splits `x`
    into copies): adds `q` and `qd` to `ports` and returns them as the item function's
    views of `x` (`ItemBuilder.emit_item_function`); `[]` for every other algorithm."""
    if "x" not in ports:
        return []
    ports["q"] = Array.runtime("q", dims.nq, "item")
    ports["qd"] = Array.runtime("qd", dims.nv, "item")
    return [("q", "x"), ("qd", f"x + {dims.nq}")]


def free_flyer_root(model: RobotModel) -> bool:
    """A free flyer at the root (tangent 0..5) over revolute and prismatic joints: the
    configurations whose fused step gradient the free-flyer rows of `emit.plant` cover."""
    joints = model.joints
    return (model.coupling is None and bool(joints)
            and joints[0].type is JointType.FREE_FLYER and joints[0].idx_v == 0
            and all(j.type.scalar for j in joints[1:]))


def _plant_step_gradient(plan: _Plan, kb: ItemBuilder, w: Writer, algorithm: Algorithm,
                         dims: Dims, ports: dict[str, Array], views: list[tuple[str, str]],
                         X: Array, unX: Callable, max_ops: int | None,
                         joint_dynamics: JointDynamics | None,
                         runtime_transform: bool) -> ThreadItem:
    """The fused step gradient (`emit.plant`): `aba_minv`, then the velocity rows `V`
    in column groups as the rows item `<alg>_rows_thread` (reading `q` and `qd` in the
    state `x`: `state_views`), then `<alg>_thread` and the kernel's staged store over
    it."""
    model, name = plan.model, algorithm.name
    floating = model.nq != model.nv
    if floating and not free_flyer_root(model):
        raise ValueError(f"{name}: the fused step gradient needs a vector configuration "
                         "or a free-flyer root over revolute and prismatic joints (this "
                         f"robot has nq {model.nq}, nv {model.nv}); the handles compose it")
    nv = model.nv
    solved = plan.dynamics_call(
        kb, "aba_minv", "qdd = FD(q, qd, u) (entries 0..nv-1) and M^-1 (row-major, "
        "then), sharing the articulated inertias.",
        lambda x, qd, u, I, g, P: A.aba_minv(model, unX(x), I, qd,
                                            _passive_input(P, u, qd), None, g),
        [X, ports["qd"], ports["u"]], "qdd_minv", passive=True)

    def velocity(x, qd, s, dt, I, g, P, columns=None):
        wanted = range(3 * nv) if columns is None else columns
        dcols = [c for c in wanted if c < 2 * nv]
        Minv = [list(s[nv + r * nv:nv + (r + 1) * nv]) for r in range(nv)]
        D = None
        if dcols:
            D = A.rnea_derivatives(model, unX(x), I, qd, list(s[:nv]), None, g, dcols)
            D = A.neg_product(Minv, _passive_slope(P, D, qd, dcols))
        return PL.velocity_rows(nv, D, dcols, Minv, dt[0])

    joint_table = bool(joint_dynamics and joint_dynamics.runtime)
    params = item_params(algorithm, dims, joint_table, runtime_transform)
    if floating:
        integrator = PL.integrator_of(algorithm)

        def full(x, qd, s, dt, I, g, P, columns=None):
            V = velocity(x, qd, s, dt, I, g, P, columns)
            return PL.position_rows(model, integrator, V, qd, s[:nv], dt[0]) + V

        out = Array.runtime("out", algorithm.output_size(dims), "out")
        column_groups(plan, kb, f"step_gradient_{integrator}", "[dq'; dqd'] / d(dq, dqd, u) "
                      "of one step of a free-flyer robot: the FD gradient's passes with dt "
                      "and the identity folded in, the root's rows through the Jacobians "
                      "of its SE(3) move", full, [X, ports["qd"], solved, ports["dt"]],
                      out, 2 * nv, 3 * nv, max_ops)
        kb.emit_item_function(w, f"{name}_thread", f"`{name}` of one item: {algorithm.doc}",
                              params, views=views)
        return ThreadItem(f"{name}_thread", kb.total_ops)
    row = PL.staged_row(algorithm, dims)
    compact = Array.runtime("out", row.width, "out")
    # (The same passes for both integrators: the library emits them once.)
    column_groups(plan, kb, "step_velocity_rows", "dqd'/d(dq, dqd, u) = [dt dqdd/d(q, qd) "
                  "+ [0, I] | dt M^-1] of one step: the FD gradient's passes with dt and "
                  "the identity folded in", velocity,
                  [X, ports["qd"], solved, ports["dt"]], compact, nv, 3 * nv, max_ops)
    kb.emit_item_function(w, row.item, f"The velocity rows of `{name}` of one item "
                          f"(`{nv} x {3 * nv}`, row-major; `emit.plant`).", params,
                          views=views)
    args = [p.split()[-1] for p in params]
    return ThreadItem(f"{name}_thread", PL.emit_items(w, algorithm, dims, params, args,
                                                      kb.total_ops))


def _finish(kb: ItemBuilder, w: Writer, algorithm: Algorithm, dims: Dims,
            joint_dynamics: JointDynamics | None, runtime_transform: bool,
            part: Part | None = None) -> ThreadItem:
    """Write the item function of `algorithm` over the passes `kb` has chained (`part`:
    a part of its output, `emit.thread_parts`)."""
    item = f"{algorithm.name}_thread"
    doc = f"`{algorithm.name}` of one item: {algorithm.doc}"
    if part is not None:
        item = part.item
        doc = (f"Entries {part.offset} .. {part.offset + part.width - 1} of "
               f"`{algorithm.name}` of one item (`emit.thread_parts`).")
    kb.emit_item_function(w, item, doc,
                          item_params(algorithm, dims, bool(joint_dynamics
                                                            and joint_dynamics.runtime),
                                      runtime_transform))
    return ThreadItem(item, kb.total_ops)


__all__ = ["RUNTIME", "ThreadItem", "TooLarge", "build_thread_item", "item_params"]
