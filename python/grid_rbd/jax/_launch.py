"""One grid_rbd algorithm as a JAX operation: `Launcher.run` lowers to the `grid_rbd_launch`
FFI target with the launch described in its attributes (ffi_handler.cc reads them).

A `Launcher` is a snapshot of what a launch needs (the bridge, the artifact, the context
id, the dimensions); it holds no handle, so the functions a handle caches keep it alive
without a reference cycle. Arrays must already be validated (`JaxRobotHandle` does it):
`(B, width)` arrays of the artifact dtype, or the same with more leading axes under
`jax.vmap` (the handler folds them into the batch).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from grid_rbd._methods import BY_NAME, Dims
from grid_rbd.jax._targets import TARGET

#: A model-version stamp as JAX holds it: the 8 bytes of a uint64 as uint32[2], which
#: needs no 64-bit mode.
STAMP_SHAPE = (2,)
STAMP_DTYPE = np.uint32


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
    _compiled: dict[tuple, Any] = field(default_factory=dict, repr=False)

    @property
    def floating_base(self) -> bool:
        return self.dims.nq == self.dims.nv + 1

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
        present = tuple(v is not None for v in values)
        key = (name, present, float(gravity), bool(stamp_out), stamp is not None)
        function = self._compiled.get(key)
        if function is None:
            self.algorithm_id(name)  # refuse an algorithm the artifact lacks, by name
            # One jitted function per launch shape: a call outside jax.jit then takes
            # jit's fast dispatch path instead of binding the FFI primitive each time.
            function = jax.jit(functools.partial(self._launch, *key))
            self._compiled[key] = function
        operands = [v for v in values if v is not None]
        if stamp is not None:
            operands.append(stamp)
        return function(*operands)

    def _launch(self, name: str, present: tuple[bool, ...], gravity: float, stamp_out: bool,
                stamp_expect: bool, *operands: jax.Array,
                ) -> jax.Array | tuple[jax.Array, jax.Array]:
        method = BY_NAME[name]
        widths = np.array([p.width(self.dims) for p, here in zip(method.inputs, present,
                                                                  strict=True) if here],
                          dtype=np.int64)
        leading = operands[0].shape[:-1]
        results = [jax.ShapeDtypeStruct((*leading, *method.output_shape(self.dims)),
                                        self.dtype)]
        if stamp_out:
            results.append(jax.ShapeDtypeStruct(STAMP_SHAPE, STAMP_DTYPE))
        call = jax.ffi.ffi_call(TARGET, results, vmap_method="broadcast_all")
        out = call(*operands,
                   bridge=_bits64(self.bridge), artifact=_bits64(self.artifact),
                   ctx_id=_bits64(self.ctx_id), algorithm=np.int32(self.algorithm_id(name)),
                   num_inputs=np.int32(len(method.inputs)),
                   present=np.int32(sum(1 << k for k, here in enumerate(present) if here)),
                   widths=widths, item_size=np.int64(method.output_size(self.dims)),
                   dtype_bytes=np.int32(self.dtype.itemsize), gravity=np.float64(gravity),
                   stamp_out=stamp_out, stamp_expect=stamp_expect, is_gpu=bool(self.is_gpu))
        return (out[0], out[1]) if stamp_out else out[0]


def _bits64(value: int) -> np.int64:
    """A uint64 (an address, a salted context id) as the int64 of the same bits: MLIR
    refuses unsigned 64-bit attributes above 2**63 - 1; the handler casts back."""
    return np.array(value, dtype=np.uint64).view(np.int64)[()]


def stamp_value(stamp: jax.Array | np.ndarray) -> int:
    """The model version a stamp holds (reads it to the host; not under jax.jit). Under
    jax.vmap every row holds the same version; this reads the first."""
    words = np.ascontiguousarray(np.asarray(stamp, dtype=STAMP_DTYPE).reshape(-1, 2)[0])
    return int(words.view(np.uint64)[0])
