"""The rows strategy of `forward_dynamics_gradient`: one thread per (item, output row).

Row r of `[dqdd/dq | dqdd/dqd]` is the cotangent `e_r^T d FD / d(q, qd)`, which is what
`forward_dynamics_vjp` computes for the seed `ct = e_r` in one reverse-mode pass. A
thread per row calls that pass's item function (already in the artifact: no traced code
of its own) with its one-hot seed and stores its row, so one item's gradient is spread
over nv threads, all running the same instructions on different seeds: at batch 1 the
latency is one reverse pass instead of a whole Jacobian in one thread. At large batches
it does nv times the reverse work of one item, and the measured dispatch keeps the thread
or level variants there.

Built for `strategy="auto"` on robots whose configuration is a vector (nq == nv, so the
q cotangent is the tangent row) and that build `forward_dynamics_vjp`. The VJP takes no
f_ext: a call with one runs the `fallback` variant's launcher instead.
"""

from __future__ import annotations

from grid_codegen.emit.kernels import VariantInfo, emit_pairs_launch
from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims

ROWS_BLOCK = 128
ROWS_MAX_BLOCK = 256


def rows_applicable(algorithm: Algorithm, dims: Dims, algorithms: tuple[str, ...],
                    strategy: str) -> bool:
    return (algorithm.name == "forward_dynamics_gradient" and strategy == "auto"
            and dims.nq == dims.nv and "forward_dynamics_vjp" in algorithms)


def emit_rows_variant(w: Writer, algorithm: Algorithm, dims: Dims, vjp_item: str, ops: int,
                      fallback: str, joint_table: bool = False,
                      transform_table: bool = False) -> VariantInfo:
    """Kernel and launcher of the rows strategy over the VJP item function `vjp_item`
    (`ops`: its traced operations); `fallback`: the strategy whose launcher serves calls
    with f_ext."""
    nv = dims.nv
    name = f"{algorithm.name}_rows"
    extra = ["args.joint_dynamics"] if joint_table else []
    if transform_table:
        extra.append("args.transform")
    w.doc(f"Row `r` of one item's `{algorithm.name}`: the reverse-mode pass seeded with "
          "e_r (q is a vector, so its cotangent is the tangent row).")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE inline void {name}_row(const Args<T>& args, size_t i, "
                 "int r)"):
        w.line(f"T ct[{nv}];")
        w.line(f"for (int k = 0; k < {nv}; ++k) ct[k] = k == r ? T(1) : T(0);")
        w.line(f"T row[{3 * nv}];  // [d/dq | d/dqd | d/du]")
        call = [f"args.in[0] + i * {nv}", f"args.in[1] + i * {nv}", f"args.in[2] + i * {nv}",
                "ct", "args.inertia", "args.gravity", "row", *extra]
        w.line(f"{vjp_item}<T, T>({', '.join(call)});")
        w.line(f"T* out = args.out + i * {2 * nv * nv} + (size_t)r * {2 * nv};")
        w.line(f"for (int c = 0; c < {2 * nv}; ++c) out[c] = row[c];")
    w.line()
    w.doc(f"Kernel of `{algorithm.name}` (rows strategy): one (item, row) per thread.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({ROWS_MAX_BLOCK}) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line(f"const int batch = args.batch * {nv};  // (item, row) pairs")
        with w.block("GRID_THREAD_ITEM_LOOP(t, batch)"):
            w.line(f"{name}_row<T>(args, (size_t)(t / {nv}), t % {nv});")
    w.line()
    w.doc(f"Dynamic shared memory of one `{name}` block: none.")
    w.line("template <typename T>")
    with w.block(f"constexpr size_t {name}_shared_bytes()"):
        w.line("return 0;")
    w.line()
    w.line("template <typename T>")
    with w.block(f"inline int configure_{name}()"):
        w.line(f"return configure_kernel({name}_kernel<T>, size_t{{0}});")
    w.line()
    w.doc(f"Launch `{algorithm.name}` (rows strategy) on `stream`; with f_ext, the "
          f"{fallback} strategy.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{name}(const Args<T>& args, const grid_launch_config& cfg,"
                 " grid_stream_t stream)"):
        w.line(f"if (args.in[3] != nullptr) return launch_{algorithm.name}_{fallback}<T>("
               "args, cfg, stream);")
        emit_pairs_launch(w, name, ROWS_BLOCK, ROWS_MAX_BLOCK, f"args.batch * {nv}",
                          (f"for (int r = 0; r < {nv}; ++r)",
                           f"{name}_row<T>(args, (size_t)i, r);"))
    w.line()
    return VariantInfo("rows", ROWS_BLOCK, ROWS_MAX_BLOCK, max(1, ROWS_BLOCK // nv), "0", ops)
