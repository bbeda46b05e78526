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
from dataclasses import asdict, dataclass, field

from grid_codegen.registry import DEFAULT_NAMES as DEFAULT_ALGORITHMS
from grid_codegen.registry import NAMES as ALGORITHMS
from grid_codegen.registry import PROFILES, expand_profiles

DTYPES = ("float32", "float64")
STRATEGIES = ("auto", "thread", "warp", "block")


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
    """

    dtype: str = "float32"
    max_batch_size: int = 65536
    algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS
    ee_joint_names: tuple[str, ...] = ()
    runtime_inertia: bool = False
    strategy: str = "auto"
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

    @property
    def scalar(self) -> str:
        """The C++ scalar type: `float` or `double`."""
        return "float" if self.dtype == "float32" else "double"

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["version"] = out.pop("_version")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def canonical_json(self) -> str:
        """Sorted, whitespace-free JSON: equal options give equal bytes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

