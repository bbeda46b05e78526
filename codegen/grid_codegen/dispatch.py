"""Which variant serves which batch size: the deterministic cost model.

An artifact built with `strategy="auto"` carries several variants of each algorithm
(thread, warp, block per item) and a default dispatch table per algorithm: for each
batch-size regime, the variant the model below predicts fastest. The model is used where
nothing can be measured: CPU builds, Bazel actions (which must be deterministic), and a
registration without a usable GPU. Where a GPU is present, registration measures the
variants instead (a short autotune) and the runtime installs the measured table with
`set_dispatch`; an explicit `strategy=` builds one variant and needs no table.

The GPU model (one H200-class device; coarse by design, it only has to rank variants):
* thread: one item per thread runs `ops` dependent-ish operations at ~1 ns each
  (latency `ops` ns); many items share the chip at ~15 Top/s;
* warp: 32 lanes share an item whose level-synchronous form does ~3x the traced
  operations (no constant folding across units) at ~25% lane efficiency
  (latency `3 ops / 8` ns); throughput ~4 Top/s of traced work;
* block: as warp, with block barriers: latency `3 ops / 6` ns, throughput ~2 Top/s;
* tangents (the FD gradient and the fused step gradients, `emit.tangents`): a
  forward-mode pass of `ops` per thread, one thread per column of the item's Jacobian
  (2 nv or 3 nv): the thread strategy's rates over `work` = that many passes per item.
* columns (the inverse-dynamics regressor's warp strategy, `emit.regressor_warp`): a
  traced pass on one lane, then lane-parallel rows: the thread strategy's rates over
  `work` (the pass plus 32 lanes' loops).
* directions (idsva_so, `emit.directions`): one thread per group of outer directions,
  `ops` the longest group: the thread strategy's rates over `work` (all groups).
* gather (idsva_so, `emit.idsva_gather`): a block per item, the forward pass on one
  thread then the turns and entries across the block: `ops` the forward pass plus the
  longest thread's share, the thread strategy's rates over `work` (every thread's).
A thread variant whose item writes more than the staged stores take
(`emit.kernels.STAGE_MAX_WIDTH`) stores one scalar per memory transaction: `scattered`
scalars at ~20 ps each (g1's ID regressor, 10,500 scalars: ~210 ns per item measured).
Each launch costs ~3 us. On the CPU the thread strategy runs on SIMD vectors of items and
is always chosen when present (the others are serial emulations there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

THREAD_MAX_OPS = 250000
"""`auto` builds the thread strategy of an algorithm only up to this many traced
operations per item: past it, straight-line code costs minutes of compile time (g++ and
ptxas grow faster than linearly on it). Below it the thread strategy is worth its
compile time even for a 29-DoF humanoid's gradients (g1: ID gradient 92k, FD gradient
210k operations): on the CPU it is the only variant that runs on SIMD vectors of items
(g1's FD gradient, float64, one core: 27.6 us per item against 74 us for the warp
strategy's code and 32 us for Pinocchio), and on a GPU the autotune measures it against
the others. An explicit strategy="thread" builds it regardless."""

REGIMES = (1, 16, 128, 1024, 8192, 65536)
"""The batch sizes the model compares variants at."""

LAUNCH_S = 3e-6

_GPU = {  # strategy: (latency seconds per traced op, throughput traced ops per second)
    "thread": (1.0e-9, 15e12),
    "warp": (3.0 / 8.0 * 1e-9, 4e12),
    "block": (3.0 / 6.0 * 1e-9, 2e12),
    "columns": (1.0e-9, 15e12),
    "directions": (1.0e-9, 15e12),
    "gather": (1.0e-9, 15e12),
    "tangents": (1.0e-9, 15e12),
}

SCATTERED_S = 2.0e-11
"""Seconds per scalar of a thread variant's unstaged stores at full occupancy."""


@dataclass(frozen=True)
class Variant:
    """A compiled variant as the cost model sees it: strategy and traced operations per
    item (the thread strategy's count; the level strategies reuse it as their scale)."""

    strategy: str
    ops: int
    work: int = 0  # traced operations per item across its threads (0: `ops`)
    scattered: int = 0  # scalars per item stored one per memory transaction


def predicted_seconds(variant: Variant, batch: int) -> float:
    latency, rate = _GPU[variant.strategy]
    ops = max(variant.ops, 1)
    work = max(variant.work, ops)
    return LAUNCH_S + max(ops * latency,
                          work * batch / rate + variant.scattered * batch * SCATTERED_S)


def gpu_dispatch(variants: Sequence[Variant], max_batch: int) -> list[tuple[int, int]]:
    """`[(min_batch, variant index), ...]`: ascending thresholds, the first one 1."""
    table: list[tuple[int, int]] = []
    for batch in REGIMES:
        if batch > max_batch and table:
            break
        best = min(range(len(variants)),
                   key=lambda k: (predicted_seconds(variants[k], batch), k))
        if not table or table[-1][1] != best:
            table.append((1 if not table else batch, best))
    return table


def cpu_dispatch(variants: Sequence[Variant]) -> list[tuple[int, int]]:
    for k, v in enumerate(variants):
        if v.strategy == "thread":
            return [(1, k)]
    return [(1, 0)]


def strategies_for(requested: str) -> tuple[str, ...]:
    """The strategies an artifact may carry for a requested strategy (`auto` drops the
    thread strategy of algorithms past THREAD_MAX_OPS)."""
    if requested == "auto":
        return ("thread", "warp", "block")
    return (requested,)
