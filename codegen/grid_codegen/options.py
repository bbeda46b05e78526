"""`CodegenOptions`: every knob that shapes the generated source, frozen and canonical.

The canonical JSON of the options is part of every cache key (DESIGN.md §5), so it must
not depend on argument order or container type: keys are sorted, tuples are lists, and
`algorithms` is normalised to the registry order (the order that fixes algorithm ids in
the artifact's descriptor). The CUDA architectures are not codegen options: the generated
text is the same for every target (the CPU build included), and the architectures are
compile flags (`grid_codegen.compile.cuda_flags`), so artifacts built on machines with
different GPUs share their generated sources and a CPU artifact never depends on them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field

from grid_codegen.registry import DEFAULT_NAMES as DEFAULT_ALGORITHMS
from grid_codegen.registry import NAMES as ALGORITHMS
from grid_codegen.registry import PROFILES, expand_profiles

DTYPES = ("float32", "float64")
STRATEGIES = ("auto", "thread", "warp", "block")
FRICTION_MODELS = ("sign", "tanh")
DEFAULT_FRICTION_WIDTH = 0.01
"""The tanh friction model's default velocity scale (rad/s or m/s): friction reaches
76% of its Coulomb value at |qd| = width, 99.5% at 3 width."""

# Options added after version 3 enter the canonical JSON only when set away from their
# defaults, so that the keys of builds that do not use them stay what they were.
_KEYED_WHEN_SET = {"use_joint_dynamics": False, "runtime_joint_dynamics": False,
                   "friction_model": "sign", "friction_width": None,
                   "runtime_transform": False}


@dataclass(frozen=True)
class CodegenOptions:
    """What to generate for one robot.

    dtype: scalar type of the artifact, "float32" (default) or "float64".
    max_batch_size: the largest batch `launch` accepts; larger batches are refused.
    algorithms: which kernels to emit (any order in, registry order kept); profile names
        ("core", the default; "centroidal"; "all") stand for their algorithms.
    ee_joint_names: fixed (or moving) joints whose frames are the end effectors; empty
        means the leaf bodies' frames (`RobotModel.end_effector_frames`). Order is kept.
    runtime_inertia: the dynamics read each body's 10 inertial parameters from the
        per-context table instead of baked constants.
    strategy: how one batch item maps to GPU threads. "thread": one item per thread,
        straight-line code specialised to the robot (the CPU build runs it on SIMD
        vectors of items); "warp": one item per warp (lanes across bodies of a tree
        level, matrix entries and gradient columns, warp barriers); "block": one item per
        thread block (GRiD's level-synchronous passes). "auto" (the default) builds every
        strategy that suits the robot and picks one per algorithm and batch size at run
        time (`grid_codegen.dispatch` says how).
    use_joint_dynamics: add each joint's viscous damping and Coulomb friction (the URDF's
        `<dynamics damping= friction=>`, free-flyer dofs excluded) to inverse dynamics,
        forward dynamics and their gradients (`grid_codegen.emit.joint_dynamics` gives
        the equations and the sign convention).
    runtime_joint_dynamics: the damping and friction coefficients are a per-context table
        (`set_joint_dynamics`) initialised from the URDF; implies the terms are on.
    friction_model: "sign" (default: `friction * sign(qd)`, zero derivative) or "tanh"
        (`friction * tanh(qd / friction_width)`, smooth for gradients); "tanh" needs joint
        dynamics on.
    friction_width: the tanh model's velocity scale, one value or one per joint-dynamics
        dof (positive; default DEFAULT_FRICTION_WIDTH); only with friction_model="tanh".
    runtime_transform: each joint's origin (parent body -> joint frame) is read from a
        per-context table (`set_transform_params`, `grid_codegen.transforms` gives the
        layout) by every kernel, dynamics and kinematics alike, instead of being folded
        in as constants.
    """

    dtype: str = "float32"
    max_batch_size: int = 65536
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    ee_joint_names: tuple[str, ...] = ()
    runtime_inertia: bool = False
    strategy: str = "auto"
    use_joint_dynamics: bool = False
    runtime_joint_dynamics: bool = False
    friction_model: str = "sign"
    friction_width: float | tuple[float, ...] | None = None
    runtime_transform: bool = False
    _version: int = field(default=3, repr=False)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if not isinstance(self.max_batch_size, int) or not 1 <= self.max_batch_size < 2**31:
            raise ValueError(f"max_batch_size must be an int in [1, 2^31), got "
                             f"{self.max_batch_size!r}")
        algorithms = (self.algorithms,) if isinstance(self.algorithms, str) else self.algorithms
        algorithms = expand_profiles(algorithms)
        unknown = sorted(set(algorithms) - set(ALGORITHMS))
        if unknown:
            raise ValueError(f"unknown algorithms {unknown}; the generator builds "
                             f"{', '.join(ALGORITHMS)} (profiles: {', '.join(PROFILES)})")
        if not algorithms:
            raise ValueError("algorithms must name at least one algorithm")
        object.__setattr__(self, "algorithms",
                           tuple(a for a in ALGORITHMS if a in set(algorithms)))
        names = ((self.ee_joint_names,) if isinstance(self.ee_joint_names, str)
                 else tuple(self.ee_joint_names or ()))
        object.__setattr__(self, "ee_joint_names", tuple(str(n) for n in names))
        object.__setattr__(self, "runtime_inertia", bool(self.runtime_inertia))
        object.__setattr__(self, "runtime_transform", bool(self.runtime_transform))
        self._check_joint_dynamics()

    def _check_joint_dynamics(self) -> None:
        object.__setattr__(self, "use_joint_dynamics", bool(self.use_joint_dynamics))
        object.__setattr__(self, "runtime_joint_dynamics", bool(self.runtime_joint_dynamics))
        if self.friction_model not in FRICTION_MODELS:
            raise ValueError(f"unknown friction_model {self.friction_model!r}: the choices "
                             "are 'sign' and 'tanh'")
        on = self.joint_dynamics
        if self.friction_model == "tanh" and not on:
            raise ValueError("friction_model='tanh' shapes the joint friction, which is off: "
                             "turn it on with use_joint_dynamics=True (or "
                             "runtime_joint_dynamics=True)")
        width = self.friction_width
        if width is None:
            return
        if not on:
            raise ValueError("friction_width is the tanh model's velocity scale, and the "
                             "joint friction is off: turn it on with use_joint_dynamics=True "
                             "and friction_model='tanh'")
        if self.friction_model != "tanh":
            raise ValueError("friction_width is the tanh model's velocity scale; "
                             "friction_model='sign' has none (pass friction_model='tanh')")
        try:
            values = ((float(width),) if not isinstance(width, (list, tuple))
                      else tuple(float(w) for w in width))
        except (TypeError, ValueError):
            raise ValueError(f"friction_width must be a positive number or a list of "
                             f"them, got {width!r}") from None
        if not values or not all(math.isfinite(w) and w > 0 for w in values):
            raise ValueError(f"friction_width must be finite and positive, got {width!r}")
        object.__setattr__(self, "friction_width",
                           values[0] if not isinstance(width, (list, tuple)) else values)

    @property
    def joint_dynamics(self) -> bool:
        """Whether the damping and friction terms are in the dynamics."""
        return self.use_joint_dynamics or self.runtime_joint_dynamics

    def friction_widths(self, n: int) -> tuple[float, ...]:
        """The tanh model's width per joint-dynamics dof (`n` of them)."""
        width = DEFAULT_FRICTION_WIDTH if self.friction_width is None else self.friction_width
        if not isinstance(width, tuple):
            return (float(width),) * n
        if len(width) != n:
            raise ValueError(f"friction_width has {len(width)} entries; this robot has {n} "
                             "joint-dynamics dofs (its tangent dofs less a free flyer's 6)")
        return width

    @property
    def scalar(self) -> str:
        """The C++ scalar type: `float` or `double`."""
        return "float" if self.dtype == "float32" else "double"

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["version"] = out.pop("_version")
        for key, default in _KEYED_WHEN_SET.items():
            if out[key] == default:
                del out[key]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def canonical_json(self) -> str:
        """Sorted, whitespace-free JSON: equal options give equal bytes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

