"""A small structured C++ writer: indentation-aware blocks and deterministic literals.

Emitters never concatenate braces or indentation by hand; they open blocks with
`Writer.block` and write statements with `Writer.line`. Floating-point constants go
through `lit`, which prints `repr(float)` (the shortest string that round-trips the
float64 value), so the same model always emits the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager


class Writer:
    """Accumulates C++ text. `block("for (...)")` writes `for (...) {`, indents, closes."""

    def __init__(self, indent: str = "  ") -> None:
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent

    def line(self, text: str = "") -> None:
        self._lines.append(self._indent * self._depth + text if text else "")

    def lines(self, *texts: str) -> None:
        for text in texts:
            self.line(text)

    def raw(self, text: str) -> None:
        """Verbatim text (a macro prelude): no indentation is added."""
        self._lines.extend(text.rstrip("\n").split("\n"))

    def comment(self, text: str) -> None:
        for part in text.split("\n"):
            self.line(f"// {part}" if part else "//")

    def doc(self, text: str) -> None:
        """A `///` documentation comment, one line per input line."""
        for part in text.strip("\n").split("\n"):
            self.line(f"/// {part}".rstrip())

    @contextmanager
    def block(self, head: str = "", tail: str = "}") -> Iterator[None]:
        self.line(f"{head} {{" if head else "{")
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            self.line(tail)

    @contextmanager
    def namespace(self, name: str) -> Iterator[None]:
        """`namespace name { ... }` without indenting its contents."""
        self.line(f"namespace {name} {{" if name else "namespace {")
        yield
        self.line(f"}}  // namespace {name}" if name else "}  // namespace")

    def extend(self, other: Writer) -> None:
        """Append another writer's lines at this writer's current depth."""
        for text in other._lines:
            self._lines.append(self._indent * self._depth + text if text else "")

    @contextmanager
    def indented(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def lit(x: float) -> str:
    """A scalar-typed C++ literal of the float64 `x`: `T(0.25)`. Exact for double."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"cannot emit the non-finite constant {x!r}")
    if x == 0.0:
        x = 0.0  # fold -0.0: the sign of a zero coefficient never matters here
    return f"T({x!r})"


def linear_combination(terms: list[tuple[float, str]], constant: float = 0.0) -> str:
    """`c0 + k1*e1 + ...` with exact zeros dropped and unit coefficients folded.

    `terms` pairs a float64 coefficient with a C++ expression; the result is a C++
    expression of type T (`T(0.0)` when every coefficient is zero)."""
    parts: list[tuple[bool, str]] = []  # (negated, expression)
    for coef, expr in terms:
        if coef == 0.0:
            continue
        if coef in (1.0, -1.0):
            parts.append((coef < 0.0, expr))
        else:
            parts.append((coef < 0.0, f"{lit(abs(coef))} * {expr}"))
    if constant != 0.0:
        parts.append((constant < 0.0, lit(abs(constant))))
    if not parts:
        return lit(0.0)
    negated, first = parts[0]
    text = f"-{first}" if negated else first
    for negated, expr in parts[1:]:
        text += f" - {expr}" if negated else f" + {expr}"
    return text
