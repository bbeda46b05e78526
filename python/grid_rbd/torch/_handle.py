"""`TorchRobotHandle`: the method table on torch tensors, through the grid_rbd:: ops."""

from __future__ import annotations

from typing import Any

import torch

from grid_rbd._framework import FrameworkHandle
from grid_rbd._handle import RobotHandle, bind_arguments, install_methods
from grid_rbd._methods import Method, resolve
from grid_rbd.torch import _autograd, _ops
from grid_rbd.torch._graph import GraphCallable

_TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class TorchRobotHandle(FrameworkHandle):
    """A compiled robot on torch tensors.

    Inputs are 2-D tensors of the handle dtype with the batch on axis 0 (`q` (B, nq);
    `qd`, `qdd`, `u` (B, nv); `f_ext` (B, 6*nb)), on the artifact's device: CUDA tensors
    for a CUDA artifact (launched on the current stream), CPU tensors for a CPU one.
    Non-contiguous inputs are made contiguous. forward_dynamics / fd, aba,
    inverse_dynamics / rnea and end_effector_pose are autograd-aware (analytic backward
    through the gradient kernels, refused after a model mutation); the other methods are
    forward-only. `out=` (eager, no autograd) writes into a given tensor.
    """

    def __init__(self, base: RobotHandle) -> None:
        super().__init__(base)
        self._runner = _ops.register_runner(self)
        # Per-call checks read these (computed once: the eager path is microseconds).
        self._dtype = _TORCH_DTYPES[self.np_dtype.name]
        self._device = torch.device("cuda") if self.device == "cuda" else torch.device("cpu")

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
        values, gravity, out = bind_arguments(method, args, kwargs)
        self._require(method)
        inputs = self._check_inputs(method, values)
        if out is not None:
            return self._run_into(method, inputs, gravity, out)
        wants_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad and port.name in method.differentiable
            for port, t in zip(method.inputs, inputs, strict=True))
        if wants_grad:
            return _autograd.apply(self._runner, method.name, self.nv, self.floating_base,
                                   gravity, inputs)
        return _ops.call_run(self._runner, method.name, inputs, gravity)

    def _check_inputs(self, method: Method, values: list[Any]) -> list[torch.Tensor | None]:
        dims = self.numpy._dims
        dtype, device_type = self._dtype, self._device.type
        batch, first = None, ""
        tensors: list[torch.Tensor | None] = []
        for port, value in zip(method.inputs, values, strict=True):
            if value is None:
                tensors.append(None)
                continue
            width = port.width(dims)
            if (type(value) is torch.Tensor and value.dim() == 2 and value.shape[1] == width
                    and value.dtype == dtype and value.device.type == device_type
                    and (batch is None or value.shape[0] == batch)):
                if batch is None:
                    batch, first = value.shape[0], port.name
                tensors.append(value.contiguous())
                continue
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{port.name} must be a torch.Tensor of shape (B, {width}); got "
                                f"{type(value).__name__} (wrap numpy with torch.from_numpy)")
            if value.dim() != 2 or value.shape[1] != width:
                raise ValueError(f"{port.name} has shape {tuple(value.shape)}; expected "
                                 f"(B, {width}): {port.width.describe(dims)}")
            if value.dtype != self.dtype:
                raise ValueError(f"{port.name} has dtype {value.dtype}; this robot computes in "
                                 f"{self.dtype} (pass {port.name}.to({self.dtype}))")
            if value.device.type != self.torch_device.type:
                raise ValueError(f"{port.name} is on {value.device}; this {self.device} "
                                 f"artifact takes {self.torch_device.type} tensors")
            if batch is None:
                batch, first = value.shape[0], port.name
            elif value.shape[0] != batch:
                raise ValueError(f"{port.name} has batch {value.shape[0]}; {first} has batch "
                                 f"{batch} (every input shares axis 0)")
            tensors.append(value.contiguous())
        self._check_batch(int(batch))
        return tensors

    def _run_into(self, method: Method, inputs: list[torch.Tensor | None], gravity: float,
                  out: Any) -> torch.Tensor:
        batch = next(t for t in inputs if t is not None).shape[0]
        expected = torch.Size((batch, *self._output_shapes[method.name]))
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor of shape {tuple(expected)}")
        if out.dtype != self.dtype or out.device.type != self.torch_device.type:
            raise ValueError(f"out is {out.dtype} on {out.device}; {method.name} writes "
                             f"{self.dtype} on {self.torch_device.type}")
        if not out.is_contiguous() or out.numel() != expected.numel() or \
                out.shape[0] != expected[0]:
            raise ValueError(f"out has shape {tuple(out.shape)}; {method.name} writes "
                             f"{tuple(expected)} (contiguous, or flat per row)")
        if out.requires_grad and torch.is_grad_enabled():
            raise ValueError("out= does not record autograd; call without out=")
        _ops.launch(self, method.name, inputs, out, gravity)
        return out.view(expected)

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
        checked = [None if t is None else t.detach() for t in self._check_inputs(table, values)]
        return GraphCallable(self, table.name, checked, gravity)


install_methods(TorchRobotHandle, "torch.Tensor")
