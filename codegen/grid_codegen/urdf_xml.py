"""Safe XML reading for URDF: no DOCTYPE, no entities, no NUL, validated names, strict
numbers, and line numbers for errors.

Names (robot, link, joint) are untrusted text that later reaches generated code, log
lines and error messages, so they are checked where they enter (`name_problem`): no
control characters (Unicode Cc: NUL, TAB, CR, LF, the C1 block), no format characters
(Cf: bidirectional overrides, zero-width joiners), no line or paragraph separators (Zl,
Zp), no surrogates (Cs), private-use (Co) or unassigned (Cn) code points, not empty and at
most `MAX_NAME_LENGTH` characters. Other Unicode letters, spaces and punctuation are fine.
"""

from __future__ import annotations

import math
import re
import unicodedata
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.parsers import expat

MAX_NAME_LENGTH = 256
"""The longest name accepted (characters): far above any real robot's names, far below
what would make keys, logs or generated code unwieldy."""


_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character (e.g. a bidirectional override)",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
}

# A decimal number as URDF writes it (C's strtod syntax, without hex, nan or inf, which
# `floats` refuses with their own message).
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z", re.ASCII)
_NUMBER_LIST = re.compile(r"\s*(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:\s+|\Z))*\Z",
                          re.ASCII)
_XML_DECLARATION = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*<\?xml[^>]*?encoding\s*=\s*[\"']([A-Za-z0-9._-]{1,40})")
_ASCII_COMPATIBLE = {None, "utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1",
                     "latin1"}
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)\Z", re.IGNORECASE)


class URDFError(ValueError):
    """A URDF that cannot become a robot model; the message names file and element."""

    def __init__(self, source: str, element: str, message: str, line: int | None = None):
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {element}: {message}")
        self.source = source
        self.element = element
        self.line = line


def quoted(text: str, limit: int = 80) -> str:
    """`text` in double quotes for a message: at most `limit` characters, anything that is
    not printable (controls, separators, bidi overrides, surrogates) as a Python escape."""
    short = text if len(text) <= limit else text[:limit - 3] + "..."
    return '"' + "".join(ch if ch.isprintable() and ch != '"' else
                         ('\\"' if ch == '"' else ascii(ch)[1:-1]) for ch in short) + '"'


def name_problem(name: object, max_length: int = MAX_NAME_LENGTH) -> str | None:
    """Why `name` cannot be a robot, link, joint or registration name, or None when it
    can. The answer reads after the name: "name 'x' " + problem."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not a str"
    if not name:
        return "is empty"
    if len(name) > max_length:
        return f"is {len(name)} characters long; at most {max_length} are allowed"
    if name.isascii() and name.isprintable():  # the common case, without a per-char walk
        return None
    for index, ch in enumerate(name):
        what = _REFUSED_CATEGORIES.get(unicodedata.category(ch))
        if what is not None:
            return (f"holds {what}, U+{ord(ch):04X}, at index {index}; names must be "
                    "printable text")
    return None


@dataclass
class XmlDocument:
    """A parsed document; the source line of an element is found when an error needs it."""

    root: ET.Element
    source: str
    data: bytes
    _lines: dict[int, int] | None = None

    def line(self, element: ET.Element | None) -> int | None:
        if element is None:
            return None
        if self._lines is None:
            self._lines = _line_map(self.root, self.data)
        return self._lines.get(id(element))

    def error(self, element: ET.Element | None, what: str, message: str) -> URDFError:
        return URDFError(self.source, what, message, self.line(element))

    def name(self, element: ET.Element, attr: str, what: str) -> str:
        """The validated name in attribute `attr` of `element` (`what` names the element
        in the error: e.g. "<joint> name")."""
        value = element.get(attr)
        if value is None:
            raise self.error(element, what, f"<{element.tag}> has no '{attr}' attribute")
        problem = name_problem(value)
        if problem is not None:
            raise self.error(element, what, f"{attr}={quoted(value)} {problem}")
        return value

    def floats(self, element: ET.Element, attr: str, what: str, count: int,
               default: tuple[float, ...] | None = None) -> tuple[float, ...]:
        """`count` finite floats from a whitespace-separated attribute."""
        text = element.get(attr)
        if text is None:
            if default is None:
                raise self.error(element, what, f"<{element.tag}> has no '{attr}' attribute")
            return default
        tokens = text.split()
        if len(tokens) == count and _NUMBER_LIST.match(text):
            values = tuple(map(float, tokens))
            # The syntax admits no NaN; only an overflow (1e999) can be infinite.
            if -math.inf < min(values) and max(values) < math.inf:
                return values
        match = _NUMBER.match
        shown = quoted(text)
        if any(_NON_FINITE.match(t) for t in tokens):
            raise self.error(element, what, f"{attr}={shown} holds NaN or inf")
        if not all(match(t) for t in tokens):
            raise self.error(element, what, f"{attr}={shown} is not a list of numbers")
        if len(tokens) != count:
            raise self.error(element, what, f"{attr}={shown} has {len(tokens)} numbers; "
                             f"expected {count}")
        raise self.error(element, what, f"{attr}={shown} overflows a double")  # 1e999

    def number(self, element: ET.Element, attr: str, what: str,
               default: float | None = None) -> float:
        """One finite float from an attribute (`default` when it is absent)."""
        text = element.get(attr)
        if text is None and default is not None:
            return default
        if text is not None and _NUMBER.match(text.strip()):
            value = float(text)
            if -math.inf < value < math.inf:
                return value
        return self.floats(element, attr, what, 1)[0]  # raises the precise error


def _declared_encoding(data: bytes) -> str | None:
    match = _XML_DECLARATION.match(data)
    return match.group(1).decode("ascii").lower() if match else None


def parse_xml(data: bytes, source: str) -> XmlDocument:
    """Parse `data` with expat, refusing any DOCTYPE (and so any entity declaration) and
    NUL bytes (which also refuses UTF-16 and UTF-32, whose ASCII text holds NULs).

    A document that provably holds no DOCTYPE (no `<!DOCTYPE` bytes, in an encoding where
    those bytes would show) is parsed by ElementTree's C parser without a Python call per
    element; any other goes through the checking parser, which refuses the declaration.
    Both build the same tree."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise URDFError(source, "XML", f"the document holds a NUL byte at offset {nul} "
                        "(a URDF is text)", data.count(b"\n", 0, nul) + 1)
    if (b"<!DOCTYPE" not in data and b"<!ENTITY" not in data
            and _declared_encoding(data) in _ASCII_COMPATIBLE):
        parser = ET.XMLParser(target=ET.TreeBuilder())
        try:
            parser.feed(data)
            root = parser.close()
        except ET.ParseError as exc:
            raise URDFError(source, "XML", f"malformed XML: {expat.ErrorString(exc.code)}",
                            exc.position[0]) from None
        return XmlDocument(root, source, data)
    lines: dict[int, int] = {}
    root = _checked_parse(data, source, lines)
    return XmlDocument(root, source, data, lines)


def _checked_parse(data: bytes, source: str, lines: dict[int, int]) -> ET.Element:
    """The tree of `data` built through expat's Python handlers: refuses a DOCTYPE where it
    starts and records each element's line in `lines` (by id)."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()

    def refuse_doctype(name: str, *_: object) -> None:
        raise URDFError(source, f"<!DOCTYPE {name[:40]}>",
                        "DOCTYPE declarations are refused (entities are never expanded)",
                        parser.CurrentLineNumber)

    def start(tag: str, attrs: dict[str, str]) -> None:
        element = builder.start(tag, attrs)
        lines[id(element)] = parser.CurrentLineNumber

    parser.StartDoctypeDeclHandler = refuse_doctype
    parser.EntityDeclHandler = lambda name, *_: refuse_doctype(name)
    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise URDFError(source, "XML", f"malformed XML: {expat.ErrorString(exc.code)}",
                        exc.lineno) from None
    return builder.close()


def _line_map(root: ET.Element, data: bytes) -> dict[int, int]:
    """id(element) -> line for the tree `root` parsed from `data`: a second parse in the
    same document order (only ever run to word an error)."""
    lines: dict[int, int] = {}
    try:
        twin = _checked_parse(data, "", lines)
    except URDFError:
        return {}
    in_order = [lines[id(e)] for e in twin.iter()]
    return {id(e): line for e, line in zip(root.iter(), in_order, strict=True)}
