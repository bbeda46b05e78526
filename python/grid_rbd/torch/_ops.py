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
shapes, so the ops trace under torch.compile.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import torch

from grid_rbd._methods import BY_NAME

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
           captured_version: int = 0) -> None:
    """Enqueue `algorithm` of `handle` on the current stream of `out`'s device."""
    first = next(t for t in inputs if t is not None)
    handle.numpy._artifact.launch(
        handle.ctx_id if ctx_id is None else ctx_id, handle._ids[algorithm],
        [0 if t is None else t.data_ptr() for t in inputs], out.data_ptr(),
        int(first.shape[0]), float(gravity), current_stream(out.device),
        0 if stamp_out is None else stamp_out.data_ptr(),
        0 if stamp_expect is None else stamp_expect.data_ptr(), int(captured_version))


def _empty_output(handle: Any, algorithm: str, inputs: list[torch.Tensor | None]
                  ) -> torch.Tensor:
    first = next(t for t in inputs if t is not None)
    shape = (first.shape[0], *BY_NAME[algorithm].output_shape(handle.numpy._dims))
    return first.new_empty(shape)


def _new_stamp(like: torch.Tensor) -> torch.Tensor:
    return torch.zeros(1, dtype=torch.int64, device=like.device)


@torch.library.custom_op("grid_rbd::run", mutates_args=())
def run(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
        gravity: float) -> torch.Tensor:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    launch(handle, algorithm, inputs, out, gravity)
    return out


@run.register_fake
def _run_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
              gravity: float) -> torch.Tensor:
    return _empty_output(_runner(runner), algorithm, inputs)


@torch.library.custom_op("grid_rbd::run_stamped", mutates_args=())
def run_stamped(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                gravity: float) -> tuple[torch.Tensor, torch.Tensor]:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    stamp = _new_stamp(out)
    launch(handle, algorithm, inputs, out, gravity, stamp_out=stamp)
    return out, stamp


@run_stamped.register_fake
def _run_stamped_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                      gravity: float) -> tuple[torch.Tensor, torch.Tensor]:
    out = _empty_output(_runner(runner), algorithm, inputs)
    return out, out.new_empty(1, dtype=torch.int64)


@torch.library.custom_op("grid_rbd::run_checked", mutates_args=())
def run_checked(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                gravity: float, stamp_expect: torch.Tensor) -> torch.Tensor:
    handle = _runner(runner)
    out = _empty_output(handle, algorithm, inputs)
    launch(handle, algorithm, inputs, out, gravity, stamp_expect=stamp_expect)
    return out


@run_checked.register_fake
def _run_checked_fake(runner: int, algorithm: str, inputs: list[torch.Tensor | None],
                      gravity: float, stamp_expect: torch.Tensor) -> torch.Tensor:
    return _empty_output(_runner(runner), algorithm, inputs)
