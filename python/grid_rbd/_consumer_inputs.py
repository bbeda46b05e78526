"""The caller's inputs of a consumer artifact (`grid_rbd.consumer.build_artifact`),
checked before anything is keyed or compiled: source and header paths (existing files,
distinct names, no NUL), preprocessor defines (`NAME` or `NAME=VALUE`, sorted so the key
does not depend on their order) and extra compiler or linker flags (a list, no NUL).
Each check raises `ValueError` (or `FileNotFoundError`) naming the offending input."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grid_rbd._store import sha256_bytes


def files(values: Sequence[str | os.PathLike], what: str,
          suffixes: tuple[str, ...] | None) -> list[Path]:
    if isinstance(values, (str, os.PathLike)):
        raise ValueError(f"{what}s must be a list of paths, not one path")
    out = []
    for value in values:
        text = os.fspath(value)
        if "\0" in text:
            raise ValueError(f"{what} {text!r} holds a NUL character")
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{what} not found: {path}")
        if suffixes is not None and path.suffix not in suffixes:
            raise ValueError(f"{what} {path.name}: expected a file ending in one of "
                             f"{', '.join(suffixes)}")
        out.append(path)
    if len({p.name for p in out}) != len(out):
        raise ValueError(f"{what}s must have distinct file names (each is one object): "
                         f"{[p.name for p in out]}")
    return out


def defines(defines: Sequence[str] | Mapping[str, Any] | None) -> list[str]:
    if not defines:
        return []
    if isinstance(defines, Mapping):
        items = [k if v is None else f"{k}={v}" for k, v in defines.items()]
    else:
        items = [str(d) for d in defines]
    for item in items:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*(=[^\0\n\r]*)?\Z", item):
            raise ValueError(f"define {item[:80]!r} is not NAME or NAME=VALUE")
    return sorted(items)


def flags(values: Sequence[str], what: str) -> list[str]:
    if isinstance(values, str):
        raise ValueError(f"{what} must be a list of flags, not a str")
    out = [str(v) for v in values]
    for flag in out:
        if "\0" in flag:
            raise ValueError(f"{what} entry {flag!r} holds a NUL character")
    return out


def digests(paths: list[Path]) -> dict[str, str]:
    return {p.name: sha256_bytes(p.read_bytes()) for p in paths}
