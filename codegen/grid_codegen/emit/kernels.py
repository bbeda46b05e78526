"""Kernels and host launchers of every variant, one text for nvcc and the host compiler.

Each variant of an algorithm gets
* a kernel `<alg>_<strategy>_kernel<T>(Args<T>)` with its launch bound stated;
* `configure_<alg>_<strategy><T>()`: the per-device setup (kernel image check, the
  shared-memory opt-in above 48 KiB);
* `launch_<alg>_<strategy><T>(args, config, stream)`: the launch. On the GPU it sizes the
  grid from the batch and the configuration (threads per block, a grid cap with the rest
  grid-striding); on the CPU every strategy runs SIMD tiles of items (grid/simd.h: the
  thread strategy on plain vector types, the block and warp strategies on `lanes`)
  across `config.threads` host threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims

if TYPE_CHECKING:
    from grid_codegen.emit.plant import StagedRow
    from grid_codegen.emit.thread_parts import Part

THREAD_BLOCK = 128
THREAD_MAX_BLOCK = 256
WARP_MAX_BLOCK = 256
"""The widest block of the regressor's warp kernel (`emit.regressor_warp`). The level
warp kernel runs one warp per block whatever width is asked: its scratch then sits at a
fixed shared address, which nvcc's optimiser needs to stay fast (g1's ABA warp kernel, cicc:
79 s with a per-warp offset into the block's shared memory, 8 s without)."""
BLOCK_MAX_BLOCK = 1024


@dataclass(frozen=True)
class VariantInfo:
    """What the descriptor says of one variant (C++ expressions for the sizes)."""

    strategy: str
    threads: int
    max_threads: int
    items_per_block: int
    shared_bytes: str  # a C++ expression of T
    ops: int


def input_pointer(algorithm: Algorithm, dims: Dims, k: int, index: str) -> str:
    port = algorithm.inputs[k]
    ptr = f"args.in[{k}] + {index} * {port.width(dims)}"
    return ptr if port.required else f"args.in[{k}] != nullptr ? {ptr} : nullptr"


STAGE_MIN_WIDTH = 32
STAGE_MAX_WIDTH = 4096
"""Thread kernels whose item writes between these many scalars (16 KiB of float32 per
thread at most: g1's FD gradient is 2,450) stage the warp's rows in
shared memory and store them row by row (coalesced); outside, each thread stores its own
row (small rows are merged in L2 anyway; large ones would not fit a thread's stack)."""

SHARED_ROW_MAX_BYTES = 640
"""A staged row of at most this many bytes (its odd pitch, `shared_row_pitch`; 20 KiB per
warp: iiwa14's FD gradient in float32 is 396 B, its fused step gradient 588 B) is written
by the item straight into shared memory; a wider one goes through the thread's stack
first. The stack row costs a local-memory store and load per scalar, and those frames do
not fit in L1 (H200, iiwa14 FD gradient: 80 MB of L2 writes for a 25.7 MB output)."""


def shared_row_pitch(width: int) -> int:
    """The scalars between two lanes' rows in shared memory: `width` made odd, so that the
    32 lanes storing their scalar `k` at once hit 32 different banks."""
    return width | 1


def shared_rows_expr(width: int) -> str:
    """The C++ condition (of T) under which a row of `width` scalars is staged in shared
    memory directly."""
    return f"{shared_row_pitch(width)} * sizeof(T) <= {SHARED_ROW_MAX_BYTES}"


def thread_shared_bytes(width: int, threads: str) -> str:
    """The C++ expression (of T) of a thread kernel's dynamic shared memory for `threads`
    threads per block: the warps' row tiles where rows are staged in shared memory."""
    if not STAGE_MIN_WIDTH <= width <= STAGE_MAX_WIDTH:
        return "0"
    return (f"({shared_rows_expr(width)}) ? "
            f"(size_t)({threads}) * {shared_row_pitch(width)} * sizeof(T) : size_t{{0}}")


def _emit_tile_store(w: Writer, width: int, stride: int, store: str | None,
                     source: str, offset: int = 0) -> None:
    """The warp's store of its 32 staged rows: the rows of items `base .. base + n` are
    consecutive in `args.out` (at `stride == width`), so lane `j` of each round stores
    scalar `j` of that span; `source(t, col)` is scalar `col` of lane `t`'s row, stored
    at entry `offset + col` of item `base + t`'s output."""
    w.line("const int n = (size_t)batch - base < 32 ? (int)((size_t)batch - base) : 32;")
    with w.block(f"for (int j = lane; j < n * {width}; j += 32)"):
        w.line(f"const int t = j / {width}, col = j - t * {width};")
        if store is not None:
            w.line(f"{store}<T>(args, base + (size_t)t, col, {source});")
        elif stride == width:
            w.line(f"store_once(args.out + base * {width} + (size_t)j, {source});")
        else:
            at = f"{offset} + col" if offset else "col"
            w.line(f"store_once(args.out + (base + (size_t)t) * {stride} + {at}, {source});")


def _emit_stack_store(w: Writer, width: int, stride: int, store: str | None,
                      offset: int = 0) -> None:
    """The warp's store of its 32 rows from the threads' stacks (`row`), through the
    shared tile `stage` of C columns: one item's C consecutive scalars per store."""
    with w.block(f"for (int c0 = 0; c0 < {width}; c0 += C)"):
        w.line("#pragma unroll")
        w.line(f"for (int k = 0; k < C; ++k) if (c0 + k < {width}) "
               "stage[warp][lane][k] = row[c0 + k];")
        w.line("__syncwarp();")
        with w.block("for (int t = lane / C; t < 32; t += 32 / C)"):
            w.line("const size_t it = base + (size_t)t;")
            w.line("const int col = c0 + lane % C;")
            at = f"{offset} + col" if offset else "col"
            target = (f"store_once(args.out + it * {stride} + {at}, stage[warp][t][lane % C])"
                      if store is None else
                      f"{store}<T>(args, it, col, stage[warp][t][lane % C])")
            w.line(f"if (it < (size_t)batch && col < {width}) {target};")
        w.line("__syncwarp();")


STACK_TILE = ("constexpr int C = sizeof(T) == 4 ? 32 : 16;  // a shared tile of 4 KiB per warp",
              f"__shared__ T stage[{THREAD_MAX_BLOCK // 32}][32][C + 1];")


@contextmanager
def _warp_items(w: Writer, row: str, call: str) -> Iterator[None]:
    """The grid-stride loop over the warp's 32 items, each lane computing its own into
    `row` (declared by `row`, filled by `call`); the body that stores the rows follows."""
    with w.block("for (size_t base = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); "
                 "base < (size_t)batch; base += stride)"):
        w.line("const size_t i = base + (size_t)lane;")
        w.line(row)
        with w.block("if (i < (size_t)batch)"):
            w.line(call)
        yield


def emit_staged_loop(w: Writer, item: str, inputs: list[str], extra: list[str],
                     out_width: int, stride: int | None = None,
                     store: str | None = None) -> None:
    """The CUDA item loop of a thread kernel with coalesced stores. A thread's own row
    would put the warp's 32 stores `out_width` scalars apart: one memory transaction per
    scalar instead of one per 32. So each thread writes its item into a row that the warp
    then stores linearly. The row is in shared memory where it fits
    (`SHARED_ROW_MAX_BYTES`, at an odd pitch: no bank conflicts either way); otherwise it
    is on the thread's stack and moves to the global output through a shared tile of C
    columns, one item's C consecutive scalars per store instruction. `stride`: the
    scalars between items' rows in `args.out` (default `out_width`). `store`: a device
    function `store(args, it, col, value)` that writes an item's output from scalar `col`
    of its row, in place of the plain store (a row narrower than the output:
    `emit.plant.staged_row`)."""
    stride = out_width if stride is None else stride
    pitch = shared_row_pitch(out_width)
    args = inputs + ["args.inertia", "args.gravity", "row", *extra]
    w.comment("Stores staged through shared memory (see STAGE_MIN_WIDTH and "
              "SHARED_ROW_MAX_BYTES in emit/kernels.py).")
    w.line("const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);")
    w.line("const size_t stride = (size_t)blockDim.x * gridDim.x;")
    call = f"{item}<T, T>({', '.join(args)});"
    with w.block(f"if constexpr ({shared_rows_expr(out_width)})"):
        w.line("extern __shared__ __align__(16) unsigned char grid_smem[];")
        w.line(f"T* GRID_RESTRICT rows = reinterpret_cast<T*>(grid_smem) + "
               f"(size_t)warp * {32 * pitch};")
        with _warp_items(w, f"T* GRID_RESTRICT row = rows + lane * {pitch};", call):
            w.line("__syncwarp();")
            _emit_tile_store(w, out_width, stride, store, f"rows[t * {pitch} + col]")
            w.line("__syncwarp();")
    with w.block("else"):
        w.lines(*STACK_TILE)
        with _warp_items(w, f"T row[{out_width}];", call):
            _emit_stack_store(w, out_width, stride, store)


def emit_parts_loop(w: Writer, parts: Sequence[Part], inputs: list[str], extra: list[str],
                    out_width: int) -> None:
    """The CUDA item loop of a thread kernel whose item runs in parts
    (`emit.thread_parts`): work unit `u` is part `u / chunks` of the 32 items
    `u % chunks * 32 ..`, so the part is uniform across the warp (no divergence), and
    part-major: the warps resident at one time run the same part, sharing its
    instructions (straight-line parts are long; neighbouring warps on different parts
    thrash the instruction cache). Each part writes its row (at most
    `SHARED_ROW_MAX_BYTES` in float32) into shared memory, or onto the stack where a
    float64 row is wider, and the warp stores it to its entries of the 32 outputs."""
    widest = max(p.width for p in parts)
    pitch = shared_row_pitch(widest)
    w.comment(f"The item in {len(parts)} parts, each part of 32 items in a warp "
              "(emit/thread_parts.py).")
    w.line("const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);")
    w.line("const size_t chunks = ((size_t)batch + 31) / 32;")
    w.line(f"const size_t units = chunks * {len(parts)};")
    w.line("const size_t warps = ((size_t)blockDim.x * gridDim.x) >> 5;")

    def loop(row: str, stage: Callable[[Part], None]) -> None:
        with w.block("for (size_t u = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; "
                     "u < units; u += warps)"):
            w.line("const size_t base = u % chunks * 32;")
            w.line("const int part = (int)(u / chunks);")
            w.line("const size_t i = base + (size_t)lane;")
            w.line(row)
            args = ", ".join([*inputs, "args.inertia", "args.gravity", "row", *extra])
            for k, p in enumerate(parts):
                call = f"{p.item}<T, T>({args});"
                with w.block(f"{'if' if k == 0 else 'else if'} (part == {k})"):
                    w.line(f"if (i < (size_t)batch) {call}")
                    stage(p)

    def shared_store(p: Part) -> None:
        w.line("__syncwarp();")
        _emit_tile_store(w, p.width, out_width, None, f"rows[t * {pitch} + col]", p.offset)
        w.line("__syncwarp();")

    with w.block(f"if constexpr ({shared_rows_expr(widest)})"):
        w.line("extern __shared__ __align__(16) unsigned char grid_smem[];")
        w.line(f"T* GRID_RESTRICT rows = reinterpret_cast<T*>(grid_smem) + "
               f"(size_t)warp * {32 * pitch};")
        loop(f"T* GRID_RESTRICT row = rows + lane * {pitch};", shared_store)
    with w.block("else"):
        w.lines(*STACK_TILE)
        loop(f"T row[{widest}];",
             lambda p: _emit_stack_store(w, p.width, out_width, None, p.offset))


HOST_ROW_STACK_BYTES = 256 * 1024
"""A CPU tile's output row up to this many bytes (at 32 bytes per vector of items) is a
stack array; a wider one is on the heap (`heap_row`, grid/simd.h): an OpenMP worker's
stack may be much smaller than the main thread's."""


def emit_host_row(w: Writer, width: int) -> None:
    """Declare `out`, a CPU tile's output row of `width` vectors `V`."""
    if 32 * width <= HOST_ROW_STACK_BYTES:
        w.line(f"V out[{width}];")
    else:
        w.line(f"heap_row<V> out_row({width});  // HOST_ROW_STACK_BYTES in emit/kernels.py")
        w.line("V* const out = out_row.p;")


def emit_thread_variant(w: Writer, algorithm: Algorithm, dims: Dims, item: str,
                        ops: int, joint_table: bool = False, transform_table: bool = False,
                        row: StagedRow | None = None, parts: Sequence[Part] = ()
                        ) -> VariantInfo:
    """Kernel and launcher of the thread strategy over the item function `item`
    (`joint_table`: it takes the runtime joint-dynamics table after the output;
    `transform_table`: then the runtime transform table; `row`: a compact row the CUDA
    kernel stages in place of the whole output, `emit.plant.staged_row`; `parts`: the
    CUDA kernel runs the item in these parts instead, `emit.thread_parts`; the host
    build runs `item`)."""
    extra = ["args.joint_dynamics"] if joint_table else []
    if transform_table:
        extra.append("args.transform")
    name = f"{algorithm.name}_thread"
    out_width = algorithm.output_size(dims)
    widths = [p.width(dims) for p in algorithm.inputs]
    w.doc(f"Kernel of `{algorithm.name}` (thread strategy): one item per thread.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({THREAD_MAX_BLOCK}) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line("const int batch = args.batch;")
        inputs = [input_pointer(algorithm, dims, k, "i") for k in range(len(widths))]
        staged = STAGE_MIN_WIDTH <= out_width <= STAGE_MAX_WIDTH
        assert staged or not parts, "parts are cut from staged widths only"
        if staged:
            w.line("#if GRID_IS_CUDA")
            if parts:
                emit_parts_loop(w, parts, inputs, extra, out_width)
            elif row is None:
                emit_staged_loop(w, item, inputs, extra, out_width)
            else:
                emit_staged_loop(w, row.item, inputs, extra, row.width, store=row.store)
            w.line("#else")
        with w.block("GRID_THREAD_ITEM_LOOP(item, batch)"):
            w.line("const size_t i = (size_t)item;")
            args = inputs + ["args.inertia", "args.gravity", f"args.out + i * {out_width}",
                             *extra]
            w.line(f"{item}<T, T>({', '.join(args)});")
        if staged:
            w.line("#endif")
    w.line()
    staged_width = out_width if row is None else row.width
    if parts:
        staged_width = max(p.width for p in parts)
    emit_configure(w, name, thread_shared_bytes(staged_width, str(THREAD_BLOCK)),
                   opt_in=thread_shared_bytes(staged_width, str(THREAD_MAX_BLOCK)))
    w.doc(f"Launch `{algorithm.name}` (thread strategy) on `stream`.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {THREAD_BLOCK};")
        w.line(f"if (threads > {THREAD_MAX_BLOCK} || threads % 32 != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        if parts:  # a warp per part of 32 items
            w.line(f"int blocks = (int)((((size_t)args.batch + 31) / 32 * {len(parts)} * 32 "
                   "+ threads - 1) / threads);")
        else:
            w.line("int blocks = (args.batch + threads - 1) / threads;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"const size_t shared = {thread_shared_bytes(staged_width, 'threads')};"
               "  // opted in up to the widest launch by configure")
        w.line(f"{name}_kernel<T><<<blocks, threads, shared, stream>>>(args);")
        w.line("return launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("typedef vec<T> V;")
        w.line("constexpr int W = simd_width<T>();")
        w.line("const int tiles = (args.batch + W - 1) / W;")
        w.line(f"const int threads = host_threads(cfg.threads, tiles, {ops});")
        with w.block("auto tile = [&args](int t)", "};"):
            w.line("const int first = t * W;")
            w.line("const int count = args.batch - first < W ? args.batch - first : W;")
            for k, (port, width) in enumerate(zip(algorithm.inputs, widths, strict=True)):
                w.line(f"V in{k}[{width}];")
                w.line(f"const V* {port.name} = load_tile(args.in[{k}], {width}, first, "
                       f"count, in{k});")
            emit_host_row(w, out_width)
            call = [p.name for p in algorithm.inputs] + ["args.inertia", "args.gravity", "out",
                                                         *extra]
            w.line(f"{item}<V, T>({', '.join(call)});")
            w.line(f"store_tile(out, {out_width}, first, count, args.out);")
        emit_tile_loop(w)
        w.line("#endif")
    w.line()
    # Items in flight per block (the workspace cap's unit): a part each per thread.
    per_block = max(1, THREAD_BLOCK // max(1, len(parts)))
    return VariantInfo("thread", THREAD_BLOCK, THREAD_MAX_BLOCK, per_block,
                       f"{name}_shared_bytes<T>()", ops)


def emit_level_variant(w: Writer, algorithm: Algorithm, dims: Dims, strategy: str,
                       item: str, scratch_size: str, ops: int, block_threads: int,
                       joint_table: int = 0, transform_table: int = 0) -> VariantInfo:
    """Kernel and launcher of the block or warp strategy over the item function `item`
    (`scratch_size`: the C++ constant of its scalars of scratch per item;
    `block_threads`: the block strategy's default width, enough for its widest step;
    `joint_table`, `transform_table`: the sizes of the runtime joint-dynamics and
    transform tables, 0 for none)."""
    name = f"{algorithm.name}_{strategy}"
    # Both run an item per block; a warp kernel's block is one warp (WARP_MAX_BLOCK's
    # note), whatever width in [32, bound] the launch asks.
    if strategy == "block":
        default, bound, per_block, sync = block_threads, BLOCK_MAX_BLOCK, 1, "GRID_SYNC()"
        launch_bound, width = bound, "threads"
    else:
        default, bound, per_block, sync = 32, WARP_MAX_BLOCK, 1, "GRID_WARP_SYNC()"
        launch_bound, width = 32, "32"
    w.doc(f"Kernel of `{algorithm.name}` ({strategy} strategy): one item per "
          f"{'thread block' if strategy == 'block' else 'warp'}.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({launch_bound}) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line("const int batch = args.batch;")
        with w.block("GRID_BLOCK_ITEM_LOOP(item, batch)"):
            w.line(f"GRID_BLOCK_SCRATCH(T, s, {scratch_size});")
            w.line(f"{item}<T>(s, args, item);")
            w.line(f"{sync};  // the next item reuses the scratch")
    w.line()
    shared = f"sizeof(T) * {scratch_size} * {per_block}"
    emit_configure(w, name, shared)
    w.doc(f"Launch `{algorithm.name}` ({strategy} strategy) on `stream`.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {default};")
        w.line(f"if (threads > {bound} || threads % 32 != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("const size_t shared = sizeof(T) * " + scratch_size + ";")
        w.line("int blocks = args.batch;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"{name}_kernel<T><<<blocks, {width}, shared, stream>>>(args);")
        w.line("return launch_status();")
        w.line("#else")
        _emit_level_host(w, algorithm, dims, item, scratch_size, ops, joint_table,
                         transform_table)
        w.line("#endif")
    w.line()
    return VariantInfo(strategy, default, bound, per_block, f"{name}_shared_bytes<T>()", ops)


def _emit_level_host(w: Writer, algorithm: Algorithm, dims: Dims, item: str,
                     scratch_size: str, ops: int, joint_table: int = 0,
                     transform_table: int = 0) -> None:
    """The host path of a level-synchronous variant: the item function on `lanes<T>`
    (SIMD vectors of items), one tile of items per call, tiles across host threads."""
    out_width = algorithm.output_size(dims)
    w.line("(void)stream;")
    w.line("typedef lanes<T> V;")
    w.line("constexpr int W = simd_width<T>();")
    w.line("const int tiles = (args.batch + W - 1) / W;")
    w.line(f"const int threads = host_threads(cfg.threads, tiles, {max(ops, 1) * 3});")
    w.line(f"V inertia[{10 * dims.nb}];")
    with w.block("if (args.inertia != nullptr)"):
        w.line(f"for (int k = 0; k < {10 * dims.nb}; ++k) inertia[k] = V(args.inertia[k]);")
    captures = "&args, &inertia"
    if joint_table:
        w.line(f"V joint_dynamics[{joint_table}];")
        w.line(f"for (int k = 0; k < {joint_table}; ++k) "
               "joint_dynamics[k] = V(args.joint_dynamics[k]);")
        captures += ", &joint_dynamics"
    if transform_table:
        w.line(f"V transform[{transform_table}];")
        w.line(f"for (int k = 0; k < {transform_table}; ++k) "
               "transform[k] = V(args.transform[k]);")
        captures += ", &transform"
    with w.block(f"auto tile = [{captures}](int t)", "};"):
        w.line("const int first = t * W;")
        w.line("const int count = args.batch - first < W ? args.batch - first : W;")
        w.line("Args<V> a = {};")
        for k, port in enumerate(algorithm.inputs):
            width = port.width(dims)
            w.line(f"V in{k}[{width}];")
            w.line(f"a.in[{k}] = load_tile(args.in[{k}], {width}, first, count, in{k});")
        emit_host_row(w, out_width)
        w.line("a.out = out;")
        w.line("a.inertia = args.inertia != nullptr ? inertia : nullptr;")
        w.line("a.gravity = V(args.gravity);")
        if joint_table:
            w.line("a.joint_dynamics = joint_dynamics;")
        if transform_table:
            w.line("a.transform = transform;")
        w.line("a.batch = 1;")
        w.line(f"V s[{scratch_size}];")
        w.line(f"{item}<V>(s, a, 0);")
        w.line(f"store_tile(out, {out_width}, first, count, args.out);")
    emit_tile_loop(w)


def emit_tile_loop(w: Writer) -> None:
    """Run `tile(t)` for every tile: across `threads` OpenMP threads, or inline for one."""
    w.line("#if defined(_OPENMP)")
    with w.block("if (threads > 1)"):
        w.line("#pragma omp parallel for num_threads(threads) schedule(static)")
        w.line("for (int t = 0; t < tiles; ++t) tile(t);")
        w.line("return GRID_OK;")
    w.line("#endif")
    w.line("for (int t = 0; t < tiles; ++t) tile(t);")
    w.line("return GRID_OK;")


def emit_configure(w: Writer, name: str, shared: str, first: Sequence[str] = (),
                   cuda_only: bool = False, also: Sequence[str] = (),
                   opt_in: str | None = None) -> None:
    """`<name>_shared_bytes<T>()` and `configure_<name><T>()`. `first`: kernels without
    shared memory that the variant launches before `<name>_kernel` (configured first);
    `also`: kernels launched with the shared memory of `<name>_kernel`; `cuda_only`: the
    variant's kernels exist on the CUDA build only (the host build's setup has nothing
    to do); `opt_in`: the bytes `<name>_kernel` is opted in to (default `shared`), the
    widest launch's where the launcher does not opt in itself."""
    w.doc(f"Dynamic shared memory of one `{name}` block at the default width, in bytes.")
    w.line("template <typename T>")
    with w.block(f"constexpr size_t {name}_shared_bytes()"):
        w.line(f"return {shared};")
    w.line()
    w.doc(f"Per-device setup of `{name}` (kernel image check, shared-memory opt-in).")
    w.line("template <typename T>")
    with w.block(f"inline int configure_{name}()"):
        if cuda_only:
            w.line("#if GRID_IS_CUDA")
        for kernel in first:
            w.line(f"const int rc_{kernel} = configure_kernel({kernel}<T>, size_t{{0}});")
            w.line(f"if (rc_{kernel} != GRID_OK) return rc_{kernel};")
        for kernel in also:
            w.line(f"const int rc_{kernel} = configure_kernel({kernel}<T>, "
                   f"{name}_shared_bytes<T>());")
            w.line(f"if (rc_{kernel} != GRID_OK) return rc_{kernel};")
        limit = f"{name}_shared_bytes<T>()" if opt_in is None else opt_in
        w.line(f"return configure_kernel({name}_kernel<T>, {limit});")
        if cuda_only:
            w.line("#else")
            w.line("return GRID_OK;  // the host build has no kernels of this variant")
            w.line("#endif")
    w.line()


def emit_pairs_launcher(w: Writer, name: str, doc: str, pairs: str, limit: str,
                        threads: int, max_threads: int,
                        host_loop: tuple[str, str]) -> None:
    """`configure_<name>` and `launch_<name>` of a variant whose kernel runs one thread per
    entry of `pairs` (`emit_pairs_launch`); `limit`: the largest batch whose pair count
    fits an int; `doc`: the launcher's."""
    emit_configure(w, name, "size_t{0}")
    w.doc(doc)
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line(f"if (args.batch > {limit}) return GRID_ERROR_INVALID_ARGUMENT;")
        emit_pairs_launch(w, name, threads, max_threads, pairs, host_loop)
    w.line()


def emit_pairs_launch(w: Writer, name: str, threads: int, max_threads: int, pairs: str,
                      host_loop: tuple[str, str]) -> None:
    """The body of a launcher whose kernel `<name>_kernel` runs one thread per entry of
    `pairs` (a C++ count: items times the threads of an item) without shared memory;
    `host_loop`: the host build's inner loop header and statement, inside a loop over
    the items `i`."""
    w.line("#if GRID_IS_CUDA")
    w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {threads};")
    w.line(f"if (threads > {max_threads} || threads % 32 != 0) "
           "return GRID_ERROR_INVALID_ARGUMENT;")
    w.line(f"int blocks = ({pairs} + threads - 1) / threads;")
    w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
    w.line("if (blocks == 0) return GRID_OK;")
    w.line(f"{name}_kernel<T><<<blocks, threads, 0, stream>>>(args);")
    w.line("return launch_status();")
    w.line("#else")
    w.line("(void)cfg;")
    w.line("(void)stream;")
    with w.block("for (int i = 0; i < args.batch; ++i)"):
        w.line(f"{host_loop[0]} {host_loop[1]}")
    w.line("return GRID_OK;")
    w.line("#endif")
