"""The warp strategy of `inverse_dynamics_regressor`: one item per warp, its output written
row by row in coalesced stores.

The regressor is wide (`nv x 10 nb`: g1's is 10,500 scalars) and a thread that writes a
whole item puts its warp's 32 stores a row apart, one memory transaction per scalar (21x
the output-write bound on an H200). Here a warp shares the item instead:

* a traced pass (`symbolic.centroidal.regressor_world_terms`) gives the item's terms: the
  world motion subspace `oS_r` of every dof and, per body, its world placement and
  body-frame twist and acceleration. On the GPU a first kernel runs it one item per
  thread into the head of each item's output; the warp then moves them to shared memory;
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

from grid_codegen.emit.kernels import (
    THREAD_BLOCK,
    THREAD_MAX_BLOCK,
    WARP_BLOCK,
    WARP_MAX_BLOCK,
    VariantInfo,
    emit_configure,
    emit_staged_loop,
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


def build_terms_item(library: PassLibrary, model: RobotModel, ee_frames: tuple,
                     runtime_inertia: bool, algorithm: Algorithm, dims: Dims, w: Writer,
                     joint_dynamics: JointDynamics | None, runtime_transform: bool
                     ) -> ThreadItem:
    """The item function of the terms: `regressor_world_terms` of one item into `out`."""
    plan = _Plan(model, ee_frames, runtime_inertia, library, joint_dynamics,
                 runtime_transform)
    kb = ItemBuilder(library)
    ports = {p.name: Array.runtime(p.name, p.width(dims), "item", not p.required)
             for p in algorithm.inputs}
    out = Array.runtime("out", terms_width(model), "out")
    X = plan.transforms(kb, ports["q"])
    plan.dynamics_call(
        kb, "regressor_world_terms", "World motion subspace, then per body its world "
        "placement, twist and acceleration (the regressor's warp strategy).",
        lambda x, qd, qdd, I, g: C.regressor_world_terms(
            model, A.unflatten_placements(x, model.nb), qd, qdd, g),
        [X, ports["qd"], ports["qdd"]], out)
    item = f"{NAME}_warp_terms"
    joint_table = bool(joint_dynamics and joint_dynamics.runtime)
    kb.emit_item_function(w, item, "The per-item terms of the regressor's warp strategy.",
                          item_params(algorithm, dims, joint_table, runtime_transform))
    return ThreadItem(item, kb.total_ops)


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


def emit_variant(w: Writer, model: RobotModel, algorithm: Algorithm, dims: Dims,
                 terms: ThreadItem, joint_table: bool, transform_table: bool) -> VariantInfo:
    """Item function, kernels and launcher of the warp strategy (see the module doc);
    `terms`: the item function of the terms (`build_terms_item`).

    On the GPU the launcher runs two kernels: the terms one item per thread (their stores
    staged, `emit.kernels.emit_staged_loop`) into the head of each item's output, then one
    item per warp: the terms into shared memory, the rows over them. The device API's
    one-warp form (`<name>_item`) computes the terms on lane 0 instead."""
    name = f"{NAME}_warp"
    width = terms_width(model)
    out_width = algorithm.output_size(dims)
    if out_width < width:
        raise ValueError(f"{NAME}: the warp strategy keeps its terms in the output "
                         f"({out_width} < {width} scalars)")
    extra = ["args.joint_dynamics"] if joint_table else []
    if transform_table:
        extra.append("args.transform")
    _emit_unit_force(w)
    _emit_columns(w, model)
    with w.namespace(f"layout_{name}"):
        w.line(f"constexpr int kSize = {width};  // the terms of one item")
    w.line()
    inputs = [input_pointer(algorithm, dims, k, "(size_t)item")
              for k in range(len(algorithm.inputs))]
    call = [*inputs, "args.inertia", "args.gravity", "s", *extra]
    w.doc(f"`{NAME}` of item `item` by the 32 lanes of one warp (the terms on lane 0);\n"
          f"`s`: layout_{name}::kSize scalars of shared memory. The caller syncs the warp\n"
          "before reusing `s`.")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE void {name}_item(T* GRID_RESTRICT s, const Args<T>& args, "
                 "int item)"):
        w.line("#if defined(__CUDA_ARCH__)")
        w.line("const int lane = (int)(threadIdx.x & 31u);")
        w.line(f"if (lane == 0) {terms.name}<T, T>({', '.join(call)});")
        w.line("__syncwarp();")
        w.line(f"{name}_columns<T>(s, args.out + (size_t)item * {out_width}, lane);")
        w.line("#else")
        w.line(f"{terms.name}<T, T>({', '.join(call)});")
        w.line(f"for (int lane = 0; lane < {LANES}; ++lane) "
               f"{name}_columns<T>(s, args.out + (size_t)item * {out_width}, lane);")
        w.line("#endif")
    w.line()
    w.line("#if GRID_IS_CUDA")
    w.doc(f"First kernel of `{NAME}` (warp strategy): the terms of one item per thread,\n"
          "into the head of the item's output.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({THREAD_MAX_BLOCK}) "
                 f"{name}_terms_kernel(const Args<T> args)"):
        w.line("const int batch = args.batch;")
        emit_staged_loop(w, terms.name, [input_pointer(algorithm, dims, k, "i")
                                         for k in range(len(algorithm.inputs))],
                         extra, width, out_width)
    w.line()
    w.doc(f"Second kernel of `{NAME}` (warp strategy): one item per warp, its terms\n"
          "moved to shared memory, then every row over them.")
    w.line("template <typename T>")
    # Two blocks of the widest launch per SM: 128 registers, 16 warps in flight to keep
    # the stores streaming (unbounded, ptxas takes ~176 and halves the warps).
    with w.block(f"GRID_KERNEL void __launch_bounds__({WARP_MAX_BLOCK}, 2) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line("const int batch = args.batch;")
        w.line("const int lane = (int)(threadIdx.x & 31u);")
        with w.block("GRID_WARP_ITEM_LOOP(item, batch)"):
            w.line(f"GRID_WARP_SCRATCH(T, s, {width});")
            w.line(f"T* GRID_RESTRICT out = args.out + (size_t)item * {out_width};")
            w.line(f"for (int k = lane; k < {width}; k += 32) s[k] = out[k];")
            w.line("__syncwarp();  // every lane has read the terms before rows overwrite them")
            w.line(f"{name}_columns<T>(s, out, lane);")
            w.line("__syncwarp();  // the next item reuses the scratch")
    w.line()
    w.line("#endif")
    emit_configure(w, name, f"sizeof(T) * {width} * {WARP_BLOCK // LANES}",
                   first=(f"{name}_terms_kernel",), cuda_only=True)
    w.doc(f"Launch `{NAME}` (warp strategy) on `stream`.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line("#if GRID_IS_CUDA")
        w.line(f"const int threads = cfg.threads > 0 ? cfg.threads : {WARP_BLOCK};")
        w.line(f"if (threads > {WARP_MAX_BLOCK} || threads % 32 != 0) "
               "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (args.batch == 0) return GRID_OK;")
        w.line("const int per_block = threads / 32;")
        w.line(f"const size_t shared = sizeof(T) * {width} * per_block;")
        w.line("int blocks = (args.batch + per_block - 1) / per_block;")
        with w.block(f"if (shared > {name}_shared_bytes<T>())"):
            w.line(f"const int rc = opt_in_shared({name}_kernel<T>, shared);")
            w.line("if (rc != GRID_OK) return rc;")
        w.line("if (cfg.max_blocks > 0 && blocks > cfg.max_blocks) blocks = cfg.max_blocks;")
        w.line(f"int term_blocks = (args.batch + {THREAD_BLOCK} - 1) / {THREAD_BLOCK};")
        w.line("if (cfg.max_blocks > 0 && term_blocks > cfg.max_blocks) "
               "term_blocks = cfg.max_blocks;")
        w.line(f"{name}_terms_kernel<T><<<term_blocks, {THREAD_BLOCK}, 0, stream>>>(args);")
        w.line("const int rc = launch_status();")
        w.line("if (rc != GRID_OK) return rc;")
        w.line(f"{name}_kernel<T><<<blocks, threads, shared, stream>>>(args);")
        w.line("return launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("const int tiles = args.batch;")
        w.line(f"const int threads = host_threads(cfg.threads, tiles, {terms.ops});")
        with w.block("auto tile = [&args](int item)", "};"):
            w.line(f"T s[{width}];")
            w.line(f"{name}_item<T>(s, args, item);")
        emit_tile_loop(w)
        w.line("#endif")
    w.line()
    return VariantInfo("warp", WARP_BLOCK, WARP_MAX_BLOCK, WARP_BLOCK // LANES,
                       f"{name}_shared_bytes<T>()", terms.ops)


def lane_ops(model: RobotModel) -> int:
    """Operations of one lane of the warp strategy (for the dispatch cost model): its
    columns' forces (~100 each) and every row's pairings (~8 per column)."""
    M = (10 * model.nb + LANES - 1) // LANES
    return M * 100 + model.nv * (6 + 8 * M)
