"""The content-addressed store of compiled artifacts (DESIGN.md §5, §11).

Layout under the root (`cache_dir=` > `$GRID_RBD_CACHE_DIR` > `~/.cache/grid-rbd`), every
folder owner-only (0700) and never written through a symbolic link:

    manifest.json            name -> {"content_key", "input_key", ...}
    manifest.lock            writers of manifest.json hold it (fcntl.flock)
    bykey/<input_key>        stage-1 pointer: a file holding the content key
    store/<content_key>/     grid.cuh, wrapper.cu, robot.so, meta.json,
                             build_inputs.json, robot.build.log, integrity.json
    staging/<owner>-<token>/ builds in progress (owner = host, pid, process start time)
    locks/<input_key>.lock   one builder per input key; content-<key>.lock per entry
    logs/                    build logs of failed compiles
    quarantine/<key>-<time>-<token>/   a damaged entry moved aside (entry/, and
                             quarantine.json: what was wrong and when)

Keys. The stage-1 input key is the SHA-256 of the canonical JSON of: the URDF bytes'
digest, the canonical options, the package version, the codegen source digest (every .py
under grid_codegen) and the build identity (backend, compiler path + realpath + `--version`
+ content digest, architectures, compile command, compile-driver digest, env knobs, the
keyed compile environment). The stage-2 content key is the SHA-256 of what the compiler
sees: every generated file's digest, the build identity, plus the names `meta.json`
reports. Every key read back from disk (pointer files, the manifest) must be a 64-digit
hex digest, so none can name a path.

Integrity. `publish` records the size and SHA-256 of each entry file in `integrity.json`;
an entry is verified against it (and against its own key) before it is used, the check
cached per process by file identity. A damaged entry is moved to `quarantine/` and
reported: `register_robot` then rebuilds it, `get_robot` raises `DamagedEntryError`.

Protocol. An entry is built in its own `staging/` directory and published with one
`rename` into `store/`; a rebuild swaps the new directory with the old one in one step
(renameat2 RENAME_EXCHANGE), so a reader always finds one whole entry. Where the system
cannot swap, the old entry is renamed aside first; readers that find no entry wait on the
entry's lock, and a process killed between the two renames has its old entry restored
by the next sweep. A pointer is honoured only when the entry's `build_inputs.json` equals
the current identity. Builders of one input key serialise on its lock, so concurrent
registrations compile once; a builder killed mid-build leaves only its staging directory
(swept once its owner is gone) and releases the lock with its process. A manifest that
cannot be read is an error, never an empty store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import shutil
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from grid_rbd._integrity import (
    CODE_MODE,
    FILE_MODE,
    INTEGRITY,
    StoreError,
    atomic_write,
    exchange,
    flock,
    is_digest,
    read_text,
    secure_folder,
    verify_folder,
    write_record,
)

log = logging.getLogger("grid_rbd.store")

ARTIFACT = "robot.so"
META = "meta.json"
BUILD_INPUTS = "build_inputs.json"
RECORDED_FILES = ("grid.cuh", "wrapper.cu", ARTIFACT, META, BUILD_INPUTS, "robot.build.log")
ENTRY_FILES = (*RECORDED_FILES, INTEGRITY)
OWNER = "owner.json"
QUARANTINE_NOTE = "quarantine.json"
STORE_SCHEMA = 2

class DamagedEntryError(StoreError):
    """A store entry failed its verification; it was moved to `quarantined` (None when it
    could not be moved). `problems` lists what was wrong."""

    def __init__(self, message: str, key: str, problems: list[str],
                 quarantined: Path | None) -> None:
        super().__init__(message)
        self.key, self.problems, self.quarantined = key, problems, quarantined


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The store's root: `cache_dir`, else `$GRID_RBD_CACHE_DIR`, else ~/.cache/grid-rbd.

    An empty `cache_dir` is refused (it would mean the current directory); an empty
    `$GRID_RBD_CACHE_DIR` counts as unset."""
    if cache_dir is not None:
        text = os.fspath(cache_dir)
        if not str(text).strip():
            raise ValueError("cache_dir is empty; pass a folder for the store (or None for "
                             "$GRID_RBD_CACHE_DIR, else ~/.cache/grid-rbd)")
        if "\0" in str(text):
            raise ValueError(f"cache_dir {text!r} holds a NUL character")
        return Path(text).expanduser().absolute()
    env = os.environ.get("GRID_RBD_CACHE_DIR", "")
    if env.strip():
        return Path(env).expanduser().absolute()
    return Path.home() / ".cache" / "grid-rbd"


# -- keys ------------------------------------------------------------------------------
def canonical_json(value: Any) -> str:
    """Sorted, whitespace-free JSON: equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_tree(root: Path, pattern: str = "*.py") -> str:
    """Digest of every file matching `pattern` under `root`: relative path and bytes."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob(pattern)):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def codegen_sources_hash() -> str:
    """Digest of every .py under grid_codegen (the generator and its compile driver) and
    of the C++ headers it inlines into every generated grid.cuh (`include/grid/*.h`)."""
    import grid_codegen

    root = Path(grid_codegen.__file__).resolve().parent
    return sha256_bytes((sha256_tree(root) + sha256_tree(root / "include", "*.h")).encode())


def input_key(urdf_bytes: bytes, options: Mapping[str, Any], package_version: str,
              identity: Mapping[str, Any]) -> str:
    """Stage-1 key: what the user asked for, with which generator, on which toolchain."""
    return sha256_bytes(canonical_json({
        "schema": STORE_SCHEMA,
        "urdf_sha256": sha256_bytes(urdf_bytes),
        "options": options,
        "package_version": package_version,
        "codegen_sha256": codegen_sources_hash(),
        "build": identity,
    }).encode())


def content_key(files: Mapping[str, str], identity: Mapping[str, Any],
                names: Mapping[str, Any]) -> str:
    """Stage-2 key: the generated bytes the compiler reads and how it is invoked."""
    return sha256_bytes(canonical_json({
        "schema": STORE_SCHEMA,
        "files": {name: sha256_bytes(text.encode()) for name, text in sorted(files.items())},
        "build": identity,
        "names": names,
    }).encode())


def _read_json(path: Path) -> Any:
    """The JSON in `path` (never through a link); raises OSError / ValueError."""
    return json.loads(read_text(path))


# -- staging owners --------------------------------------------------------------------
def _process_start_time(pid: int) -> int:
    """The kernel's start time of `pid` (clock ticks since boot), 0 when unknown; with the
    pid it tells a live owner from a recycled pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _hostname() -> str:
    return socket.gethostname().replace("-", "_").replace("/", "_") or "host"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start_time: int

    @staticmethod
    def current() -> Owner:
        return Owner(_hostname(), os.getpid(), _process_start_time(os.getpid()))

    @staticmethod
    def parse(dirname: str) -> Owner | None:
        parts = dirname.split("-")
        if len(parts) < 4 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        return Owner(parts[0], int(parts[1]), int(parts[2]))

    def prefix(self) -> str:
        return f"{self.host}-{self.pid}-{self.start_time}"

    def alive(self) -> bool:
        """False only when this host can tell the owner is gone."""
        if self.host != _hostname():
            return True
        if not _pid_alive(self.pid):
            return False
        return self.start_time == 0 or _process_start_time(self.pid) in (0, self.start_time)


@dataclass(frozen=True)
class Entry:
    """A published, verified store entry."""

    content_key: str
    path: Path
    meta: dict[str, Any]
    build_inputs: dict[str, Any]

    @property
    def so_path(self) -> Path:
        return self.path / ARTIFACT


class Store:
    """One store root. Creating it checks the folders (owned by this user, writable by no
    one else) and sweeps dead staging directories.

    `recorded_files` / `code_files`: what an entry holds and which of it is code (a
    subclass keeps other files under the same protocol: `grid_rbd.consumer`)."""

    recorded_files: tuple[str, ...] = RECORDED_FILES
    code_files: tuple[str, ...] = (ARTIFACT,)

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.entries = self.root / "store"
        self.pointers = self.root / "bykey"
        self.staging = self.root / "staging"
        self.locks = self.root / "locks"
        self.logs = self.root / "logs"
        self.quarantine_dir = self.root / "quarantine"
        self.manifest_path = self.root / "manifest.json"
        self.manifest_lock = self.root / "manifest.lock"
        secure_folder(self.root, follow=True)
        for folder in (self.entries, self.pointers, self.staging, self.locks, self.logs,
                       self.quarantine_dir):
            try:
                secure_folder(folder)
            except StoreError:
                raise
            except OSError:
                if os.path.lexists(folder):
                    raise
                # A read-only store without it: reading needs none of these folders.
        self.swept = self.sweep_staging()

    # -- entries ---------------------------------------------------------------------
    def entry_path(self, key: str) -> Path:
        if not is_digest(key):
            raise ValueError(f"store key {str(key)[:80]!r} is not a 64-digit hex digest")
        return self.entries / key

    def _content_lock(self, key: str) -> Path:
        return self.locks / f"content-{key}.lock"

    def _check(self, key: str, use_cache: bool) -> tuple[list[str], Entry | None]:
        """(problems, the entry when there are none) of the present entry `key`."""
        path = self.entry_path(key)
        problems = verify_folder(path, key, self.recorded_files, code=self.code_files,
                                 use_cache=use_cache)
        if problems:
            return problems, None
        try:
            meta, build_inputs = _read_json(path / META), _read_json(path / BUILD_INPUTS)
        except (OSError, ValueError, StoreError) as exc:
            return [f"metadata cannot be read ({exc})"], None
        if not isinstance(meta, dict) or not isinstance(build_inputs, dict):
            return [f"{META} or {BUILD_INPUTS} is not a JSON object"], None
        recorded = (meta.get("built_from") or {}).get("content_key")
        if recorded != key:
            return [f"{META} describes entry {str(recorded)[:80]!r}, not {key}"], None
        return [], Entry(key, path, meta, build_inputs)

    def verify_entry(self, key: str) -> list[str]:
        """What is wrong with the published entry `key` ([] when it is sound), re-hashing
        every file (no cached result). For `grid-rbd verify`: it changes nothing; pass a
        damaged entry to `quarantine` to move it aside. A key that is not a 64-hex digest
        or an entry that does not exist is reported as a problem, never raised."""
        if not is_digest(key):
            return [f"{str(key)[:80]!r} is not a store key (64 hex digits)"]
        return self._check(key, use_cache=False)[0]

    def entry(self, key: str, use_cache: bool = True) -> Entry | None:
        """The verified entry `key`, or None when the store has none. A damaged entry is
        quarantined and raises `DamagedEntryError` (naming it and what was wrong)."""
        path = self.entry_path(key)
        if not os.path.lexists(path):
            # A rebuild without an atomic swap renames the old entry aside under the
            # entry's lock: wait for it before concluding there is none.
            try:
                with flock(self._content_lock(key)):
                    present = os.path.lexists(path)
            except OSError:  # a read-only store: no rebuild can be under way in it
                present = False
            if not present:
                return None
        problems, entry = self._check(key, use_cache)
        if entry is not None:
            return entry
        moved, problems = self.quarantine(key, problems)
        if moved is None and not problems:  # sound after all (replaced meanwhile)
            return self._check(key, use_cache=False)[1]
        where = f"moved to {moved}" if moved else "left in place (it could not be moved)"
        raise DamagedEntryError(f"store entry {path} is damaged: {'; '.join(problems)}; "
                                f"{where}", key, problems, moved)

    def quarantine(self, key: str, problems: list[str] | None = None, force: bool = False
                   ) -> tuple[Path | None, list[str]]:
        """Move the entry `key` to `quarantine/` when it (still) fails verification, or
        with `force` for the given `problems` (e.g. a descriptor that contradicts
        meta.json, which only loading shows); returns (where it went, its problems).
        (None, []) when it is sound or absent; `quarantine.json` beside the files says why
        and when. `key` may also be any other name `verify_all` reported under store/
        (a folder that is not an entry)."""
        if is_digest(key) or not key or os.sep in key or key in (".", ".."):
            path = self.entry_path(key)
        else:
            path = self.entries / key  # a plain name listed in store/: moved, not checked
            force, problems = True, problems or ["not a store key"]
        with ExitStack() as held:
            try:
                held.enter_context(flock(self._content_lock(key)))
            except OSError as exc:  # a read-only store: report, move nothing
                problems = problems or self._check(key, use_cache=False)[0]
                log.warning("store entry %s is damaged (%s) and cannot be moved aside: %s",
                            path, "; ".join(problems), exc.strerror)
                return None, problems
            if not os.path.lexists(path):
                return None, []
            found = self._check(key, use_cache=False)[0] if is_digest(key) else []
            problems = found + list(problems or []) if force else found
            if not problems:
                return None, []
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            dest = self.quarantine_dir / f"{key}-{stamp}-{secrets.token_hex(4)}"
            try:
                # The entry (whatever it is: a folder, a link) goes inside a fresh folder
                # of ours, so the note beside it is never written through a link.
                os.mkdir(dest, 0o700)
                os.rename(path, dest / "entry")
            except OSError as exc:
                log.warning("store entry %s is damaged (%s) and could not be moved aside: %s",
                            path, "; ".join(problems), exc.strerror)
                return None, problems
        try:
            atomic_write(dest / QUARANTINE_NOTE, json.dumps(
                {"key": key, "problems": problems, "time": stamp}, indent=1) + "\n")
        except OSError:
            pass
        log.warning("store entry %s is damaged (%s); moved to %s", path, "; ".join(problems),
                    dest)
        return dest, problems

    # -- pointers ----------------------------------------------------------------------
    def read_pointer(self, key: str) -> str | None:
        """The content key the stage-1 pointer `key` holds; None when there is none or it
        holds anything but a store key (a damaged pointer is reported and ignored)."""
        path = self.pointers / self.entry_path(key).name
        try:
            text = read_text(path, limit=4096).strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, StoreError) as exc:
            log.warning("ignoring the unreadable pointer %s (%s)", path, exc)
            return None
        if not is_digest(text):
            log.warning("ignoring the damaged pointer %s: it holds %r, not a store key",
                        path, text[:80])
            return None
        return text

    def write_pointer(self, key: str, target: str) -> None:
        if not is_digest(target):
            raise ValueError(f"pointer target {target!r} is not a store key")
        atomic_write(self.pointers / self.entry_path(key).name, target + "\n")

    def lookup(self, key: str, identity: Mapping[str, Any]) -> Entry | None:
        """Follow the stage-1 pointer `key`; honoured only when the entry is sound and its
        build_inputs.json equals `identity`. A damaged entry is quarantined (and so
        rebuilt by the caller)."""
        target = self.read_pointer(key)
        if target is None:
            return None
        try:
            entry = self.entry(target)
        except DamagedEntryError:
            return None  # reported and quarantined: the caller builds it again
        if entry is None or entry.build_inputs != json.loads(canonical_json(identity)):
            return None
        return entry

    # -- building ---------------------------------------------------------------------
    @contextmanager
    def build_lock(self, key: str) -> Iterator[None]:
        """Held by the one process building input key `key`."""
        with flock(self.locks / f"{self.entry_path(key).name}.lock"):
            yield

    @contextmanager
    def staging_dir(self) -> Iterator[Path]:
        """A fresh, private (0700) staging directory owned by this process; removed on
        exit unless it was published (renamed away)."""
        owner = Owner.current()
        path = self.staging / f"{owner.prefix()}-{secrets.token_hex(6)}"
        os.mkdir(path, 0o700)
        atomic_write(path / OWNER, canonical_json({
            "host": socket.gethostname(), "pid": owner.pid, "start_time": owner.start_time,
            "created": time.time()}) + "\n")
        try:
            yield path
        finally:
            if os.path.lexists(path):
                shutil.rmtree(path, ignore_errors=True)

    def publish(self, staging: Path, key: str, replace: bool = False) -> Entry:
        """Record the integrity of the finished `staging` directory and move it to
        `store/<key>`.

        An existing sound entry is kept (and `staging` dropped) unless `replace`; a
        damaged one, or any one with `replace`, is swapped with the new one in one step
        (the old one, now in `staging`, is removed), so the key never lacks an entry."""
        for name in (OWNER, INTEGRITY):
            (staging / name).unlink(missing_ok=True)
        missing = [name for name in self.recorded_files if not (staging / name).is_file()]
        if missing:
            raise RuntimeError(f"staging directory {staging} lacks {missing}")
        for name in self.recorded_files:
            os.chmod(staging / name, CODE_MODE if name in self.code_files else FILE_MODE)
            with open(staging / name, "rb") as fh:
                os.fsync(fh.fileno())
        write_record(staging, key, self.recorded_files)
        os.chmod(staging, 0o700)
        target = self.entry_path(key)
        with flock(self._content_lock(key)):
            if os.path.lexists(target):
                existing = None if replace else self._check(key, use_cache=True)[1]
                if existing is not None:
                    shutil.rmtree(staging, ignore_errors=True)
                    return existing
                self._replace(staging, target, key)
            else:
                os.rename(staging, target)
            _fsync_folder(self.entries)
        problems, entry = self._check(key, use_cache=True)
        if entry is None:
            raise StoreError(f"published entry {target} fails its own check: {problems}")
        return entry

    def _replace(self, staging: Path, target: Path, key: str) -> None:
        """Put `staging` at `target` in place of the entry there (the content lock held)."""
        if exchange(staging, target):
            shutil.rmtree(staging, ignore_errors=True)  # the old entry, swapped out
            return
        aside = self.staging / f"{Owner.current().prefix()}-replaced-{key}-{secrets.token_hex(4)}"
        os.rename(target, aside)
        os.rename(staging, target)
        shutil.rmtree(aside, ignore_errors=True)

    def sweep_staging(self) -> list[Path]:
        """Remove staging directories whose owner process is gone (an entry a killed
        rebuild had renamed aside goes back when its key has none); returns them."""
        swept = []
        try:
            children = list(self.staging.iterdir())
        except OSError:
            return swept
        for path in children:
            owner = Owner.parse(path.name)
            if owner is None:
                try:
                    stale = time.time() - path.lstat().st_mtime > 86400
                except OSError:
                    continue
                if not stale:
                    continue
            elif owner.alive():
                continue
            try:
                if path.is_symlink():
                    path.unlink(missing_ok=True)
                elif not self._restore(path):
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:  # a read-only store: sweeping is for whoever can write it
                continue
            swept.append(path)
        return swept

    def _restore(self, path: Path) -> bool:
        """Put back an entry that a killed rebuild renamed aside (`...-replaced-<key>-`)
        when its key has no entry; True when it did."""
        parts = path.name.split("-")
        if len(parts) < 6 or parts[3] != "replaced" or not is_digest(parts[4]):
            return False
        key = parts[4]
        target = self.entry_path(key)
        with flock(self._content_lock(key)):
            if os.path.lexists(target):
                return False
            os.rename(path, target)
        try:
            self.entry(key)  # verified; quarantined if the killed rebuild left it damaged
        except DamagedEntryError:
            pass
        return True

    # -- the manifest ----------------------------------------------------------------
    def read_manifest(self) -> dict[str, dict[str, Any]]:
        """name -> record ({"content_key", "input_key", ...}); {} when there is none yet.

        Raises `StoreError` when manifest.json exists but cannot be read or is not a
        JSON object of records: the store is never taken for empty."""
        try:
            data = _read_json(self.manifest_path)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, StoreError) as exc:
            raise StoreError(
                f"the store manifest {self.manifest_path} cannot be read ({exc}); the "
                "entries themselves are intact: move the file aside and register the "
                "robots again (nothing is compiled twice)") from None
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, dict) for k, v in data.items()):
            raise StoreError(f"the store manifest {self.manifest_path} is not a JSON object "
                             "of name -> record; move it aside and register the robots "
                             "again (nothing is compiled twice)")
        return data

    def record(self, name: str, record: Mapping[str, Any]) -> None:
        """Set the manifest's record of `name` (read-modify-write under manifest.lock)."""
        with flock(self.manifest_lock):
            manifest = self.read_manifest()
            manifest[name] = dict(record)
            atomic_write(self.manifest_path,
                         json.dumps(manifest, sort_keys=True, indent=1) + "\n")

    # -- verification of the whole store ---------------------------------------------
    def verify_all(self) -> dict[str, list[str]]:
        """Every item of the store and what is wrong with it: keys "manifest.json",
        "manifest.json:<name>" (each record), "bykey/<key>" (each pointer) and
        "store/<key>" (each entry), values the problems ([] when sound). Read-only:
        nothing is moved (see `quarantine`)."""
        report: dict[str, list[str]] = {}
        try:
            manifest = self.read_manifest()
            report["manifest.json"] = []
        except StoreError as exc:
            manifest, report["manifest.json"] = {}, [str(exc)]
        entries = sorted(p.name for p in self.entries.iterdir())
        for name, rec in sorted(manifest.items()):
            problems = [f"{field} {str(rec.get(field))[:80]!r} is not a store key"
                        for field in ("content_key", "input_key")
                        if not is_digest(rec.get(field))]
            if not problems and rec["content_key"] not in entries:
                problems.append(f"its entry store/{rec['content_key']} does not exist")
            report[f"manifest.json:{name}"] = problems
        for pointer in sorted(self.pointers.iterdir()):
            if pointer.name.startswith("."):
                continue
            problems = [] if is_digest(pointer.name) else ["its name is not a store key"]
            if not problems:
                target = self.read_pointer(pointer.name)
                if target is None:
                    problems.append("it holds no store key")
                elif target not in entries:
                    problems.append(f"it points at store/{target}, which does not exist")
            report[f"bykey/{pointer.name}"] = problems
        for key in entries:
            report[f"store/{key}"] = self.verify_entry(key)
        return report


def _fsync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
