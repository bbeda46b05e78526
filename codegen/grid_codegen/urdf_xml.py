"""Safe XML reading for URDF: no DOCTYPE, no entities, line numbers kept for errors."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.parsers import expat


class URDFError(ValueError):
    """A URDF that cannot become a robot model; the message names file and element."""

    def __init__(self, source: str, element: str, message: str, line: int | None = None):
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {element}: {message}")
        self.source = source
        self.element = element
        self.line = line


@dataclass
class XmlDocument:
    """A parsed document plus the source line of every element."""

    root: ET.Element
    source: str
    lines: dict[int, int]

    def line(self, element: ET.Element) -> int | None:
        return self.lines.get(id(element))

    def error(self, element: ET.Element, what: str, message: str) -> URDFError:
        return URDFError(self.source, what, message, self.line(element))

    def floats(self, element: ET.Element, attr: str, what: str, count: int,
               default: tuple[float, ...] | None = None) -> tuple[float, ...]:
        """`count` finite floats from a whitespace-separated attribute."""
        text = element.get(attr)
        if text is None:
            if default is None:
                raise self.error(element, what, f"<{element.tag}> has no '{attr}' attribute")
            return default
        try:
            values = tuple(float(tok) for tok in text.split())
        except ValueError:
            raise self.error(element, what, f"{attr}=\"{text}\" is not a list of numbers") from None
        if len(values) != count:
            raise self.error(element, what,
                             f"{attr}=\"{text}\" has {len(values)} numbers; expected {count}")
        if not all(math.isfinite(v) for v in values):
            raise self.error(element, what, f"{attr}=\"{text}\" holds NaN or inf")
        return values

    def number(self, element: ET.Element, attr: str, what: str,
               default: float | None = None) -> float:
        return self.floats(element, attr, what, 1,
                           None if default is None else (default,))[0]


def parse_xml(data: bytes, source: str) -> XmlDocument:
    """Parse `data` with expat, refusing any DOCTYPE (and so any entity declaration)."""
    builder = ET.TreeBuilder()
    lines: dict[int, int] = {}
    parser = expat.ParserCreate()

    def refuse_doctype(name: str, *_: object) -> None:
        raise URDFError(source, f"<!DOCTYPE {name}>",
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
    return XmlDocument(builder.close(), source, lines)
