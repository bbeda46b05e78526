"""How the passes of one batch item map onto threads: the seam between *what* an
emitter computes and *how* it is scheduled.

Emitters describe work as units (a body, a dof, a matrix entry) grouped into steps:
`schedule` runs steps in order, the units of one step are independent. They call
`parallel` for entry-wise loops and `barrier` where a later step reads an earlier one's
results. A strategy decides what that becomes:

* `BlockStrategy` (GRiD's): one batch item per thread block; the units of a step are
  spread over the block's threads (a `switch` picks each unit's specialised code),
  a barrier separates steps, the scratch is shared memory.
* `WarpStrategy`: the same passes with one batch item per warp: units across its 32
  lanes, warp barriers, one warp per thread block (its scratch at a fixed shared address).

(The thread strategy is not scheduled here: it is straight-line code traced from the
algorithms themselves, `grid_codegen.emit.thread`.)

On the host build both reduce to plain loops over the item's work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from grid_codegen.emit.writer import Writer

EmitUnit = Callable[[Writer, int], None]


class Strategy:
    """Base: records the widest step so the kernel can size its thread block."""

    name = "abstract"

    def __init__(self) -> None:
        self.max_width = 1

    def reset(self) -> None:
        self.max_width = 1

    def note_width(self, width: int) -> None:
        self.max_width = max(self.max_width, width)

    @contextmanager
    def parallel(self, w: Writer, var: str, count: int | str) -> Iterator[None]:
        raise NotImplementedError

    @contextmanager
    def single(self, w: Writer) -> Iterator[None]:
        raise NotImplementedError

    def barrier(self, w: Writer) -> None:
        raise NotImplementedError

    def schedule(self, w: Writer, steps: Sequence[Sequence[int]], emit_unit: EmitUnit,
                 label: str) -> None:
        raise NotImplementedError

    def threads_per_block(self) -> int:
        raise NotImplementedError


class BlockStrategy(Strategy):
    name = "block"

    @contextmanager
    def parallel(self, w: Writer, var: str, count: int | str) -> Iterator[None]:
        if isinstance(count, int):
            self.note_width(count)
        with w.block(f"GRID_THREAD_LOOP({var}, {count})"):
            yield

    @contextmanager
    def single(self, w: Writer) -> Iterator[None]:
        with w.block("GRID_SINGLE_THREAD"):
            yield

    def barrier(self, w: Writer) -> None:
        w.line("GRID_SYNC();")

    def schedule(self, w: Writer, steps: Sequence[Sequence[int]], emit_unit: EmitUnit,
                 label: str) -> None:
        for number, units in enumerate(steps):
            if not units:
                continue
            w.comment(f"{label}, step {number}: {_describe(units)}")
            if len(units) == 1:
                with self.single(w), w.block():
                    emit_unit(w, units[0])
            else:
                with self.parallel(w, "unit", len(units)), w.block("switch (unit)"):
                    for slot, unit in enumerate(units):
                        with w.block(f"case {slot}:", "} break;"):
                            emit_unit(w, unit)
            self.barrier(w)

    def threads_per_block(self) -> int:
        # Whole warps, enough for the widest step, capped where occupancy still pays.
        return min(max(32, -(-self.max_width // 32) * 32), 256)


class WarpStrategy(BlockStrategy):
    """One batch item per warp: the block strategy's passes with units across the 32
    lanes and warp barriers. A thread block is one warp (`emit.kernels.WARP_MAX_BLOCK`
    says why), so the item's scratch is the block's shared memory."""

    name = "warp"

    @contextmanager
    def parallel(self, w: Writer, var: str, count: int | str) -> Iterator[None]:
        if isinstance(count, int):
            self.note_width(count)
        with w.block(f"GRID_LANE_LOOP({var}, {count})"):
            yield

    @contextmanager
    def single(self, w: Writer) -> Iterator[None]:
        with w.block("GRID_LANE0"):
            yield

    def barrier(self, w: Writer) -> None:
        w.line("GRID_WARP_SYNC();")

    def threads_per_block(self) -> int:
        return 32


def make_strategy(name: str) -> Strategy:
    """The scheduling of the level-synchronous emitters: "block" or "warp" (the thread
    strategy is traced straight-line code, `grid_codegen.emit.thread`)."""
    if name == "block":
        return BlockStrategy()
    if name == "warp":
        return WarpStrategy()
    raise ValueError(f"no level-synchronous strategy {name!r}; expected 'block' or 'warp'")


def _describe(units: Sequence[int]) -> str:
    return f"unit {units[0]}" if len(units) == 1 else f"units {', '.join(map(str, units))}"
