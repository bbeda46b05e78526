"""What the plant methods work out once per handle, and the step-length columns they reuse.

`PlantPlan` holds what a call would otherwise look up again every time: the widths, the
configuration chart the artifact recorded (`grid_rbd._framework.tangent_chart`, read
from meta.json), the algorithms built and the fused step gradients usable on that chart.
An artifact and its metadata never change under a handle, so one plan serves all of its
calls (`plan_of`).

`StepColumns` keeps the `(B, 1)` columns of `dt` that the fused step gradients take
(the kernels read one step per item): an MPC loop calls with one `dt` and one batch
every iteration, and a fresh column per call is one more allocation and fill (on the GPU
a launch) on the step's critical path. The columns are private to the handle: they are
passed to a kernel as an input and nothing else (never returned, never written; numpy's
are read-only), so a caller can neither see nor change one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

FUSED = {"euler": "plant_step_gradient_euler",
         "semi_implicit_euler": "plant_step_gradient_semi_implicit_euler"}
"""The fused step gradient of each integrator that has one (the "plant" profile)."""


@dataclass(frozen=True)
class PlantPlan:
    """A handle's constants for the plant methods (module doc). `chart`: the recorded
    chart (`tangent_chart`: "vector", "free_flyer", joint blocks or None); `fused`:
    integrator -> kernel method, only those built and only on a vector chart or a
    free-flyer root in Pinocchio's convention."""

    nq: int
    nv: int
    chart: Any
    algorithms: frozenset[str]
    fused: dict[str, str]

    @property
    def state_width(self) -> int:
        return self.nq + self.nv


def plan_of(handle: Any) -> PlantPlan:
    """`handle`'s `PlantPlan`, made on its first plant call. Kept in the instance's own
    `__dict__` (a MuJoCo-convention handle forwards unknown private attributes to the
    handle it wraps, whose plan is not its own)."""
    plan = handle.__dict__.get("_plant_plan")
    if plan is None:
        from grid_rbd._framework import tangent_chart  # (it imports grid_rbd._plant)
        nq, nv = int(handle.nq), int(handle.nv)
        chart = tangent_chart(nq, nv, handle._meta_dict())
        algorithms = frozenset(handle.algorithms)
        # The kernels read Pinocchio's state: a vector or a free-flyer root (the MuJoCo
        # convention's floating state is laid out otherwise and composes the gradient).
        pinocchio = getattr(handle, "output_convention", "pinocchio") == "pinocchio"
        fused = ({i: name for i, name in FUSED.items() if name in algorithms}
                 if chart == "vector" or (chart == "free_flyer" and pinocchio) else {})
        plan = PlantPlan(nq, nv, chart, algorithms, fused)
        handle.__dict__["_plant_plan"] = plan
    return plan


class StepColumns:
    """`(B, 1)` arrays filled with a step `dt`, made once per (framework, dtype, device,
    stream, batch, dt) and reused; at most `SIZE` are kept, the least recently used
    dropped first (module doc). On CUDA a column is used only on the stream that filled
    it, so its fill is ordered before every launch that reads it (and the caching
    allocator, which tracks that stream only, never hands its memory out under a
    reader). Not kept: a column made while torch.compile traces or a CUDA graph is being
    captured (its fill runs only when the graph does)."""

    SIZE = 8

    def __init__(self) -> None:
        self._columns: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, like: Any, batch: int, dt: float) -> Any:
        """The `(batch, 1)` column of `dt` in `like`'s dtype, where `like` lives (numpy
        or torch; `dt` a checked Python float)."""
        if isinstance(like, np.ndarray):
            key: tuple | None = ("numpy", like.dtype, batch, dt)
        else:
            key = _torch_key(like, batch, dt)
            if key is None:  # traced or captured: a fresh column, filled in the graph
                return _filled(like, batch, dt)
        with self._lock:
            column = self._columns.get(key)
            if column is not None:
                self._columns.move_to_end(key)
                return column
        column = _filled(like, batch, dt)
        with self._lock:
            self._columns[key] = column
            while len(self._columns) > self.SIZE:
                self._columns.popitem(last=False)
        return column

    def __len__(self) -> int:
        return len(self._columns)


def _torch_key(like: Any, batch: int, dt: float) -> tuple | None:
    """A torch column's key: dtype, device index, the current stream's address (0 on the
    CPU), batch and `dt`; None while torch.compile traces or the current CUDA stream is
    capturing a graph. Read with torch's C accessors (a `torch.cuda.Stream` object per call
    costs microseconds of the step's host path)."""
    import torch
    if torch.compiler.is_compiling():
        return None
    if not like.is_cuda:
        return ("torch", like.dtype, -1, 0, batch, dt)
    native = torch._C
    if native._cuda_isCurrentStreamCapturing():
        return None
    index = like.get_device()
    raw = getattr(native, "_cuda_getCurrentRawStream", None)
    stream = (raw(index) if raw is not None else
              torch.cuda.current_stream(like.device).cuda_stream)
    return ("torch", like.dtype, index, stream, batch, dt)


def _filled(like: Any, batch: int, dt: float) -> Any:
    if isinstance(like, np.ndarray):
        column = np.full((batch, 1), dt, dtype=like.dtype)
        column.flags.writeable = False
        return column
    import torch
    return torch.full((batch, 1), dt, dtype=like.dtype, device=like.device)


def step_columns(handle: Any) -> StepColumns:
    """`handle`'s `StepColumns` (in its own `__dict__`, as `plan_of`)."""
    columns = handle.__dict__.get("_step_columns")
    if columns is None:
        columns = handle.__dict__.setdefault("_step_columns", StepColumns())
    return columns
