"""`TorchRobotHandle`: the method table on torch tensors, through the grid_rbd:: ops.

A call takes one of three paths. Outside torch.compile, a call of positional tensors
(at most `gravity=`) goes to the torch extension (`_native`, native_call.cc): one C call
that checks the tensors and launches into a new output, and on CPU artifacts records the
autograd of a method with a reverse-mode kernel (no f_ext) with its own C++ node.
What it declines, or every call when it is not built, tries the Python fast path
(`_fast_inputs`: the same checks with a handful of attribute reads, and the autograd
launch of a differentiable method). Everything else (keywords, `out=`, single states)
goes through `_run_checked`, which binds the arguments like the numpy handle, raises the
precise error for a wrong input, and runs the custom ops so torch.compile can trace it.
All paths apply the same rules:

* a tensor carrying the negation bit (`torch._neg_view`, `x.conj().imag`) is resolved
  first, a non-contiguous one copied: the kernel reads plain memory;
* under grad mode an input that requires grad takes the analytic autograd path of a
  differentiable method, and is refused by a forward-only one (no silently
  non-differentiable result);
* a batch of 0 gives the empty result of the right shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grid_codegen.model import GRAVITY
from grid_rbd._framework import FrameworkHandle, unsupported_q_gradient
from grid_rbd._handle import RobotHandle, _core, bind_arguments, install_methods
from grid_rbd._methods import BY_NAME, METHODS, Method, resolve
from grid_rbd._native_library import store_root_of
from grid_rbd.torch import _autograd, _native, _ops
from grid_rbd.torch._graph import GraphCallable

_TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_Tensor = torch.Tensor


@dataclass(frozen=True)
class _Spec:
    """What the fast path needs of one method, computed once per handle."""

    method: Method
    launcher: Any  # _core.DeviceLauncher of the algorithm on the handle's context
    widths: tuple[int, ...]
    required: int  # leading inputs that must be given
    output: tuple[int, ...]  # per item
    size: int  # scalars per item of the output


class TorchRobotHandle(FrameworkHandle):
    """A compiled robot on torch tensors.

    Inputs are 2-D tensors of the handle dtype with the batch on axis 0 (`q` (B, nq);
    `qd`, `qdd`, `u` (B, nv); `f_ext` (B, 6*nb)), or all 1-D for a single state (the
    result then has no batch axis), on the artifact's device: CUDA tensors for a CUDA
    artifact (launched on the current stream, never waited for), CPU tensors for a CPU
    one. Non-contiguous and negated-view inputs are read as their values.
    forward_dynamics / fd, aba, inverse_dynamics / rnea and end_effector_pose are
    autograd-aware (analytic backward through the gradient kernels, refused after a model
    mutation); the other methods are forward-only and refuse an input that requires grad
    under grad mode. `out=` (no autograd) writes into a given tensor.
    """

    def _stop_gradient(self, x: Any) -> Any:
        # A tensor outside autograd is returned as is (detach() would build a new one).
        return x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x

    def _needs_gradient(self, x: Any) -> bool:
        return (torch.is_grad_enabled() and isinstance(x, torch.Tensor)
                and x.requires_grad)

    def __init__(self, base: RobotHandle) -> None:
        super().__init__(base)
        self._runner = _ops.register_runner(self)
        # Per-call checks read these (computed once: the eager path is microseconds).
        self._dtype = _TORCH_DTYPES[self.np_dtype.name]
        self._is_cuda = self.device == "cuda"
        # The runtime creates contexts on the current CUDA device of the calling thread.
        self._device_index = torch.cuda.current_device() if self._is_cuda else -1
        self._device = (torch.device("cuda", self._device_index) if self._is_cuda
                        else torch.device("cpu"))
        dims = base._dims
        launcher = _core().DeviceLauncher
        self._specs = {
            m.name: _Spec(m, launcher(base._binding, self._ids[m.name]), m.widths(dims),
                          next((k for k, p in enumerate(m.inputs) if not p.required),
                               len(m.inputs)),
                          m.output_shape(dims), m.output_size(dims))
            for m in METHODS if m.name in self._ids}
        # The backward's launch groups: the gradient kernel, then (forward dynamics) the
        # method itself for M^-1 ct; one admission and one stamp read each.
        group = _core().DeviceGroupLauncher
        self._backward_groups = {
            (m.name, solve): group(base._binding, [self._ids[m.gradient]] +
                                   ([self._ids[m.name]] if solve else []))
            for m in METHODS if m.differentiable and m.name in self._ids
            and m.gradient in self._ids for solve in (False, True)}
        self._fast = self._native_methods()
        # The reverse-mode kernels: one launch per backward (no f_ext), stamp read once.
        self._vjps = {m.name: (m.vjp, group(base._binding, [self._ids[m.vjp]]))
                      for m in METHODS if m.vjp in self._ids and m.name in self._ids}

    def _native_methods(self) -> dict[str, Any]:
        """The torch extension's callable per method (`_native`), or callables that
        decline every call where the extension is off or unavailable."""
        module = _native.load(store_root_of(self._base.path))
        raw_stream = _ops.RAW_STREAM if self._is_cuda else None
        if module is None or (self._is_cuda and raw_stream is None):
            return {name: _decline for name in self._specs}
        core = _core()
        address = core.launcher_call_address()
        bits = 64 if self._dtype is torch.float64 else 32
        index = self._device_index if self._is_cuda else -1
        methods = {}
        for name, spec in self._specs.items():
            # The autograd calls the extension records: a reverse-mode kernel's backward.
            vjp = spec.method.vjp if spec.method.vjp in self._ids else None
            reverse = _REVERSE_ORDER.get(vjp, 0)
            launcher = core.DeviceLauncher(self._base._binding, self._ids[vjp]) if reverse \
                else None
            methods[name] = module.fast_method(
                spec.launcher, address, spec.widths, spec.required, spec.output, bits, index,
                self._max_batch, spec.method.uses_gravity, GRAVITY, raw_stream, launcher,
                reverse, len(spec.method.differentiable) if reverse else 0, self.nq, self.nv)
        return methods

    @property
    def native(self) -> bool:
        """Whether eager calls go through the torch extension (`GRID_RBD_TORCH_NATIVE`,
        docs/torch.md); False: the Python path, with the same results."""
        return any(fast is not _decline for fast in self._fast.values())

    def _require(self, method: Method) -> int:
        if torch.compiler.is_compiling():  # traced: the launch itself refuses a closed one
            return self._ids[method.name]
        return super()._require(method)

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype (torch.float32 or torch.float64)."""
        return self._dtype

    @property
    def torch_device(self) -> torch.device:
        """Where inputs must live: cuda (the current device) or cpu."""
        return self._device

    # -- calls ---------------------------------------------------------------------------
    def _run(self, method: Method, args: tuple, kwargs: dict[str, Any]) -> torch.Tensor:
        spec = self._specs.get(method.name)
        if spec is not None and len(args) >= spec.required and \
                not torch.compiler.is_compiling():
            out = kwargs.get("out")
            known = len(kwargs) - (out is not None) - ("gravity" in kwargs)
            gravity = kwargs.get("gravity", GRAVITY)
            if known == 0 and ("gravity" not in kwargs or method.uses_gravity) and \
                    type(gravity) in (float, int):
                prepared = self._fast_inputs(spec, args)
                if prepared is not None and self._base._binding.prepare_call():
                    inputs, batch, grad = prepared
                    grad = grad and torch.is_grad_enabled()
                    if out is None:
                        if grad:
                            return self._differentiate(method, inputs, float(gravity))
                        return self._launch_new(spec, inputs, batch, float(gravity))
                    if not grad and self._plain_out(spec, out, batch):
                        self._launch_into(spec, out, inputs, batch, float(gravity))
                        return out.view((batch, *spec.output))
        return self._run_checked(method, args, kwargs)

    def _plain_out(self, spec: _Spec, out: Any, batch: int) -> bool:
        """Whether `out` takes the launch as it is: a contiguous tensor of the compute
        dtype on the handle's device, `batch` rows of the output's size, no autograd (the
        checked path explains anything else)."""
        if type(out) is not _Tensor or out.dtype is not self._dtype or \
                out.is_cuda is not self._is_cuda or out.requires_grad or out.is_neg():
            return False
        if self._is_cuda and out.get_device() != self._device_index:
            return False
        return out.dim() >= 1 and out.shape[0] == batch and \
            out.numel() == batch * spec.size and out.is_contiguous()

    def _fast_inputs(self, spec: _Spec, args: tuple
                     ) -> tuple[list[torch.Tensor | None], int, bool] | None:
        """The inputs ready to launch, the batch and whether one requires grad; None
        when anything is unusual (the checked path then decides)."""
        widths = spec.widths
        if len(args) > len(widths):
            return None
        dtype, cuda = self._dtype, self._is_cuda
        inputs: list[Any] = [*args, *([None] * (len(widths) - len(args)))]
        batch, grad = -1, False
        for k, t in enumerate(inputs):
            if t is None:
                if k < spec.required:
                    return None
                continue
            if type(t) is not _Tensor or t.dtype is not dtype or t.is_cuda is not cuda:
                return None
            shape = t.shape
            if len(shape) != 2 or shape[1] != widths[k] or (batch >= 0 and shape[0] != batch):
                return None
            batch = shape[0]
            if cuda and t.get_device() != self._device_index:
                return None
            if t.is_neg():
                t = t.resolve_neg()
            if not t.is_contiguous():
                t = t.contiguous()
            grad = grad or t.requires_grad
            inputs[k] = t
        if batch > self._max_batch:
            return None
        return inputs, batch, grad

    def _launch_new(self, spec: _Spec, inputs: list[torch.Tensor | None], batch: int,
                    gravity: float) -> torch.Tensor:
        """The eager launch into a new output (no op dispatcher, no wait)."""
        out = torch.empty((batch, *spec.output), dtype=self._dtype, device=self._device)
        self._launch_into(spec, out, inputs, batch, gravity)
        return out

    def _launch_into(self, spec: _Spec, out: torch.Tensor,
                     inputs: list[torch.Tensor | None], batch: int, gravity: float) -> None:
        """Enqueue `spec`'s kernel into `out` (checked by the caller) on the current stream."""
        stream = _ops.current_stream(self._device) if self._is_cuda else 0
        spec.launcher(out.data_ptr(), batch, gravity, stream, 0, 0, 0,
                      *[0 if t is None else t.data_ptr() for t in inputs])

    def _launch_stamped(self, name: str, inputs: tuple[torch.Tensor | None, ...],
                        gravity: float) -> tuple[torch.Tensor, torch.Tensor]:
        """An autograd forward's eager launch: the output and the model-version stamp the
        same launch wrote (int64[1], on the stream)."""
        spec = self._specs[name]
        batch = next(t for t in inputs if t is not None).shape[0]
        out = torch.empty((batch, *spec.output), dtype=self._dtype, device=self._device)
        stamp = torch.empty(1, dtype=torch.int64, device=self._device)
        stream = _ops.current_stream(self._device) if self._is_cuda else 0
        spec.launcher(out.data_ptr(), batch, gravity, stream, stamp.data_ptr(), 0, 0,
                      *[0 if t is None else t.data_ptr() for t in inputs])
        return out, stamp

    def _launch_backward(self, name: str, inputs: list[torch.Tensor | None], gravity: float,
                         solve_inputs: list[torch.Tensor | None] | None, stamp: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A backward's eager launches as one group: the gradient of `name` at the saved
        inputs, and for forward dynamics `name` itself on `solve_inputs` at zero gravity
        (M^-1 ct). The stamp is read once; a stale one refuses the whole group."""
        group = self._backward_groups.get((name, solve_inputs is not None))
        if group is None:
            raise RuntimeError(f"{name}'s backward needs {BY_NAME[name].gradient}, which was "
                               "not built into this artifact; register with it in "
                               "algorithm_list")
        batch = next(t for t in inputs if t is not None).shape[0]
        gradient = BY_NAME[name].gradient
        jacobian = torch.empty((batch, *self._output_shapes[gradient]), dtype=self._dtype,
                               device=self._device)
        args = [jacobian.data_ptr(), batch, gravity, len(inputs),
                *[0 if t is None else t.data_ptr() for t in inputs]]
        solved = None
        if solve_inputs is not None:
            solved = torch.empty_like(solve_inputs[2])
            args += [solved.data_ptr(), batch, 0.0, len(solve_inputs),
                     *[0 if t is None else t.data_ptr() for t in solve_inputs]]
        stream = _ops.current_stream(self._device) if self._is_cuda else 0
        group(stream, stamp.data_ptr(), *args)
        return jacobian, solved

    def _launch_vjp(self, name: str, ordered: list[torch.Tensor | None], gravity: float,
                    stamp: torch.Tensor) -> torch.Tensor:
        """A backward as one reverse-mode launch (stamp read once): `(B, nq + k nv)`
        cotangents of q (its configuration layout), qd (and u)."""
        vjp, group = self._vjps[name]
        batch = ordered[0].shape[0]
        out = torch.empty((batch, *self._output_shapes[vjp]), dtype=self._dtype,
                          device=self._device)
        stream = _ops.current_stream(self._device) if self._is_cuda else 0
        group(stream, stamp.data_ptr(), out.data_ptr(), batch, gravity, 4,
              *[0 if t is None else t.data_ptr() for t in ordered])
        return out

    def _differentiate(self, method: Method, inputs: list[torch.Tensor | None],
                       gravity: float) -> torch.Tensor:
        if not method.differentiable:
            raise RuntimeError(
                f"{method.name} is forward-only (no backward), but an input requires grad; "
                f"detach the inputs or call it under torch.no_grad(). Differentiable: "
                f"{', '.join(sorted({m.name for m in METHODS if m.differentiable}))}")
        q = inputs[0]
        vjp = self._vjps.get(method.name, (None,))[0]
        chart = self.tangent_chart
        reverse = vjp is not None and inputs[3] is None  # q's cotangent from the kernel
        if chart is None and not reverse and q is not None and q.requires_grad:
            raise unsupported_q_gradient(method.name, self.nq, self.nv)
        return _autograd.apply(self._runner, method.name, self.nv, chart, gravity, vjp,
                               inputs)

    def _run_checked(self, method: Method, args: tuple, kwargs: dict[str, Any]
                     ) -> torch.Tensor:
        values, gravity, out = bind_arguments(method, args, kwargs)
        self._require(method)
        inputs, single = self._check_inputs(method, values)
        grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                               for t in inputs)
        if out is not None:
            if grad:
                raise ValueError(f"{method.name}: out= records no autograd, but an input "
                                 "requires grad; call without out= or detach the inputs")
            return self._run_into(method, inputs, gravity, out, single)
        if grad:
            result = self._differentiate(method, inputs, gravity)
        else:
            result = _ops.call_run(self._runner, method.name, inputs, gravity)
        return result.squeeze(0) if single else result

    def _check_inputs(self, method: Method, values: list[Any]
                      ) -> tuple[list[torch.Tensor | None], bool]:
        """(B, width) tensors in table order, contiguous and without the negation bit
        (single states viewed as batch 1), and whether the call is on single states."""
        dims = self.numpy._dims
        batch, first, single = None, "", None
        tensors: list[torch.Tensor | None] = []
        for port, value in zip(method.inputs, values, strict=True):
            if value is None:
                tensors.append(None)
                continue
            width = port.width(dims)
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{port.name} must be a torch.Tensor of shape (B, {width}); got "
                                f"{type(value).__name__} (wrap numpy with torch.from_numpy)")
            if value.dim() not in (1, 2) or value.shape[-1] != width:
                raise ValueError(f"{port.name} has shape {tuple(value.shape)}; expected "
                                 f"(B, {width}), or ({width},) for a single state: "
                                 f"{port.width.describe(dims)}")
            if value.dtype != self.dtype:
                raise ValueError(f"{port.name} has dtype {value.dtype}; this robot computes in "
                                 f"{self.dtype} (pass {port.name}.to({self.dtype}))")
            if value.device.type != self._device.type or \
                    (self._is_cuda and value.get_device() != self._device_index):
                raise ValueError(f"{port.name} is on {value.device}; this {self.device} "
                                 f"artifact takes tensors on {self._where()}")
            one = value.dim() == 1
            if single is None:
                single = one
            elif one != single:
                raise ValueError(f"{port.name} is {'1-D' if one else '2-D'} but {first} is "
                                 f"{'2-D' if one else '1-D'}; pass every input as a single "
                                 "state (1-D) or every input batched (2-D)")
            value = value.unsqueeze(0) if one else value
            if batch is None:
                batch, first = value.shape[0], port.name
            elif value.shape[0] != batch:
                raise ValueError(f"{port.name} has batch {value.shape[0]}; {first} has batch "
                                 f"{batch} (every input shares axis 0)")
            tensors.append(value.resolve_neg().contiguous())
        self._check_batch(int(batch))
        return tensors, bool(single)

    def _where(self) -> str:
        return f"cuda:{self._device_index}" if self._is_cuda else "cpu"

    def _run_into(self, method: Method, inputs: list[torch.Tensor | None], gravity: float,
                  out: Any, single: bool) -> torch.Tensor:
        batch = next(t for t in inputs if t is not None).shape[0]
        item = self._output_shapes[method.name]
        expected = torch.Size((batch, *item))
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor of shape {tuple(expected)}")
        if out.dtype != self.dtype or out.device.type != self.torch_device.type:
            raise ValueError(f"out is {out.dtype} on {out.device}; {method.name} writes "
                             f"{self.dtype} on {self.torch_device.type}")
        rows_ok = out.dim() >= 1 and (out.shape[0] == batch or (single and out.dim() <= 2))
        if not out.is_contiguous() or out.is_neg() or out.numel() != expected.numel() or \
                not rows_ok:
            raise ValueError(f"out has shape {tuple(out.shape)}; {method.name} writes "
                             f"{tuple(expected)} (contiguous, or flat per row)")
        if out.requires_grad and torch.is_grad_enabled():
            raise ValueError("out= does not record autograd; call without out=")
        _ops.launch(self, method.name, inputs, out, gravity)
        return out.view(item if single else expected)

    # -- captured graphs -----------------------------------------------------------------
    def capture(self, method: str, *inputs: torch.Tensor, **kwargs: Any) -> GraphCallable:
        """Record `method` on these inputs (warm-up first) and return a GraphCallable:
        `g(*new_inputs)` copies into `g.static_in` and replays; `g.replay()` reuses them.
        Refused after a model mutation or a close of the context (capture again)."""
        table = resolve(method)
        values, gravity, out = bind_arguments(table, inputs, kwargs)
        if out is not None:
            raise ValueError("capture() owns its output (static_out); do not pass out=")
        self._require(table)
        tensors, single = self._check_inputs(table, values)
        if single:
            raise ValueError("capture() records batched calls: pass (B, width) inputs")
        checked = [None if t is None else t.detach() for t in tensors]
        return GraphCallable(self, table.name, checked, gravity)


#: The torch extension's code for a reverse-mode kernel's input order (native_call.cc).
_REVERSE_ORDER = {"forward_dynamics_vjp": 1, "inverse_dynamics_vjp": 2}


def _decline(args: tuple, kwargs: dict[str, Any]) -> None:
    return None  # no extension: every call takes the Python path


install_methods(TorchRobotHandle, "torch.Tensor", fast=True,
                fast_unless=torch.compiler.is_compiling)
