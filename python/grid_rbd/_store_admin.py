"""Store maintenance for `grid-rbd rm` and `grid-rbd gc`: forget names, delete what no name
refers to. Reading and verifying the store is `_store.Store`'s; this module only removes.

What is referenced: the entries (`store/<content key>`) that a manifest record names, and
the pointers (`bykey/<input key>`) that lead to one of them. Everything else is garbage:
entries and pointers no name reaches, quarantined entries, logs of failed builds and
staging folders whose builder is gone. A registration publishes its entry and pointer a
moment before it records its name, so `gc` keeps what was written in the last
`min_age_s` seconds (default ten minutes): it never deletes a build that is still being
registered.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grid_rbd._integrity import flock, is_digest
from grid_rbd._store import Store

DEFAULT_MIN_AGE_S = 600.0


@dataclass
class Removal:
    """What a `remove_names` or `collect_garbage` call removed (or, dry, would remove)."""

    names: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    pointers: list[str] = field(default_factory=list)
    other: list[Path] = field(default_factory=list)
    bytes_freed: int = 0
    kept_young: int = 0

    @property
    def empty(self) -> bool:
        return not (self.names or self.entries or self.pointers or self.other)


def folder_size(path: Path) -> int:
    """Bytes of the regular files below `path` (links are not followed)."""
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file() and not item.is_symlink():
                total += item.lstat().st_size
        except OSError:
            continue
    return total


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.lstat().st_mtime
    except OSError:
        return float("inf")


def remove_names(store: Store, names: Iterable[str]) -> list[str]:
    """Drop `names` from the manifest (under its lock); returns the ones that were there.
    Their entries stay until `collect_garbage` (which `grid-rbd rm` runs next)."""
    import json

    from grid_rbd._integrity import atomic_write

    wanted = list(dict.fromkeys(names))
    with flock(store.manifest_lock):
        manifest = store.read_manifest()
        removed = [n for n in wanted if n in manifest]
        if removed:
            for name in removed:
                del manifest[name]
            atomic_write(store.manifest_path,
                         json.dumps(manifest, sort_keys=True, indent=1) + "\n")
    return removed


def collect_garbage(store: Store, dry_run: bool = False,
                    min_age_s: float = DEFAULT_MIN_AGE_S) -> Removal:
    """Delete what no manifest name refers to (see the module doc); `dry_run` only
    reports. Entries and pointers younger than `min_age_s` are kept (`kept_young`)."""
    out = Removal()
    out.other.extend(store.swept)  # dead staging folders, already removed by Store()
    referenced = {rec.get("content_key") for rec in store.read_manifest().values()}
    for pointer in sorted(store.pointers.iterdir()):
        if pointer.name.startswith("."):
            continue
        target = store.read_pointer(pointer.name) if is_digest(pointer.name) else None
        if target in referenced:
            continue
        if _age_s(pointer) < min_age_s:
            out.kept_young += 1
            continue
        out.pointers.append(pointer.name)
        if not dry_run:
            pointer.unlink(missing_ok=True)
    for path in sorted(store.entries.iterdir()):
        key = path.name
        if key in referenced:
            continue
        if _age_s(path) < min_age_s:
            out.kept_young += 1
            continue
        planted = path.is_symlink() or not path.is_dir()  # never followed: removed as is
        size = 0 if planted else folder_size(path)
        if not dry_run:
            if planted:
                path.unlink(missing_ok=True)
            elif is_digest(key):
                # The entry's lock: no reader is half-way through verifying it.
                with flock(store._content_lock(key)):
                    shutil.rmtree(path, ignore_errors=True)
            else:
                shutil.rmtree(path, ignore_errors=True)
        out.entries.append(key)
        out.bytes_freed += size
    for folder in (store.quarantine_dir, store.logs):
        for path in sorted(folder.iterdir()):
            real_dir = path.is_dir() and not path.is_symlink()
            out.bytes_freed += folder_size(path) if real_dir else path.lstat().st_size
            out.other.append(path)
            if not dry_run:
                if real_dir:
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
    return out
