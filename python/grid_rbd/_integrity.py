"""File safety for folders that hold code (the store, the JAX handler's folder).

* Digests: `write_record` records the size and SHA-256 of an entry's files in
  `integrity.json` when it is published; `verify_folder` checks them before anything in
  the folder is loaded. A check that passed is remembered per process by the file's
  (path, device, inode, size, mtime, ctime), so a warm load re-hashes nothing.
* Ownership and modes: folders are created owner-only (0700) and checked to be real
  directories (not symbolic links) owned by this user and writable by no one else;
  code files (`robot.so`) are made owner-only before they are published.
* No link following: lock files, records and metadata are opened with `O_NOFOLLOW`, so a
  link planted in the store can neither redirect a write nor feed a read.
* `exchange` swaps two directories in one step (renameat2 RENAME_EXCHANGE), which is how
  a rebuilt entry replaces the old one without a moment where neither exists.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

INTEGRITY = "integrity.json"
RECORD_SCHEMA = 1
FOLDER_MODE = 0o700
FILE_MODE = 0o600
CODE_MODE = 0o700  # a shared object: read and map by its owner only
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_CHUNK = 1 << 20

_VERIFIED: set[tuple[Any, ...]] = set()
_VERIFIED_LOCK = threading.Lock()


class StoreError(RuntimeError):
    """The store (or another folder that holds code) is damaged or unsafe to use; the
    message names the path and what to do."""


def is_digest(value: object) -> bool:
    """Whether `value` is a 64-digit lower-case hex SHA-256 (the only form a store key
    takes, so a key read from disk can never be a path)."""
    return isinstance(value, str) and _HEX64.match(value) is not None


# -- folders -----------------------------------------------------------------------------
def _owner_problem(path: Path, st: os.stat_result, what: str) -> str | None:
    uid = os.getuid()
    if st.st_uid not in (uid, 0):
        return f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {uid})"
    return None


def secure_folder(path: Path, *, follow: bool = False) -> Path:
    """Make sure `path` is a folder that only this user can change, creating it (0700) when
    missing. A folder of ours that group or others could write is tightened (chmod go-w);
    a symbolic link (unless `follow`: the store root may be one), a non-folder, or a folder
    of another user is a `StoreError`."""
    try:
        os.mkdir(path, FOLDER_MODE)
    except FileExistsError:
        pass
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return secure_folder(path, follow=follow)
    st = os.stat(path) if follow else os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StoreError(f"{path} is a symbolic link; a store folder must be a real folder "
                         "(remove the link)")
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"{path} is not a folder; the store needs a folder there")
    problem = _owner_problem(path, st, "folder")
    if problem is not None:
        raise StoreError(f"{problem}: another user could replace the code loaded from it; "
                         "use a store of your own (cache_dir= or GRID_RBD_CACHE_DIR)")
    if st.st_mode & 0o022 and not _read_only_mount(path):
        if st.st_uid != os.getuid():
            raise StoreError(f"folder {path} is writable by group or others (mode "
                             f"{stat.S_IMODE(st.st_mode):04o}) and not yours to fix")
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)
    return path


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def private_folder_problem(path: Path) -> str | None:
    """Why `path` is not a private folder of this user (a real directory, owned by this
    user, mode 0700 or stricter), or None when it is."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be examined ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; a private folder is 0700"
    return None


# -- files without link following -----------------------------------------------------------
def open_nofollow(path: Path | str, flags: int, mode: int = FILE_MODE,
                  dir_fd: int | None = None) -> int:
    """`os.open` that refuses a symbolic link in the last component (`StoreError`)."""
    try:
        return os.open(path, flags | _NOFOLLOW, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{path} is a symbolic link; files in the store are never "
                             "followed through links (remove it)") from None
        raise


@contextmanager
def flock(path: Path) -> Iterator[None]:
    """An exclusive `fcntl.flock` on the lock file `path` (created 0600 when missing,
    never through a symbolic link); released when the block ends or the process dies.

    flock binds the lock to this open file description, so it also excludes other
    threads of this process (each acquisition opens the file anew)."""
    fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"lock file {path} is not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_text(path: Path, dir_fd: int | None = None, limit: int = 64 << 20) -> str:
    """The UTF-8 text of `path` (not through a link; at most `limit` bytes)."""
    fd = open_nofollow(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, _CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise StoreError(f"{path} is larger than {limit} bytes")
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def atomic_write(path: Path, text: str, mode: int = FILE_MODE) -> None:
    """Write `text` to `path` through a fresh sibling file (O_EXCL, never a link) and a
    rename, so readers see the old or the new content."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def fd_digest(fd: int) -> str:
    """SHA-256 (hex) of what `fd` reads from its start."""
    digest = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return digest.hexdigest()
        digest.update(chunk)


# -- integrity records ---------------------------------------------------------------------
def write_record(folder: Path, key: str, names: Sequence[str]) -> dict[str, Any]:
    """Record size and SHA-256 of `names` in `folder/integrity.json`, with the key the
    folder is published under; returns the record."""
    files = {}
    for name in names:
        fd = open_nofollow(folder / name, os.O_RDONLY)
        try:
            files[name] = {"size": os.fstat(fd).st_size, "sha256": fd_digest(fd)}
        finally:
            os.close(fd)
    record = {"schema": RECORD_SCHEMA, "key": key, "files": files}
    atomic_write(folder / INTEGRITY, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def _parse_record(text: str, key: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        record = json.loads(text)
    except ValueError as exc:
        return None, f"{INTEGRITY} is not JSON ({exc})"
    if not isinstance(record, dict) or record.get("schema") != RECORD_SCHEMA:
        return None, f"{INTEGRITY} is not a schema-{RECORD_SCHEMA} integrity record"
    if record.get("key") != key:
        return None, (f"{INTEGRITY} describes entry {str(record.get('key'))[:80]!r}, not "
                      f"{key} (an entry moved or copied under another key)")
    files = record.get("files")
    if not isinstance(files, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("size"), int) and is_digest(v.get("sha256"))
            for v in files.values()):
        return None, f"{INTEGRITY} has no valid file list"
    return record, None


def verify_folder(folder: Path, key: str, names: Sequence[str], code: Sequence[str] = (),
                  use_cache: bool = True) -> list[str]:
    """What is wrong with `folder` against its `integrity.json` ([] when nothing is).

    Checks that the folder is a real directory owned by this user and writable by no one
    else, that its record names `key`, that each of `names` is a regular file (not a
    link) with the recorded size and SHA-256, and that each of `code` is not writable by
    group or others. Files are read through one open directory, so an entry swapped in
    between is never half-read. `use_cache`: skip hashing a file whose (path, inode, size,
    mtime, ctime) already passed in this process."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except FileNotFoundError:
        return [f"{folder} does not exist"]
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(folder):
            return [f"{folder} is a symbolic link, not an entry folder"]
        return [f"{folder} cannot be opened ({exc.strerror})"]
    problems: list[str] = []
    try:
        st = os.fstat(dir_fd)
        owner = _owner_problem(folder, st, "folder")
        if owner is not None:
            problems.append(owner)
        elif st.st_mode & 0o022:
            problems.append(f"folder {folder} is writable by group or others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o})")
        try:
            text = read_text(Path(INTEGRITY), dir_fd=dir_fd)
        except (OSError, UnicodeDecodeError, StoreError) as exc:
            problems.append(f"{INTEGRITY} cannot be read ({_reason(exc)})")
            return problems
        record, problem = _parse_record(text, key)
        if record is None:
            problems.append(str(problem))
            return problems
        for name in names:
            problems.extend(_check_file(folder, dir_fd, name, record["files"].get(name),
                                        name in code, use_cache))
    finally:
        os.close(dir_fd)
    return problems


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _check_file(folder: Path, dir_fd: int, name: str, expected: dict[str, Any] | None,
                is_code: bool, use_cache: bool) -> list[str]:
    if expected is None:
        return [f"{INTEGRITY} has no record of {name}"]
    try:
        fd = open_nofollow(name, os.O_RDONLY, dir_fd=dir_fd)
    except FileNotFoundError:
        return [f"{name} is missing"]
    except (OSError, StoreError) as exc:
        return [f"{name} cannot be opened ({_reason(exc)})"]
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [f"{name} is not a regular file"]
        problems = []
        if is_code and st.st_mode & 0o022:
            problems.append(f"{name} is writable by group or others (mode "
                            f"{stat.S_IMODE(st.st_mode):04o}); code must not be")
        if is_code and st.st_uid not in (os.getuid(), 0):
            problems.append(f"{name} belongs to uid {st.st_uid}, not to this user")
        if st.st_size != expected["size"]:
            problems.append(f"{name} is {st.st_size} bytes; {INTEGRITY} records "
                            f"{expected['size']} (truncated or replaced)")
            return problems
        cache_key = (str(folder / name), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                     st.st_ctime_ns, expected["sha256"])
        with _VERIFIED_LOCK:
            known = use_cache and cache_key in _VERIFIED
        if not known:
            actual = fd_digest(fd)
            if actual != expected["sha256"]:
                problems.append(f"{name} has SHA-256 {actual[:16]}...; {INTEGRITY} records "
                                f"{expected['sha256'][:16]}... (edited or replaced)")
                return problems
            with _VERIFIED_LOCK:
                _VERIFIED.add(cache_key)
        return problems
    finally:
        os.close(fd)


# -- swapping two folders --------------------------------------------------------------------
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                         ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2()


def exchange(first: Path, second: Path) -> bool:
    """Atomically swap the directories `first` and `second` (both must exist); False when
    this system or filesystem cannot (the caller then falls back to two renames)."""
    if _RENAMEAT2 is None:
        return False
    done = _RENAMEAT2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                      _RENAME_EXCHANGE)
    if done == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, f"exchanging {first} and {second}: {os.strerror(err)}")
