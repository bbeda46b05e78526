"""The one list of environment variables that change what `register_robot` builds.

Every value read here enters the build identity (`build_inputs.json`), hence both cache
keys: an environment variable that changed a build without changing its key would hand
back a stale `robot.so`. A knob that is read anywhere in the build path must be listed
here and read through `knob`.

Variables that do not change a build, and so are not knobs: `GRID_RBD_CACHE_DIR` (where
the store lives) and `GRID_RBD_PROGRESS` (how a cold build reports its phases).

The rest of the environment never reaches the compiler: it runs with the environment
`grid_codegen.compile.compile_environment` builds from nothing (docs/security.md), and the
one variable passed through, `LD_LIBRARY_PATH`, enters the build identity beside these
knobs (`compile_env` in build_inputs.json).
"""

from __future__ import annotations

import os
import shlex

# name -> what it changes.
ENV_KNOBS: dict[str, str] = {
    "GRID_RBD_CXX": "the host C++ compiler of CPU builds (default: $CXX, else g++)",
    "GRID_RBD_CXXFLAGS": "extra flags appended to the host compiler's command line",
    "GRID_RBD_NVCC": "the nvcc of CUDA builds (default: $NVCC, $CUDA_HOME/bin/nvcc, PATH)",
    "GRID_RBD_NVCCFLAGS": "extra flags appended to nvcc's command line",
    "GRID_RBD_CUDA_ARCH": "CUDA architectures to build, e.g. 'sm_90,sm_120' "
                          "(default: the detected GPU's)",
}


def knob(name: str) -> str | None:
    """The value of knob `name` (None when unset or empty)."""
    if name not in ENV_KNOBS:
        raise KeyError(f"{name} is not a build knob; the knobs are {sorted(ENV_KNOBS)}")
    value = os.environ.get(name, "")
    return value or None


def knob_values() -> dict[str, str | None]:
    """Every knob's current value, sorted by name (the form that enters the keys)."""
    return {name: knob(name) for name in sorted(ENV_KNOBS)}


def knob_flags(name: str) -> tuple[str, ...]:
    """A flags knob split as a shell would split it."""
    value = knob(name)
    return tuple(shlex.split(value)) if value else ()


def parse_arch(item: object, what: str) -> str:
    """'sm_90' from 'sm_90', '90', '9.0' or 90; ValueError naming `what` otherwise."""
    digits = str(item).strip().removeprefix("sm_").replace(".", "")
    if not digits.isdigit():
        raise ValueError(f"{what} {item!r} is not an architecture; use e.g. 'sm_90' or '90'")
    return f"sm_{digits}"


def knob_archs() -> tuple[str, ...]:
    """`GRID_RBD_CUDA_ARCH` as ('sm_90', ...); accepts 'sm_90', '90' or '9.0' entries."""
    value = knob("GRID_RBD_CUDA_ARCH")
    if not value:
        return ()
    archs = [parse_arch(item, "GRID_RBD_CUDA_ARCH entry")
             for item in value.replace(";", ",").split(",") if item.strip()]
    return tuple(sorted(set(archs), key=lambda a: int(a[3:])))
