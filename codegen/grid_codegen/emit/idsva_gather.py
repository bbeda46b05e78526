"""The gather strategy of `idsva_so`: one item per thread block, its entries in memory order.

A thread that runs the whole sweep for its item (the thread strategy) stores one scalar
per memory transaction, its warp's 32 stores a whole item apart, and at small batches
leaves the chip idle (g1 at B = 1,024: 1,024 threads). Here a block shares an item
(`symbolic.idsva_gather` holds the math and the tables):

1. thread 0 runs the traced forward pass into the table `K` in shared memory (world
   columns and bodies, `idsva.forward_table`);
2. the block sums the bodies' entries over their subtrees (`grid::idsva_composites`,
   one of the 52 components per thread);
3. one turn of the sweep per thread: its eight vectors into `U` in shared memory
   (`grid::idsva_turn_vectors`);
4. every entry of the four blocks, thread `r` taking `r, r + team, ...`: a per-robot
   descriptor names its turn, column and formula (`grid::idsva_gather_entry`), so a
   warp's stores are 32 consecutive scalars and the structural zeros cost a store each.

The descriptors are a per-robot table of `4 nv^3` words in global memory (g1: 686 KB,
read through L2 by every block); the strategy is built up to MAX_ENTRIES of them and
while `K` and `U` fit a block's shared memory in float64. The host build runs the same
steps serially per item (items across host threads), for the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.emit import second_order as SO
from grid_codegen.emit.kernels import VariantInfo, emit_configure, emit_tile_loop, input_pointer
from grid_codegen.emit.thread import ThreadItem, _Plan, item_params
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic import idsva_gather as G
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

MAX_ENTRIES = 1 << 19
"""The most entries (`4 nv^3`) the descriptor table holds (nv <= 50)."""

MAX_SHARED_BYTES = 200 * 1024
"""`K` and the turns' vectors in float64 must fit one block's shared memory (227 KB on
an H100/H200)."""

BLOCK = 256
"""Threads per block of the gather kernel: `BLOCK / team` items at a time (a tile)."""

REGISTERS = 128
"""The gather kernel's register cap (its launch bounds)."""

FORWARD_BLOCK = 128


def k_size(model: RobotModel) -> int:
    return 24 * model.nv + 52 * model.nb


def applicable(model: RobotModel, algorithm: Algorithm, strategy: str,
               joint_table: bool) -> bool:
    """idsva_so, built with strategy="auto", on a model the sweep covers, within the
    table and shared-memory limits above."""
    if (algorithm.name != "idsva_so" or strategy != "auto" or joint_table
            or not idsva.supported(model) or model.nv > G.MAX_DOFS
            or 4 * model.nv ** 3 > MAX_ENTRIES):
        return False
    turns = len(G.plan(model).turns)
    return 8 * (k_size(model) + 48 * turns) <= MAX_SHARED_BYTES


def default_team(entries: int) -> int:
    """Threads per item: a warp for a small item (iiwa14: 1,372 entries), more where the
    entries dominate (g1: 171,500)."""
    if entries <= 4096:
        return 32
    return 128 if entries <= 32768 else BLOCK


def build_forward_items(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                        runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                        runtime_transform: bool = False, tile: int = 1
                        ) -> tuple[ThreadItem, str]:
    """`idsva_so_gather_forward(q, qd, qdd, f_ext, inertia, gravity, out[, transform])`,
    the forward pass into `out` (a team's K), and `..._forward_tiled`, the same with
    entry k at `out[tile k]` (the forward kernel's, into the head of a tile's output):
    the first's ThreadItem and the second's name."""
    names, ops = [], 0
    for stride, suffix in ((1, ""), (tile, "_tiled")):
        plan = _Plan(model, ee_frames, runtime_inertia, library, None, runtime_transform)
        kb = ItemBuilder(library)
        ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
                 for p in algorithm.inputs}
        X = plan.transforms(kb, ports["q"])
        acc = SO._acceleration(kb, ports)
        plan.dynamics_call(
            kb, f"idsva_forward_table{suffix}", "World-frame columns and bodies of the IDSVA "
            "sweep (grid/idsva.h K) for the gather strategy, written to `out`"
            + (f" (entry k at out[{tile} k])." if stride > 1 else "."),
            lambda x, v, a, f, I, g: idsva.forward_table(
                model, A.unflatten_placements(x, model.nb), I, v, a, f, g),
            [X, ports["qd"], acc, ports["f_ext"]], Array.runtime("out", k_size(model), "out"),
            out_stride=stride)
        name = f"{algorithm.name}_gather_forward{suffix}"
        kb.emit_item_function(w, name, f"The forward pass of `{algorithm.name}`'s gather "
                              "strategy into K (`emit.idsva_gather`)"
                              + (f", interleaved by {tile} items." if stride > 1 else "."),
                              item_params(algorithm, dims, False, runtime_transform))
        w.line()
        names.append(name)
        ops = ops or kb.total_ops
    return ThreadItem(names[0], ops), names[1]


def _table(w: Writer, ctype: str, name: str, values: Sequence[int], per_line: int = 24) -> None:
    w.line(f"GRID_TABLE {ctype} {name}[{max(1, len(values))}] = {{")
    text = [str(v) for v in values] or ["0"]
    for k in range(0, len(text), per_line):
        w.line("    " + ", ".join(text[k:k + per_line]) + ",")
    w.line("};")


def tile_of(model: RobotModel, width: int) -> int:
    """Items per tile (a block's items at the default team)."""
    return BLOCK // default_team(width)


def emit_variant(w: Writer, model: RobotModel, algorithm: Algorithm, dims: Dims,
                 forward: ThreadItem, forward_tiled: str, transform_table: bool
                 ) -> VariantInfo:
    """Tables, item function, kernels and launcher of the gather strategy over the
    forward item functions (`build_forward_items`).

    On the GPU the launcher runs two kernels: the forward pass of the items of whole
    tiles, one item per thread, into the head of their tile's output (interleaved by
    item, so that a warp's stores fill sectors); then one tile per block, a team per
    item: K moved to shared memory (a partial tile's teams run their forward pass on
    their first thread instead), the composites, the turns, the entries."""
    name = f"{algorithm.name}_gather"
    plan = G.plan(model)
    nv, nb = model.nv, model.nb
    width = algorithm.output_size(dims)
    turns = len(plan.turns)
    ksize = k_size(model)
    team = default_team(width)
    tile = BLOCK // team
    w.comment(f"The gather strategy's tables (symbolic/idsva_gather.py): the tree, the "
              f"{turns} turns (ip << 16 | jq), the formulas, and per entry of the four blocks "
              "0 (a zero) or 1 + (turn << 12 | kr << 4 | formula).")
    _table(w, "int", f"{name}_parent", [j.parent for j in model.joints])
    _table(w, "int", f"{name}_body_of", G.body_of(model))
    _table(w, "unsigned", f"{name}_turns", [ip << 16 | jq for ip, jq in plan.turns], 12)
    w.line(f"GRID_TABLE signed char {name}_formulas[16][6] = {{")
    for (sa, a, ma), (sb, b, mb) in G.FORMULAS:
        w.line(f"    {{{sa}, {a}, {ma}, {sb}, {b}, {mb}}},")
    w.line("};")
    _table(w, "unsigned", f"{name}_entries", plan.entries, 16)
    w.line()
    with w.namespace(f"layout_{name}"):
        w.line(f"constexpr int kK = {ksize};  // K: 24 per dof, 52 per body")
        w.line(f"constexpr int kTurns = {turns};  // U: 48 per turn")
        w.line("constexpr int kSize = kK + 48 * kTurns;  // shared scalars per item")
        w.line(f"constexpr int kTeam = {team};  // threads per item by default")
        w.line(f"constexpr int kTile = {tile};  // items per block at kTeam")
    w.line()
    extra = ["args.transform"] if transform_table else []

    def forward_call(fn: str, index: str, out: str) -> str:
        inputs = [input_pointer(algorithm, dims, k, index) for k in range(len(algorithm.inputs))]
        return f"{fn}<T, T>({', '.join([*inputs, 'args.inertia', 'args.gravity', out, *extra])})"

    w.doc("Steps 2 to 4 of one item (`emit.idsva_gather`), the threads `rank` of `team`;\n"
          "`sync` runs between the steps (a block barrier on the GPU).")
    w.line("template <typename T, typename Sync>")
    with w.block(f"GRID_HOST_DEVICE inline void {name}_steps(T* GRID_RESTRICT K, "
                 "T* GRID_RESTRICT U, T* GRID_RESTRICT out, int rank, int team, bool live, "
                 "Sync sync)"):
        w.line(f"if (live) idsva_composites<T>({nb}, {nv}, {name}_parent, K, rank, team);")
        w.line("sync();")
        with w.block(f"if (live) for (int t = rank; t < {turns}; t += team)"):
            w.line(f"const unsigned pair = {name}_turns[t];")
            w.line(f"idsva_turn_vectors<T>({nv}, {name}_body_of, K, (int)(pair >> 16), "
                   "(int)(pair & 0xffffu), U + 48 * t);")
        w.line("sync();")
        w.line(f"if (live) for (int e = rank; e < {width}; e += team) "
               f"out[e] = idsva_gather_entry<T>({name}_entries[e], U, K, {name}_formulas);")
    w.line()
    w.line("#if GRID_IS_CUDA")
    w.doc(f"First kernel of `{algorithm.name}` (gather strategy): the forward pass of the\n"
          f"items of whole tiles of `tile` items, one per thread, into the head of their\n"
          "tile's output (entry k of item j at tile * width + tile k + j).")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({FORWARD_BLOCK}) "
                 f"{name}_forward_kernel(const Args<T> args)"):
        w.line(f"const size_t whole = (size_t)(args.batch / {tile}) * {tile};")
        with w.block("for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; "
                     "i < whole; i += (size_t)blockDim.x * gridDim.x)"):
            w.line(f"T* const K = args.out + (i / {tile}) * {tile * width} + i % {tile};")
            w.line(forward_call(forward_tiled, "i", "K") + ";")
    w.line()
    blocks = 65536 // (REGISTERS * BLOCK)
    w.doc(f"Second kernel of `{algorithm.name}` (gather strategy): a tile of `blockDim.x /\n"
          "team` items per block, a team of threads per item. `tiled`: the first kernel\n"
          "wrote the K of whole tiles.")
    w.comment(f"At most {REGISTERS} registers a thread: unbounded, the straight-line forward "
              "pass takes 255, which caps an SM at 8 warps.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void __launch_bounds__({BLOCK}, {blocks}) "
                 f"{name}_kernel(const Args<T> args, int team, bool tiled)"):
        w.line("extern __shared__ __align__(16) unsigned char grid_smem[];")
        w.line("T* const scratch = reinterpret_cast<T*>(grid_smem);")
        w.line("const int tile = (int)blockDim.x / team;")
        w.line("const int j = (int)threadIdx.x / team, rank = (int)threadIdx.x % team;")
        w.line(f"T* const K = scratch + (size_t)j * layout_{name}::kSize;")
        w.line(f"T* const U = K + layout_{name}::kK;")
        w.line("const int tiles = (args.batch + tile - 1) / tile;")
        with w.block("for (int t = (int)blockIdx.x; t < tiles; t += (int)gridDim.x)"):
            w.line("const int first = t * tile;")
            w.line("const int count = args.batch - first < tile ? args.batch - first : tile;")
            w.line(f"T* const tile_out = args.out + (size_t)first * {width};")
            with w.block("if (tiled && count == tile)"):
                with w.block(f"for (int k = (int)threadIdx.x; k < tile * {ksize}; "
                             "k += (int)blockDim.x)"):
                    w.line(f"scratch[(size_t)(k % tile) * layout_{name}::kSize + k / tile] = "
                           "tile_out[k];")
            with w.block("else if (j < count && rank == 0)"):
                w.line("const size_t item = (size_t)(first + j);")
                w.line(forward_call(forward.name, "item", "K") + ";")
            w.line("__syncthreads();  // K is complete before the composites")
            w.line(f"{name}_steps<T>(K, U, tile_out + (size_t)j * {width}, rank, team, "
                   "j < count, idsva_block_sync{});")
            w.line("__syncthreads();  // the next tile reuses K and U")
    w.line("#endif")
    w.line()
    emit_configure(w, name, f"sizeof(T) * layout_{name}::kSize * layout_{name}::kTile",
                   first=(f"{name}_forward_kernel",), cuda_only=True)
    w.doc(f"Launch `{algorithm.name}` (gather strategy) on `stream`; `cfg.threads`: the\n"
          f"threads per item (a divisor of {BLOCK} that is a multiple of 32; default\n"
          f"layout_{name}::kTeam).")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int team = cfg.threads > 0 ? cfg.threads : layout_{name}::kTeam;")
        w.line(f"if (team > {BLOCK} || team % 32 != 0 || {BLOCK} % team != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line(f"const int tile = {BLOCK} / team;")
        w.line(f"const size_t shared = sizeof(T) * layout_{name}::kSize * tile;")
        w.line(f"if (shared > {name}_shared_bytes<T>()) return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (args.batch == 0) return GRID_OK;")
        w.comment("The first kernel's layout is the default tile's, and needs K to fit in an "
                  "item's output.")
        tiled_ok = "true" if ksize <= width else "false"
        w.line(f"const bool tiled = {tiled_ok} && team == layout_{name}::kTeam && "
               "args.batch >= tile;")
        with w.block("if (tiled)"):
            w.line("const int whole = args.batch / tile * tile;")
            w.line(f"int blocks = (whole + {FORWARD_BLOCK - 1}) / {FORWARD_BLOCK};")
            w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
            w.line(f"{name}_forward_kernel<T><<<blocks, {FORWARD_BLOCK}, 0, stream>>>(args);")
            w.line("const int rc = launch_status();")
            w.line("if (rc != GRID_OK) return rc;")
        w.line("int blocks = (args.batch + tile - 1) / tile;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"{name}_kernel<T><<<blocks, {BLOCK}, shared, stream>>>(args, team, tiled);")
        w.line("return launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("const int tiles = args.batch;")
        w.line(f"const int threads = host_threads(cfg.threads, tiles, "
               f"{forward.ops + idsva.sweep_operations(model)});")
        with w.block("auto tile = [&args](int item)", "};"):
            w.line(f"heap_row<T> scratch(layout_{name}::kSize);  // g1 in float64: 156 KB")
            w.line("T* const K = scratch.p;")
            w.line(forward_call(forward.name, "(size_t)item", "K") + ";")
            w.line(f"{name}_steps<T>(K, K + layout_{name}::kK, args.out + (size_t)item * "
                   f"{width}, 0, 1, true, idsva_no_sync{{}});")
        emit_tile_loop(w)
        w.line("#endif")
    w.line()
    return VariantInfo("gather", BLOCK, BLOCK, tile, f"{name}_shared_bytes<T>()", forward.ops)


def lane_ops(model: RobotModel, width: int) -> int:
    """Operations of a team's longest thread after the forward pass (the dispatch model's):
    its turns (~800 each) and its entries (~40 each)."""
    team = default_team(width)
    turns = len(G.plan(model).turns)
    return 800 * -(-turns // team) + 40 * -(-width // team)


__all__ = ["BLOCK", "MAX_ENTRIES", "applicable", "build_forward_items", "default_team",
           "emit_variant", "k_size", "lane_ops", "tile_of"]
