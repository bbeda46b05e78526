"""Thread items cut into parts of their output, for the CUDA thread kernel.

A thread-strategy item writes its output row into shared memory when the row fits
(`SHARED_ROW_MAX_BYTES`); a wider row goes through the thread's stack first, which costs
a local-memory store and load per scalar. A wide row also means a long item: at mid-size
batches (g1 at B = 16,384 is 512 warps, four per SM of an H200) few warps each run one
long chain, and nothing hides its latency.

So the CUDA kernel of such an item can run it as P *parts*, each in warps of its own:
part p computes the output entries `offset_p .. offset_p + width_p` (whole rows of the
output matrix) into a shared-memory row. Each part's item function is traced from the
same passes as the whole item and keeps only what its entries read (`ItemBuilder`'s
`out_map`); what the parts share (the joint transforms, the composite inertias of the
rows near the root) is computed once per part.

The parts run part-major: the warps resident at one time run the same part. Straight-line
parts are long, and neighbouring warps on different parts thrash the instruction cache
(H200, g1's CRBA at B = 65,536: 1,857 us with the parts of 32 items in neighbouring
warps, 459 us part-major, 496 us whole).

The cost model (the generator's, so builds stay deterministic): parts are used when the
operations they repeat stay under `STACK_SCALAR_OPS` per output scalar. Measured on an
H200 in float32 (kernel time, whole -> parts):
* g1's CRBA (1,225 scalars, 5,003 operations whole, 9 parts repeating 11.8 per
  scalar): 179 -> 135 us at B = 16,384, 496 -> 459 us at 65,536, 76 -> 27 us at 1,024;
* g1's end-effector gradient (840 scalars, 6 parts, 4.5 per scalar): 141 -> 81 us at
  16,384, 363 -> 257 us at 65,536;
* go2's CRBA and end-effector gradient (2.6 and 0.7 per scalar): 2.0-2.8x faster at
  every batch;
* go2's M^-1 (3 parts repeating 23.6 per scalar): 42 -> 40 us at 16,384 but 129 -> 143 us
  at 65,536, so it stays whole, as does g1's (87.5 per scalar).
The host build runs the whole item (its SIMD tiles have no stack rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grid_codegen.emit.kernels import SHARED_ROW_MAX_BYTES
from grid_codegen.emit.plant import PREFIX as PLANT_PREFIX
from grid_codegen.emit.thread_vjp import VJP_OF
from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic.emit import PassLibrary

STACK_SCALAR_OPS = 16
"""Repeated operations the parts may cost per output scalar (see the module doc: 11.8
measured faster at every batch, 23.6 slower at the largest)."""

MAX_PARTS = 16
"""At most this many parts per item (wider outputs keep the stack path)."""

PART_SCALAR_BYTES = 4
"""Parts are sized for float32 rows in shared memory (float64 parts, twice as wide in
bytes, are staged through the stack, as whole float64 rows of that size are)."""


FITS = (SHARED_ROW_MAX_BYTES // PART_SCALAR_BYTES - 1) | 1
"""The widest float32 row in shared memory (its pitch, the width made odd, fits too)."""


@dataclass(frozen=True)
class Part:
    """One part of a thread item's output: its item function and entries."""

    item: str
    offset: int
    width: int


def cuttable(algorithm: Algorithm) -> bool:
    """Whether the thread item of `algorithm` may run in parts: not the reverse-mode
    items (one pass from q, their own layout) nor the fused step gradients (their CUDA
    kernel stages a compact row of its own, `emit.plant`)."""
    return algorithm.name not in VJP_OF and not algorithm.name.startswith(PLANT_PREFIX)


def part_ranges(algorithm: Algorithm, dims: Dims) -> list[tuple[int, int]]:
    """`(offset, width)` of the parts an output would be cut into: whole rows of its last
    axis, balanced, each row fitting a float32 shared-memory row; `[]` for an output that
    fits one (or whose rows do not fit, or would need more than MAX_PARTS)."""
    width = algorithm.output_size(dims)
    shape = algorithm.output_shape(dims)
    fits = FITS
    if width <= fits:
        return []
    row = shape[-1] if len(shape) >= 2 else 1
    rows = width // row
    per_part = fits // row
    if per_part == 0:
        return []
    count = -(-rows // per_part)
    if count > MAX_PARTS:
        return []
    ranges, start = [], 0
    for p in range(count):
        n = rows // count + (1 if p < rows % count else 0)
        ranges.append((start * row, n * row))
        start += n
    return ranges


def worth_cutting(whole_ops: int, part_ops: list[int], width: int) -> bool:
    """The cost model: the parts' repeated operations against the stack path's cost."""
    return sum(part_ops) - whole_ops <= STACK_SCALAR_OPS * width


def build_parts(library: PassLibrary, algorithm: Algorithm, dims: Dims, whole_ops: int,
                build: Callable[[Part, Writer], int], w: Writer) -> list[Part]:
    """Trace the parts of a thread item whose whole form took `whole_ops` operations:
    `build(part, writer)` writes the item function of `part`
    (`emit.thread.build_thread_item`) and returns its operation count. Kept (their item
    functions appended to `w`) when the cost model says so, else rolled back: `[]`."""
    ranges = part_ranges(algorithm, dims) if cuttable(algorithm) else []
    if not ranges:
        return []
    parts = [Part(f"{algorithm.name}_thread_p{k}", offset, width)
             for k, (offset, width) in enumerate(ranges)]
    checkpoint = library.checkpoint()
    text = Writer()
    ops = [build(part, text) for part in parts]
    if not worth_cutting(whole_ops, ops, algorithm.output_size(dims)):
        library.rollback(checkpoint)
        return []
    w.extend(text)
    return parts


__all__ = ["FITS", "MAX_PARTS", "Part", "STACK_SCALAR_OPS", "build_parts", "cuttable",
           "part_ranges", "worth_cutting"]
