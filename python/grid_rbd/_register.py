"""`register_robot`, `get_robot`, `load_robot`: from a URDF (or a store entry, or an
artifact file) to a handle."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grid_rbd._handle import RobotHandle

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("numpy", "jax", "torch")


def with_backend(handle: RobotHandle, backend: str) -> Any:
    """`handle` as the handle of `backend`: itself for numpy, else a JAX or torch view."""
    if backend == "numpy":
        return handle
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    try:
        if backend == "jax":
            from grid_rbd.jax import JaxRobotHandle as view
        else:
            from grid_rbd.torch import TorchRobotHandle as view
    except ModuleNotFoundError as exc:
        if exc.name not in ("jax", "jaxlib", "torch"):
            raise
        raise ImportError(f"backend={backend!r} needs {exc.name}, which is not installed "
                          f"(pip install -e '.[{backend}]'); the artifact itself is built "
                          "and usable with backend='numpy'") from exc
    return view(handle)


def resolve_device(device: str) -> str:
    """The build backend for `device`: "cpu" or "cuda" ("auto": cuda when usable)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu"
    from grid_rbd._device import cuda_status

    status = cuda_status()
    if device == "auto":
        return "cuda" if status.usable else "cpu"
    if not status.usable:
        raise RuntimeError(f"device='cuda' needs a usable CUDA GPU, but {status.reason}; "
                           "use device='cpu' for the host build, or device='auto' to pick")
    return "cuda"


def register_robot(name: str, urdf_path: str | os.PathLike | None = None,
                   urdf_string: str | None = None, floating_base: bool = False,
                   max_batch_size: int = 65536, dtype: str = "float32",
                   ee_joint_names: Sequence[str] | None = None,
                   algorithm_list: Sequence[str] | None = None,
                   runtime_inertia: bool = False, device: str = "auto",
                   backend: str = "numpy", cache_dir: str | os.PathLike | None = None,
                   force_rebuild: bool = False) -> Any:
    """Compile (or find in the store) the artifact of a robot and return its handle.

    name: the name `get_robot(name)` finds it under later.
    urdf_path / urdf_string: exactly one: a URDF file, or the URDF text.
    floating_base: add a free-flyer root (q = [p(3), quat xyzw(4), joints], nv = 6 + joints).
    max_batch_size: the largest batch a call accepts.
    dtype: "float32" (default) or "float64": the compute dtype of inputs and outputs.
    ee_joint_names: fixed-joint frames used as end effectors (default: the leaf bodies).
    algorithm_list: the algorithms to build (default: all of them).
    runtime_inertia: read inertias from a per-context table (`set_inertia_params`).
    device: "auto" (the GPU when one is usable, else the CPU), "cuda" or "cpu".
    backend: "numpy" (a `RobotHandle`), "jax" (a `grid_rbd.jax.JaxRobotHandle`) or "torch"
        (a `grid_rbd.torch.TorchRobotHandle`); all three share the store entry.
    cache_dir: the store root (default `$GRID_RBD_CACHE_DIR`, else ~/.cache/grid-rbd).
    force_rebuild: compile again and republish even when the store has the entry.

    A cold build reports its phases (parse, generate, compile, publish) on stderr; a warm
    one finds the entry by its key and loads it. Raises `ValueError` for bad arguments,
    `RuntimeError` for device="cuda" without a usable GPU, `ImportError` when the chosen
    backend's framework is not installed, and `grid_codegen.compile.CompileError` when the
    compiler fails.
    """
    from grid_codegen.options import ALGORITHMS, CodegenOptions
    from grid_rbd._build import ensure_entry

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if (urdf_path is None) == (urdf_string is None):
        raise ValueError("pass exactly one of urdf_path= and urdf_string=")
    if urdf_path is not None:
        path = Path(urdf_path)
        if not path.is_file():
            raise FileNotFoundError(f"no URDF at {urdf_path}")
        urdf_bytes, source = path.read_bytes(), str(path.resolve())
    else:
        if not isinstance(urdf_string, str):
            raise ValueError(f"urdf_string must be a str, got {type(urdf_string).__name__}")
        urdf_bytes, source = urdf_string.encode(), "<urdf string>"
    try:
        dtype_name = np.dtype(dtype).name
    except TypeError as exc:
        raise ValueError(f"dtype {dtype!r} is not a numpy dtype; use float32 or float64") from exc
    if isinstance(ee_joint_names, str) or isinstance(algorithm_list, str):
        raise ValueError("ee_joint_names and algorithm_list are lists of names, not a str")
    options = CodegenOptions(
        dtype=dtype_name, max_batch_size=max_batch_size,
        algorithms=tuple(algorithm_list) if algorithm_list is not None else ALGORITHMS,
        ee_joint_names=tuple(ee_joint_names or ()), runtime_inertia=bool(runtime_inertia))
    target = resolve_device(device)
    registration = ensure_entry(name, urdf_bytes, source, bool(floating_base), options,
                                target, cache_dir=cache_dir, force_rebuild=force_rebuild)
    return with_backend(RobotHandle._open(registration.so_path, name, registration), backend)


def get_robot(name: str, cache_dir: str | os.PathLike | None = None,
              backend: str = "numpy") -> Any:
    """The handle of a robot registered earlier under `name` (from the store's manifest;
    nothing is compiled), for `backend` as in register_robot. Raises `KeyError` when the
    name is unknown."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    from grid_rbd._store import Store, cache_root

    store = Store(cache_root(cache_dir))
    record = store.read_manifest().get(name)
    if record is None:
        known = sorted(store.read_manifest())
        raise KeyError(f"no robot named {name!r} in {store.manifest_path} (registered: "
                       f"{', '.join(known) or 'none'}); call register_robot first")
    entry = store.entry(str(record.get("content_key", "")))
    if entry is None:
        raise RuntimeError(f"{name!r} points at store entry {record.get('content_key')}, "
                           f"which is missing or incomplete in {store.entries}; register it "
                           "again")
    return with_backend(RobotHandle._open(entry.so_path, name), backend)


def load_robot(path: str | os.PathLike, backend: str = "numpy") -> Any:
    """A handle on an artifact file (`robot.so`) or a store entry directory holding one,
    for `backend` as in register_robot. Joint and body names come from the meta.json
    beside it, when present."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    path = Path(path)
    so_path = path / "robot.so" if path.is_dir() else path
    if not so_path.is_file():
        raise FileNotFoundError(f"no artifact at {so_path}")
    return with_backend(RobotHandle._open(so_path), backend)


def bound_to_backend(backend: str) -> tuple[Any, Any, Any]:
    """`register_robot`, `get_robot` and `load_robot` with `backend` fixed: what
    grid_rbd.jax and grid_rbd.torch export. Each keeps the signature and documentation of
    the function it wraps, without the `backend` parameter."""
    import functools
    import inspect

    def bind(function: Any) -> Any:
        @functools.wraps(function)
        def bound(*args: Any, **kwargs: Any) -> Any:
            if "backend" in kwargs:
                raise TypeError(f"grid_rbd.{backend}.{function.__name__} always uses "
                                f"backend={backend!r}")
            return function(*args, backend=backend, **kwargs)

        signature = inspect.signature(function)
        bound.__signature__ = signature.replace(parameters=[
            p for name, p in signature.parameters.items() if name != "backend"])
        bound.__doc__ = f"`grid_rbd.{function.__name__}(..., backend={backend!r})`.\n\n" + \
            (function.__doc__ or "")
        return bound

    return bind(register_robot), bind(get_robot), bind(load_robot)

