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
    "nq": "configuration width nq",
    "nv": "tangent width nv",
    "nb": "body count nb",
    "num_ees": "end-effector count num_ees",
}


@dataclass(frozen=True)
class Dims:
    """A robot's dimensions: nq (configuration), nv (tangent), nb (bodies), num_ees."""

    nq: int
    nv: int
    nb: int
    num_ees: int


@dataclass(frozen=True)
class Dim:
    """`factor * dims.<name>`."""

    name: str
    factor: int = 1

    def __call__(self, dims: Dims) -> int:
        return self.factor * getattr(dims, self.name)

    def describe(self, dims: Dims) -> str:
        """This width for error messages: 'tangent width nv is 18', '6*nb is 48 (nb = 8)'."""
        if self.factor == 1:
            return f"{_DIM_LABELS[self.name]} is {self(dims)}"
        return f"{self} is {self(dims)} ({self.name} = {getattr(dims, self.name)})"

    def __str__(self) -> str:
        return self.name if self.factor == 1 else f"{self.factor}*{self.name}"


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
    forward-only methods). jacobian_columns: for a Jacobian-shaped output (rows x
    columns, row-major), the column count, which the emitters may split work by."""

    name: str
    doc: str
    inputs: tuple[Port, ...]
    output: tuple[Dim, ...]
    uses_gravity: bool
    aliases: tuple[str, ...] = ()
    differentiable: tuple[str, ...] = ()
    gradient: str | None = None
    jacobian_columns: Dim | None = None

    def widths(self, dims: Dims) -> tuple[int, ...]:
        return tuple(p.width(dims) for p in self.inputs)

    def output_shape(self, dims: Dims) -> tuple[int, ...]:
        """Per-item output shape (the batch axis is in front of it)."""
        return tuple(d(dims) for d in self.output)

    def output_size(self, dims: Dims) -> int:
        """Scalars per item."""
        return math.prod(self.output_shape(dims))


NQ, NV, NB6, NEE6, NV2 = Dim("nq"), Dim("nv"), Dim("nb", 6), Dim("num_ees", 6), Dim("nv", 2)
Q = Port("q", NQ, doc="configuration; floating base [p(3), quat xyzw(4), joints]")
QD = Port("qd", NV, doc="tangent velocity; floating base [v_lin, omega, joints] (local)")
QDD = Port("qdd", NV, False, "acceleration; None means zero (the bias c = C qd + g)")
U = Port("u", NV, doc="generalized force (torque)")
FEXT = Port("f_ext", NB6, False, "one spatial force [f; tau] per body, local frame")

ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("inverse_dynamics",
              "Inverse dynamics (RNEA): tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext.",
              (Q, QD, QDD, FEXT), (NV,), True, aliases=("rnea",),
              differentiable=("q", "qd"), gradient="inverse_dynamics_gradient"),
    Algorithm("crba", "The joint-space mass matrix M(q) (CRBA), full and symmetric.",
              (Q,), (NV, NV), False),
    Algorithm("minv", "The inverse mass matrix M(q)^-1, full and symmetric.",
              (Q,), (NV, NV), False),
    Algorithm("forward_dynamics", "Forward dynamics qdd = M(q)^-1 (u - c(q, qd, f_ext)).",
              (Q, QD, U, FEXT), (NV,), True, aliases=("fd",),
              differentiable=("q", "qd", "u"), gradient="forward_dynamics_gradient"),
    Algorithm("aba", "Forward dynamics by the articulated-body algorithm.",
              (Q, QD, U, FEXT), (NV,), True,
              differentiable=("q", "qd", "u"), gradient="forward_dynamics_gradient"),
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
)

BY_NAME: dict[str, Algorithm] = {a.name: a for a in ALGORITHMS}
NAMES: tuple[str, ...] = tuple(a.name for a in ALGORITHMS)
"""Every algorithm, in descriptor (id) order."""

MAX_INPUTS = max(len(a.inputs) for a in ALGORITHMS)


def algorithm(name: str) -> Algorithm:
    found = BY_NAME.get(name)
    if found is None:
        raise KeyError(f"unknown algorithm {name!r}; the generator builds {', '.join(NAMES)}")
    return found
