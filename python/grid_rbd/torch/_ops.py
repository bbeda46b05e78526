"""The torch.library custom ops of grid-rbd and the launch they share.

Three ops, each a launch of one artifact algorithm on the caller's tensors (device
tensors on a CUDA artifact, on the current CUDA stream; CPU tensors on a CPU artifact):

    grid_rbd::run(runner, algorithm, inputs, gravity) -> out
    grid_rbd::run_stamped(runner, algorithm, inputs, gravity) -> (out, stamp_out)
    grid_rbd::run_checked(runner, algorithm, inputs, gravity, stamp_expect) -> out

`runner` is the key of a `TorchRobotHandle` in this module's registry (ops take plain
values, not Python objects); `inputs` follow the method table's order, None for an
omitted optional input. `stamp_out` is an int64 tensor of one element that receives the
model version the launch ran under, written on the stream by the launch itself;
`run_checked` refuses ("model mutated between forward and backward ...") unless
`stamp_expect` still equals the context's version. Fake implementations give the output
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


def current_stream(device: torch.device) -> int:
    """The address of the current CUDA stream of `device`; 0 on the CPU."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.current_stream(device).cuda_stream)


def launch(handle: Any, algorithm: str, inputs: list[torch.Tensor | None],
           out: torch.Tensor, gravity: float, *, ctx_id: int | None = None,
           stamp_out: torch.Tensor | None = None, stamp_expect: torch.Tensor | None = None,
           captured_version: int = 0) -> int:
    """Enqueue `algorithm` of `handle` on the current stream of `out`'s device; returns
    the model version it ran under."""
    first = next(t for t in inputs if t is not None)
    return handle._artifact.launch(
        handle.ctx_id if ctx_id is None else ctx_id, handle._ids[algorithm],
        [0 if t is None else t.data_ptr() for t in inputs], out.data_ptr(),
        int(first.shape[0]), float(gravity), current_stream(out.device),
        0 if stamp_out is None else stamp_out.data_ptr(),
        0 if stamp_expect is None else stamp_expect.data_ptr(), int(captured_version))


def _empty_output(handle: Any, algorithm: str, inputs: list[torch.Tensor | None]
                  ) -> torch.Tensor:
    first = next(t for t in inputs if t is not None)
    return first.new_empty((first.shape[0], *handle._output_shapes[algorithm]))


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
