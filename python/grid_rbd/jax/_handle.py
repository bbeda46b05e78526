"""`JaxRobotHandle`: the handle methods as JAX operations (XLA FFI custom calls).

Every method of the table (`grid_rbd._methods.METHODS`) takes `(B, width)` jax or numpy
arrays of the handle dtype and returns a jax array placed where its inputs are; it works
under `jax.jit` and composes with `jax.vmap` (the mapped axes fold into the batch of one
launch). The handle's artifact decides the platform: a CUDA build runs on JAX's CUDA
stream, a CPU build on the CPU; inputs on the other platform are refused at run time.

forward_dynamics (fd), aba, inverse_dynamics (rnea) and end_effector_pose carry an
analytic VJP (`_autodiff.py`). Each method `m` also has two twins:

* `m_stamped(...) -> (value, stamp)`: the stamp is the model version the launch ran
  under, written by the same launch (uint32[2]; `grid_rbd.jax.stamp_value` reads it);
* `m_checked(..., stamp=...)`: refused at run time unless the context's model version
  still equals `stamp`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from grid_codegen.model import GRAVITY
from grid_rbd._framework import FrameworkHandle
from grid_rbd._handle import RobotHandle, bind_arguments, install_methods
from grid_rbd._methods import METHODS, Input, Method
from grid_rbd.jax._autodiff import differentiable
from grid_rbd.jax._ffi_build import store_root_of
from grid_rbd.jax._launch import Launcher
from grid_rbd.jax._targets import ensure_registered


class JaxRobotHandle(FrameworkHandle):
    """A compiled robot whose methods take and return jax arrays (see the module doc).

    Built by `grid_rbd.jax.register_robot` (or `register_robot(..., backend="jax")`) as
    a view over the numpy handle: dimensions, names, `model_version`,
    `set_inertia_params`, `context()` and `close()` are that handle's.
    """

    def _stop_gradient(self, x: Any) -> Any:
        return None if x is None else jax.lax.stop_gradient(x)

    def _as_array(self, x: Any) -> Any:
        return None if x is None else jnp.asarray(x)

    def __init__(self, base: RobotHandle, command_buffers: bool = False) -> None:
        super().__init__(base)
        ensure_registered(store_root_of(base.path))  # the handler lives in the same store
        self._command_buffers = bool(command_buffers)
        self._launcher: Launcher | None = None
        self._vjp_functions: dict[tuple, Any] = {}
        self._fused_steps: dict[tuple, Any] = {}  # (kernel, gravity) -> jitted call

    @property
    def command_buffers(self) -> bool:
        """Whether calls that read no stamp lower to the command-buffer compatible target
        (see `graphable`)."""
        return self._command_buffers

    def graphable(self) -> JaxRobotHandle:
        """A view on the same context whose calls XLA may record into its command buffers
        (CUDA graphs) on a CUDA artifact: every call but a stamp check (a backward's, a
        `_checked` twin's) lowers to the command-buffer compatible target.

        A recorded call is replayed by XLA without reaching the runtime, so the runtime
        cannot refuse it: a replay after `set_inertia_params` computes with the new table
        (tables are updated in place) and stamps the new version; after the context is
        closed, its device memory is kept (never freed under a graph), the replay computes
        with the last table and its stamp says the context is closed, so any backward or
        `_checked` call from it is refused. Do not close a context whose graphs still
        run. On a CPU artifact this view behaves like the handle."""
        return JaxRobotHandle(self._base, command_buffers=True)

    def context(self, workspace_slots: int = 0) -> JaxRobotHandle:
        """A view of this backend over a new explicit context (its own tables); closing
        the returned handle closes that context."""
        return JaxRobotHandle(self._base.context(workspace_slots), self._command_buffers)

    # -- the fused step gradients (grid_rbd._plant) -------------------------------------
    FUSED_STEPS = 8
    """Compiled fused step-gradient calls kept per handle (one per kernel and gravity)."""

    def _fused_step_gradient(self, kernel: str, x: Any, u: Any, dt: float,
                             gravity: float) -> jax.Array:
        """`plant_step_gradient` through the fused kernel: the batch view of a single
        state, the column of `dt` and the launch as one compiled call (an eager call
        would dispatch each of them on its own), `dt` an argument of it so that a new
        step length is not a new compilation; inside a trace, the same operations."""
        if isinstance(x, jax.core.Tracer) or isinstance(u, jax.core.Tracer):
            return self._fused_step_body(kernel, gravity, x, u, dt)
        key = (kernel, gravity)
        call = self._fused_steps.get(key)
        if call is None:
            call = jax.jit(functools.partial(self._fused_step_body, kernel, gravity))
            if len(self._fused_steps) >= self.FUSED_STEPS:
                del self._fused_steps[next(iter(self._fused_steps))]
            self._fused_steps[key] = call
        return call(x, u, dt)

    def _fused_step_body(self, kernel: str, gravity: float, x: Any, u: Any, dt: Any
                         ) -> jax.Array:
        x, u = jax.lax.stop_gradient(jnp.asarray(x)), jax.lax.stop_gradient(jnp.asarray(u))
        x, single = self._check_state(x)
        u = u[None] if single else u
        column = jnp.full((x.shape[0], 1), dt, dtype=x.dtype)
        G = getattr(self, kernel)(x, u, column, gravity=gravity)
        return G[0] if single else G

    # -- launching ------------------------------------------------------------------------
    @property
    def launcher(self) -> Launcher:
        """The static launch description of this handle's context (built once)."""
        if self._launcher is None:
            from grid_rbd._handle import _core

            self._launcher = Launcher(
                robot=self.name, bridge=int(_core().bridge_address()),
                artifact=int(self._base._artifact.native_address), ctx_id=self.ctx_id,
                is_gpu=self.device == "cuda", dtype=np.dtype(self.np_dtype),
                dims=self._dims, ids=dict(self._ids),
                command_buffers=self._command_buffers, chart=self.tangent_chart)
        return self._launcher

    def _run(self, method: Method, args: tuple, kwargs: dict[str, Any]) -> jax.Array:
        values, gravity = _bind(method, args, kwargs)
        arrays, single = self._prepare(method, values)
        # Concrete inputs mean no transformation traces this call: nothing to
        # differentiate, so the plain launch runs without the custom_vjp wrapper.
        traced = any(isinstance(a, jax.core.Tracer) for a in arrays)
        if method.differentiable and traced:
            present = tuple(a is not None for a in arrays)
            key = (method.name, gravity, present)
            function = self._vjp_functions.get(key)
            if function is None:
                function = differentiable(self.launcher, method, gravity, present)
                self._vjp_functions[key] = function
            out = function(*(a for a in arrays if a is not None))
        else:
            out = self.launcher.run(method.name, arrays, gravity)
        return self._unbatch(method, out, single)

    def _run_stamped(self, method: Method, args: tuple, kwargs: dict[str, Any],
                     ) -> tuple[jax.Array, jax.Array]:
        values, gravity = _bind(method, args, kwargs)
        arrays, single = self._prepare(method, values)
        out, stamp = self.launcher.run(method.name, arrays, gravity, stamp_out=True)
        return self._unbatch(method, out, single), stamp

    def _run_checked(self, method: Method, args: tuple, kwargs: dict[str, Any],
                     stamp: Any) -> jax.Array:
        values, gravity = _bind(method, args, kwargs)
        stamp = self._check_stamp(stamp)
        arrays, single = self._prepare(method, values)
        return self._unbatch(method, self.launcher.run(method.name, arrays, gravity,
                                                       stamp=stamp), single)

    def _unbatch(self, method: Method, out: jax.Array, single: bool) -> jax.Array:
        """A single state's result without its batch axis of 1."""
        return out.reshape(method.output_shape(self.launcher.dims)) if single else out

    # -- validation -----------------------------------------------------------------------
    def _prepare(self, method: Method, values: list[Any]
                 ) -> tuple[list[jax.Array | None], bool]:
        """`values` validated and as (B, width) jax arrays, f_ext's broadcast forms
        materialised, and whether the call is on a single state (every input 1-D, viewed
        as a batch of 1)."""
        self._require(method)
        if jax.dtypes.canonicalize_dtype(self.np_dtype) != self.np_dtype:
            raise ValueError(f"{self.name} computes in {self.np_dtype}, which JAX supports "
                             "only in 64-bit mode: call jax.config.update('jax_enable_x64', "
                             "True) (or set JAX_ENABLE_X64=1) before creating arrays, or "
                             "register the robot with dtype='float32'")
        checked = [None if v is None else self._check_input(p, v)
                   for p, v in zip(method.inputs, values, strict=True)]
        lead = method.inputs[0].name  # q (x for the fused step gradients)
        if checked[0] is not None and checked[0].ndim == 1:  # a single state
            for port, arr in zip(method.inputs, checked, strict=True):
                if arr is not None and arr.ndim != 1:
                    raise ValueError(f"{port.name} is 2-D but {lead} is a single state "
                                     "(1-D); pass every input as a single state (1-D) or "
                                     "every input batched (2-D)")
            return [None if a is None else a.reshape(1, -1) for a in checked], True
        batch, first = None, ""
        for port, arr in zip(method.inputs, checked, strict=True):
            if arr is None:
                continue
            if arr.ndim == 1 and port.name != "f_ext":
                raise ValueError(f"{port.name} is a single state (1-D) but {lead} is "
                                 "batched; pass every input as a single state (1-D) or "
                                 "every input batched (2-D)")
            if arr.ndim == 2 and not (port.name == "f_ext" and arr.shape[0] == 1):
                if batch is None:
                    batch, first = arr.shape[0], port.name
                elif arr.shape[0] != batch:
                    raise ValueError(f"{port.name} has batch {arr.shape[0]}; {first} has "
                                     f"batch {batch} (every input shares axis 0)")
        assert batch is not None  # the first input is required and 2-D
        self._check_batch(batch)
        return [a if a is None or a.ndim == 2 and a.shape[0] == batch
                else jnp.broadcast_to(a.reshape(1, -1), (batch, a.shape[-1]))
                for a in checked], False

    def _check_input(self, port: Input, value: Any) -> jax.Array:
        dims = self.launcher.dims
        width = port.width(dims)
        if not isinstance(value, (jax.Array, np.ndarray)):
            raise TypeError(f"{port.name} must be a jax.Array or numpy.ndarray of shape "
                            f"(B, {width}); got {type(value).__name__}")
        shape = tuple(value.shape)
        if len(shape) not in (1, 2):
            forms = (f"(B, {width}), ({width},) or (1, {width})" if port.name == "f_ext"
                     else f"(B, {width}) with the batch on axis 0, or ({width},) for a "
                     "single state")
            raise ValueError(f"{port.name} must be {forms}; got shape {shape}")
        if shape[-1] != width:
            raise ValueError(f"{port.name} has width {shape[-1]}; this robot's "
                             f"{port.width.describe(dims)}")
        if value.dtype != self.np_dtype:
            raise ValueError(f"{port.name} has dtype {value.dtype}; this robot computes in "
                             f"{self.np_dtype} (pass {port.name}.astype(jnp.{self.np_dtype}), "
                             f"or register with dtype='{value.dtype}')")
        return value if isinstance(value, jax.Array) else jnp.asarray(value)

    @staticmethod
    def _check_stamp(stamp: Any) -> jax.Array:
        if not isinstance(stamp, (jax.Array, np.ndarray)) or stamp.dtype != np.uint32 or \
                tuple(stamp.shape) != (2,):
            raise TypeError("stamp must be the uint32[2] a _stamped twin returned; got "
                            f"{getattr(stamp, 'dtype', type(stamp).__name__)} "
                            f"{getattr(stamp, 'shape', '')}")
        return jnp.asarray(stamp)


def _bind(method: Method, args: tuple, kwargs: dict[str, Any]) -> tuple[list, float]:
    """`bind_arguments` for the JAX surface: gravity must be static, and there is no
    `out=`."""
    if isinstance(kwargs.get("gravity"), jax.core.Tracer):
        raise TypeError(f"{method.name}: gravity must be a static Python float; under "
                        "jax.jit mark it static (jax.jit(f, static_argnames='gravity')) or "
                        "close over it")
    values, gravity, out = bind_arguments(method, args, kwargs)
    if out is not None:
        raise TypeError(f"{method.name}: out= is not supported on the JAX backend (jax "
                        "arrays are immutable); to let XLA reuse an input's buffer, jit "
                        "the caller with donate_argnums")
    return values, gravity


# -- the methods ------------------------------------------------------------------------
def _twin(method: Method, public: str, kind: str) -> Any:
    """`<public>_stamped` or `<public>_checked` for `method`."""
    if kind == "stamped":
        def call(self: JaxRobotHandle, *args: Any, **kwargs: Any) -> Any:
            return self._run_stamped(method, args, kwargs)
    else:
        def call(self: JaxRobotHandle, *args: Any, stamp: Any, **kwargs: Any) -> Any:
            return self._run_checked(method, args, kwargs, stamp)

    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=inspect.Parameter.empty if p.required else None,
                                 annotation="jax.Array") for p in method.inputs]
    if kind == "checked":
        params.append(inspect.Parameter("stamp", kw, annotation="jax.Array"))
    if method.uses_gravity:
        params.append(inspect.Parameter("gravity", kw, default=GRAVITY, annotation=float))
    name = f"{public}_{kind}"
    call.__signature__ = inspect.Signature(
        params, return_annotation="tuple[jax.Array, jax.Array]" if kind == "stamped"
        else "jax.Array")
    call.__name__ = name
    call.__qualname__ = f"JaxRobotHandle.{name}"
    call.__doc__ = (
        f"`{method.name}` returning `(value, stamp)`: the stamp (uint32[2]) is the model "
        "version this launch ran under, written by the launch itself."
        if kind == "stamped" else
        f"`{method.name}`, refused at run time (\"model mutated between forward and "
        "backward\") unless the context's model version still equals `stamp`, the "
        "stamp a _stamped twin returned.")
    return call


def _install_twins(cls: type, methods: tuple[Method, ...] = METHODS) -> None:
    for method in methods:
        for public in (method.name, *method.aliases):
            for kind in ("stamped", "checked"):
                setattr(cls, f"{public}_{kind}", _twin(method, public, kind))


install_methods(JaxRobotHandle, array="jax.Array")
_install_twins(JaxRobotHandle)
