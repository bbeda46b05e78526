"""The numpy `RobotHandle`: a loaded artifact plus the runtime context it calls into.

The handle only marshals arrays. Its methods are generated from the method table
(`_methods.METHODS`), so the JAX and torch handles (grid_rbd.jax, grid_rbd.torch) get the
same names, aliases and shapes. A call first tries the extension's fast path
(`_core.HostMethod`: argument binding, array checks, the output and the launch in one
C++ call); anything it declines (a wrong argument, an unusual array) comes to
`RobotHandle._run`, which checks everything in Python and raises the precise error.

Contexts: a handle from `register_robot` / `get_robot` / `load_robot` holds a share of
the artifact's default context (`ctx_id == 0`, created lazily by the runtime and shared
by every such handle in the process): the last share given back (`close()`, a `with`
block, garbage collection) closes it, `close_arena()` closes it whatever the shares.
`handle.context()` returns a handle owning a new explicit context, closed by `close()`,
by leaving a `with` block, or at garbage collection. Both live in a
`_core.ContextBinding`.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from grid_codegen.model import GRAVITY
from grid_rbd._collision import CollisionMethods
from grid_rbd._contacts import ContactMethods
from grid_rbd._frames import FrameMethods
from grid_rbd._launch import LaunchOverrides
from grid_rbd._methods import METHODS, Dims, Method, check_against_artifact
from grid_rbd._parameters import ParameterSensitivities
from grid_rbd._plant import PlantMethods
from grid_rbd._tables import RuntimeTables
from grid_rbd._transforms import TransformParams

_MISSING = object()
_ARTIFACTS: dict[str, Any] = {}
_ARTIFACTS_LOCK = threading.Lock()


def _core() -> Any:
    try:
        from grid_rbd import _core as core
    except ImportError as exc:
        raise ImportError(
            "grid_rbd._core, the runtime extension, is not built or not importable "
            f"({exc}); install the package with `pip install -e .` (tools/setup.sh does "
            "it). The store entry was built; only loading it needs the runtime."
        ) from exc
    return core


def load_artifact(so_path: str | os.PathLike) -> Any:
    """The `_core.Artifact` of `so_path`, loaded once per process (handles over one
    artifact share its default context)."""
    key = os.path.realpath(so_path)
    with _ARTIFACTS_LOCK:
        artifact = _ARTIFACTS.get(key)
        if artifact is None:
            if not os.path.isfile(key):
                raise FileNotFoundError(f"no artifact at {so_path}")
            artifact = _core().load_artifact(key)
            _ARTIFACTS[key] = artifact
        return artifact


def install_dispatch(artifact: Any, meta: dict[str, Any] | None) -> None:
    """The dispatch tables the registration measured on the GPU (meta.json "dispatch":
    algorithm -> [[min_batch, variant], ...]), for every context of `artifact`. A table
    the artifact refuses (a hand-edited meta.json) is an error naming it, not ignored."""
    tables = (meta or {}).get("dispatch") or {}
    if not isinstance(tables, dict):
        raise ValueError("meta.json's \"dispatch\" is not a table per algorithm")
    known = set(artifact.info["algorithms"])
    for algorithm, table in sorted(tables.items()):
        if algorithm in known:  # else: an algorithm this artifact was not built with
            artifact.set_dispatch(algorithm, [(int(b), str(v)) for b, v in table])


class RobotHandle(ParameterSensitivities, FrameMethods, PlantMethods, ContactMethods,
                  TransformParams, CollisionMethods, RuntimeTables, LaunchOverrides):
    """A compiled robot: batched algorithms on numpy arrays.

    Every algorithm method takes 2-D C-contiguous arrays of the handle dtype with the batch
    on axis 0 (`q` is (B, nq); `qd`, `qdd`, `u` are (B, nv); `f_ext` is (B, 6*nb)), or
    every input 1-D for a single state (`q` (nq,), ...), and returns a new array (without
    the batch axis for a single state), or a view of `out=`. Dynamics methods take
    `gravity=` (signed, along z, default -9.81). Aliases: `rnea` = `inverse_dynamics`,
    `fd` = `forward_dynamics`.
    """

    def __init__(self, artifact: Any, meta: dict[str, Any] | None = None,
                 binding: Any = None, name: str | None = None,
                 registration: Any = None) -> None:
        info = artifact.info
        self._artifact = artifact
        self._info = info
        self._meta = meta or {}
        self._binding = binding if binding is not None else _core().ContextBinding(artifact)
        self._ctx_id = int(self._binding.ctx_id)
        self._name = name or self._meta.get("robot_name") or str(info["robot_name"])
        self._registration = registration
        collision = self._meta.get("collision") or {}  # a collision=True build's counts
        self._dims = Dims(int(info["nq"]), int(info["nv"]), int(info["nb"]),
                          int(info["num_ees"]), len(collision.get("spheres", ())),
                          len(collision.get("pairs", ())))
        self._dtype = np.dtype(str(info["dtype"]))
        self._algorithms: dict[str, dict[str, Any]] = dict(info["algorithms"])
        check_against_artifact(self._algorithms, self._dims)
        host_method = _core().HostMethod
        self._fast = {m.name: host_method(self._binding, m.name) if m.name in self._algorithms
                      else _declined for m in METHODS}

    @classmethod
    def _open(cls, so_path: str | os.PathLike, name: str | None = None,
              registration: Any = None) -> RobotHandle:
        """A default-context handle on the artifact at `so_path` (meta.json beside it
        supplies joint and body names when present)."""
        meta_path = Path(so_path).parent / "meta.json"
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
        artifact = load_artifact(so_path)
        install_dispatch(artifact, meta)
        return cls(artifact, meta, None, name, registration)

    # -- dimensions and description ----------------------------------------------------
    @property
    def name(self) -> str:
        """The registered name (or the URDF's robot name)."""
        return self._name

    @property
    def nq(self) -> int:
        """Configuration width: `q` is (B, nq). Floating base: 7 + joints."""
        return self._dims.nq

    @property
    def nv(self) -> int:
        """Tangent width: `qd`, `qdd`, `u` and dynamics outputs are (B, nv)."""
        return self._dims.nv

    @property
    def nb(self) -> int:
        """Body count (the base included on a floating base): `f_ext` is (B, 6*nb)."""
        return self._dims.nb

    num_joints = nq
    num_vel = nv
    num_bodies = nb

    @property
    def num_ees(self) -> int:
        """End-effector count: `end_effector_pose` is (B, 6*num_ees)."""
        return self._dims.num_ees

    @property
    def joint_names(self) -> tuple[str, ...]:
        """Moving joints in configuration order (Pinocchio's order); () without meta.json."""
        return tuple(self._meta.get("joint_names", ()))

    @property
    def body_names(self) -> tuple[str, ...]:
        """Bodies (URDF links) in f_ext order; () without meta.json."""
        return tuple(self._meta.get("body_names", ()))

    def _meta_dict(self) -> dict[str, Any]:
        return self._meta

    @property
    def ee_names(self) -> tuple[str, ...]:
        """The end-effector frames, in `end_effector_pose` order; () without meta.json."""
        return tuple(f["name"] for f in self._meta.get("ee_frames", ()))

    @property
    def dtype(self) -> np.dtype:
        """The compute dtype: inputs and outputs are arrays of it."""
        return self._dtype

    @property
    def device(self) -> str:
        """"cuda" for a GPU artifact, "cpu" for the host build."""
        return "cuda" if self._info["is_gpu"] else "cpu"

    @property
    def max_batch_size(self) -> int:
        return int(self._info["max_batch"])

    @property
    def runtime_inertia(self) -> bool:
        """Whether `set_inertia_params` is available (a runtime_inertia=True build)."""
        return bool(self._info["runtime_inertia"])

    @property
    def algorithms(self) -> tuple[str, ...]:
        """The algorithms this artifact was built with."""
        return tuple(self._algorithms)

    @property
    def path(self) -> Path:
        """The artifact's shared object."""
        return Path(self._artifact.path)

    @property
    def registration(self) -> Any:
        """What `register_robot` did (store hit, compile skipped or built, the phases and
        their seconds), or None for `get_robot` / `load_robot` handles."""
        return self._registration

    # -- the context ---------------------------------------------------------------------
    @property
    def ctx_id(self) -> int:
        """The context this handle calls: 0 (the default context) or an explicit id."""
        return self._ctx_id

    @property
    def model_version(self) -> int:
        """The context's model version (artifact-wide epoch; bumped by every mutation)."""
        self._check_open()
        return int(self._artifact.model_version(self._ctx_id))

    @property
    def device_profile(self) -> dict[str, Any]:
        """The record captured when the context was created (device, memory, arena...)."""
        self._check_open()
        return dict(self._artifact.device_profile(self._ctx_id))

    @property
    def closed(self) -> bool:
        """True once `close()` closed this handle's explicit context (a default-context
        handle is never closed: its next call takes a share again)."""
        return bool(self._binding.closed)

    def context(self, workspace_slots: int = 0) -> RobotHandle:
        """A new handle bound to a new explicit context on the same artifact: its own
        arena, stream, tables and launch overrides. `workspace_slots` caps the items in
        flight per launch (0: auto-fit; see docs/runtime.md)."""
        self._check_open()
        if isinstance(workspace_slots, bool) or not isinstance(workspace_slots, int) or \
                workspace_slots < 0:
            raise ValueError(f"workspace_slots must be an int >= 0, got {workspace_slots!r}")
        binding = _core().ContextBinding.explicit(self._artifact, workspace_slots)
        return RobotHandle(self._artifact, self._meta, binding, self._name, self._registration)

    def close(self) -> None:
        """Give this handle's context up (idempotent). An explicit context is closed and
        refuses later calls. A default-context handle gives its share back: the last share
        closes the default context (the next call on any default handle re-creates it, a
        new model epoch); other handles' shares keep it open."""
        self._binding.close()

    def close_arena(self) -> None:
        """Close the default context now, whatever other handles share it: its memory is
        freed, its graphs and mutations are gone, and the next call re-creates it. On an
        explicit-context handle this is `close()`."""
        if self._ctx_id == 0:
            self._artifact.close_arena()
        else:
            self.close()

    def __enter__(self) -> RobotHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if not self._binding.prepare_call():
            raise RuntimeError(f"this handle's context {self._ctx_id:#x} was closed; open a "
                               "new one with handle.context()")

    # Launch overrides: `_launch.LaunchOverrides`; the inertia and joint-dynamics tables:
    # `_tables.RuntimeTables`; the joint-origin table: `_transforms.TransformParams`.

    # -- host buffers ----------------------------------------------------------------------
    def pinned_empty(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """An uninitialised page-locked array of the handle dtype (an ordinary array on
        the CPU backend): allocate once and pass as `out=` to skip the host copy."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not all(isinstance(n, (int, np.integer)) and n >= 0 for n in shape):
            raise ValueError(f"shape must be non-negative ints, got {shape!r}")
        return self._artifact.pinned_empty(tuple(int(n) for n in shape))

    # -- calls -----------------------------------------------------------------------------
    def _run(self, method: Method, args: tuple, kwargs: dict[str, Any]) -> np.ndarray:
        """The checked path: what the fast path declined, with the precise errors."""
        values, gravity, out = bind_arguments(method, args, kwargs)
        self._check_open()
        if method.name not in self._algorithms:
            raise RuntimeError(
                f"{method.name} was not built into this artifact (built: "
                f"{', '.join(self._algorithms)}); register with {method.name!r} or its "
                f"profile {method.profile!r} in algorithm_list")
        arrays, batch, single = self._check_inputs(method, values)
        if batch > self.max_batch_size:
            raise ValueError(f"batch {batch} exceeds this artifact's max_batch_size "
                             f"{self.max_batch_size}; split the batch or register with a "
                             "larger max_batch_size")
        item = method.output_shape(self._dims)
        shape = item if single else (batch, *item)
        if out is None:
            result = np.empty(shape, dtype=self._dtype)
            buffer = result
        else:
            buffer = self._check_out(method, out, batch, single)
            result = buffer.reshape(shape)
        self._artifact.call(self._ctx_id, method.name, arrays, buffer, float(gravity))
        return result

    def _check_inputs(self, method: Method, values: list[Any]
                      ) -> tuple[list[np.ndarray | None], int, bool]:
        """The inputs as (B, width) arrays (single states viewed as batch 1), the batch,
        and whether the call is on single states."""
        arrays: list[np.ndarray | None] = []
        batch: int | None = None
        first, single = "", None
        for port, value in zip(method.inputs, values, strict=True):
            if value is None:
                arrays.append(None)
                continue
            arr = self._check_input(port, value)
            one = arr.ndim == 1
            if single is None:
                single, first, batch = one, port.name, 1 if one else arr.shape[0]
            elif one != single:
                state, batched = (port.name, first) if one else (first, port.name)
                raise ValueError(f"{state} is a single state but {batched} is batched; pass "
                                 "every input as a single state (1-D) or every input "
                                 "batched (2-D)")
            elif not one and arr.shape[0] != batch:
                raise ValueError(f"{port.name} has batch {arr.shape[0]}; {first} has batch "
                                 f"{batch} (every input shares axis 0)")
            arrays.append(arr.reshape(1, -1) if one else arr)
        assert batch is not None and single is not None  # q is required and first
        return arrays, batch, single

    def _check_input(self, port: Any, value: Any) -> np.ndarray:
        width = port.width(self._dims)
        if not isinstance(value, np.ndarray):
            raise TypeError(f"{port.name} must be a numpy.ndarray of shape (B, {width}); got "
                            f"{type(value).__name__}")
        if value.ndim not in (1, 2):
            raise ValueError(f"{port.name} must be (B, {width}) with the batch on axis 0, or "
                             f"({width},) for a single state; got shape {value.shape}")
        if value.shape[-1] != width:
            raise ValueError(f"{port.name} has width {value.shape[-1]}; this robot's "
                             f"{port.width.describe(self._dims)}")
        if value.dtype != self._dtype:
            raise ValueError(f"{port.name} has dtype {value.dtype}; this robot computes in "
                             f"{self._dtype} (pass {port.name}.astype(np.{self._dtype}), or "
                             f"register with dtype='{value.dtype}')")
        if not value.flags.c_contiguous:
            raise ValueError(f"{port.name} is not C-contiguous; pass "
                             f"np.ascontiguousarray({port.name})")
        return value

    def _check_out(self, method: Method, out: Any, batch: int, single: bool) -> np.ndarray:
        shapes = method.out_shapes(batch, self._dims)
        if single:
            shapes = (*shapes, *(s[1:] for s in shapes))
        expected = " or ".join(str(s) for s in shapes)
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray of shape {expected}; got "
                            f"{type(out).__name__}")
        if out.dtype != self._dtype:
            raise ValueError(f"out has dtype {out.dtype}; {method.name} writes {self._dtype}")
        if not out.flags.c_contiguous:
            raise ValueError("out is not C-contiguous; allocate it with pinned_empty(shape) "
                             "or np.empty(shape)")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        if out.shape not in shapes:
            raise ValueError(f"out has shape {out.shape}; {method.name} on a batch of {batch} "
                             f"writes {expected}")
        return out

    _allow_fp64 = False

    @property
    def allow_fp64(self) -> bool:
        """Whether float64 inputs are accepted (computed in the artifact's float32, results
        returned in float64): `register_robot(..., allow_fp64=True)`."""
        return self._allow_fp64

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        wide = " allow_fp64 (float64 in/out, float32 compute)" if self._allow_fp64 else ""
        return (f"<RobotHandle {self._name!r} nq={self.nq} nv={self.nv} nb={self.nb} "
                f"dtype={self._dtype}{wide} device={self.device!r} "
                f"ctx_id={self._ctx_id:#x}{state}>")


def bind_arguments(method: Method, args: tuple, kwargs: dict[str, Any],
                   ) -> tuple[list[Any], float, Any]:
    """`method`'s inputs from a call's positional and keyword arguments, in table order
    (None for an omitted optional input), its gravity (the default when the method takes
    none) and `out=` (None when not given). Raises TypeError as Python would for a wrong
    call: too many inputs, unknown or repeated keywords, a required input missing."""
    inputs = method.inputs
    kwargs = dict(kwargs)
    if len(args) > len(inputs):
        raise TypeError(f"{method.name}() takes {len(inputs)} inputs "
                        f"({', '.join(p.name for p in inputs)}), got {len(args)}")
    values = list(args) + [_MISSING] * (len(inputs) - len(args))
    out = kwargs.pop("out", None)
    gravity = kwargs.pop("gravity", GRAVITY) if method.uses_gravity else GRAVITY
    for key, value in kwargs.items():
        index = next((i for i, p in enumerate(inputs) if p.name == key), None)
        if index is None:
            raise TypeError(f"{method.name}() got an unexpected keyword argument {key!r}")
        if values[index] is not _MISSING:
            raise TypeError(f"{method.name}() got multiple values for {key!r}")
        values[index] = value
    for k, (port, value) in enumerate(zip(inputs, values, strict=True)):
        if value is _MISSING or value is None:
            if port.required:
                raise TypeError(f"{method.name}() missing required input {port.name!r}")
            values[k] = None
    return values, float(gravity), out


def _declined(args: tuple, kwargs: dict) -> None:
    """The fast path of an algorithm the artifact lacks: always the checked path."""
    return None


_LAYOUTS: dict[tuple[str, Dims], tuple] = {}


def _result_layout(method: Method, dims: Dims) -> tuple:
    """(parts, full, stored) of `shape_result`, computed once per method and robot."""
    key = (method.name, dims)
    layout = _LAYOUTS.get(key)
    if layout is None:
        full = method.output_shape(dims)
        layout = (method.part_shapes(dims), full,
                  full if len(full) <= 2 else (math.prod(full[:-1]), full[-1]))
        _LAYOUTS[key] = layout
    return layout


def shape_result(method: Method, result: Any, dims: Dims) -> Any:
    """A kernel's result (numpy, jax or torch; batched or a single state) in the method's
    shape: the registry's per-item shape (the descriptor stores rank-3 outputs as rank
    2), or the tuple of its parts' views for a method returning several arrays."""
    parts, full, stored = _result_layout(method, dims)
    ndim = result.ndim
    if tuple(result.shape[ndim - len(full):]) == full:
        if len(parts) == 1:
            return result
        stored = full  # an `out=` of the registry's shape
    lead = tuple(result.shape[:ndim - len(stored)])
    if len(parts) == 1:
        return result.reshape(lead + full)
    shape = parts[0][1]
    if hasattr(result, "unbind") and all(s == shape for _, s in parts):
        # torch: equal parts (idsva_so's four blocks) as one view and one unbind, about
        # 4 us against 15 for a slice and a reshape each
        return result.reshape(lead + (len(parts), *shape)).unbind(len(lead))
    flat = result.reshape(lead + (-1,))
    out, start = [], 0
    for _, shape in parts:
        size = math.prod(shape)
        out.append(flat[..., start:start + size].reshape(lead + shape))
        start += size
    return tuple(out)


def _cast(x: Any, dtype: str) -> Any:
    """`x` (numpy, torch or jax) in the floating dtype named `dtype` (autograd-aware)."""
    module = type(x).__module__
    if module.startswith("torch"):
        import torch
        return x.to(getattr(torch, dtype))
    return x.astype(dtype)


def _is_float64(x: Any) -> bool:
    return hasattr(x, "dtype") and str(x.dtype).endswith("float64")


def _widened(self: Any, run: Any, args: tuple, kwargs: dict) -> Any:
    """`allow_fp64`: float64 inputs computed in the handle's float32, the result (and an
    `out=`) in float64."""
    compute = str(self.np_dtype if hasattr(self, "np_dtype") else self.dtype)
    out = kwargs.pop("out", None)
    args = tuple(_cast(a, compute) if _is_float64(a) else a for a in args)
    kwargs = {k: _cast(v, compute) if k != "gravity" and _is_float64(v) else v
              for k, v in kwargs.items()}
    result = run(self, *args, **kwargs)
    wide = (tuple(_cast(r, "float64") for r in result) if isinstance(result, tuple)
            else _cast(result, "float64"))
    if out is None:
        return wide
    parts = wide if isinstance(wide, tuple) else (wide,)
    flat = out.reshape(out.shape[0], -1) if len(out.shape) > 1 else out.reshape(1, -1)
    start = 0
    views = []
    for part in parts:
        size = math.prod(part.shape[1:]) if len(out.shape) > 1 else math.prod(part.shape)
        view = flat[:, start:start + size].reshape(part.shape)
        if hasattr(view, "copy_"):
            view.copy_(part)
        else:
            np.copyto(view, part)
        views.append(view)
        start += size
    return tuple(views) if isinstance(wide, tuple) else views[0]


def _make_method(method: Method, public_name: str, owner: str, array: Any,
                 fast: bool = False, fast_unless: Callable[[], bool] | None = None) -> Any:
    reshaped = bool(method.parts) or len(method.output) > 2
    name = method.name
    if fast and fast_unless is None:

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = self._fast[name](args, kwargs)
            if result is None:
                result = self._run(method, args, kwargs)
            return shape_result(method, result, self._dims) if reshaped else result
    else:
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = self._run(method, args, kwargs)
            return shape_result(method, result, self._dims) if reshaped else result

    def checked_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._allow_fp64 and (any(_is_float64(a) for a in args) or any(
                _is_float64(v) for k, v in kwargs.items() if k != "gravity")):
            return _widened(self, run, args, kwargs)
        return run(self, *args, **kwargs)

    if fast and fast_unless is not None:
        # The C++ path first, in the method's own frame (it takes only inputs of the
        # compute dtype, so nothing of allow_fp64's widening is skipped).
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not fast_unless():
                result = self._fast[name](args, kwargs)
                if result is not None:
                    return shape_result(method, result, self._dims) if reshaped else result
            return checked_call(self, *args, **kwargs)
    else:
        call = checked_call

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=inspect.Parameter.empty if p.required else None,
                                 annotation=array)
               for p in method.inputs]
    if method.uses_gravity:
        params.append(inspect.Parameter("gravity", inspect.Parameter.KEYWORD_ONLY,
                                        default=GRAVITY, annotation=float))
    params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None,
                                    annotation=f"{array} | None"))
    call.__signature__ = inspect.Signature(params, return_annotation=array)
    call.__name__ = public_name
    call.__qualname__ = f"{owner}.{public_name}"
    call.__doc__ = method.docstring() if public_name == method.name else (
        f"Alias of `{method.name}`.\n\n{method.docstring()}")
    return call


def install_methods(cls: type, array: Any = "np.ndarray",
                    methods: tuple[Method, ...] = METHODS, fast: bool = False,
                    fast_unless: Callable[[], bool] | None = None) -> None:
    """Give `cls` one method per table entry and alias (shared with the JAX and torch
    handles, which supply their own `_run(method, args, kwargs)`); `array` annotates the
    inputs and the result in the signatures. `fast`: try `self._fast[name](args,
    kwargs)` first (the numpy handle's and the torch extension's C++ paths) and fall back
    to `_run` when it returns None; `fast_unless()`, when given, skips it (torch: while
    torch.compile traces, which must see the custom ops)."""
    for method in methods:
        for public in (method.name, *method.aliases):
            setattr(cls, public, _make_method(method, public, cls.__name__, array, fast,
                                              fast_unless))


install_methods(RobotHandle, fast=True)
