"""A small structured C++ writer: indentation-aware blocks and deterministic literals.

Emitters never concatenate braces or indentation by hand; they open blocks with
`Writer.block` and write statements with `Writer.line`. Floating-point constants go
through `lit`, which prints `repr(float)` (the shortest string that round-trips the
float64 value), so the same model always emits the same bytes.

Untrusted text (robot, link, joint and frame names from a URDF, user option values)
reaches generated code only through `c_string` (a string literal) and `comment_text`
(inside a comment). Both return printable ASCII that cannot end the literal, the comment
or the line. The writer itself refuses any line holding a byte outside printable ASCII
(0x20-0x7E), so a forgotten escape fails generation instead of emitting a line break:
C++ ends a line at a bare carriage return too, and a backslash at the end of a `//`
comment continues it onto the next line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class Writer:
    """Accumulates C++ text. `block("for (...)")` writes `for (...) {`, indents, closes."""

    def __init__(self, indent: str = "  ") -> None:
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent

    def line(self, text: str = "") -> None:
        _check_printable(text)
        self._lines.append(self._indent * self._depth + text if text else "")

    def lines(self, *texts: str) -> None:
        for text in texts:
            self.line(text)

    def raw(self, text: str) -> None:
        """Verbatim text (a macro prelude): no indentation is added."""
        parts = text.rstrip("\n").split("\n")
        for part in parts:
            _check_printable(part)
        self._lines.extend(parts)

    def comment(self, text: str) -> None:
        """`// text`, one comment line per `\\n` of `text` (the emitter's own text; wrap
        any name in `comment_text` first)."""
        for part in text.split("\n"):
            self.line(f"// {part}".rstrip() if part else "//")

    def doc(self, text: str) -> None:
        """A `///` documentation comment, one line per input line."""
        for part in text.strip("\n").split("\n"):
            self.line(f"/// {part}".rstrip())

    def table(self, ctype: str, name: str, values: Sequence[object], per_line: int = 24,
              align: int = 0) -> None:
        """`GRID_TABLE ctype name[n] = {...};`, `per_line` values a line (at least one
        entry: a C++ array has no zero size); `align`: an `alignas` in bytes."""
        aligned = f"alignas({align}) " if align else ""
        self.line(f"{aligned}GRID_TABLE {ctype} {name}[{max(1, len(values))}] = {{")
        text = [str(v) for v in values] or ["0"]
        for k in range(0, len(text), per_line):
            self.line("    " + ", ".join(text[k:k + per_line]) + ",")
        self.line("};")

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

    def extend(self, other: Writer, start: int = 0, end: int | None = None) -> None:
        """Append another writer's lines (those from `start` to `end`) at this writer's
        current depth."""
        for text in other._lines[start:end]:
            self._lines.append(self._indent * self._depth + text if text else "")

    def line_count(self) -> int:
        """The number of lines written (not `__len__`: an empty writer stays truthy)."""
        return len(self._lines)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def _check_printable(text: str) -> None:
    bad = _UNPRINTABLE.search(text)
    if bad is not None:
        raise ValueError(f"generated code may hold printable ASCII only; got "
                         f"{bad.group()!r} at column {bad.start()} of {text[:60]!r} (a name "
                         "that bypassed c_string / comment_text?)")
    if text.endswith("\\") and "//" in text:
        raise ValueError(f"a comment line ends in a backslash, which would continue it onto "
                         f"the next line: {text[:60]!r}")


_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")
# Kept as they are inside comments; everything else is percent-encoded (UTF-8 bytes).
_COMMENT_SAFE = re.compile(r"[A-Za-z0-9_.+:@/ =,()\[\]-]")


def comment_text(name: str) -> str:
    """`name` for a `//` comment: printable ASCII, no backslash, no `?`, `*` or quotes;
    other characters as `%XX` of their UTF-8 bytes (`%` itself is `%25`). Only for
    reading: the exact name travels in `c_string` literals."""
    out = []
    for ch in str(name):
        if _COMMENT_SAFE.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def c_string(text: str) -> str:
    """A C/C++ string literal whose bytes are exactly `text` in UTF-8.

    Printable ASCII stays as it is except `"`, `\\` and `?` (no trigraph can form); every
    other byte is a three-digit octal escape, so the literal is printable ASCII, one line,
    and a following character can never extend an escape. Refuses lone surrogates and NUL
    (the ABI's strings are NUL-terminated: a NUL would truncate the name)."""
    data = str(text).encode("utf-8")  # a lone surrogate raises UnicodeEncodeError
    if b"\0" in data:
        raise ValueError(f"a string for generated code holds NUL: {text!r}")
    out = ['"']
    for b in data:
        ch = chr(b)
        if 0x20 <= b <= 0x7E and ch not in '"\\?':
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def real(x: float) -> str:
    """A double literal of the float64 `x` (`0.25`; exact); -0.0 folds to 0.0, and a
    non-finite value is refused."""
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"cannot emit the non-finite constant {x!r}")
    if x == 0.0:
        x = 0.0  # fold -0.0: the sign of a zero coefficient never matters here
    return repr(x)


def lit(x: float) -> str:
    """A scalar-typed C++ literal of the float64 `x`: `T(0.25)`. Exact for double."""
    return f"T({real(x)})"


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
