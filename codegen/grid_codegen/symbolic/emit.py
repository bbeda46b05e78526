"""Traced passes as C++ functions, and the item functions that chain them.

A `PassLibrary` collects the passes of one generated file. `ItemBuilder.call` traces a
Python function on a fresh `Graph`: the run-time entries of its input arrays become
input nodes (`X[5]`), the entries already known to be constant enter as floats, so the
sparsity a producer pass discovered (a zero entry of a transform, a velocity that is
exactly zero on a fixed base) keeps folding in its consumers. The traced graph is
scheduled (`graph.schedule`) and emitted once as

    template <typename T, typename S>
    GRID_INLINE void <pass>(const T* GRID_RESTRICT X, ..., T* GRID_RESTRICT out)

`T` is the per-item scalar (float or double on the GPU; a SIMD vector of items on the
CPU), `S` the artifact scalar of the shared tables (the runtime inertia table, gravity).
A pass traced twice to the same text is emitted once.

Register pressure is a design input. Straight-line code is register-resident only while
its live set fits the register file, and compilers handle very long blocks badly (ptxas
spills heavily past ~10k operations and its compile time grows fast). So a pass longer
than `SEGMENT_OPS` is emitted as *segments*: consecutive runs of the schedule, each a
`GRID_NOINLINE` function, that hand the values crossing a boundary to each other through
a small per-item `scratch` array (slots reused once their last reader has run). An item
function whose passes add up to more than `INLINE_OPS` calls each pass through a
`GRID_NOINLINE` wrapper, so that the arrays between passes stay in memory instead of
turning into one live set of every pass together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from grid_codegen.emit.writer import Writer
from grid_codegen.symbolic import graph as G

_BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CALLS = {"sqrt": "sqrt_", "sin": "sin_", "cos": "cos_", "atan2": "atan2_", "tanh": "tanh_",
          "sign": "sign_"}

RUNTIME = None  # the marker of a run-time entry in an `Array`'s pattern

SEGMENT_OPS = 8000
"""Operations per straight-line segment (ptxas keeps ~7k-op blocks register-resident at
255 registers without spills on sm_90; measured on iiwa14's derivative passes)."""

LARGE_PASS_OPS = 40000
LARGE_SEGMENT_OPS = 2000
"""A pass of more than LARGE_PASS_OPS operations is cut into segments of at most
LARGE_SEGMENT_OPS: long segments of a large pass carry wide live sets (g1's FD
derivatives, 175k operations: 8k-op segments spill 144 KB in ptxas at sm_90, 2k-op
segments 8 KB) and g++'s register allocator grows faster than linearly on them (the same
unit: 114 s at 8k, 66 s at 2k, same run time). Smaller passes keep SEGMENT_OPS."""

INLINE_OPS = 9000
"""Item functions up to this many operations inline their passes (one register-resident
block); larger ones call them out of line."""


@dataclass(frozen=True)
class Array:
    """A named array of one item function: per entry a float constant or RUNTIME.

    kind: "item" (a per-item input pointer), "local" (declared in the item function),
    "table" (a shared table of scalar S, e.g. the runtime inertia), "out" (the output).
    optional: an item input that may be NULL (read as zeros)."""

    name: str
    pattern: tuple
    kind: str = "local"
    optional: bool = False

    @property
    def size(self) -> int:
        return len(self.pattern)

    def is_constant(self) -> bool:
        return all(p is not RUNTIME for p in self.pattern)

    @staticmethod
    def runtime(name: str, size: int, kind: str, optional: bool = False) -> Array:
        return Array(name, (RUNTIME,) * size, kind, optional)


@dataclass
class _Pass:
    name: str
    doc: str
    params: list[tuple[str, str]]  # (C++ declaration, argument name) in call order
    segments: list[Writer]  # one body, or the bodies of the segment functions
    scratch: int  # slots of the segment scratch (0 when not segmented)
    ops: dict[str, int]
    noinline_wrapper: bool = False
    wrapper: str = "GRID_NOINLINE"  # the wrapper's attribute (GRID_HOST_NOINLINE: host only)

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())


@dataclass
class PassLibrary:
    """The passes emitted into one file, in first-use order, deduplicated."""

    segment_ops: int = SEGMENT_OPS
    passes: dict[str, _Pass] = field(default_factory=dict)
    touched: list[str] = field(default_factory=list)
    """The passes called, in call order, one entry per call (`emit.unit_sections`)."""
    _by_signature: dict[str, str] = field(default_factory=dict)

    def emit(self, w: Writer) -> None:
        for p in self.passes.values():
            emit_pass(w, p)

    def checkpoint(self) -> tuple[int, int]:
        return len(self.passes), len(self._by_signature)

    def rollback(self, checkpoint: tuple[int, int]) -> None:
        """Forget the passes added since `checkpoint` (a variant that was not kept)."""
        passes, signatures = checkpoint
        for name in list(self.passes)[passes:]:
            del self.passes[name]
        for key in list(self._by_signature)[signatures:]:
            del self._by_signature[key]


def emit_pass(w: Writer, p: _Pass) -> None:
    params = ", ".join(decl for decl, _ in p.params)
    args = ", ".join(name for _, name in p.params)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(p.ops.items()))
    if len(p.segments) > 1:
        for k, body in enumerate(p.segments):
            w.doc(f"Segment {k} of `{p.name}` (values cross segments in `scratch`).")
            w.line("template <typename T, typename S>")
            with w.block(f"GRID_NOINLINE void {p.name}_s{k}({params}, "
                         "T* GRID_RESTRICT scratch)"):
                w.extend(body)
            w.line()
    w.doc(p.doc)
    w.comment(f"Operations: {p.op_count} ({counts or 'none'})"
              + (f", in {len(p.segments)} segments." if len(p.segments) > 1 else "."))
    w.line("template <typename T, typename S>")
    with w.block(f"GRID_INLINE void {p.name}({params})"):
        if len(p.segments) > 1:
            w.line(f"T scratch[{max(p.scratch, 1)}];")
            for k in range(len(p.segments)):
                w.line(f"{p.name}_s{k}<T, S>({args}, scratch);")
        else:
            w.extend(p.segments[0])
    w.line()
    if p.noinline_wrapper:
        w.doc(f"`{p.name}` as a call (keeps the caller's other arrays out of its live set).")
        w.line("template <typename T, typename S>")
        with w.block(f"{p.wrapper} void {p.name}_call({params})"):
            w.line(f"{p.name}<T, S>({args});")
        w.line()


def _input_name(array: Array, k: int) -> str:
    """The C++ expression of entry k of `array` as a value of T."""
    if array.optional:
        return f"({array.name} != nullptr ? {array.name}[{k}] : T{{}})"
    if array.kind == "table":  # a shared table of S: broadcast (a SIMD T on the CPU)
        return f"T{{}} + {array.name}[{k}]"
    return f"{array.name}[{k}]"


def lit(x: float) -> str:
    """A constant operand: `S(0.25)`, the table scalar (binary operations of a SIMD
    vector T with a scalar S broadcast it; on the GPU S is T)."""
    x = float(x)
    return f"S({0.0 if x == 0.0 else x!r})"


def splat(x: float) -> str:
    """A constant as a value of T on its own (a constant output)."""
    return f"T{{}} + {lit(x)}"


@dataclass
class _Call:
    pass_name: str
    args: str


class ItemBuilder:
    """Builds one item function: a sequence of pass calls over named arrays.

    out_map: a *part* of the output (`emit.thread_parts`): output entry `k` of every
    call that writes the array of kind "out" is stored at `out[out_map[k]]` when `k` is
    a key, and not computed at all otherwise (a call left with nothing to write is
    dropped)."""

    def __init__(self, library: PassLibrary, out_map: dict[int, int] | None = None) -> None:
        self.library = library
        self.out_map = out_map
        self.calls: list[_Call] = []
        self.locals: list[Array] = []
        self.total_ops = 0

    def call(self, name: str, doc: str, fn: Callable[..., Sequence[object]],
             inputs: Sequence[Array], output: Array | str, *,
             scalars: Sequence[str] = (), schedule_order: Sequence[int] | None = None,
             write: Sequence[int] | None = None, dense: bool = False,
             out_stride: int = 1, vector_stores: bool = False) -> Array:
        """Trace `fn(*input_values, *scalar_values)` and emit (or reuse) the pass `name`.

        inputs: arrays whose values `fn` receives as lists (constants folded in).
        output: the output `Array` of kind "out" (written in full, constants included), or
            the name of a new local array (only its run-time entries are written; the
            returned `Array` records which entries are constant).
        scalars: names of scalar parameters of type S (e.g. "gravity").
        schedule_order: the order in which outputs are computed (default: index order);
            e.g. column by column for a row-major Jacobian, so that one column's working
            set is live at a time.
        write: the output indices this call writes (default: all); `fn` still returns the
            whole output, the rest is dead code.
        dense: a local output is written in full, its constant entries included (for a
            consumer that reads it with run-time indices, such as a dense product loop).
        out_stride: output entry `k` is stored at `out[k * out_stride]` (an output of kind
            "out" interleaved with other items' outputs, `emit.regressor_warp`).
        vector_stores: four consecutive output entries from a multiple of 4 are stored
            by one `grid::store4` (a 16-byte store where aligned), for an output whose
            stores are each a memory transaction per lane (`emit.idsva_gather`'s head)."""
        g = G.Graph()
        values: list[object] = []
        owner: dict[str, str] = {}  # input expression -> the parameter it reads
        for array in inputs:
            row = []
            for k, p in enumerate(array.pattern):
                if p is RUNTIME:
                    expr = _input_name(array, k)
                    owner[expr] = array.name
                    row.append(g.input(expr))
                else:
                    row.append(p)
            values.append(row)
        for s in scalars:
            owner[f"T{{}} + {s}"] = s
            values.append(g.input(f"T{{}} + {s}"))
        result = list(fn(*values))
        is_out = isinstance(output, Array)
        out_name = output.name if is_out else output
        if is_out and len(result) != output.size:
            raise AssertionError(f"{name}: {len(result)} outputs, expected {output.size}")
        positions = list(schedule_order) if schedule_order is not None else \
            list(range(len(result)))
        if write is not None:
            keep = set(write)
            positions = [k for k in positions if k in keep]
        index: Callable[[int], int] = lambda k: k * out_stride  # noqa: E731
        if is_out and self.out_map is not None:
            if out_stride != 1:
                raise ValueError(f"{name}: out_stride and a part's out_map exclude "
                                 "each other")
            positions = [k for k in positions if k in self.out_map]
            if not positions:
                return output  # nothing of this part: the pass is not called
            index = self.out_map.__getitem__
        pattern = tuple(RUNTIME if type(r) is G.Sym or dense else float(r) for r in result)
        if not is_out and not dense and all(type(result[k]) is not G.Sym for k in positions):
            local = Array(out_name, pattern)  # nothing to compute at run time
            self.locals.append(local)
            return local
        used = {owner[name] for name in _used_inputs(g, [result[k] for k in positions])}
        params = [(f"const {'S' if a.kind == 'table' else 'T'}* GRID_RESTRICT {a.name}",
                   a.name) for a in inputs if a.name in used]
        params += [(f"S {s}", s) for s in scalars if s in used]
        params.append((f"T* GRID_RESTRICT {out_name}", out_name))
        if out_stride != 1 and not is_out:
            raise ValueError(f"{name}: out_stride applies to an output of kind 'out'")
        segments, scratch, ops = _emit_body(g, result, positions, out_name, is_out or dense,
                                            self.library.segment_ops, index, vector_stores)
        text = "\n".join([*(d for d, _ in params), *(ln for s in segments for ln in s._lines)])
        signature = hashlib.sha256(text.encode()).hexdigest()
        emitted = self.library._by_signature.get(signature)
        if emitted is None:
            emitted = name
            suffix = 1
            while emitted in self.library.passes:
                suffix += 1
                emitted = f"{name}_{suffix}"
            self.library.passes[emitted] = _Pass(emitted, doc, params, segments, scratch, ops)
            self.library._by_signature[signature] = emitted
        self.calls.append(_Call(emitted, ", ".join(n for _, n in params)))
        self.library.touched.append(emitted)
        self.total_ops += sum(ops.values())
        if is_out:
            return output
        local = Array(out_name, pattern)
        self.locals.append(local)
        return local

    def call_static(self, name: str, text: Callable[[Writer], None], doc: str,
                    params: Sequence[tuple[str, str]], ops: int) -> None:
        """Call a pass written directly in C++ (a dense loop): `text(w)` writes its body;
        `params` are its (declaration, argument) pairs; `ops` its operation count."""
        self._written(name, text, doc, params, ops)
        self.calls.append(_Call(name, ", ".join(n for _, n in params)))
        self.library.touched.append(name)
        self.total_ops += ops

    def define_static(self, name: str, text: Callable[[Writer], None], doc: str,
                      params: Sequence[tuple[str, str]], ops: int) -> str:
        """Define a written pass that another written pass calls (a case of its switch),
        emitted before that one with a `GRID_HOST_NOINLINE` wrapper (so that the host
        compiler meets it as a function of its own; the GPU build inlines it); returns
        the name to call (`<name>_call`)."""
        self._written(name, text, doc, params, ops, noinline_wrapper=True,
                      wrapper="GRID_HOST_NOINLINE")
        self.library.touched.append(name)
        return f"{name}_call"

    def _written(self, name: str, text: Callable[[Writer], None], doc: str,
                 params: Sequence[tuple[str, str]], ops: int, **wrapper: object) -> None:
        """Add the written pass `name` to the library once (`text(w)` writes its body)."""
        if name not in self.library.passes:
            body = Writer()
            text(body)
            self.library.passes[name] = _Pass(name, doc, list(params), [body], 0,
                                              {"loop ops": ops}, **wrapper)

    def emit_item_function(self, w: Writer, name: str, doc: str,
                           params: Sequence[str], inline_ops: int = INLINE_OPS,
                           views: Sequence[tuple[str, str]] = ()) -> None:
        """`template <T, S> GRID_INLINE void name(params) { views; locals; calls }`.
        Above `inline_ops` operations the passes are called out of line. `views`:
        `(name, pointer expression)` of input arrays read inside a parameter (`q` and
        `qd` of a state `x`: `("qd", "x + 7")`)."""
        out_of_line = self.total_ops > inline_ops and len(self.calls) > 1
        w.doc(doc)
        w.comment(f"Operations: {self.total_ops}"
                  + (" (passes called out of line)." if out_of_line else "."))
        w.line("template <typename T, typename S>")
        with w.block(f"GRID_INLINE void {name}({', '.join(params)})"):
            for view, pointer in views:
                w.line(f"const T* GRID_RESTRICT {view} = {pointer};")
            for local in self.locals:
                if not local.is_constant():
                    w.line(f"T {local.name}[{local.size}];")
            for call in self.calls:
                callee = call.pass_name
                if out_of_line:
                    self.library.passes[callee].noinline_wrapper = True
                    callee += "_call"
                w.line(f"{callee}<T, S>({call.args});")


def emit_straight_line(w: Writer, fn: Callable[..., Sequence[object]],
                       inputs: Sequence[Sequence[str]], out: str) -> int:
    """Trace `fn` over inputs named by C++ expressions (one list per argument) and write
    its statements into `w`, output `k` stored to `out[k]` (constants included), for a
    small computation inlined in hand-written code (`T` the value type and `S` that of the
    literals, `lit`, in the enclosing scope). Returns its operation count."""
    g = G.Graph()
    values = [[g.input(expr) for expr in arg] for arg in inputs]
    result = list(fn(*values))
    segments, _, ops = _emit_body(g, result, range(len(result)), out, True,
                                  LARGE_PASS_OPS, lambda k: k)
    if len(segments) != 1:
        raise ValueError(f"emit_straight_line: {sum(ops.values())} operations is past the "
                         "size of one inlined block")
    w.extend(segments[0])
    return sum(ops.values())


def _used_inputs(g: G.Graph, roots: Sequence[object]) -> set[str]:
    """The input expressions (`X[3]`, `T{} + gravity`, ...) `roots` depend on."""
    return {g.nodes[i][1] for i in G.reachable(g, roots) if g.nodes[i][0] == "in"}


def _angle_expression(g: G.Graph, i: int, operand: Callable[[object], str], body: Writer,
                      angles: dict[str, str]) -> str | None:
    """A `sin` or `cos` node as a member of its angle's `sincos_` pair (declared at the
    first of the two, so one argument reduction serves both); None for other nodes."""
    op = g.nodes[i][0]
    if op not in ("sin", "cos"):
        return None
    argument = operand(g.operands(i)[0])
    pair = angles.get(argument)
    if pair is None:
        pair = angles[argument] = f"sc{len(angles)}"
        body.line(f"const auto {pair} = sincos_({argument});")
    return f"{pair}.{op[0]}"


def _expression(g: G.Graph, i: int, operand: Callable[[object], str]) -> str:
    op, _, _ = g.nodes[i]
    a, b = g.operands(i)
    if op == "in":
        return g.nodes[i][1]
    if op in _BINARY:
        return f"{operand(a)} {_BINARY[op]} {operand(b)}"
    if op == "neg":
        return f"-{operand(a)}"
    if op == "atan2":  # a function of T: a constant argument is splatted
        args = [operand(x) if isinstance(x, int) else f"T{{}} + {operand(x)}" for x in (a, b)]
        return f"atan2_({args[0]}, {args[1]})"
    return f"{_CALLS[op]}({operand(a)})"


def _emit_body(g: G.Graph, result: Sequence[object], positions: Sequence[int],
               out_name: str, write_constants: bool, segment_ops: int,
               index: Callable[[int], int], vector_stores: bool = False
               ) -> tuple[list[Writer], int, dict[str, int]]:
    """The statements of one pass: one body, or segments with their scratch size;
    output entry `k` is stored at `out_name[index(k)]` (`vector_stores`: `_store_lines`)."""
    order = G.schedule(g, [result[k] for k in positions])
    ops: dict[str, int] = {}
    for i in order:
        op = g.nodes[i][0]
        if op != "in":
            ops[op] = ops.get(op, 0) + 1
    # Cut the schedule into segments of at most `segment_ops` operations; the output
    # stores of an output go with the segment that computes it.
    segment_of: dict[int, int] = {}
    seg, count = 0, 0
    total = sum(ops.values())
    if total > LARGE_PASS_OPS:
        segment_ops = min(segment_ops, LARGE_SEGMENT_OPS)
    if total > segment_ops:
        per = -(-total // -(-total // segment_ops))  # balanced segment sizes
    else:
        per = total + 1
    for i in order:
        if g.nodes[i][0] != "in":
            if count >= per:
                seg, count = seg + 1, 0
            count += 1
        segment_of[i] = seg
    nseg = seg + 1
    if nseg == 1:
        body = Writer()
        names: dict[int, str] = {}

        def operand(x: object) -> str:
            return names[x] if isinstance(x, int) else lit(x)

        angles: dict[str, str] = {}
        for i in order:
            expr = _angle_expression(g, i, operand, body, angles)
            names[i] = f"t{len(names)}"
            body.line(f"const T {names[i]} = {expr or _expression(g, i, operand)};")
        (stores,) = _segment_stores(result, positions, index, write_constants, segment_of,
                                    [names])
        for line in _store_lines(stores, out_name, vector_stores):
            body.line(line)
        return [body], 0, ops
    # Inputs are re-read in each segment that uses them (they are the caller's arrays);
    # computed values used by a later segment go through scratch slots.
    last_use: dict[int, int] = {}
    for i in order:
        for x in g.operands(i):
            if isinstance(x, int):
                last_use[x] = max(last_use.get(x, -1), segment_of[i])
    slot_of, nslots = _allocate_slots(g, order, segment_of, last_use)
    bodies: list[Writer] = [Writer() for _ in range(nseg)]
    names_by_seg: list[dict[int, str]] = [{} for _ in range(nseg)]
    angles_by_seg: list[dict[str, str]] = [{} for _ in range(nseg)]
    for i in order:
        s = segment_of[i]
        names = names_by_seg[s]
        body = bodies[s]

        def operand(x: object, s: int = s, names: dict = names, body: Writer = body) -> str:
            if not isinstance(x, int):
                return lit(x)
            if x not in names:  # defined in an earlier segment: load it here
                if g.nodes[x][0] == "in":
                    names[x] = f"t{len(names)}"
                    body.line(f"const T {names[x]} = {g.nodes[x][1]};")
                else:
                    names[x] = f"t{len(names)}"
                    body.line(f"const T {names[x]} = scratch[{slot_of[x]}];")
            return names[x]

        expr = (_angle_expression(g, i, operand, body, angles_by_seg[s])
                or _expression(g, i, operand))
        names[i] = f"t{len(names)}"
        body.line(f"const T {names[i]} = {expr};")
        if i in slot_of:
            body.line(f"scratch[{slot_of[i]}] = {names[i]};")
    stores_by_seg = _segment_stores(result, positions, index, write_constants, segment_of,
                                    names_by_seg)
    for body, stores in zip(bodies, stores_by_seg, strict=True):
        for line in _store_lines(stores, out_name, vector_stores):
            body.line(line)
    return bodies, nslots, ops


def _segment_stores(result: Sequence[object], positions: Sequence[int],
                    index: Callable[[int], int], write_constants: bool,
                    segment_of: dict[int, int], names_by_seg: list[dict[int, str]]
                    ) -> list[list[tuple[int, str]]]:
    """Per segment, the `(index(k), value)` stores of the outputs it computes, in the
    order of `positions`; constant outputs (`write_constants`) go with the last."""
    stores: list[list[tuple[int, str]]] = [[] for _ in names_by_seg]
    for k in positions:
        r = result[k]
        if type(r) is G.Sym:
            s = segment_of[r.i]
            stores[s].append((index(k), names_by_seg[s][r.i]))
        elif write_constants:
            stores[-1].append((index(k), splat(r)))
    return stores


def _allocate_slots(g: G.Graph, order: Sequence[int], segment_of: dict[int, int],
                    last_use: dict[int, int]) -> tuple[dict[int, int], int]:
    """Scratch slots for values read after their own segment: a slot taken in segment s
    is free again for values defined after the segment of its last reader."""
    slot_of: dict[int, int] = {}
    free: list[int] = []
    pending: dict[int, list[int]] = {}  # segment -> slots freed when it ends
    nslots = 0
    current = -1
    for i in order:
        s = segment_of[i]
        while current < s:
            current += 1
            free.extend(pending.pop(current - 1, []))
        if g.nodes[i][0] == "in" or last_use.get(i, -1) <= s:
            continue
        if free:
            slot = free.pop()
        else:
            slot, nslots = nslots, nslots + 1
        slot_of[i] = slot
        pending.setdefault(last_use[i], []).append(slot)
    return slot_of, nslots


def _store_lines(stores: Sequence[tuple[int, str]], out_name: str,
                 vector: bool) -> list[str]:
    """`out[i] = value;` per `(i, value)`, in order; with `vector`, the four stores of
    `i = 4m .. 4m + 3`, when all are there, as one `grid::store4(out + 4m, ...)` where the
    first of them was."""
    if not vector:
        return [f"{out_name}[{i}] = {v};" for i, v in stores]
    value = dict(stores)
    lines: list[str] = []
    done: set[int] = set()
    for i, v in stores:
        if i in done:
            continue
        quad = [i - i % 4 + d for d in range(4)]
        if all(j in value for j in quad):
            lines.append(f"grid::store4({out_name} + {quad[0]}, "
                         f"{', '.join(value[j] for j in quad)});")
            done.update(quad)
        else:
            lines.append(f"{out_name}[{i}] = {v};")
            done.add(i)
    return lines
