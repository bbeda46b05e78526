"""grid_rbd algorithms as JAX operations: `Launcher.run` (one algorithm) and
`Launcher.run_group` (several under one admission of the context and one stamp read)
lower to one call of the grid_rbd FFI target with the launches described in its
attributes (ffi_handler.cc reads them).

A `Launcher` is a snapshot of what a launch needs (the bridge, the artifact, the context
id, the dimensions); it holds no handle, so the functions a handle caches keep it alive
without a reference cycle. Arrays must already be validated (`JaxRobotHandle` does it):
`(B, width)` arrays of the artifact dtype, or the same with more leading axes under
`jax.vmap` (the handler folds them into the batch).

Targets: `grid_rbd_launch` everywhere, and on CUDA, for a launcher made with
`command_buffers=True`, `grid_rbd_launch_graph` for the calls that read no stamp: it is
declared command-buffer compatible, so XLA may record it into a CUDA graph.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from grid_rbd._methods import BY_NAME, Dims
from grid_rbd.jax._targets import GRAPH_TARGET, TARGET

#: A model-version stamp as JAX holds it: the 8 bytes of a uint64 as uint32[2], which
#: needs no 64-bit mode.
STAMP_SHAPE = (2,)
STAMP_DTYPE = np.uint32

#: One launch of a group: (algorithm name, its inputs in table order with None for an
#: omitted optional one, gravity).
Launch = tuple[str, Sequence[Any], float]


@dataclass(frozen=True, eq=False)
class Launcher:
    """The static part of every launch on one robot context (see the module doc)."""

    robot: str
    bridge: int
    artifact: int
    ctx_id: int
    is_gpu: bool
    dtype: np.dtype
    dims: Dims
    ids: Mapping[str, int]
    command_buffers: bool = False
    chart: str | None = "vector"  # _framework.tangent_chart of the robot
    _compiled: dict[tuple, Any] = field(default_factory=dict, repr=False)

    @property
    def floating_base(self) -> bool:
        return self.chart == "free_flyer"

    def algorithm_id(self, name: str) -> int:
        algorithm_id = self.ids.get(name)
        if algorithm_id is None:
            raise RuntimeError(f"{name} was not built into {self.robot}'s artifact (built: "
                               f"{', '.join(self.ids)}); register with it in algorithm_list")
        return algorithm_id

    def run(self, name: str, values: Sequence[jax.Array | None], gravity: float, *,
            stamp_out: bool = False, stamp: jax.Array | None = None,
            ) -> jax.Array | tuple[jax.Array, jax.Array]:
        """Algorithm `name` on `values` (its inputs in table order, None for an omitted
        optional one). `stamp_out`: also return the model-version stamp the launch ran
        under, as `(value, stamp)` (the `_stamped` twin). `stamp`: a forward's stamp;
        the launch is refused unless the model still has that version (the `_checked`
        twin)."""
        results = self.run_group([(name, values, gravity)], stamp_out=stamp_out, stamp=stamp)
        return (results[0], results[1]) if stamp_out else results[0]

    def run_group(self, launches: Sequence[Launch], *, stamp_out: bool = False,
                  stamp: jax.Array | None = None) -> tuple[jax.Array, ...]:
        """The launches, in order, as one call: one admission of the context, so they see
        one model version, and `stamp` (when given) read once for all of them. Returns
        their outputs, then the stamp with `stamp_out`."""
        operands: list[jax.Array] = []
        layout = []
        for name, values, gravity in launches:
            slots = []
            for value in values:
                if value is None:
                    slots.append(-1)
                    continue
                # An array given to several launches is one operand.
                index = next((k for k, o in enumerate(operands) if o is value), None)
                if index is None:
                    index = len(operands)
                    operands.append(value)
                slots.append(index)
            layout.append((name, tuple(slots), float(gravity)))
        key = (tuple(layout), bool(stamp_out), stamp is not None)
        function = self._compiled.get(key)
        if function is None:
            for name, _, _ in layout:
                self.algorithm_id(name)  # refuse an algorithm the artifact lacks, by name
            # One jitted function per call shape: a call outside jax.jit then takes
            # jit's fast dispatch path instead of binding the FFI primitive each time.
            function = jax.jit(functools.partial(self._launch, *key))
            self._compiled[key] = function
        if stamp is not None:
            operands.append(stamp)
        return function(*operands)

    def _launch(self, layout: tuple, stamp_out: bool, stamp_expect: bool,
                *operands: jax.Array) -> tuple[jax.Array, ...]:
        data = len(operands) - (1 if stamp_expect else 0)
        widths = [0] * data
        leading = operands[0].shape[:-1]
        results, algorithms, num_inputs, slots, sizes, gravities = [], [], [], [], [], []
        for name, indices, gravity in layout:
            method = BY_NAME[name]
            for port, index in zip(method.inputs, indices, strict=True):
                if index >= 0:
                    widths[index] = port.width(self.dims)
            results.append(jax.ShapeDtypeStruct((*leading, *method.output_shape(self.dims)),
                                                self.dtype))
            algorithms.append(self.algorithm_id(name))
            num_inputs.append(len(method.inputs))
            slots.extend(indices)
            sizes.append(method.output_size(self.dims))
            gravities.append(gravity)
        if stamp_out:
            results.append(jax.ShapeDtypeStruct(STAMP_SHAPE, STAMP_DTYPE))
        graph = self.command_buffers and self.is_gpu and not stamp_expect
        call = jax.ffi.ffi_call(GRAPH_TARGET if graph else TARGET, results,
                                vmap_method="broadcast_all")
        out = call(*operands,
                   bridge=_bits64(self.bridge), artifact=_bits64(self.artifact),
                   ctx_id=_bits64(self.ctx_id), algorithms=np.array(algorithms, np.int64),
                   num_inputs=np.array(num_inputs, np.int64),
                   operands=np.array(slots, np.int64), widths=np.array(widths, np.int64),
                   item_sizes=np.array(sizes, np.int64),
                   gravities=np.array(gravities, np.float64),
                   dtype_bytes=np.int32(self.dtype.itemsize), stamp_out=stamp_out,
                   stamp_expect=stamp_expect, is_gpu=bool(self.is_gpu))
        return tuple(out)


def _bits64(value: int) -> np.int64:
    """A uint64 (an address, a salted context id) as the int64 of the same bits: MLIR
    refuses unsigned 64-bit attributes above 2**63 - 1; the handler casts back."""
    return np.array(value, dtype=np.uint64).view(np.int64)[()]


def stamp_value(stamp: jax.Array | np.ndarray) -> int:
    """The model version a stamp holds (reads it to the host; not under jax.jit). Under
    jax.vmap every row holds the same version; this reads the first."""
    words = np.ascontiguousarray(np.asarray(stamp, dtype=STAMP_DTYPE).reshape(-1, 2)[0])
    return int(words.view(np.uint64)[0])
