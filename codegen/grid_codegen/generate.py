"""`generate(model, options)`: the generated sources of one artifact.

Returns `{"grid.cuh": ..., "wrapper.cu": ...}`. `grid.cuh` holds, in namespace `grid`
and templated on the scalar `T`: the portability prelude and spatial algebra, the robot's
dimensions, and per algorithm its scratch layout, item function, kernel and host
launcher; it ends with the C ABI types. `wrapper.cu` instantiates everything for the
options' dtype and exports the descriptor. Identical inputs give byte-identical text.
"""

from __future__ import annotations

from grid_codegen.emit import BUILDERS
from grid_codegen.emit.algorithm import MAX_INPUTS, EmitContext, emit_algorithm
from grid_codegen.emit.prelude import emit_prelude
from grid_codegen.emit.strategy import make_strategy
from grid_codegen.emit.wrapper import emit_abi_types, emit_wrapper
from grid_codegen.emit.writer import Writer, comment_text
from grid_codegen.model import RobotModel
from grid_codegen.options import CodegenOptions


def generate(model: RobotModel, options: CodegenOptions | None = None) -> dict[str, str]:
    """The files of the artifact for `model`: file name -> text."""
    options = options or CodegenOptions()
    ctx = EmitContext(model=model, options=options, strategy=make_strategy(options.strategy),
                      ee_frames=model.end_effector_frames(options.ee_joint_names or None))
    specs = [BUILDERS[name](ctx) for name in options.algorithms]

    w = Writer()
    emit_prelude(w, model.name)
    w.line()
    with w.namespace("grid"):
        w.line()
        _emit_robot_constants(w, ctx)
        for spec in specs:
            emit_algorithm(ctx, w, spec)
    w.line()
    emit_abi_types(w)
    return {"grid.cuh": w.text(), "wrapper.cu": emit_wrapper(ctx, specs)}


def _emit_robot_constants(w: Writer, ctx: EmitContext) -> None:
    model = ctx.model
    w.comment(f"Robot '{comment_text(model.name)}': {model.nb} bodies, "
              f"{'floating' if model.floating_base else 'fixed'} base.")
    w.comment("Bodies (joint order): " + ", ".join(
        f"{i} {comment_text(j.name)}" for i, j in enumerate(model.joints)))
    w.line(f"constexpr int kNq = {model.nq};")
    w.line(f"constexpr int kNv = {model.nv};")
    w.line(f"constexpr int kNb = {model.nb};")
    w.line(f"constexpr int kNumEes = {len(ctx.ee_frames)};")
    w.line(f"constexpr int kMaxBatch = {ctx.options.max_batch_size};")
    runtime = "true" if ctx.options.runtime_inertia else "false"
    w.line(f"constexpr bool kRuntimeInertia = {runtime};")
    w.line()
    w.doc("The arguments of every kernel: per-item inputs and output (batch on axis 0),\n"
          "the runtime inertia table (nb x 10, or NULL) and the signed gravity along z.")
    w.line("template <typename T>")
    with w.block("struct Args", "};"):
        w.line(f"const T* in[{MAX_INPUTS}];")
        w.line("T* out;")
        w.line("const T* inertia;")
        w.line("T gravity;")
        w.line("int batch;")
    w.line()
