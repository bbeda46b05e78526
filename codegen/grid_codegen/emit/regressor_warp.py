"""The warp strategy of `inverse_dynamics_regressor`: one item per warp, its output written
row by row in coalesced stores.

The regressor is wide (`nv x 10 nb`: g1's is 10,500 scalars) and a thread that writes a
whole item puts its warp's 32 stores a row apart, one memory transaction per scalar (21x
the output-write bound on an H200). Here a warp shares the item instead:

* a traced pass (`symbolic.centroidal.regressor_world_terms`) gives the item's terms: the
  world motion subspace `oS_r` of every dof and, per body, its world placement and
  body-frame twist and acceleration. It is split into groups of bodies (a limb each,
  `terms_groups`), one thread each: one thread of g1's whole terms is a ~3k-operation
  straight line whose latency alone took 70 us. On the GPU a first kernel runs them, one
  (item, group) per thread, into the head of the output of each tile of TILE items,
  interleaved by item so that a warp's stores fill whole sectors without staging; a block
  of the second kernel takes a tile, its warps one item each, the terms in shared memory;
* lane `l` owns the columns `l + 32 m` (`m < M`): for each it forms the body force of the
  unit parameter, `F_kc = I_c a_k + v_k x* (I_c v_k)`, and takes it to the world;
* row by row, every lane writes `Y[r, col] = oS_r . F_kc` (0 unless body k hangs below
  dof r's joint): one warp store covers 32 consecutive scalars of a row.

Bodies are numbered depth first, so the bodies below a joint are a range of columns, and a
chunk of 32 columns outside it stores zeros without arithmetic. The rows are a loop, not
straight-line code: unrolled, the kernel's tens of KB of instructions are fetched cold by
every SM, which costs more than the loop. The host build runs the same item serially, lane
after lane.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid_codegen import transforms as T
from grid_codegen.emit.kernels import (
    THREAD_BLOCK,
    THREAD_MAX_BLOCK,
    WARP_MAX_BLOCK,
    VariantInfo,
    emit_configure,
    emit_tile_loop,
    input_pointer,
)
from grid_codegen.emit.thread import ThreadItem, _Plan, item_params
from grid_codegen.emit.writer import Writer
from grid_codegen.joint_dynamics import JointDynamics
from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm, Dims
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import centroidal as C
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

NAME = "inverse_dynamics_regressor"
LANES = 32


def applicable(model: RobotModel, algorithms: tuple[str, ...], strategy: str) -> bool:
    """Built with `strategy="auto"` on models without mimic couplings whose regressor is
    at least as wide as its terms (the first kernel keeps them in the output) and whose
    bodies are numbered depth first (as `grid_codegen.urdf` numbers them), so that a
    subtree is a range of bodies."""
    return (NAME in algorithms and strategy == "auto" and model.coupling is None
            and 10 * model.nb * model.nv >= terms_width(model)
            and _subtree_columns(model) is not None)


def terms_width(model: RobotModel) -> int:
    return 6 * model.nv + C.REGRESSOR_BODY_TERMS * model.nb


MAX_GROUPS = 8
"""The most groups the terms are split into (`terms_groups`)."""


BLOCK = WARP_MAX_BLOCK
TILE = BLOCK // LANES
"""Items per tile: the terms kernel interleaves the terms of `TILE` consecutive items
(entry `k` of item `j` at `TILE k + j` from the tile's first output), the rows kernel's
block (one warp per item) takes a tile at a time."""


@dataclass(frozen=True)
class TermsGroup:
    """The terms of the bodies `[b0, b1)` and their dofs `[v0, v1)`, written where
    `regressor_world_terms` puts them by the item function `item` (contiguous) and
    `tiled` (interleaved by TILE, the terms kernel's)."""

    item: ThreadItem
    tiled: str
    bodies: tuple[int, int]
    dofs: tuple[int, int]


def _picks(model: RobotModel, bodies: tuple[int, int], dofs: tuple[int, int]) -> list[int]:
    """The group's entries, as indices of `regressor_world_terms`."""
    (b0, b1), (v0, v1) = bodies, dofs
    body = 6 * model.nv
    return [*range(6 * v0, 6 * v1), *range(body + C.REGRESSOR_BODY_TERMS * b0,
                                           body + C.REGRESSOR_BODY_TERMS * b1)]


@dataclass(frozen=True)
class Terms:
    groups: tuple[TermsGroup, ...]

    @property
    def ops(self) -> int:
        """The longest group's operations (the terms kernel's latency)."""
        return max(g.item.ops for g in self.groups)

    @property
    def work(self) -> int:
        """Every group's operations (the ancestors they share counted once per group)."""
        return sum(g.item.ops for g in self.groups)


def terms_groups(model: RobotModel) -> list[tuple[int, int]]:
    """The body ranges `[b0, b1)` the terms are split into, one thread each (a thread of
    one item computing them all is a ~3k-operation straight line for g1, whose latency
    alone took ~70 us). A group is a run of bodies from a branch point down to a leaf
    (the depth-first numbering makes it a range), merged with its neighbours while the
    bodies it must trace (the range and its ancestors) stay within the longest such run;
    at most MAX_GROUPS. One group on a chain."""
    nb = model.nb
    parents = [joint.parent for joint in model.joints]

    def traced(b0: int, b1: int) -> int:
        need: set[int] = set()
        for b in range(b0, b1):
            while b >= 0 and b not in need:
                need.add(b)
                b = parents[b]
        return len(need)

    runs, start = [], 0
    for b in range(nb):
        if not model.children[b]:
            runs.append((start, b + 1))
            start = b + 1
    if start != nb or not runs:
        return [(0, nb)]
    limit = max(traced(*r) for r in runs)
    groups = [runs[0]]
    for b0, b1 in runs[1:]:
        if traced(groups[-1][0], b1) <= limit:
            groups[-1] = (groups[-1][0], b1)
        else:
            groups.append((b0, b1))
    while len(groups) > MAX_GROUPS:
        k = min(range(len(groups) - 1), key=lambda k: traced(groups[k][0], groups[k + 1][1]))
        groups[k:k + 2] = [(groups[k][0], groups[k + 1][1])]
    return groups


def _group_dofs(model: RobotModel, b0: int, b1: int) -> tuple[int, int] | None:
    """The dofs `[v0, v1)` of the bodies `[b0, b1)`, None where they are not a range."""
    joints = model.joints[b0:b1]
    v = joints[0].idx_v
    for joint in joints:
        if joint.idx_v != v:
            return None
        v += joint.nv
    return joints[0].idx_v, v


def build_terms(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                joint_dynamics: JointDynamics | None, runtime_transform: bool) -> Terms:
    """The item functions of the terms, one per group (`terms_groups`): each traces
    `regressor_world_terms` from `q` and keeps its own entries, so the transforms and
    recursions of other branches are dead code and not emitted."""
    ranges = terms_groups(model)
    dofs = [_group_dofs(model, b0, b1) for b0, b1 in ranges]
    if None in dofs:
        ranges, dofs = [(0, model.nb)], [(0, model.nv)]
    width = terms_width(model)
    joint_table = bool(joint_dynamics and joint_dynamics.runtime)
    params = item_params(algorithm, dims, joint_table, runtime_transform)

    def terms(q, qd, qdd, *rest):  # rest: the transform table (if any), I, gravity
        *table, _, gravity = rest
        origins = T.origins(model, table[0]) if table else None
        X = A.joint_transforms(model, q, origins)
        return C.regressor_world_terms(model, X, qd, qdd, gravity)

    plan = _Plan(model, ee_frames, runtime_inertia, library, joint_dynamics,
                 runtime_transform)
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    groups = []
    for k, (bodies, span) in enumerate(zip(ranges, dofs, strict=True)):
        picks = _picks(model, bodies, span)
        names, ops = [], 0
        for stride, suffix in ((1, ""), (TILE, "_tiled")):
            kb = ItemBuilder(library)
            b0, b1 = bodies
            plan.dynamics_call(
                kb, f"regressor_world_terms_{k}{suffix}", f"Bodies {b0}..{b1 - 1} of the "
                "regressor's warp strategy: the world motion subspace of their dofs, then "
                "per body its world placement, twist and acceleration"
                + (f" (entry k at out[{TILE} k])." if stride > 1 else "."),
                terms, [ports["q"], ports["qd"], ports["qdd"], *plan.transform_array()],
                Array.runtime("out", width, "out"), write=picks, out_stride=stride)
            item = f"{NAME}_warp_terms{suffix}_{k}"
            kb.emit_item_function(w, item, f"Group {k} of the terms of the regressor's warp "
                                  "strategy (`emit.regressor_warp.terms_groups`)"
                                  + (f", interleaved by {TILE} items." if stride > 1 else "."),
                                  params)
            w.line()
            names.append(item)
            ops = kb.total_ops
        groups.append(TermsGroup(ThreadItem(names[0], ops), names[1], bodies, span))
    # The longest first: the first wave of the terms kernel's blocks takes them.
    groups.sort(key=lambda g: -g.item.ops)
    return Terms(tuple(groups))


def _subtree_columns(model: RobotModel) -> list[tuple[int, int]] | None:
    """Per body the columns `[10 j, 10 (j + n))` of the `n` bodies of its subtree, which
    the depth-first numbering of `grid_codegen.urdf` makes a range; None where a subtree
    is not one."""
    out = []
    for j, subtree in enumerate(model.subtrees):
        if subtree != tuple(range(j, j + len(subtree))):
            return None
        out.append((10 * j, 10 * (j + len(subtree))))
    return out


def _emit_unit_force(w: Writer) -> None:
    w.doc("World force of body `b`'s unit parameter `c` (Pinocchio's order): F = I_c a +\n"
          "v x* (I_c v) in the body frame, then [R f; R n + p x R f]. `b`: R (9), p (3),\n"
          "v (6), a (6), as `regressor_world_terms` writes them.")
    w.line("template <typename T>")
    with w.block("GRID_HOST_DEVICE inline void regressor_unit_force(const T* GRID_RESTRICT b, "
                 "int c, T* GRID_RESTRICT f)"):
        w.line("const T* R = b; const T* p = b + 9; const T* v = b + 12; const T* a = b + 18;")
        w.line("T P[10];")
        w.line("for (int k = 0; k < 10; ++k) P[k] = k == c ? T(1) : T(0);")
        w.comment("I x = [m x_lin - h x x_ang; h x x_lin + I0 x_ang], I0 = [[4 5 7] [5 6 8] "
                  "[7 8 9]]")
        with w.block("auto apply = [&P](const T* x, T* y)", "};"):
            w.line("y[0] = P[0] * x[0] - (P[2] * x[5] - P[3] * x[4]);")
            w.line("y[1] = P[0] * x[1] - (P[3] * x[3] - P[1] * x[5]);")
            w.line("y[2] = P[0] * x[2] - (P[1] * x[4] - P[2] * x[3]);")
            w.line("y[3] = P[2] * x[2] - P[3] * x[1] + P[4] * x[3] + P[5] * x[4] + P[7] * x[5];")
            w.line("y[4] = P[3] * x[0] - P[1] * x[2] + P[5] * x[3] + P[6] * x[4] + P[8] * x[5];")
            w.line("y[5] = P[1] * x[1] - P[2] * x[0] + P[7] * x[3] + P[8] * x[4] + P[9] * x[5];")
        w.line("T Ia[6], Iv[6];")
        w.line("apply(a, Ia);")
        w.line("apply(v, Iv);")
        w.comment("v x* Iv = [w x Iv_lin; v_lin x Iv_lin + w x Iv_ang]")
        w.line("T F[6];")
        w.line("F[0] = Ia[0] + v[4] * Iv[2] - v[5] * Iv[1];")
        w.line("F[1] = Ia[1] + v[5] * Iv[0] - v[3] * Iv[2];")
        w.line("F[2] = Ia[2] + v[3] * Iv[1] - v[4] * Iv[0];")
        w.line("F[3] = Ia[3] + v[1] * Iv[2] - v[2] * Iv[1] + v[4] * Iv[5] - v[5] * Iv[4];")
        w.line("F[4] = Ia[4] + v[2] * Iv[0] - v[0] * Iv[2] + v[5] * Iv[3] - v[3] * Iv[5];")
        w.line("F[5] = Ia[5] + v[0] * Iv[1] - v[1] * Iv[0] + v[3] * Iv[4] - v[4] * Iv[3];")
        with w.block("for (int r = 0; r < 3; ++r)"):
            w.line("f[r] = R[3 * r] * F[0] + R[3 * r + 1] * F[1] + R[3 * r + 2] * F[2];")
            w.line("f[3 + r] = R[3 * r] * F[3] + R[3 * r + 1] * F[4] + R[3 * r + 2] * F[5];")
        w.line("f[3] += p[1] * f[2] - p[2] * f[1];")
        w.line("f[4] += p[2] * f[0] - p[0] * f[2];")
        w.line("f[5] += p[0] * f[1] - p[1] * f[0];")
    w.line()


def _emit_columns(w: Writer, model: RobotModel) -> None:
    """`<NAME>_warp_columns(terms, out, lane)`: lane `lane`'s columns of every row."""
    nv, cols = model.nv, 10 * model.nb
    M = (cols + LANES - 1) // LANES
    columns = _subtree_columns(model)
    if columns is None:
        raise AssertionError("the regressor's warp strategy needs subtrees that are ranges")
    dof_joint = [0] * nv
    for j, joint in enumerate(model.joints):
        dof_joint[joint.idx_v:joint.idx_v + joint.nv] = [j] * joint.nv
    w.doc("`(lo << 16) | hi`: the columns [lo, hi) of the bodies below dof `r`'s joint.")
    with w.block(f"GRID_HOST_DEVICE inline int {NAME}_warp_row_columns(int r)"):
        with w.block("switch (r)"):
            for r in range(nv):
                lo, hi = columns[dof_joint[r]]
                w.line(f"case {r}: return {lo} << 16 | {hi};")
            w.line("default: return 0;")
    w.line()
    w.doc(f"Lane `lane`'s columns (lane + 32 m, m < {M}) of every row of one item's\n"
          "regressor, from the terms lane 0 wrote (`regressor_world_terms`).")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE inline void {NAME}_warp_columns(const T* GRID_RESTRICT "
                 "terms, T* GRID_RESTRICT out, int lane)"):
        w.line(f"constexpr int kCols = {cols};")
        w.line(f"T F[{M}][6];")
        w.line("#pragma unroll")
        with w.block(f"for (int m = 0; m < {M}; ++m)"):
            w.line("const int col = lane + 32 * m;")
            w.line("for (int e = 0; e < 6; ++e) F[m][e] = T(0);")
            with w.block("if (col < kCols)"):
                w.line("const int k = col / 10;")
                w.line(f"regressor_unit_force(terms + {6 * nv} + "
                       f"{C.REGRESSOR_BODY_TERMS} * k, col - 10 * k, F[m]);")
        w.comment("Rows in a loop (straight-line rows would be tens of KB of code, fetched")
        w.comment("cold by every SM): the columns of the bodies below dof r's joint are")
        w.comment("[lo, hi), and a chunk of 32 that misses them stores zeros without arithmetic.")
        w.line("#pragma unroll 1")
        with w.block(f"for (int r = 0; r < {nv}; ++r)"):
            w.line(f"const int range = {NAME}_warp_row_columns(r);")
            w.line("const int lo = range >> 16, hi = range & 0xffff;")
            w.line("const T* s = terms + 6 * r;")
            w.line("const T s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5];")
            w.line("T* o = out + (size_t)r * kCols + lane;")
            w.line("#pragma unroll")
            with w.block(f"for (int m = 0; m < {M}; ++m)"):
                w.line("const int c0 = 32 * m, col = c0 + lane;")
                w.line("T value = T(0);")
                with w.block("if (c0 < hi && c0 + 32 > lo && col >= lo && col < hi)"):
                    w.line("value = s0 * F[m][0] + s1 * F[m][1] + s2 * F[m][2] + "
                           "s3 * F[m][3] + s4 * F[m][4] + s5 * F[m][5];")
                w.line("if (col < kCols) o[c0] = value;")
    w.line()


def _emit_groups(w: Writer, terms: Terms, inputs: list[str], extra: list[str]) -> None:
    """`<NAME>_warp_group_terms<T>(g, ..., s)`: group g's terms of one item into `s`;
    `<NAME>_warp_group_terms_tiled<T>` (CUDA): the same interleaved by TILE items."""
    params = ", ".join(f"const T* GRID_RESTRICT {name}" for name in inputs)
    call = ", ".join([*inputs, "args.inertia", "args.gravity", "s", *extra])
    for suffix, cuda in (("", False), ("_tiled", True)):
        if cuda:
            w.line("#if GRID_IS_CUDA")
        w.doc("Group `g`'s terms of one item into `s` (`regressor_world_terms`' layout"
              + (f",\nentry k at s[{TILE} k])." if cuda else ")."))
        w.line("template <typename T>")
        with w.block(f"GRID_HOST_DEVICE inline void {NAME}_warp_group_terms{suffix}(int g, "
                     f"{params}, const Args<T>& args, T* GRID_RESTRICT s)"):
            with w.block("switch (g)"):
                for k, group in enumerate(terms.groups):
                    label = "default" if k == len(terms.groups) - 1 else f"case {k}"
                    item = group.tiled if cuda else group.item.name
                    w.line(f"{label}: {item}<T, T>({call}); return;")
        if cuda:
            w.line("#endif")
        w.line()


def _emit_terms_kernel(w: Writer, inputs: list[str], out_width: int) -> None:
    """The first kernel: thread (item, group `blockIdx.y`) of the items of whole tiles
    writes the group's terms into the head of the tile's output, interleaved by TILE: a
    warp's store covers whole 32-byte sectors (TILE consecutive items), with no row on
    the stack and no staging."""
    name = f"{NAME}_warp"
    w.doc(f"First kernel of `{NAME}` (warp strategy): the terms of one item and group per\n"
          f"thread (the group is `blockIdx.y`), interleaved by {TILE} items into the head of\n"
          "their tile's output; the items of whole tiles only.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({THREAD_MAX_BLOCK}) "
                 f"{name}_terms_kernel(const Args<T> args)"):
        w.line(f"const size_t tiled = (size_t)(args.batch / {TILE}) * {TILE};")
        w.line("const int group = (int)blockIdx.y;")
        with w.block("for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; "
                     "i < tiled; i += (size_t)blockDim.x * gridDim.x)"):
            w.line(f"T* s = args.out + (i / {TILE}) * {TILE * out_width} + i % {TILE};")
            w.line(f"{name}_group_terms_tiled<T>(group, {', '.join(inputs)}, args, s);")
    w.line()


def _emit_rows_kernels(w: Writer, width: int, out_width: int) -> None:
    """The second kernel, one tile per block and one item per warp (see the module doc),
    and the one of a last, partial tile, whose warps compute their own terms."""
    name = f"{NAME}_warp"
    w.doc(f"Second kernel of `{NAME}` (warp strategy): one whole tile of {TILE} items per\n"
          "block, one item per warp: the tile's terms moved to shared memory (one item's\n"
          "after another), then every row over them.")
    w.line("template <typename T>")
    # Two blocks per SM: 128 registers, 16 warps in flight to keep the stores streaming
    # (unbounded, ptxas takes ~176 and halves the warps).
    with w.block(f"GRID_KERNEL void __launch_bounds__({BLOCK}, 2) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line("const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);")
        w.line(f"GRID_WARP_SCRATCH(T, s, {width});")
        w.line("T* GRID_RESTRICT tile_terms = reinterpret_cast<T*>(grid_smem);")
        w.line(f"const int tiles = args.batch / {TILE};")
        with w.block("for (int tile = (int)blockIdx.x; tile < tiles; tile += (int)gridDim.x)"):
            w.line(f"T* GRID_RESTRICT out = args.out + (size_t)tile * {TILE * out_width};")
            with w.block(f"for (int k = (int)threadIdx.x; k < {TILE * width}; "
                         "k += (int)blockDim.x)"):
                w.line(f"tile_terms[(k % {TILE}) * {width} + k / {TILE}] = out[k];")
            w.line("__syncthreads();  // the tile's terms are read before rows overwrite them")
            w.line(f"{name}_columns<T>(s, out + (size_t)warp * {out_width}, lane);")
            w.line("__syncthreads();  // the next tile reuses the scratch")
    w.line()
    w.doc(f"Kernel of the items from `first` on of `{NAME}` (warp strategy): one item per\n"
          "warp, its terms computed on its first lanes (a last, partial tile; every item\n"
          f"where a launch is not {BLOCK} threads wide).")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void __launch_bounds__({BLOCK}) "
                 f"{name}_rest_kernel(const Args<T> args, int first)"):
        w.line(f"GRID_WARP_SCRATCH(T, s, {width});")
        with w.block("for (int item = first + (int)(blockIdx.x * (blockDim.x >> 5) + "
                     "(threadIdx.x >> 5)); item < args.batch; "
                     "item += (int)(gridDim.x * (blockDim.x >> 5)))"):
            w.line(f"{name}_item<T>(s, args, item);")
            w.line("__syncwarp();  // the next item reuses the scratch")
    w.line()


def emit_variant(w: Writer, model: RobotModel, algorithm: Algorithm, dims: Dims,
                 terms: Terms, joint_table: bool, transform_table: bool) -> VariantInfo:
    """Item function, kernels and launcher of the warp strategy (see the module doc);
    `terms`: the item functions of the terms (`build_terms`).

    On the GPU the launcher runs two kernels: the terms of the whole tiles, one (item,
    group) per thread, into the head of each tile's output, then one tile per block and
    one item per warp: the terms into shared memory, the rows over them. The one-warp
    form `<name>_item` (the device API's, a last partial tile's, the host's) computes the
    groups on its first lanes instead."""
    name = f"{NAME}_warp"
    width = terms_width(model)
    out_width = algorithm.output_size(dims)
    if out_width < width:
        raise ValueError(f"{NAME}: the warp strategy keeps its terms in the output "
                         f"({out_width} < {width} scalars)")
    extra = ["args.joint_dynamics"] if joint_table else []
    if transform_table:
        extra.append("args.transform")
    groups = len(terms.groups)
    names = [p.name for p in algorithm.inputs]
    _emit_unit_force(w)
    _emit_columns(w, model)
    _emit_groups(w, terms, names, extra)
    with w.namespace(f"layout_{name}"):
        w.line(f"constexpr int kSize = {width};  // the terms of one item")
        w.line(f"constexpr int kGroups = {groups};  // threads of one item's terms")
    w.line()
    inputs = [input_pointer(algorithm, dims, k, "(size_t)item")
              for k in range(len(algorithm.inputs))]
    w.doc(f"`{NAME}` of item `item` by the 32 lanes of one warp (the terms' groups on the\n"
          f"first lanes); `s`: layout_{name}::kSize scalars of shared memory. The caller\n"
          "syncs the warp before reusing `s`.")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE void {name}_item(T* GRID_RESTRICT s, const Args<T>& args, "
                 "int item)"):
        for port, pointer in zip(names, inputs, strict=True):
            w.line(f"const T* {port} = {pointer};")
        w.line("#if defined(__CUDA_ARCH__)")
        w.line("const int lane = (int)(threadIdx.x & 31u);")
        w.line(f"if (lane < {groups}) {name}_group_terms<T>(lane, {', '.join(names)}, args, s);")
        w.line("__syncwarp();")
        w.line(f"{name}_columns<T>(s, args.out + (size_t)item * {out_width}, lane);")
        w.line("#else")
        w.line(f"for (int g = 0; g < {groups}; ++g) "
               f"{name}_group_terms<T>(g, {', '.join(names)}, args, s);")
        w.line(f"for (int lane = 0; lane < {LANES}; ++lane) "
               f"{name}_columns<T>(s, args.out + (size_t)item * {out_width}, lane);")
        w.line("#endif")
    w.line()
    w.line("#if GRID_IS_CUDA")
    _emit_terms_kernel(w, [input_pointer(algorithm, dims, k, "i")
                           for k in range(len(algorithm.inputs))], out_width)
    _emit_rows_kernels(w, width, out_width)
    w.line("#endif")
    emit_configure(w, name, f"sizeof(T) * {width} * {TILE}",
                   first=(f"{name}_terms_kernel",), cuda_only=True,
                   also=(f"{name}_rest_kernel",))
    w.doc(f"Launch `{NAME}` (warp strategy) on `stream`: at {BLOCK} threads (the default),\n"
          f"a block per tile of {TILE} items; at another width one item per warp throughout.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {BLOCK};")
        w.line(f"if (threads > {BLOCK} || threads % 32 != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (args.batch == 0) return GRID_OK;")
        w.comment(f"Whole tiles where a block is one ({BLOCK} threads), then the rest")
        w.line(f"const int tiles = threads == {BLOCK} ? args.batch / {TILE} : 0;")
        with w.block("if (tiles > 0)"):
            w.line(f"int blocks = (tiles * {TILE} + {THREAD_BLOCK} - 1) / {THREAD_BLOCK};")
            w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
            w.line(f"{name}_terms_kernel<T><<<dim3(blocks, {groups}), {THREAD_BLOCK}, 0, "
                   "stream>>>(args);")
            w.line("int rc = launch_status();")
            w.line("if (rc != GRID_OK) return rc;")
            w.line("blocks = cfg.max_blocks > 0 && tiles > cfg.max_blocks ? cfg.max_blocks "
                   ": tiles;")
            w.line(f"{name}_kernel<T><<<blocks, {BLOCK}, "
                   f"{name}_shared_bytes<T>(), stream>>>(args);")
            w.line("rc = launch_status();")
            w.line("if (rc != GRID_OK) return rc;")
        w.line(f"const int first = tiles * {TILE}, per_block = threads / 32;")
        w.line("if (first == args.batch) return GRID_OK;")
        w.line("int blocks = (args.batch - first + per_block - 1) / per_block;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"{name}_rest_kernel<T><<<blocks, threads, sizeof(T) * {width} * per_block, "
               "stream>>>(args, first);")
        w.line("return launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("const int tiles = args.batch;")
        w.line(f"const int threads = host_threads(cfg.threads, tiles, {terms.work});")
        with w.block("auto tile = [&args](int item)", "};"):
            w.line(f"T s[{width}];")
            w.line(f"{name}_item<T>(s, args, item);")
        emit_tile_loop(w)
        w.line("#endif")
    w.line()
    return VariantInfo("warp", BLOCK, BLOCK, TILE,
                       f"{name}_shared_bytes<T>()", terms.ops)


def lane_ops(model: RobotModel) -> int:
    """Operations of one lane of the warp strategy (for the dispatch cost model): its
    columns' forces (~100 each) and every row's pairings (~8 per column)."""
    M = (10 * model.nb + LANES - 1) // LANES
    return M * 100 + model.nv * (6 + 8 * M)
