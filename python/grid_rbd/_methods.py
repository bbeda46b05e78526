"""The one method table of the robot handles (numpy now; JAX and torch share it).

Each public method is described once: the artifact algorithm it calls, its aliases, its
inputs with their widths, its per-item output shape, whether it takes `gravity=` and
which inputs a framework backward differentiates. Widths and shapes are written in the
robot's dimensions (`Dim("nv")`, `Dim("nb", 6)`) and evaluated with `Dims`.

`out=` (all methods): a C-contiguous array of the handle dtype holding `B * prod(output)`
scalars, shaped either `(B, *output)` or flat `(B, prod(output))`; the result is a view
of it shaped `(B, *output)` (e.g. a gradient's `(B, nv, 2*nv)` viewed from a
`(B, 2*nv*nv)` buffer).
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
class Input:
    """One input: a `(B, width)` array; optional inputs default to None."""

    name: str
    width: Dim
    required: bool = True
    doc: str = ""


@dataclass(frozen=True)
class Method:
    """One handle method.

    name: the artifact algorithm it runs. aliases: other public names. output: the
    per-item output shape. differentiable: inputs a JAX/torch backward reaches (through
    `gradient`, the algorithm giving `[d/dq | d/dqd]`); empty for forward-only methods."""

    name: str
    inputs: tuple[Input, ...]
    output: tuple[Dim, ...]
    uses_gravity: bool
    doc: str
    aliases: tuple[str, ...] = ()
    differentiable: tuple[str, ...] = ()
    gradient: str | None = None

    def widths(self, dims: Dims) -> tuple[int, ...]:
        return tuple(p.width(dims) for p in self.inputs)

    def output_shape(self, dims: Dims) -> tuple[int, ...]:
        """Per-item output shape (the batch axis is in front of it)."""
        return tuple(d(dims) for d in self.output)

    def output_size(self, dims: Dims) -> int:
        """Scalars per item: what a flat `out=` holds per row."""
        return math.prod(self.output_shape(dims))

    def out_shapes(self, batch: int, dims: Dims) -> tuple[tuple[int, ...], ...]:
        """The shapes `out=` may have: `(B, *output)` or flat `(B, prod(output))`."""
        shaped = (batch, *self.output_shape(dims))
        flat = (batch, self.output_size(dims))
        return (shaped,) if shaped == flat else (shaped, flat)

    def signature_text(self) -> str:
        args = [p.name if p.required else f"{p.name}=None" for p in self.inputs]
        kw = (["gravity=-9.81"] if self.uses_gravity else []) + ["out=None"]
        return f"{self.name}({', '.join(args)}, *, {', '.join(kw)})"

    def docstring(self) -> str:
        shape = ", ".join(["B", *(str(d) for d in self.output)])
        lines = [self.doc, "", "Inputs (C-contiguous, the handle dtype, batch on axis 0):"]
        lines += [f"    {p.name}: (B, {p.width}){'' if p.required else ', optional'}"
                  f"{' -- ' + p.doc if p.doc else ''}" for p in self.inputs]
        if self.uses_gravity:
            lines.append("    gravity: signed gravitational acceleration along z "
                         "(default -9.81).")
        lines.append(f"    out: optional buffer, ({shape}) or flat; the result is a view of "
                     "it.")
        lines.append(f"Returns: ({shape}).")
        if self.aliases:
            lines.append(f"Aliases: {', '.join(self.aliases)}.")
        return "\n".join(lines)


NQ, NV, NB6, NEE6 = Dim("nq"), Dim("nv"), Dim("nb", 6), Dim("num_ees", 6)
_Q = Input("q", NQ, doc="configuration; floating base [p(3), quat xyzw(4), joints]")
_QD = Input("qd", NV, doc="tangent velocity; floating base [v_lin, omega, joints] (local)")
_QDD = Input("qdd", NV, False, "acceleration; None means zero (the bias c = C qd + g)")
_U = Input("u", NV, doc="generalized force (torque)")
_FEXT = Input("f_ext", NB6, False, "one spatial force [f; tau] per body, local frame")

METHODS: tuple[Method, ...] = (
    Method("inverse_dynamics", (_Q, _QD, _QDD, _FEXT), (NV,), True,
           "Inverse dynamics (RNEA): tau = M(q) qdd + C(q, qd) qd + g(q) - J^T f_ext.",
           aliases=("rnea",), differentiable=("q", "qd"),
           gradient="inverse_dynamics_gradient"),
    Method("crba", (_Q,), (NV, NV), False,
           "The joint-space mass matrix M(q) (CRBA), full and symmetric."),
    Method("minv", (_Q,), (NV, NV), False,
           "The inverse mass matrix M(q)^-1, full and symmetric."),
    Method("forward_dynamics", (_Q, _QD, _U, _FEXT), (NV,), True,
           "Forward dynamics qdd = M(q)^-1 (u - c(q, qd, f_ext)).",
           aliases=("fd",), differentiable=("q", "qd", "u"),
           gradient="forward_dynamics_gradient"),
    Method("aba", (_Q, _QD, _U, _FEXT), (NV,), True,
           "Forward dynamics by the articulated-body algorithm.",
           differentiable=("q", "qd", "u"), gradient="forward_dynamics_gradient"),
    Method("end_effector_pose", (_Q,), (NEE6,), False,
           "End-effector poses [x, y, z, roll, pitch, yaw] per end effector "
           "(rpy as Pinocchio's matrixToRpy).",
           differentiable=("q",), gradient="end_effector_pose_gradient"),
    Method("end_effector_pose_gradient", (_Q,), (NEE6, NV), False,
           "d(end-effector [xyz, rpy])/d(tangent): coordinate derivatives, nv columns."),
    Method("inverse_dynamics_gradient", (_Q, _QD, _QDD, _FEXT), (NV, Dim("nv", 2)), True,
           "[dtau/dq | dtau/dqd] of inverse dynamics (local tangent chart)."),
    Method("forward_dynamics_gradient", (_Q, _QD, _U, _FEXT), (NV, Dim("nv", 2)), True,
           "[dqdd/dq | dqdd/dqd] of forward dynamics (local tangent chart)."),
)

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}
ALIASES: dict[str, str] = {alias: m.name for m in METHODS for alias in m.aliases}


def resolve(name: str) -> Method:
    """The method called `name` or aliased so."""
    method = BY_NAME.get(ALIASES.get(name, name))
    if method is None:
        known = sorted([*BY_NAME, *ALIASES])
        raise KeyError(f"no method {name!r}; the handles have {', '.join(known)}")
    return method


def check_against_artifact(algorithms: dict[str, dict], dims: Dims) -> None:
    """Raise when the artifact's descriptor disagrees with this table (an artifact from
    another generator version): every built algorithm must be in the table with the same
    input names, widths, required flags and output size."""
    for name, info in algorithms.items():
        method = BY_NAME.get(name)
        if method is None:
            raise RuntimeError(f"the artifact builds {name!r}, which this grid_rbd does not "
                               "know; update grid_rbd or rebuild the artifact")
        expected = [(p.name, p.width(dims), p.required) for p in method.inputs]
        actual = [(str(n), int(w), bool(r)) for n, w, r in info["inputs"]]
        if expected != actual:
            raise RuntimeError(f"the artifact's {name} takes {actual}; this grid_rbd expects "
                               f"{expected}; rebuild the artifact (force_rebuild=True)")
        size = math.prod(int(n) for n in info["output_shape"])
        if size != method.output_size(dims):
            raise RuntimeError(f"the artifact's {name} returns {info['output_shape']} per "
                               f"item; this grid_rbd expects {method.output_shape(dims)}")
