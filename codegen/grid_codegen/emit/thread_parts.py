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

The cost model (the generator's, so builds stay deterministic): parts are used when the
operations they repeat stay under `STACK_SCALAR_OPS` per output scalar, the work the
stack path spends on moving one scalar out (H200, iiwa14's FD gradient in float32: the
98-scalar row through the stack took 0.82 ns per item more than through shared memory,
the time of about 40 of its traced operations per scalar at that throughput). g1's CRBA
(1,225 scalars, 4,781 operations whole) is cut into 9 parts of 3 or 4 rows repeating
11.6k operations (under 49k); its M^-1 (28k operations) would repeat 112k and stays
whole. The host build runs the whole item (its SIMD tiles have no stack rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grid_codegen.emit.kernels import SHARED_ROW_MAX_BYTES, shared_row_pitch
from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic.emit import PassLibrary

STACK_SCALAR_OPS = 40
"""Repeated operations the parts may cost per output scalar (see the module doc)."""

MAX_PARTS = 16
"""At most this many parts per item (wider outputs keep the stack path)."""

PART_SCALAR_BYTES = 4
"""Parts are sized for float32 rows in shared memory (float64 parts, twice as wide in
bytes, are staged through the stack, as whole float64 rows of that size are)."""


@dataclass(frozen=True)
class Part:
    """One part of a thread item's output: its item function and entries."""

    item: str
    offset: int
    width: int


def part_ranges(algorithm: Algorithm, dims: Dims) -> list[tuple[int, int]]:
    """`(offset, width)` of the parts an output would be cut into: whole rows of its last
    axis, balanced, each row fitting a float32 shared-memory row; `[]` for an output that
    fits one (or whose rows do not fit, or would need more than MAX_PARTS)."""
    width = algorithm.output_size(dims)
    shape = algorithm.output_shape(dims)
    fits = max(w for w in range(1, width + 1)
               if shared_row_pitch(w) * PART_SCALAR_BYTES <= SHARED_ROW_MAX_BYTES)
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
                build: Callable[[tuple[int, int, int], Writer], int], w: Writer
                ) -> list[Part]:
    """Trace the parts of a thread item whose whole form took `whole_ops` operations:
    `build(part, writer)` writes the item function of `part` (`(index, offset, width)`,
    `emit.thread.build_thread_item`) and returns its operation count. Kept (their item
    functions appended to `w`) when the cost model says so, else rolled back: `[]`."""
    ranges = part_ranges(algorithm, dims)
    if not ranges:
        return []
    checkpoint = library.checkpoint()
    text = Writer()
    ops = [build((k, offset, width), text) for k, (offset, width) in enumerate(ranges)]
    if not worth_cutting(whole_ops, ops, algorithm.output_size(dims)):
        library.rollback(checkpoint)
        return []
    w.extend(text)
    return [Part(f"{algorithm.name}_thread_p{k}", offset, width)
            for k, (offset, width) in enumerate(ranges)]


__all__ = ["MAX_PARTS", "Part", "STACK_SCALAR_OPS", "build_parts", "part_ranges",
           "worth_cutting"]
