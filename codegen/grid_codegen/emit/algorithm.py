"""What every algorithm emitter shares: its interface record (`AlgorithmSpec`), the
emission context, and the item function / kernel / host launcher around its passes.

An emitter module builds an `AlgorithmSpec`: its inputs and output shape (per batch
item), its scratch `Layout` and a callback writing the body of the item function. The
item function computes one batch item: `<name>_item<T>(s, args, item)` with `s` the
item's scratch. `emit_algorithm` wraps it in a kernel (the strategy decides its form) and
a host launcher `launch_<name><T>(args, stream)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.strategy import Strategy
from grid_codegen.emit.writer import Writer, lit
from grid_codegen.model import Frame, RobotModel
from grid_codegen.options import CodegenOptions

MAX_INPUTS = 4


@dataclass(frozen=True)
class Port:
    """An input: `width` scalars per batch item; optional ones may be NULL."""

    name: str
    width: int
    required: bool = True


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm of the artifact. `output_shape` is per batch item."""

    name: str
    doc: str
    inputs: tuple[Port, ...]
    output_shape: tuple[int, ...]
    uses_gravity: bool
    layout: Layout
    emit_body: Callable[[Writer], None]

    @property
    def output_width(self) -> int:
        size = 1
        for n in self.output_shape:
            size *= n
        return size


@dataclass
class EmitContext:
    """The immutable inputs of one generation plus the scheduling strategy."""

    model: RobotModel
    options: CodegenOptions
    strategy: Strategy
    ee_frames: tuple[Frame, ...]

    def emit_inertia(self, w: Writer, body: int, name: str = "I") -> None:
        """Declare `name`: body `body`'s 10 inertial parameters, baked or from the
        per-context table (`runtime_inertia`)."""
        if self.options.runtime_inertia:
            w.line(f"const T* GRID_RESTRICT {name} = args.inertia + 10 * {body};")
        else:
            params = self.model.bodies[body].inertia.dynamic_parameters()
            w.line(f"const T {name}[10] = {{{', '.join(lit(x) for x in params)}}};")

    def dof_body(self) -> list[tuple[int, int]]:
        """For each dof, `(body, index of the dof within its joint)`."""
        out: list[tuple[int, int]] = []
        for i, joint in enumerate(self.model.joints):
            out.extend((i, d) for d in range(joint.nv))
        return out


def input_var(port: Port) -> str:
    return f"in_{port.name}"


def emit_load(ctx: EmitContext, w: Writer, pairs: list[tuple[Buffer, Port]]) -> None:
    """Copy per-item inputs into scratch (zeros for an absent optional input), then a
    barrier. On the GPU this stages global memory in shared memory."""
    for buf, port in pairs:
        with ctx.strategy.parallel(w, "k", port.width):
            src = input_var(port)
            value = f"{src}[k]" if port.required else f"({src} != nullptr ? {src}[k] : T(0))"
            w.line(f"{buf['k']} = {value};")
    ctx.strategy.barrier(w)


def emit_algorithm(ctx: EmitContext, w: Writer, spec: AlgorithmSpec) -> None:
    """Layout constants, item function, kernel and host launcher of `spec`."""
    if len(spec.inputs) > MAX_INPUTS:
        raise ValueError(f"{spec.name}: at most {MAX_INPUTS} inputs")
    strategy = ctx.strategy
    strategy.reset()
    body = Writer()
    body.doc(spec.doc)
    body.line("template <typename T>")
    with body.block(f"GRID_DEVICE void {spec.name}_item(T* GRID_RESTRICT s, "
                    f"const Args<T>& args, int item)"):
        for k, port in enumerate(spec.inputs):
            ptr = f"args.in[{k}] + (size_t)item * {port.width}"
            if not port.required:
                ptr = f"args.in[{k}] != nullptr ? {ptr} : nullptr"
            body.line(f"const T* GRID_RESTRICT {input_var(port)} = {ptr};")
        body.line(f"T* GRID_RESTRICT out = args.out + (size_t)item * {spec.output_width};")
        spec.layout.emit_aliases(body)
        spec.emit_body(body)
    threads = strategy.threads_per_block()
    ns = spec.layout.namespace

    spec.layout.emit_constants(w)
    w.line(f"constexpr int {spec.name}_threads = {threads};")
    w.line()
    w.extend(body)
    w.line()
    w.doc(f"Kernel of `{spec.name}` ({strategy.name} strategy) over `args.batch` items.")
    w.line("template <typename T>")
    with w.block(f"GRID_KERNEL void {spec.name}_kernel(const Args<T> args)"):
        w.line("const int batch = args.batch;")
        strategy.emit_kernel(w, spec.name, f"{ns}::kSize")
    w.line()
    shared = f"sizeof(T) * {ns}::kSize" if strategy.name == "block" else "0"
    w.doc(f"Dynamic shared memory of one `{spec.name}` block, in bytes.")
    w.line("template <typename T>")
    with w.block(f"constexpr size_t {spec.name}_shared_bytes()"):
        w.line(f"return {shared};")
    w.line()
    w.doc(f"Per-device setup of `{spec.name}` (kernel image check, shared-memory opt-in).")
    w.line("template <typename T>")
    with w.block(f"inline int configure_{spec.name}()"):
        w.line(f"return configure_kernel({spec.name}_kernel<T>, "
               f"{spec.name}_shared_bytes<T>());")
    w.line()
    w.doc(f"Launch `{spec.name}` on `stream`; pointers are device pointers under nvcc.")
    w.line("template <typename T>")
    with w.block(f"inline int launch_{spec.name}(const Args<T>& args, grid_stream_t stream)"):
        w.line("const int batch = args.batch;")
        w.line("if (batch <= 0) return GRID_OK;")
        w.line(f"const int threads = {spec.name}_threads;")
        w.line(f"const int blocks = {strategy.grid_size('threads')};")
        w.line("(void)threads; (void)blocks; (void)stream;")
        w.line(f"GRID_LAUNCH({spec.name}_kernel<T>, blocks, threads, "
               f"{spec.name}_shared_bytes<T>(), stream, args);")
        w.line("return launch_status();")
    w.line()
