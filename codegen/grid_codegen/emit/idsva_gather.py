"""The gather strategy of `idsva_so` and `fdsva_so`: a team of threads per item, its
entries written in memory order.

A thread that runs the whole sweep for its item (the thread strategy) stores one scalar
per memory transaction, its warp's 32 stores a whole item apart, and at small batches
leaves the chip idle (g1 at B = 1,024: 1,024 threads). Here a team shares an item
(`symbolic.idsva_gather` holds the math and the tables):

1. the *head*: the traced forward pass into the table `K` (world columns and bodies,
   `idsva.forward_table`); for `fdsva_so` at `qdd = FD(q, qd, u)`, followed by `M^-1`
   and RNEA's first derivatives there;
2. the bodies' entries of `K` summed over their subtrees (`grid::idsva_composites`, one
   of the 52 components per thread);
3. one turn of the sweep per thread: its eight vectors into `U` (`idsva_turn_vectors`);
4. every entry of the four blocks, in one of two forms:
   - *memory order* (go2, g1, every item larger than a warp's): a warp takes 128
     consecutive entries at a time (32 where an item is one warp's, `chunk_of`); its
     lanes compute the chunk's non-zero entries (a per-robot code names each one's one
     or two products, `grid::idsva_gather_entry`; 12 or 24 shared scalars loaded per
     entry) into the warp's zeroed stage in shared memory, then store the chunk four
     consecutive entries a lane (`grid::idsva_gather_sparse`), so a warp's stores fill
     whole sectors and the structural zeros (78% of g1's entries) cost a store each but
     no products;
   - *tile* (a warp per item whose block of items and output tiles fits in shared
     memory: iiwa14): one thread per (turn, column) pair loads the turn's 48 and the
     column's 24 scalars once into registers, evaluates the sixteen formulas and writes
     the entries whose writes stand (a per-pair mask of the 24 rules,
     `symbolic.idsva_gather.pair_masks`) into the item's tile in shared memory, which the
     team then copies out in memory order (iiwa14: 84 pairs, 1,253 writes, against
     1,372 entries of up to 24 loads each);
5. `fdsva_so` only, the implicit-function combination of `emit.second_order` (on the
   tile in the tile form) as contractions the team shares: `D = -M^-1 dtau`; per row
   `l`, with the slab `dM[l]` staged, `qq[l] += P + P^T` (`P[j][k] = dM[l][:, j] .
   D[:, k]`), `qv[l] += R`, and `dM[l] <- M^-1 dM[l]` (the first factor of `dMinv =
   -M^-1 dM M^-1`); then per fibre `(j, k)` of each block, `block[:, j, k] <- -M^-1 block[:, j, k]`.

On the GPU a first kernel computes the heads of the items of whole tiles, one item per
thread (idsva_so in the memory form: one thread per item and group of bodies,
`emit.idsva_head_groups`), into the head of their tile's output (interleaved by item so
that a warp's stores fill sectors); the second kernel's block takes a tile of
`BLOCK / team` items, moves their heads into shared memory and runs steps 2-5. A partial
tile's teams compute their heads on their first thread. The host build runs the same
steps serially per item (items across host threads), for the tests.

The entries' codes are a per-robot table in global memory, one 64-bit word per non-zero
entry with its byte of slot in its chunk and each chunk's first index (g1: 37,128 codes,
334 KB with the slots, read through L2 by every block; each algorithm's unit has its own
copy): the offsets of one or two products' 6-vectors in U and K, with their signs, so an
entry is one 8-byte load, two dot products and no decoding. K's columns and U's turns are padded
to odd strides (COLUMN_STRIDE, TURN_STRIDE). The tile form also aligns every item and
its tile (`Layout`), which is zeroed and copied out in 16-byte vectors. (Strides of four
times an odd number, for vector loads of the pairs' 72 scalars, were measured slower:
the turns' scalar stores into U then collide four ways in the banks, and the known
alignment lets nvcc vectorize the turns' loads, which spill at 128 registers.) A partial
tile's head is an out-of-line call, so that the straight-line head does not raise the
second kernel's register pressure. The strategy is built up to MAX_ENTRIES
entries and while an item's shared memory fits a block in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grid_codegen.emit import second_order as SO
from grid_codegen.emit.idsva_gather_layout import (
    BLOCK,
    COLUMN_STRIDE,
    TURN_STRIDE,
    Layout,
    chunk_of,
    default_team,
    layout,
    one_warp,
    pad_columns,
    sparse_tables,
)
from grid_codegen.emit.kernels import VariantInfo, emit_configure, emit_tile_loop, input_pointer
from grid_codegen.emit.thread import ThreadItem, _Plan, item_params
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic import idsva_gather as G
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

REGISTERS = 128
"""The second kernel's register cap (its launch bounds)."""

FORWARD_BLOCK = 128
"""Threads per block of the first kernel."""


def build_head_items(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                     runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                     runtime_transform: bool = False, tile: int = 1
                     ) -> tuple[ThreadItem, str]:
    """`<name>_gather_head(inputs, inertia, gravity, out[, transform])`, the head into
    `out` (a team's shared memory), and `..._head_tiled`, the same with entry k at
    `out[tile k]` (the first kernel's): the first's ThreadItem and the second's name.
    The head's passes are the thread strategy's loop-form passes (`idsva_forward`, and
    fdsva_so's `aba_minv`, `rnea_derivatives_dense`), shared with it where it has them;
    a last pass copies them out."""
    fd = algorithm.name == "fdsva_so"
    nv = model.nv
    lay = layout(model, fd)
    pad = [0.0] * (lay.head - lay.k - (3 * nv ** 2 if fd else 0))
    names, ops = [], 0
    for stride, suffix in ((1, ""), (tile, "_tiled")):
        plan = _Plan(model, ee_frames, runtime_inertia, library, None, runtime_transform)
        kb = ItemBuilder(library)
        ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
                 for p in algorithm.inputs}
        X = plan.transforms(kb, ports["q"])
        if fd:
            solved, acc, dtau = SO.fd_first_order(plan, kb, X, ports)
            parts = [SO.forward_table_call(plan, kb, [X, ports["qd"], acc, ports["f_ext"]]),
                     solved, dtau]
            pick = lambda K, s, d: [*pad_columns(model, K), *s[nv:], *d, *pad]  # noqa: E731
        else:
            acc = SO._acceleration(kb, ports)
            parts = [SO.forward_table_call(plan, kb, [X, ports["qd"], acc, ports["f_ext"]])]
            pick = lambda K: [*pad_columns(model, K), *pad]  # noqa: E731
        kb.call(f"{algorithm.name}_gather_head_out{suffix}",
                f"The head of {algorithm.name}'s gather strategy out: K"
                + (", M^-1, dtau" if fd else "")
                + (f", entry k at out[{tile} k]." if stride > 1 else "."),
                pick, parts, Array.runtime("out", lay.head, "out"),
                out_stride=stride, vector_stores=stride == 1)
        name = f"{algorithm.name}_gather_head{suffix}"
        kb.emit_item_function(w, name, f"The head of `{algorithm.name}`'s gather strategy "
                              "(`emit.idsva_gather`)"
                              + (f", interleaved by {tile} items." if stride > 1 else "."),
                              item_params(algorithm, dims, False, runtime_transform))
        w.line()
        names.append(name)
        ops = ops or kb.total_ops
    return ThreadItem(names[0], ops), names[1]


def _emit_tables(w: Writer, name: str, model: RobotModel, plan: G.Plan,
                 pairs: Sequence[tuple[int, int, int]]) -> None:
    """The tree and the turns; then the tile form's pairs and masks (`pairs` not empty)
    or the memory-order form's entry codes."""
    w.comment(f"The gather strategy's tables (symbolic/idsva_gather.py): the tree, the "
              f"{len(plan.turns)} turns (ip << 16 | jq), and "
              + ("the tile form's (turn, column) pairs (t << 16 | kr) with the masks of the "
                 "rules whose writes stand." if pairs else
                 "the non-zero entries of the four blocks: their two product codes "
                 "(grid::idsva_gather_entry), slots in their chunk "
                 "and each chunk's first code (grid::idsva_gather_sparse)."))
    w.table("int", f"{name}_parent", [j.parent for j in model.joints])
    w.table("int", f"{name}_body_of", G.body_of(model))
    w.table("unsigned", f"{name}_turns", [ip << 16 | jq for ip, jq in plan.turns], 12)
    if pairs:
        w.table("unsigned", f"{name}_pairs", [t << 16 | kr for t, kr, _ in pairs], 12)
        w.table("unsigned", f"{name}_masks", [f"{m:#x}u" for _, _, m in pairs], 12)
    else:
        codes, slots, chunks = sparse_tables(plan)
        w.table("unsigned long long", f"{name}_codes", [f"{c:#x}ull" for c in codes], 8,
               align=16)
        w.table("unsigned char", f"{name}_slots", slots, 32)
        w.table("int", f"{name}_chunks", chunks, 16)
    w.line()


def _emit_steps(w: Writer, name: str, model: RobotModel, lay: Layout, turns: int,
                width: int, fd: bool, pairs: int) -> None:
    """`<name>_steps`: steps 2-5 of one item by the threads `rank` of `team`; `pairs`: the
    number of (turn, column) pairs of the tile form, 0 for the memory-order form."""
    nv, nb = model.nv, model.nb
    w.doc("Steps 2 to 5 of one item (`emit.idsva_gather`) by the threads `rank` of `team`:\n"
          "`H` the item's head, `U` its work space, `out` its output; `sync` runs between\n"
          "the steps (a block barrier on the GPU), also where `live` is false.")
    w.line("template <typename T, typename Sync>")
    # The memory form's steps out of line: inlined into the gather kernel (128 registers)
    # its loops spilled (g1: 308 -> 48 B of spill stores, Nsight 1.8 M -> 0.12 M local
    # requests at 1,024). The tile form stays inline: out of line the call saved its
    # registers to the stack (iiwa14: 5.5 M local requests, 458 -> 477 us at 65,536).
    linkage = "GRID_HOST_DEVICE inline" if pairs else "GRID_NOINLINE"
    with w.block(f"{linkage} void {name}_steps(T* GRID_RESTRICT H, "
                 "T* GRID_RESTRICT U, T* GRID_RESTRICT out, int rank, int team, bool live, "
                 "Sync sync)"):
        w.line("T* const K = H;")
        w.line(f"T* const bodies = K + {COLUMN_STRIDE * nv};")
        if pairs:
            w.line(f"T* const tile = U + {TURN_STRIDE * turns};  // the item's output, staged")
        w.line(f"if (live) idsva_composites<T>({nb}, {name}_parent, bodies, rank, team);")
        w.line("sync();")
        with w.block("if (live)"):
            with w.block(f"for (int t = rank; t < {turns}; t += team)"):
                w.line(f"const unsigned pair = {name}_turns[t];")
                w.line(f"idsva_turn_vectors<T>(K, {COLUMN_STRIDE}, bodies, {name}_body_of, "
                       f"(int)(pair >> 16), (int)(pair & 0xffffu), U + {TURN_STRIDE} * t);")
            if pairs:
                w.line(f"idsva_zero(tile, {width}, rank, team);")
        w.line("sync();")
        if not pairs:
            once = "false" if fd else "true"  # fdsva_so's step 5 reads the blocks back
            w.line(f"if (live) idsva_gather_sparse<T, {once}, {chunk_of(width)}>("
                   f"{name}_codes, {name}_slots, "
                   f"{name}_chunks, U, K, out, {width}, rank, team, H + {lay.stage});")
            if fd:
                w.line("sync();  // the blocks are whole; U is free")
                _emit_combine(w, model, lay, "out")
            w.line()
            return
        with w.block(f"if (live) for (int p = rank; p < {pairs}; p += team)"):
            w.line(f"const unsigned pair = {name}_pairs[p];")
            w.line("const int t = (int)(pair >> 16), kr = (int)(pair & 0xffffu);")
            w.line(f"const unsigned turn = {name}_turns[t];")
            w.line(f"{name}_pair<T>(U + {TURN_STRIDE} * t, K + {COLUMN_STRIDE} * kr, "
                   f"(int)(turn >> 16), (int)(turn & 0xffffu), kr, {name}_masks[p], tile);")
        w.line("sync();  // the tile is whole" + ("; U is free" if fd else ""))
        if fd:
            _emit_combine(w, model, lay, "tile")
            w.line("sync();")
        w.line(f"if (live) idsva_copy(out, tile, {width}, rank, team);")
    w.line()


def _emit_pair(w: Writer, name: str, model: RobotModel) -> None:
    """`<name>_pair`: the tile form's entries of one (turn, column) pair: the sixteen
    FORMULAS from the turn's vectors and the column's motions in registers, each RULES
    write that stands (bit r of `mask`, `symbolic.idsva_gather.pair_masks`) into the
    tile."""
    nv = model.nv
    n3 = nv ** 3
    w.doc("The tile form's writes of turn (ip, jq) at column kr (`emit.idsva_gather`): `Ut`\n"
          "the turn's vectors, `V` the column's motions, bit r of `mask` for rule r of\n"
          "symbolic/idsva_gather.py's RULES.")
    w.line("template <typename T>")
    with w.block(f"GRID_INLINE void {name}_pair(const T* GRID_RESTRICT Ut, "
                 "const T* GRID_RESTRICT V, int ip, int jq, int kr, unsigned mask, "
                 "T* GRID_RESTRICT tile)"):
        # The turn's vectors in four loads of two (12 scalars), each adding its products
        # to the formulas: fewer live registers than all 48 at once.
        w.line("T v[24], u[12], " + ", ".join(f"f{f}" for f in range(len(G.FORMULAS))) + ";")
        w.line("for (int k = 0; k < 24; ++k) v[k] = V[k];")
        started: set[int] = set()
        for group in range(4):
            w.line(f"for (int k = 0; k < 12; ++k) u[k] = Ut[{12 * group} + k];")
            for f, products in enumerate(G.FORMULAS):
                for sign, vec, mot in products:
                    if not sign or vec // 2 != group:
                        continue
                    dot = f"idsva_dot(u + {6 * (vec % 2)}, v + {6 * mot})"
                    if f in started:
                        w.line(f"f{f} {'+' if sign > 0 else '-'}= {dot};")
                    else:
                        w.line(f"f{f} = {'-' if sign < 0 else ''}{dot};")
                        started.add(f)
        names = {"i": "ip", "j": "jq", "k": "kr"}
        for r, (_, block, order, formula) in enumerate(G.RULES):
            a, c, d = (names[x] for x in order)
            w.line(f"if (mask & {1 << r:#x}u) tile[{block * n3} + ({a} * {nv} + {c}) * {nv} + "
                   f"{d}] = f{formula};")
    w.line()


def _emit_combine(w: Writer, model: RobotModel, lay: Layout, blocks: str) -> None:
    """Step 5 of fdsva_so (the module doc), inside `<name>_steps`, on the four blocks at
    `blocks` (the output, or the tile form's tile)."""
    nv = model.nv
    n2, n3 = nv * nv, nv ** 3
    w.line(f"constexpr int n = {nv};")
    w.line(f"const T* const Minv = H + {lay.k};")
    w.line(f"const T* const dtau = Minv + {n2};  // n x 2n")
    w.line("T* const D = U;  // dqdd = -Minv dtau, n x 2n")
    w.line(f"T* const slab = U + {2 * n2};  // dM[l], n x n")
    w.line(f"T* const P = slab + {n2};")
    w.line(f"T* const qq = {blocks}; T* const vv = {blocks} + {n3}; "
           f"T* const qv = {blocks} + {2 * n3};")
    w.line(f"T* const dM = {blocks} + {3 * n3};")
    with w.block(f"if (live) for (int e = rank; e < {2 * n2}; e += team)"):
        w.line("const int i = e / (2 * n), c = e % (2 * n);")
        w.line("T acc = Minv[i * n] * dtau[c];")
        w.line("for (int l = 1; l < n; ++l) acc += Minv[i * n + l] * dtau[l * 2 * n + c];")
        w.line("D[e] = -acc;")
    w.line("sync();")
    w.comment("Row by row: qq[l] += P + P^T, qv[l] += R, dM[l] <- Minv dM[l].")
    with w.block("for (int l = 0; l < n; ++l)"):
        w.line(f"if (live) for (int e = rank; e < {n2}; e += team) slab[e] = dM[l * {n2} + e];")
        w.line("sync();")
        with w.block(f"if (live) for (int e = rank; e < {n2}; e += team)"):
            w.line("const int j = e / n, k = e % n;")
            w.line("T p = slab[j] * D[k], r = slab[j] * D[n + k], x = Minv[j] * slab[k];")
            with w.block("for (int m = 1; m < n; ++m)"):
                w.line("const T s = slab[m * n + j];")
                w.line("p += s * D[m * 2 * n + k];")
                w.line("r += s * D[m * 2 * n + n + k];")
                w.line("x += Minv[m * n + j] * slab[m * n + k];")
            w.line("P[e] = p;")
            w.line(f"qv[l * {n2} + e] += r;")
            w.line(f"dM[l * {n2} + e] = x;")
        w.line("sync();")
        w.line(f"if (live) for (int e = rank; e < {n2}; e += team) "
               f"qq[l * {n2} + e] += P[e] + P[(e % n) * n + e / n];")
        w.line("sync();  // the next row restages slab and P")
    w.comment("Fibre by fibre: block[:, j, k] <- -Minv block[:, j, k], in place.")
    with w.block(f"if (live) for (int e = rank; e < {4 * n2}; e += team)"):
        w.line(f"T* const fibre = {blocks} + (e / {n2}) * {n3} + e % {n2};")
        w.line("T t[n];")
        w.line(f"for (int l = 0; l < n; ++l) t[l] = fibre[l * {n2}];")
        with w.block("for (int i = 0; i < n; ++i)"):
            w.line("T acc = Minv[i * n] * t[0];")
            w.line("for (int l = 1; l < n; ++l) acc += Minv[i * n + l] * t[l];")
            w.line(f"fibre[i * {n2}] = -acc;")


def emit_variant(w: Writer, model: RobotModel, algorithm: Algorithm, dims: Dims,
                 head: ThreadItem, head_tiled: str, transform_table: bool,
                 groups: Sequence[ThreadItem] = ()) -> VariantInfo:
    """Tables, steps, kernels and launcher of the gather strategy over the head item
    functions (`build_head_items`; `groups`: the head in groups of bodies,
    `emit.idsva_head_groups`, run by the first kernel and the host where given); the
    module doc says what runs where."""
    name = f"{algorithm.name}_gather"
    fd = algorithm.name == "fdsva_so"
    plan = G.plan(model)
    width = algorithm.output_size(dims)
    turns = len(plan.turns)
    lay = layout(model, fd, turns)
    hsize = lay.head
    team = default_team(width)
    tile = BLOCK // team
    pairs = G.pair_masks(model, plan) if lay.tile else []
    _emit_tables(w, name, model, plan, pairs)
    with w.namespace(f"layout_{name}"):
        w.line(f"constexpr int kHead = {hsize};  // K ({COLUMN_STRIDE} per dof, 52 per body)"
               + (", M^-1, dtau" if fd else ""))
        w.line(f"constexpr int kSize = {lay.size};  // shared scalars per item")
        w.line(f"constexpr int kTeam = {team};  // threads per item by default")
        w.line(f"constexpr int kTile = {tile};  // items per block at kTeam")
        w.line(f"constexpr int kHeadGroups = {max(1, len(groups))};  // the first kernel's "
               "threads per item")
    w.line()
    if pairs:
        _emit_pair(w, name, model)
    _emit_steps(w, name, model, lay, turns, width, fd, len(pairs))
    extra = ["args.transform"] if transform_table else []

    def head_call(fn: str, index: str, out: str) -> str:
        inputs = [input_pointer(algorithm, dims, k, index) for k in range(len(algorithm.inputs))]
        return f"{fn}<T, T>({', '.join([*inputs, 'args.inertia', 'args.gravity', out, *extra])})"

    w.line("#if GRID_IS_CUDA")
    _emit_head_kernel(w, name, tile, width, [g.name for g in groups] or [head_tiled],
                      head_call)
    w.line()
    w.doc("A partial tile's head, on its team's first thread: out of line, so that the\n"
          "straight-line head's registers do not weigh on the second kernel's.")
    w.line("template <typename T>")
    with w.block(f"__device__ __noinline__ void {name}_head_alone(const Args<T> args, "
                 "size_t item, T* H)"):
        w.line(head_call(head.name, "item", "H") + ";")
    w.line()
    blocks = 65536 // (REGISTERS * BLOCK)
    w.doc(f"Second kernel of `{algorithm.name}` (gather strategy): a tile of `blockDim.x /\n"
          "team` items per block, a team of threads per item. `tiled`: the first kernel\n"
          "wrote the heads of whole tiles.")
    w.comment(f"At most {REGISTERS} registers a thread: unbounded, the straight-line head "
              "takes 255, which caps an SM at 8 warps.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void __launch_bounds__({BLOCK}, {blocks}) "
                 f"{name}_kernel(const Args<T> args, int team, bool tiled)"):
        w.line("extern __shared__ __align__(16) unsigned char grid_smem[];")
        w.line("T* const scratch = reinterpret_cast<T*>(grid_smem);")
        w.line("const int tile = (int)blockDim.x / team;")
        w.line("const int j = (int)threadIdx.x / team, rank = (int)threadIdx.x % team;")
        if lay.tile:
            w.comment("The item's offset through an empty asm: nvcc, knowing the items 16-byte "
                      "aligned, would vectorize the turns' loads, which then spill.")
            w.line(f"int offset = j * layout_{name}::kSize;")
            w.line('asm("" : "+r"(offset));')
            w.line("T* const H = scratch + offset;")
        else:
            w.line(f"T* const H = scratch + (size_t)j * layout_{name}::kSize;")
        w.line("const int tiles = (args.batch + tile - 1) / tile;")
        with w.block("for (int t = (int)blockIdx.x; t < tiles; t += (int)gridDim.x)"):
            w.line("const int first = t * tile;")
            w.line("const int count = args.batch - first < tile ? args.batch - first : tile;")
            w.line(f"T* const tile_out = args.out + (size_t)first * {width};")
            with w.block("if (tiled && count == tile)"):
                with w.block(f"for (int k = (int)threadIdx.x; k < tile * {hsize}; "
                             "k += (int)blockDim.x)"):
                    w.line(f"scratch[(size_t)(k % tile) * layout_{name}::kSize + k / tile] = "
                           "tile_out[k];")
            with w.block("else if (j < count && rank == 0)"):
                w.line(f"{name}_head_alone<T>(args, (size_t)(first + j), H);")
            w.line("__syncthreads();  // the heads are in place")
            # (launch_ always passes kTeam, the team `one_warp` asks about)
            sync = "idsva_warp_sync" if one_warp(width) else "idsva_block_sync"
            w.line(f"{name}_steps<T>(H, H + layout_{name}::kHead, tile_out + (size_t)j * "
                   f"{width}, rank, team, j < count, {sync}{{}});")
            w.line("__syncthreads();  // the next tile reuses the scratch")
    w.line("#endif")
    w.line()
    emit_configure(w, name, f"sizeof(T) * layout_{name}::kSize * layout_{name}::kTile",
                   first=(f"{name}_head_kernel",), cuda_only=True)
    w.doc(f"Launch `{algorithm.name}` (gather strategy) on `stream`; `cfg.threads`: threads\n"
          f"per block, a multiple of the team (layout_{name}::kTeam) up to {BLOCK} (default\n"
          f"{BLOCK}); the first kernel runs at the default only.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {BLOCK};")
        w.line(f"const int team = layout_{name}::kTeam;")
        w.line(f"if (threads > {BLOCK} || threads % team != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("const int tile = threads / team;")
        w.line(f"const size_t shared = sizeof(T) * layout_{name}::kSize * tile;")
        w.line("if (args.batch == 0) return GRID_OK;")
        w.comment("The first kernel's layout is the default tile's, and needs the head to fit "
                  "in an item's output.")
        fits = "true" if hsize <= width else "false"
        w.line(f"const bool tiled = {fits} && tile == layout_{name}::kTile && "
               "args.batch >= tile;")
        with w.block("if (tiled)"):
            w.line("const int whole = args.batch / tile * tile;")
            w.comment("A thread per (item, group), the items padded to whole warps.")
            w.line(f"const size_t lanes = (size_t)(layout_{name}::kHeadGroups > 1 ? "
                   "(whole + 31) / 32 * 32 : whole);")
            w.line(f"int blocks = (int)((lanes * layout_{name}::kHeadGroups + "
                   f"{FORWARD_BLOCK - 1}) / {FORWARD_BLOCK});")
            w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
            w.line(f"{name}_head_kernel<T><<<blocks, {FORWARD_BLOCK}, 0, stream>>>(args);")
            w.line("const int rc = launch_status();")
            w.line("if (rc != GRID_OK) return rc;")
        w.line("int blocks = (args.batch + tile - 1) / tile;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"{name}_kernel<T><<<blocks, threads, shared, stream>>>(args, team, tiled);")
        w.line("return launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("const int tiles = args.batch;")
        w.line(f"const int threads = host_threads(cfg.threads, tiles, "
               f"{head.ops + idsva.sweep_operations(model)});")
        with w.block("auto tile = [&args](int item)", "};"):
            w.line(f"heap_row<T> scratch(layout_{name}::kSize);  // g1 in float64: 156 KB")
            w.line("T* const H = scratch.p;")
            if not groups:
                w.line(head_call(head.name, "(size_t)item", "H") + ";")
            elif tile == 1:
                for g in groups:
                    w.line(head_call(g.name, "(size_t)item", "H") + ";")
            else:
                w.comment(f"The groups write entry e at {tile} e (the first kernel's layout).")
                w.line(f"heap_row<T> staged((size_t){tile} * {hsize});")
                for g in groups:
                    w.line(head_call(g.name, "(size_t)item", "staged.p") + ";")
                w.line(f"for (int e = 0; e < {hsize}; ++e) H[e] = staged.p[(size_t){tile} * e];")
            w.line(f"{name}_steps<T>(H, H + layout_{name}::kHead, args.out + (size_t)item * "
                   f"{width}, 0, 1, true, idsva_no_sync{{}});")
        emit_tile_loop(w)
        w.line("#endif")
    w.line()
    return VariantInfo("gather", BLOCK, BLOCK, tile, f"{name}_shared_bytes<T>()", head.ops)


def _emit_head_kernel(w: Writer, name: str, tile: int, width: int, heads: Sequence[str],
                      head_call: Callable[[str, str, str], str]) -> None:
    """The first kernel: the heads of the items of whole tiles into the head of their
    tile's output, one thread per item; with the head in groups of bodies
    (`emit.idsva_head_groups`, several `heads`) one per (item, group), group-major with
    the items padded to whole warps, so that a warp runs one group's code."""
    grouped = len(heads) > 1
    w.doc(f"First kernel of `{name}`: the heads of the items of whole tiles of {tile} items\n"
          f"into the head of their tile's output (entry k of item j at tile * width + {tile} k"
          " + j),\n" + (f"one thread per (item, group of bodies), {len(heads)} groups "
                        "(emit.idsva_head_groups)." if grouped else "one item per thread."))
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({FORWARD_BLOCK}) "
                 f"{name}_head_kernel(const Args<T> args)"):
        w.line(f"const size_t whole = (size_t)(args.batch / {tile}) * {tile};")
        step = "+= (size_t)blockDim.x * gridDim.x)"
        out = f"T* const out = args.out + (i / {tile}) * {tile * width} + i % {tile};"
        if not grouped:
            with w.block(f"for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; "
                         f"i < whole; i {step}"):
                w.line(out)
                w.line(head_call(heads[0], "i", "out") + ";")
            return
        w.line("const size_t lanes = (whole + 31) / 32 * 32;")
        with w.block(f"for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; "
                     f"t < lanes * {len(heads)}; t {step}"):
            w.line("const size_t i = t % lanes;")
            w.line("if (i >= whole) continue;")
            w.line(out)
            with w.block("switch ((int)(t / lanes))"):
                for k, fn in enumerate(heads):
                    w.line(f"case {k}: {head_call(fn, 'i', 'out')}; break;")
                w.line("default: break;")


__all__ = ["FORWARD_BLOCK", "REGISTERS", "build_head_items", "emit_variant"]
