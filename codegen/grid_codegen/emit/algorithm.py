"""What the level-synchronous emitters (block and warp strategies) share: their
interface record (`AlgorithmSpec`), the emission context, and the item function around
their passes.

An emitter module builds an `AlgorithmSpec`: its inputs and output shape (per batch
item, as the registry gives them), its scratch `Layout` and a callback writing the body
of the item function. The item function computes one batch item:
`<name>_<strategy>_item<T>(s, args, item)` with `s` the item's scratch;
`grid_codegen.emit.kernels` wraps it in a kernel and a host launcher.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.strategy import Strategy
from grid_codegen.emit.writer import Writer, lit
from grid_codegen.joint_dynamics import JointDynamics
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
    joint_dynamics: JointDynamics | None = None  # damping and friction (emit.passive)

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


def emit_level_item(ctx: EmitContext, w: Writer, spec: AlgorithmSpec) -> str:
    """Layout constants and item function of `spec` under `ctx.strategy` (block or warp):
    `<name>_<strategy>_item<T>(s, args, item)` with `s` the item's scratch. Returns the
    item function's name; `spec.layout` names its scratch size."""
    if len(spec.inputs) > MAX_INPUTS:
        raise ValueError(f"{spec.name}: at most {MAX_INPUTS} inputs")
    strategy = ctx.strategy
    strategy.reset()
    item = f"{spec.name}_{strategy.name}_item"
    spec.layout.suffix = strategy.name
    body = Writer()
    body.doc(spec.doc)
    body.line("template <typename T>")
    with body.block(f"GRID_DEVICE void {item}(T* GRID_RESTRICT s, const Args<T>& args, "
                    "int item)"):
        for k, port in enumerate(spec.inputs):
            ptr = f"args.in[{k}] + (size_t)item * {port.width}"
            if not port.required:
                ptr = f"args.in[{k}] != nullptr ? {ptr} : nullptr"
            body.line(f"const T* GRID_RESTRICT {input_var(port)} = {ptr};")
        body.line(f"T* GRID_RESTRICT out = args.out + (size_t)item * {spec.output_width};")
        spec.layout.emit_aliases(body)
        spec.emit_body(body)
    spec.layout.emit_constants(w)
    w.line()
    w.extend(body)
    w.line()
    return item
