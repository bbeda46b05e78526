"""The tangents strategy of `forward_dynamics_gradient` and of the fused step gradients:
one thread per (item, direction).

Column c of `[dqdd/dq | dqdd/dqd]` is the derivative of FD along the unit direction
`e_c` of `z = (q, qd)`; a step gradient's column of `[dq'; dqd']` along `e_c` of
`[dq, dqd, du]` follows from it (`emit.plant.step_tangent`). A thread per column runs one
forward-mode pass with that seed given at run time (`symbolic.algorithms.fd_tangent`: ABA
for `qdd` and the articulated inertias, RNEA's directional derivative at `qdd`, ABA's
solve with the same inertias), so the threads of an item run the same instructions on
different seeds: at batch 1 the latency is one such pass, not a whole Jacobian in one
thread. It does one first-order pass per column, so the dispatch keeps it for small
batches.

It replaced a rows strategy (one reverse-mode VJP pass per output row): forward mode holds
no tape across the pass (iiwa14 in float32: no spills against 876 B), traces about 20%
fewer operations, takes f_ext and covers the free flyer (its seed is the local tangent).
On an H200 (iiwa14, float32, kernel time, `tools/bench/fd_gradient_latency_probe`):
6.0 us at B = 1 against 7.1 for rows and 23.3 for the thread kernel, an empty kernel
3.2-4.4 us in the same runs; 7.2 against 9.7 us at B = 1,024.

Built for `strategy="auto"` on the models the level strategies cover (no mimic couplings)
without joint dynamics (the pass traces no passive torques).
"""

from __future__ import annotations

from grid_codegen.emit.kernels import VariantInfo, emit_pairs_launcher, input_pointer
from grid_codegen.emit.plant import integrator_of
from grid_codegen.emit.writer import Writer
from grid_codegen.registry import Algorithm, Dims

TANGENTS_BLOCK = 128
TANGENTS_MAX_BLOCK = 256


def tangents_applicable(algorithm: Algorithm, strategy: str, joint_dynamics: bool) -> bool:
    return (_columns(algorithm) is not None and strategy == "auto" and not joint_dynamics)


def _columns(algorithm: Algorithm) -> int | None:
    """The directions of `algorithm`'s Jacobian in units of nv (None: no tangents)."""
    if algorithm.name == "forward_dynamics_gradient":
        return 2
    return 3 if integrator_of(algorithm) is not None else None


def emit_tangents_variant(w: Writer, algorithm: Algorithm, dims: Dims, item: str, ops: int,
                          transform_table: bool = False) -> VariantInfo:
    """Kernel and launcher of the tangents strategy over the item function `item`
    (`emit.thread.build_tangent_item`; `ops`: its traced operations)."""
    nv = dims.nv
    n = _columns(algorithm) * nv
    rows = algorithm.output_size(dims) // n
    name = f"{algorithm.name}_tangents"
    staged = [k for k, port in enumerate(algorithm.inputs) if port.required]
    args = [f"in{k}" if k in staged else input_pointer(algorithm, dims, k, "i")
            for k in range(len(algorithm.inputs))]
    args += ["args.inertia", "args.gravity", "column"]
    if transform_table:
        args.append("args.transform")
    args.append("seed")
    w.doc(f"Column `c` of one item's `{algorithm.name}`: the forward-mode pass seeded "
          "with e_c, stored down the column of the row-major output.")
    w.line("template <typename T>")
    with w.block(f"GRID_HOST_DEVICE inline void {name}_column(const Args<T>& args, size_t i, "
                 "int c)"):
        w.line(f"T seed[{n}];")
        w.line(f"for (int k = 0; k < {n}; ++k) seed[k] = k == c ? T(1) : T(0);")
        w.line(f"T column[{rows}];")
        w.comment("The required inputs are read here, all at once: at a small batch the "
                  "pass would otherwise wait for each where it first reads it.")
        for k in staged:
            width = algorithm.inputs[k].width(dims)
            w.line(f"T in{k}[{width}];")
            w.line(f"for (int e = 0; e < {width}; ++e) in{k}[e] = args.in[{k}][i * {width} + e];")
        w.line(f"{item}<T, T>({', '.join(args)});")
        w.line(f"T* out = args.out + i * {rows * n} + c;")
        w.line(f"for (int r = 0; r < {rows}; ++r) out[r * {n}] = column[r];")
    w.line()
    w.doc(f"Kernel of `{algorithm.name}` (tangents strategy): one (item, column) per thread.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void GRID_LAUNCH_BOUNDS({TANGENTS_MAX_BLOCK}) "
                 f"{name}_kernel(const Args<T> args)"):
        w.line(f"const int batch = args.batch * {n};  // (item, column) pairs")
        with w.block("GRID_THREAD_ITEM_LOOP(t, batch)"):
            w.line(f"{name}_column<T>(args, (size_t)(t / {n}), t % {n});")
    w.line()
    emit_pairs_launcher(w, name, f"Launch `{algorithm.name}` (tangents strategy) on `stream`.",
                        f"args.batch * {n}", f"2147483647 / {n}", TANGENTS_BLOCK,
                        TANGENTS_MAX_BLOCK, (f"for (int c = 0; c < {n}; ++c)",
                                             f"{name}_column<T>(args, (size_t)i, c);"))
    return VariantInfo("tangents", TANGENTS_BLOCK, TANGENTS_MAX_BLOCK,
                       max(1, TANGENTS_BLOCK // n), "0", ops)


__all__ = ["TANGENTS_BLOCK", "TANGENTS_MAX_BLOCK", "emit_tangents_variant",
           "tangents_applicable"]
