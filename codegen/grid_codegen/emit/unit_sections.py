"""What of `grid.cuh` each translation unit of a split build reads.

A split build compiles each algorithm's kernels in a unit of its own, and every unit used
to read the whole header: for g1 that is 20 MB, about 10 s of nvcc's front ends (cudafe++
and the host compiler) per unit, whatever the unit compiles. So the header wraps each
traced pass, each algorithm's item functions and each algorithm's kernels in a *section*:

    #if !defined(GRID_UNIT) || defined(GRID_NEED_<section>)
    ...
    #endif

and an algorithm's unit defines `GRID_UNIT` and the sections it needs: its algorithm's
items and kernels and the passes they call.
A build that reads the whole header (the single-file build, the wrapper of a split one)
defines no `GRID_UNIT`.

What is written outside an algorithm's section (and every pass called from there) stays
outside every section: read by every unit, as before. The consumer device API, appended
after the kernels, is left out of every unit (`generate`). Builds of the collision
profile, whose tables and items call into the sections, keep them, but their units read
all of the header.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from grid_codegen.emit.writer import Writer
from grid_codegen.symbolic.emit import PassLibrary, emit_pass


def guard(section: str) -> str:
    """The preprocessor condition under which `section` is read."""
    return f"!defined(GRID_UNIT) || defined(GRID_NEED_{section})"


@dataclass
class UnitSections:
    """The sections of one header as it is generated: `items` and `kernels` are the
    writers of the item functions and of the kernels; `library` the traced passes."""

    library: PassLibrary
    items: Writer
    kernels: Writer
    partial: bool = True
    """Whether units read only their sections (else every unit reads all the header)."""
    _ranges: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)
    _passes: dict[str, set[str]] = field(default_factory=dict)
    _touched_inside: list[tuple[int, int]] = field(default_factory=list)
    _lines: dict[str, int] = field(default_factory=dict)  # section -> lines, once emitted

    @contextmanager
    def section(self, algorithm: str) -> Iterator[None]:
        """What is written to the items and kernels writers inside is `algorithm`'s, and
        so is every pass it calls (several `with` blocks of one algorithm add up)."""
        starts = self.items.line_count(), self.kernels.line_count()
        touched = len(self.library.touched)
        yield
        ranges = self._ranges.setdefault(algorithm, [])
        ranges.append(("items", starts[0], self.items.line_count()))
        ranges.append(("kernels", starts[1], self.kernels.line_count()))
        end = len(self.library.touched)
        self._passes.setdefault(algorithm, set()).update(self.library.touched[touched:end])
        self._touched_inside.append((touched, end))

    def needs(self, algorithm: str) -> list[str]:
        """The sections `algorithm`'s unit reads, sorted (empty when not sectioned)."""
        if not self.partial:
            return []
        needed = {f"kernels_{algorithm}", f"items_{algorithm}"}
        needed.update(f"pass_{p}" for p in self._passes.get(algorithm, ()))
        return sorted(needed)

    def weight(self, algorithm: str) -> int:
        """Lines of the header `algorithm`'s unit compiles (once the header is emitted):
        the split build starts the heaviest units first (`compile.compile_units`)."""
        return sum(self._lines.get(section, 0) for section in self.needs(algorithm))

    def _shared_passes(self) -> set[str]:
        """Passes called from outside every section: read by every unit."""
        inside = [False] * len(self.library.touched)
        for start, end in self._touched_inside:
            inside[start:end] = [True] * (end - start)
        return {p for p, flag in zip(self.library.touched, inside, strict=True) if not flag}

    def emit_passes(self, w: Writer) -> None:
        shared = self._shared_passes()
        for p in self.library.passes.values():
            sectioned = p.name not in shared
            if sectioned:
                w.raw(f"#if {guard('pass_' + p.name)}")
            start = w.line_count()
            emit_pass(w, p)
            self._lines[f"pass_{p.name}"] = w.line_count() - start
            if sectioned:
                w.raw("#endif")

    def emit_items(self, w: Writer) -> None:
        self._emit_writer(w, "items", self.items)

    def emit_kernels(self, w: Writer) -> None:
        self._emit_writer(w, "kernels", self.kernels)

    def _emit_writer(self, w: Writer, kind: str, source: Writer) -> None:
        owner: list[str | None] = [None] * source.line_count()
        for algorithm, ranges in self._ranges.items():
            for k, start, end in ranges:
                if k == kind:
                    owner[start:end] = [algorithm] * (end - start)
        start = 0
        for end in range(1, len(owner) + 1):  # runs of lines of one owner
            if end < len(owner) and owner[end] == owner[start]:
                continue
            name = owner[start]
            if name is not None:
                w.raw(f"#if {guard(f'{kind}_{name}')}")
                section = f"{kind}_{name}"
                self._lines[section] = self._lines.get(section, 0) + end - start
            w.extend(source, start, end)
            if name is not None:
                w.raw("#endif")
            start = end
