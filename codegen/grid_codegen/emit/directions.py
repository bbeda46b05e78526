"""The directions strategy of `idsva_so`: one thread per (item, group).

The thread strategy computes an item's second derivatives as one pass (iiwa14: 33,100
operations of the world-frame sweep): at small batches a few warps each run one long
chain and the chip idles (iiwa14 at B = 1,024 is 32 warps on 132 SMs). Here the work is
cut into groups of at most `second_order.DIRECTION_GROUP_OPS` traced operations, each
group an item function that recomputes what it reads and writes its entries of the
item's output in place: consecutive turns of the sweep (`second_order._sweep_groups`),
or, on models outside the sweep, outer directions (then dM/dq columns) on hyper-duals. A
thread runs one (item, group) pair, group-major, with the items padded to whole warps:
the warps resident at one time run the same group's code (as `emit.thread_parts` orders
its parts), and no warp runs two groups one after the other.

The groups repeat work (iiwa14: 46,969 operations in all on the sweep, 1.4x the whole
item; 83,700 on hyper-duals), so at large batches the thread strategy stays faster; the
dispatch (the cost model, then the autotune on a GPU) picks per batch. Measured on an
H200 in float32, iiwa14, the kernels alone, hyper-dual groups against the hyper-dual
thread kernel (tools/bench/second_order_probe): 298 -> 57 ns per item at B = 1,024,
40 -> 44 at 16,384, 28 -> 49 at 65,536. On the sweep (2026-12-05, us per call): 27.4
against 128.7 at B = 1, 82.5 against 140.4 at 1,024; the gather strategy
(`emit.idsva_gather`) beats both from 64 items to 16,383.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.emit.kernels import VariantInfo, emit_pairs_launcher, input_pointer
from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims

DIRECTIONS_BLOCK = 128
DIRECTIONS_MAX_BLOCK = 256


def directions_applicable(algorithm: Algorithm, strategy: str, joint_table: bool) -> bool:
    return algorithm.name == "idsva_so" and strategy == "auto" and not joint_table


def emit_directions_variant(w: Writer, algorithm: Algorithm, dims: Dims,
                            items: Sequence[str], ops: int,
                            transform_table: bool = False) -> VariantInfo:
    """Kernel and launcher of the directions strategy over the group item functions
    `items` (`emit.thread.build_direction_items`); `ops`: the longest group's traced
    operations."""
    name = f"{algorithm.name}_directions"
    groups = len(items)
    width = algorithm.output_size(dims)
    args = [input_pointer(algorithm, dims, k, "i") for k in range(len(algorithm.inputs))]
    args += ["args.inertia", "args.gravity", f"args.out + i * {width}"]
    if transform_table:
        args.append("args.transform")
    w.doc(f"Group `g` of the outer directions of one item's `{algorithm.name}`, written in "
          "place in the item's output.")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE inline void {name}_group(const Args<T>& args, size_t i, "
                 "int g)"):
        with w.block("switch (g)"):
            for k, item in enumerate(items):
                w.line(f"case {k}: {item}<T, T>({', '.join(args)}); break;")
            w.line("default: break;")
    w.line()
    w.doc(f"Kernel of `{algorithm.name}` (directions strategy): one (item, group) per "
          "thread, group-major.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({DIRECTIONS_MAX_BLOCK}) "
                 f"{name}_kernel(const Args<T> args)"):
        w.comment("Items padded to whole warps, so that no warp mixes groups (at B = 1 "
                  "each group runs in a warp of its own, not one after the other).")
        w.line("const int items = (args.batch + 31) & ~31;")
        w.line(f"const int batch = items * {groups};  // (item, group) pairs")
        with w.block("GRID_THREAD_ITEM_LOOP(t, batch)"):
            w.line("const int i = t % items;")
            w.line(f"if (i < args.batch) {name}_group<T>(args, (size_t)i, t / items);")
    w.line()
    emit_pairs_launcher(w, name, f"Launch `{algorithm.name}` (directions strategy, {groups} "
                        "groups) on `stream`.", f"((args.batch + 31) & ~31) * {groups}",
                        f"2147483647 / {groups} - 32", DIRECTIONS_BLOCK, DIRECTIONS_MAX_BLOCK,
                        (f"for (int g = 0; g < {groups}; ++g)",
                         f"{name}_group<T>(args, (size_t)i, g);"))
    return VariantInfo("directions", DIRECTIONS_BLOCK, DIRECTIONS_MAX_BLOCK,
                       max(1, DIRECTIONS_BLOCK // groups), "0", ops)


__all__ = ["DIRECTIONS_BLOCK", "DIRECTIONS_MAX_BLOCK", "directions_applicable",
           "emit_directions_variant"]
