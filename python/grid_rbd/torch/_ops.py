"""The torch.library custom ops of grid-rbd and the launch they share.

Four ops, launches of artifact algorithms on the caller's tensors (device tensors on a
CUDA artifact, on the current CUDA stream; CPU tensors on a CPU artifact):

    grid_rbd::run(runner, algorithm, inputs, gravity) -> out
    grid_rbd::run_stamped(runner, algorithm, inputs, gravity) -> (out, stamp_out)
    grid_rbd::run_checked(runner, algorithm, inputs, gravity, stamp_expect) -> out
    grid_rbd::run_checked_group(runner, algorithm, inputs, gravity, solver, solve_inputs,
                                stamp_expect) -> (out, minv_ct)

`runner` is the key of a `TorchRobotHandle` in this module's registry (ops take plain
values, not Python objects); `inputs` follow the method table's order, None for an
omitted optional input. `stamp_out` is an int64 tensor of one element that receives the
model version the launch ran under, written on the stream by the launch itself;
`run_checked` refuses ("model mutated between forward and backward ...") unless
`stamp_expect` still equals the context's version; `run_checked_group` is the
forward-dynamics backward's pair of launches (the gradient and M^-1 ct) under one
admission, with one stamp read. Fake implementations give the output
shapes, so the ops trace under torch.compile; eager calls go straight to the
implementations (`call_run*`), skipping the dispatcher.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import torch

_RUNNERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def register_runner(handle: Any) -> int:
    """A key under which the ops find `handle` (held weakly)."""
    with _LOCK:
        key = next(_KEYS)
        _RUNNERS[key] = handle
        return key


def _runner(key: int) -> Any:
    handle = _RUNNERS.get(key)
    if handle is None:
        raise RuntimeError(f"grid_rbd torch runner {key} is gone (its handle was collected)")
    return handle


#: torch's current raw CUDA stream of a device index (None in a torch without CUDA).
RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(device: torch.device) -> int:
    """The address of the current CUDA stream of `device`; 0 on the CPU."""
    if device.type != "cuda":
        return 0
    if RAW_STREAM is not None:  # the address without building a Stream object
        index = device.index if device.index is not None else torch.cuda.current_device()
        return int(RAW_STREAM(index))
    return int(torch.cuda.current_stream(device).cuda_stream)


def addresses(inputs: list[torch.Tensor | None]) -> list[int]:
    """Data addresses of the inputs, 0 for an omitted one."""
    return [0 if t is None else t.data_ptr() for t in inputs]


def _batch(inputs: list[torch.Tensor | None]) -> int:
    for t in inputs:
        if t is not None:
            return int(t.shape[0])
    raise ValueError("a call needs at least one input")


def launch(handle: Any, algorithm: str, inputs: list[torch.Tensor | None],
           out: torch.Tensor, gravity: float, *, ctx_id: int | None = None,
           stamp_out: torch.Tensor | None = None, stamp_expect: torch.Tensor | None = None,
           captured_version: int = 0) -> int:
    """Enqueue `algorithm` of `handle` on the current stream of `out`'s device; returns
    the model version it ran under."""
    return handle._artifact.launch(
        handle.ctx_id if ctx_id is None else ctx_id, handle._ids[algorithm],
        addresses(inputs), out.data_ptr(), _batch(inputs), float(gravity),
        current_stream(out.device), 0 if stamp_out is None else stamp_out.data_ptr(),
        0 if stamp_expect is None else stamp_expect.data_ptr(), int(captured_version))


def launch_group(handle: Any, calls: list[tuple[str, list[torch.Tensor | None], torch.Tensor,
                                               float]],
                 stamp_expect: torch.Tensor | None = None) -> int:
    """Enqueue (algorithm, inputs, out, gravity) calls under one admission of the handle's
    context on the current stream; the stamp, when given, is read once for all of them.
    Returns the model version they ran under."""
    device = calls[0][2].device
    group = [(handle._ids[name], addresses(inputs), out.data_ptr(), _batch(inputs),
              float(gravity)) for name, inputs, out, gravity in calls]
    return handle._artifact.launch_group(
        handle.ctx_id, group, current_stream(device),
        0 if stamp_expect is None else stamp_expect.data_ptr(), 0)


def _empty_output(handle: Any, algorithm: str, inputs: list[torch.Tensor | None]
                  ) -> torch.Tensor:
    first = next(t for t in inputs if t is not None)
    return first.new_empty((first.shape[0], *handle._output_shapes[algorithm]))


def run_checked_group_impl(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                           gravity: float, solver: str, solve_inputs: list[torch.Tensor | None],
                           stamp_expect: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A forward-dynamics backward's two launches under one admission and one stamp
    read: `algorithm` (the gradient) on `inputs`, and `solver` (forward_dynamics or aba)
    on `solve_inputs` at zero gravity (M^-1 ct)."""
    handle = _runner(runner)
    jacobian = _empty_output(handle, algorithm, inputs)
    solved = torch.empty_like(solve_inputs[2])
    launch_group(handle, [(algorithm, inputs, jacobian, gravity),
                          (solver, solve_inputs, solved, 0.0)], stamp_expect)
    return jacobian, solved


def _new_stamp(like: torch.Tensor) -> torch.Tensor:
    return torch.empty(1, dtype=torch.int64, device=like.device)  # the launch writes it


def run_impl(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
             gravity: float) -> torch.Tensor:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    launch(handle, algorithm, inputs, out, gravity)
    return out


def run_stamped_impl(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                     gravity: float) -> tuple[torch.Tensor, torch.Tensor]:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    stamp = _new_stamp(out)
    launch(handle, algorithm, inputs, out, gravity, stamp_out=stamp)
    return out, stamp


def run_checked_impl(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                     gravity: float, stamp_expect: torch.Tensor) -> torch.Tensor:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    launch(handle, algorithm, inputs, out, gravity, stamp_expect=stamp_expect)
    return out


run = torch.library.custom_op("grid_rbd::run", run_impl, mutates_args=())
run_stamped = torch.library.custom_op("grid_rbd::run_stamped", run_stamped_impl,
                                      mutates_args=())
run_checked = torch.library.custom_op("grid_rbd::run_checked", run_checked_impl,
                                      mutates_args=())
run_checked_group = torch.library.custom_op("grid_rbd::run_checked_group",
                                            run_checked_group_impl, mutates_args=())


@run.register_fake
def _run_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
              gravity: float) -> torch.Tensor:
    return _empty_output(_runner(runner), algorithm, inputs)


@run_stamped.register_fake
def _run_stamped_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                      gravity: float) -> tuple[torch.Tensor, torch.Tensor]:
    out = _empty_output(_runner(runner), algorithm, inputs)
    return out, out.new_empty(1, dtype=torch.int64)


@run_checked.register_fake
def _run_checked_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                      gravity: float, stamp_expect: torch.Tensor) -> torch.Tensor:
    return _empty_output(_runner(runner), algorithm, inputs)


@run_checked_group.register_fake
def _run_checked_group_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                            gravity: float, solver: str,
                            solve_inputs: list[torch.Tensor | None],
                            stamp_expect: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (_empty_output(_runner(runner), algorithm, inputs),
            torch.empty_like(solve_inputs[2]))


def _pick(op: Any, impl: Any) -> Any:
    """The custom op while torch.compile traces (so the call is a graph node), else its
    implementation called directly: the eager result is the same, without the op
    dispatcher's per-call cost (tens of microseconds)."""
    return op if torch.compiler.is_compiling() else impl


def call_run(*args: Any) -> torch.Tensor:
    return _pick(run, run_impl)(*args)


def call_run_stamped(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return _pick(run_stamped, run_stamped_impl)(*args)


def call_run_checked(*args: Any) -> torch.Tensor:
    return _pick(run_checked, run_checked_impl)(*args)
