"""Named per-item scratch buffers whose offsets a `Layout` computes.

Each algorithm declares its scratch (per batch item: shared memory on the GPU's block
strategy, a stack array otherwise) as named buffers of `count` entries of `width`
scalars. The layout assigns offsets in declaration order and emits them as named
`constexpr` constants; emitted code reaches a buffer only through its pointer alias
(`s_v`) and the entry stride (`s_v + 6 * 3` is body 3's velocity), never through a
hand-computed number.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid_codegen.emit.writer import Writer


@dataclass(frozen=True)
class Buffer:
    """`count` entries of `width` scalars at `offset` in the item's scratch."""

    name: str
    width: int
    count: int
    offset: int
    doc: str

    @property
    def size(self) -> int:
        return self.width * self.count

    @property
    def var(self) -> str:
        """The pointer alias emitted code uses: `s_<name>`."""
        return f"s_{self.name}"

    @property
    def constant(self) -> str:
        return f"k_{self.name}"

    def at(self, entry: int | str) -> str:
        """Pointer to entry `entry` (a body, a dof): `s_v + 6 * 3`."""
        if isinstance(entry, int):
            if not 0 <= entry < self.count:
                raise IndexError(f"buffer {self.name} has {self.count} entries, asked {entry}")
            if entry == 0:
                return self.var
        if self.width == 1:
            return f"({self.var} + {entry})"
        return f"({self.var} + {self.width} * {entry})"

    def __getitem__(self, index: int | str) -> str:
        """Element access `s_q[index]` (an int or a C++ index expression)."""
        if isinstance(index, int) and not 0 <= index < self.size:
            raise IndexError(f"buffer {self.name} has {self.size} scalars, asked {index}")
        return f"{self.var}[{index}]"


class Layout:
    """The scratch layout of one algorithm's item function, emitted as `layout_<name>`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.suffix = ""  # the strategy, when one algorithm has several layouts
        self._buffers: dict[str, Buffer] = {}
        self._size = 0

    @property
    def namespace(self) -> str:
        return f"layout_{self.name}" + (f"_{self.suffix}" if self.suffix else "")

    @property
    def size(self) -> int:
        """Scalars per item; at least 1 so the stack array is never empty."""
        return max(self._size, 1)

    @property
    def size_constant(self) -> str:
        return f"{self.namespace}::kSize"

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        return tuple(self._buffers.values())

    def add(self, name: str, width: int, count: int = 1, doc: str = "") -> Buffer:
        if name in self._buffers:
            raise ValueError(f"layout {self.name} already has a buffer {name}")
        if width < 1 or count < 0:
            raise ValueError(f"buffer {name}: width {width} / count {count} out of range")
        buf = Buffer(name, width, count, self._size, doc)
        self._buffers[name] = buf
        self._size += buf.size
        return buf

    def __getitem__(self, name: str) -> Buffer:
        return self._buffers[name]

    def emit_constants(self, w: Writer) -> None:
        """`namespace layout_<name> { constexpr int kV = 12; ... kSize }`."""
        w.doc(f"Scratch layout of `{self.name}` (scalars per batch item).")
        with w.block(f"namespace {self.namespace}", "}  // namespace " + self.namespace):
            for buf in self.buffers:
                shape = f"{buf.count} x {buf.width}" if buf.count != 1 else f"{buf.width}"
                w.line(f"constexpr int {buf.constant} = {buf.offset};  "
                       f"// {buf.name} [{shape}]{': ' + buf.doc if buf.doc else ''}")
            w.line(f"constexpr int kSize = {self.size};")

    def emit_aliases(self, w: Writer, base: str = "s") -> None:
        """Inside the item function: `T* __restrict__ s_v = s + layout_x::kV;`."""
        for buf in self.buffers:
            if buf.size:
                w.line(f"T* GRID_RESTRICT {buf.var} = {base} + "
                       f"{self.namespace}::{buf.constant};")
