"""The one list of algorithms: names, ports, shapes and semantics, written once.

Everything that names an algorithm reads this table: the code generator (which kernels
exist, their inputs and output sizes, their order and so their ids in the artifact's
descriptor), the C ABI wrapper, the handles' method table (`grid_rbd._methods`), the
codegen command line and, through it, the Bazel macro. Adding a kernel is one entry here
plus its emitters.

Widths and shapes are written in the robot's dimensions (`Dim("nv")`, `Dim("nb", 6)`) and
evaluated with `Dims`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_DIM_LABELS = {
    "one": "constant",
    "nq": "configuration width nq",
    "nv": "tangent width nv",
    "nb": "body count nb",
    "num_ees": "end-effector count num_ees",
    "world_kinematics": "world-kinematics width 18*nb + 6*nv",
    "num_spheres": "collision sphere count num_spheres",
    "num_pairs": "collision pair count num_pairs",
    "nq_nv": "width nq + nv",
    "nq_2nv": "width nq + 2*nv",
}


@dataclass(frozen=True)
class Dims:
    """A robot's dimensions: nq (configuration), nv (tangent), nb (bodies), num_ees;
    num_spheres and num_pairs of a collision build (grid_codegen.collision; 0 without)."""

    nq: int
    nv: int
    nb: int
    num_ees: int
    num_spheres: int = 0
    num_pairs: int = 0

    @property
    def one(self) -> int:
        """The unit, for constant widths (`Dim("one", 3)` is 3)."""
        return 1

    @property
    def nq_nv(self) -> int:
        """[configuration | tangent]: an inverse-dynamics VJP's width."""
        return self.nq + self.nv

    @property
    def nq_2nv(self) -> int:
        """[configuration | tangent | tangent]: a forward-dynamics VJP's width."""
        return self.nq + 2 * self.nv

    @property
    def world_kinematics(self) -> int:
        """The width of `world_kinematics`: R (9) and p (3) and a twist (6) per body, and
        a world motion-subspace column (6) per dof."""
        return 18 * self.nb + 6 * self.nv


@dataclass(frozen=True)
class Dim:
    """`factor * dims.<name> + plus` (`name` "one" for a constant)."""

    name: str
    factor: int = 1
    plus: int = 0

    def __call__(self, dims: Dims) -> int:
        return self.factor * getattr(dims, self.name) + self.plus

    def describe(self, dims: Dims) -> str:
        """This width for error messages: 'tangent width nv is 18', '6*nb is 48 (nb = 8)'."""
        if self.factor == 1 and not self.plus:
            return f"{_DIM_LABELS[self.name]} is {self(dims)}"
        return f"{self} is {self(dims)} ({self.name} = {getattr(dims, self.name)})"

    def __str__(self) -> str:
        if self.name == "one":
            return str(self.factor + self.plus)
        text = self.name if self.factor == 1 else f"{self.factor}*{self.name}"
        return f"{text}+{self.plus}" if self.plus else text


@dataclass(frozen=True)
class Port:
    """One input: a `(B, width)` array; optional inputs may be absent (read as zeros)."""

    name: str
    width: Dim
    required: bool = True
    doc: str = ""


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of the artifact.

    output: the per-item output shape. uses_gravity: takes the signed gravity.
    aliases: other public names of the handle method. differentiable: inputs a JAX/torch
    backward reaches through `gradient`, the algorithm giving `[d/dq | d/dqd]` (empty for
    forward-only methods). vjp: the reverse-mode algorithm that gives all of the
    backward's cotangents in one pass (the backward uses it when it was built and no
    f_ext was given). jacobian_columns: for a Jacobian-shaped output (rows x columns,
    row-major), the column count, which the emitters may split work by."""

    name: str
    doc: str
    inputs: tuple[Port, ...]
    output: tuple[Dim, ...]
    uses_gravity: bool
    aliases: tuple[str, ...] = ()
    differentiable: tuple[str, ...] = ()
    gradient: str | None = None
    vjp: str | None = None
    jacobian_columns: Dim | None = None
    parts: tuple[tuple[str, tuple[Dim, ...]], ...] = ()
    profile: str = "core"

    def widths(self, dims: Dims) -> tuple[int, ...]:
        return tuple(p.width(dims) for p in self.inputs)

    def output_shape(self, dims: Dims) -> tuple[int, ...]:
        """Per-item output shape (the batch axis is in front of it)."""
        return tuple(d(dims) for d in self.output)

    def output_size(self, dims: Dims) -> int:
        """Scalars per item."""
        return math.prod(self.output_shape(dims))

    def part_shapes(self, dims: Dims) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """`(name, per-item shape)` of each returned array (one part for most methods)."""
        if not self.parts:
            return (("", self.output_shape(dims)),)
        return tuple((name, tuple(d(dims) for d in shape)) for name, shape in self.parts)


REFERENCE_FRAME_CODES = {"WORLD": 0, "LOCAL": 1, "LOCAL_WORLD_ALIGNED": 2}
"""`frame_jacobian_indexed`'s reference-frame codes (Pinocchio's ReferenceFrame enum)."""

NQ, NV, NB6, NEE6, NV2 = Dim("nq"), Dim("nv"), Dim("nb", 6), Dim("num_ees", 6), Dim("nv", 2)
C3, C6, NB10 = Dim("one", 3), Dim("one", 6), Dim("nb", 10)
NV3 = (NV, NV, NV)
Q = Port("q", NQ, doc="configuration; floating base [p(3), quat xyzw(4), joints]")
QD = Port("qd", NV, doc="tangent velocity; floating base [v_lin, omega, joints] (local)")
QDD = Port("qdd", NV, False, "acceleration; None means zero (the bias c = C qd + g)")
U = Port("u", NV, doc="generalized force (torque)")
FEXT = Port("f_ext", NB6, False, "one spatial force [f; tau] per body, local frame")
DT = Port("dt", Dim("one", 1), doc="the step length (s), one per item")
STATE = Port("x", Dim("nq_nv"), doc="the state [q, qd] (the plant methods' x)")
CT = Port("ct", NV, doc="the cotangent of the method's (B, nv) output")
FRAME = Port("frame", Dim("one", 2), doc="[frame table index, reference frame code] per item")

ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("inverse_dynamics",
              "Inverse dynamics (RNEA): tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext.",
              (Q, QD, QDD, FEXT), (NV,), True, aliases=("rnea",),
              differentiable=("q", "qd"), gradient="inverse_dynamics_gradient",
              vjp="inverse_dynamics_vjp"),
    Algorithm("crba", "The joint-space mass matrix M(q) (CRBA), full and symmetric.",
              (Q,), (NV, NV), False),
    Algorithm("minv", "The inverse mass matrix M(q)^-1, full and symmetric.",
              (Q,), (NV, NV), False),
    Algorithm("forward_dynamics", "Forward dynamics qdd = M(q)^-1 (u - c(q, qd, f_ext)).",
              (Q, QD, U, FEXT), (NV,), True, aliases=("fd",),
              differentiable=("q", "qd", "u"), gradient="forward_dynamics_gradient",
              vjp="forward_dynamics_vjp"),
    Algorithm("aba", "Forward dynamics by the articulated-body algorithm.",
              (Q, QD, U, FEXT), (NV,), True,
              differentiable=("q", "qd", "u"), gradient="forward_dynamics_gradient",
              vjp="forward_dynamics_vjp"),
    Algorithm("end_effector_pose",
              "End-effector poses [x, y, z, roll, pitch, yaw] per end effector "
              "(rpy as Pinocchio's matrixToRpy).",
              (Q,), (NEE6,), False, differentiable=("q",),
              gradient="end_effector_pose_gradient"),
    Algorithm("end_effector_pose_gradient",
              "d(end-effector [xyz, rpy])/d(tangent): coordinate derivatives, nv columns.",
              (Q,), (NEE6, NV), False, jacobian_columns=NV),
    Algorithm("inverse_dynamics_gradient",
              "[dtau/dq | dtau/dqd] of inverse dynamics (local tangent chart).",
              (Q, QD, QDD, FEXT), (NV, NV2), True, jacobian_columns=NV2),
    Algorithm("forward_dynamics_gradient",
              "[dqdd/dq | dqdd/dqd] of forward dynamics (local tangent chart).",
              (Q, QD, U, FEXT), (NV, NV2), True, jacobian_columns=NV2),
    # Reverse mode (one pass for all inputs; the JAX/torch backwards without f_ext).
    Algorithm("forward_dynamics_vjp",
              "ct^T d FD(q, qd, u) / d(q, qd, u) without f_ext, by reverse mode through "
              "the whole pass: [ct_q (nq: q's configuration layout as given, a "
              "quaternion's four numbers) | ct_qd (nv) | ct_u = M^-1 ct (nv)].",
              (Q, QD, U, CT), (Dim("nq_2nv"),), True),
    Algorithm("inverse_dynamics_vjp",
              "ct^T d ID(q, qd, qdd) / d(q, qd) without f_ext, by reverse mode (qdd None "
              "is zero): [ct_q (nq, q's configuration layout) | ct_qd (nv)].",
              (Q, QD, CT, QDD), (Dim("nq_nv"),), True),
    # -- the centroidal profile (built on request: algorithm_list=["centroidal", ...]) --
    Algorithm("generalized_gravity", "g(q): the joint torques that hold the robot still.",
              (Q,), (NV,), True, profile="centroidal"),
    Algorithm("nonlinear_effects",
              "C(q, qd) qd + g(q) (Pinocchio's nonLinearEffects; RNEA at qdd = 0).",
              (Q, QD), (NV,), True, profile="centroidal"),
    Algorithm("coriolis_matrix",
              "The Coriolis matrix C(q, qd) of Pinocchio's computeCoriolisMatrix: "
              "C qd + g = nonlinear_effects and dM/dt = C + C^T.",
              (Q, QD), (NV, NV), False, profile="centroidal"),
    Algorithm("com", "The centre of mass (world) and its Jacobian (tangent columns).",
              (Q,), (Dim("nv", 3, 3),), False, profile="centroidal",
              parts=(("com", (C3,)), ("jacobian", (C3, NV)))),
    Algorithm("ccrba",
              "The centroidal momentum matrix A (rows [linear; angular], about the centre "
              "of mass, world axes) and the momentum h = A qd (Pinocchio's ccrba).",
              (Q, QD), (Dim("nv", 6, 6),), False, profile="centroidal",
              parts=(("A", (C6, NV)), ("h", (C6,)))),
    Algorithm("dccrba",
              "dA/dq: dA[r, c, i] = d A[r, c] / d eps_i along the tangent chart "
              "(derivative index last).",
              (Q,), (C6, NV, NV), False, profile="centroidal"),
    Algorithm("cmm_time_variation", "dA/dt = sum_i (dA/d eps_i) qd_i.",
              (Q, QD), (C6, NV), False, profile="centroidal"),
    Algorithm("energy",
              "[kinetic, potential, mechanical] energy (potential zero at z = 0).",
              (Q, QD), (C3,), True, profile="centroidal"),
    Algorithm("kinetic_energy_regressor",
              "y with kinetic energy T = y . pi (pi: Pinocchio's dynamic parameters, body "
              "by body, the order of set_inertia_params).",
              (Q, QD), (NB10,), False, profile="centroidal"),
    Algorithm("potential_energy_regressor", "y with potential energy V = y . pi.",
              (Q,), (NB10,), True, profile="centroidal"),
    Algorithm("inverse_dynamics_regressor",
              "Y with inverse_dynamics(q, qd, qdd) = Y pi (Pinocchio's "
              "computeJointTorqueRegressor); qdd None is zero.",
              (Q, QD, QDD), (NV, NB10), True, profile="centroidal"),
    # -- the kinematics profile --------------------------------------------------------
    Algorithm("fk_batched",
              "[x, y, z, qw, qx, qy, qz] of the first end-effector frame in the world (the "
              "quaternion composed along the chain: unit, its sign continuous in q).",
              (Q,), (Dim("one", 7),), False, profile="kinematics"),
    Algorithm("world_kinematics",
              "Every body's world rotation and position, the world motion-subspace columns "
              "(spatial, about the world origin) and every body's world twist (zero "
              "without qd): what frame Jacobians of any frame are assembled from.",
              (Q, Port("qd", NV, False, "tangent velocity; None means zero (no twists)")),
              (Dim("world_kinematics"),), False, profile="kinematics",
              parts=(("rotations", (Dim("nb"), C3, C3)), ("positions", (Dim("nb"), C3)),
                     ("motion_subspace", (C6, NV)), ("body_twists", (Dim("nb"), C6)))),
    Algorithm("frame_jacobian_indexed",
              "The geometric Jacobian [linear; angular rows] of any frame, chosen per item "
              "(what frame_jacobian calls): frame[0] indexes the artifact's frame table "
              "(body b's own frame for b < nb, then meta.json's frames), frame[1] is the "
              "reference frame (0 WORLD, 1 LOCAL, 2 LOCAL_WORLD_ALIGNED); another index or "
              "code gives NaN.",
              (Q, FRAME), (C6, NV), False, profile="kinematics"),
    Algorithm("frame_jacobian_dot_indexed",
              "d/dt of frame_jacobian_indexed along qd (what frame_jacobian_dot calls; "
              "Pinocchio's getFrameJacobianTimeVariation): the same frame and reference "
              "frame selector per item, NaN for a bad one.",
              (Q, Port("qd", NV, doc="tangent velocity (the direction of the time "
                       "derivative)"), FRAME), (C6, NV), False, profile="kinematics"),
    Algorithm("end_effector_pose_hessian",
              "d2(end-effector [xyz, rpy])/d eps_i d eps_j along the chart q (+) eps "
              "(symmetric; the free flyer moves by the exponential of its local twist).",
              (Q,), (NEE6, NV, NV), False, profile="kinematics"),
    # -- the second-order profile ------------------------------------------------------
    Algorithm("idsva_so",
              "Second-order derivatives of inverse dynamics, Pinocchio's "
              "ComputeRNEASecondOrderDerivatives layout: d2tau_dq2[i, j, k] = "
              "d/dq_k (dtau_i/dq_j) (iterated chart), d2tau_dqd2, d2tau_dq_dqd[i, j, k] = "
              "d2tau_i/dq_j dqd_k and dM_dq[i, j, k] = dM_ij/dq_k.",
              (Q, QD, QDD, FEXT), (Dim("nv", 4), NV, NV), True, profile="second_order",
              parts=(("d2tau_dq2", NV3), ("d2tau_dqd2", NV3), ("d2tau_dq_dqd", NV3),
                     ("dM_dq", NV3))),
    Algorithm("fdsva_so",
              "Second-order derivatives of forward dynamics in idsva_so's layout, u in "
              "the place of qdd: d2qdd_dq2, d2qdd_dqd2, d2qdd_dq_dqd and dMinv_dq[i, j, k] "
              "= dMinv_ij/dq_k = d2qdd_i/du_j dq_k.",
              (Q, QD, U, FEXT), (Dim("nv", 4), NV, NV), True, profile="second_order",
              parts=(("d2qdd_dq2", NV3), ("d2qdd_dqd2", NV3), ("d2qdd_dq_dqd", NV3),
                     ("dMinv_dq", NV3))),
    # -- the collision profile (register_robot(collision=True); docs/collision.md) ------
    Algorithm("sphere_positions",
              "World centres of the collision spheres (collision_spheres order).",
              (Q,), (Dim("num_spheres"), C3), False, profile="collision",
              differentiable=("q",), gradient="sphere_positions_gradient"),
    Algorithm("sphere_positions_gradient",
              "d(sphere centre)/d(tangent): [s, k, j] = d p_s[k] / d eps_j.",
              (Q,), (Dim("num_spheres"), C3, NV), False, profile="collision",
              jacobian_columns=NV),
    Algorithm("self_collision_distance",
              "Signed distance per checked link pair (collision_pairs order): the "
              "smallest |p_a - p_b| - r_a - r_b over the two links' spheres.",
              (Q,), (Dim("num_pairs"),), False, profile="collision",
              differentiable=("q",), gradient="self_collision_distance_gradient"),
    Algorithm("self_collision_distance_gradient",
              "d(self_collision_distance)/d(tangent): the active sphere pair's gradient.",
              (Q,), (Dim("num_pairs"), NV), False, profile="collision",
              jacobian_columns=NV),
    # -- the plant profile (register_robot(emit_plant=True); docs/plant.md) -----------
    Algorithm("plant_step_gradient_euler",
              "[A | B] = dx'/d(x, u) (2nv x 3nv: the tangent [dq, dqd], then u) of one "
              "explicit euler step x' = [q + dt qd, qd + dt FD(q, qd, u)] (robots whose "
              "configuration is a vector, nq == nv).",
              (STATE, U, DT), (NV2, Dim("nv", 3)), True, profile="plant",
              jacobian_columns=Dim("nv", 3)),
    Algorithm("plant_step_gradient_semi_implicit_euler",
              "[A | B] of one semi-implicit euler step qd' = qd + dt FD(q, qd, u), "
              "q' = q + dt qd' (nq == nv).",
              (STATE, U, DT), (NV2, Dim("nv", 3)), True, profile="plant",
              jacobian_columns=Dim("nv", 3)),
)

BY_NAME: dict[str, Algorithm] = {a.name: a for a in ALGORITHMS}
NAMES: tuple[str, ...] = tuple(a.name for a in ALGORITHMS)
"""Every algorithm, in descriptor (id) order."""

MAX_INPUTS = max(len(a.inputs) for a in ALGORITHMS)

PROFILES: dict[str, tuple[str, ...]] = {
    profile: tuple(a.name for a in ALGORITHMS if a.profile == profile)
    for profile in dict.fromkeys(a.profile for a in ALGORITHMS)}
PROFILES["all"] = tuple(n for n in NAMES if BY_NAME[n].profile not in ("collision", "plant"))
# ("all" leaves out the collision profile: it needs a sphere model, which only a
# registration with collision=True has; and the plant profile, which needs nq == nv;
# asking for either by name adds it.)
"""Groups of algorithms `algorithm_list` may name: "core" (the dynamics, mass matrix,
kinematics and their gradients: the default build), "centroidal", "kinematics",
"second_order", "plant" (the fused step gradients), "collision" (needs a sphere model),
"all"."""

DEFAULT_NAMES: tuple[str, ...] = PROFILES["core"]


def expand_profiles(names) -> tuple[str, ...]:
    """Algorithm and profile names to algorithm names (unknown names are kept, for the
    caller to refuse with the list of choices)."""
    out: list[str] = []
    for name in names:
        out.extend(PROFILES.get(name, (name,)))
    return tuple(dict.fromkeys(out))


def algorithm(name: str) -> Algorithm:
    found = BY_NAME.get(name)
    if found is None:
        raise KeyError(f"unknown algorithm {name!r}; the generator builds {', '.join(NAMES)}")
    return found
