"""Small C++ libraries compiled once per machine at first use, kept in the store.

Two backends compile a little C++ against a framework's headers on the user's machine:
the JAX FFI handler (`jax/_ffi_build.py`) and the torch extension (`torch/_native.py`).
Both live in the grid-rbd store root (`cache_root(cache_dir)`) at
`<root>/<kind>/<key>/<library>`, where the key hashes everything the binary depends on
(the source, the framework's version, the compiler path and `--version`, the flags).
Concurrent builders serialise on a lock file (never opened through a link), the library
is made owner-only and published by a rename, and its size and SHA-256
(`integrity.json` beside it) are checked before it is loaded; a damaged one is rebuilt.

Only folders this user owns are used: every folder on the way is a real directory of
this user that no one else can write. When the store cannot be written (a sandbox, a
read-only cache), the library goes to `<tmp>/grid-rbd-<uid>/<kind>/<key>`, used only when
that is a private folder of this user (mode 0700, not a link); otherwise a fresh
`tempfile.mkdtemp` folder of this process is used instead.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grid_rbd._integrity import (
    CODE_MODE,
    INTEGRITY,
    StoreError,
    flock,
    is_digest,
    private_folder_problem,
    secure_folder,
    verify_folder,
    write_record,
)
from grid_rbd._store import cache_root

_LOG_TAIL_LINES = 40


class NativeBuildError(RuntimeError):
    """The host compiler failed on a library; the message ends with its output."""


@dataclass(frozen=True)
class NativeKind:
    """One kind of library: its store folder, file name and how messages name it."""

    folder: str  # under the store root, e.g. "jax_ffi"
    library: str  # the file name, e.g. "grid_rbd_jax_ffi.so"
    label: str  # e.g. "the JAX FFI handler"
    temp_prefix: str  # of a process-private fallback folder, e.g. "grid-rbd-jax-"


def host_compiler(purpose: str) -> str:
    """The C++ compiler: `$CXX` when set, else `c++`, else `g++` (absolute path).
    `purpose` completes the error ("the JAX backend compiles ...")."""
    for name in filter(None, [os.environ.get("CXX", "").strip(), "c++", "g++"]):
        path = shutil.which(name)
        if path:
            return os.path.abspath(path)
    raise NativeBuildError(f"{purpose}, but no C++ compiler was found (set $CXX or install "
                           "g++)")


def compiler_version(compiler: str) -> str:
    from grid_codegen.compile import compile_environment

    done = subprocess.run([compiler, "--version"], capture_output=True, check=False,
                          env=compile_environment(None, [compiler]),
                          stdin=subprocess.DEVNULL)
    return done.stdout.decode("utf-8", "backslashreplace").strip()


def build_key(source: bytes, *parts: str) -> str:
    """The cache key of one binary (hex SHA-256, truncated to 24 digits) over the
    source's digest and every other part it depends on."""
    digest = hashlib.sha256()
    for part in (hashlib.sha256(source).hexdigest(), *parts):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def store_root_of(so_path: str | os.PathLike) -> str | None:
    """The store root holding the artifact `so_path` (`<root>/store/<key>/robot.so`), or
    None when it is not in a store (its handle's native libraries are kept there too)."""
    path = Path(so_path).absolute()
    if path.parent.parent.name == "store" and is_digest(path.parent.name):
        return str(path.parent.parent.parent)
    return None


def store_folder(kind: NativeKind, cache_dir: str | None, key: str) -> Path:
    root = secure_folder(cache_root(cache_dir), follow=True)
    return secure_folder(secure_folder(root / kind.folder) / key)


def fallback_folder(kind: NativeKind, key: str, why: str) -> Path:
    """`<tmp>/grid-rbd-<uid>/<kind>/<key>` when that is this user's private folder, else
    a fresh private folder of this process; says which on stderr."""
    base = Path(tempfile.gettempdir()) / f"grid-rbd-{os.getuid()}"
    base.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    problem = private_folder_problem(base)
    if problem is None:
        try:
            folder = secure_folder(secure_folder(base / kind.folder) / key)
            print(f"grid-rbd: {why}; {kind.label} goes to {folder}", file=sys.stderr,
                  flush=True)
            return folder
        except (OSError, StoreError) as exc:
            problem = str(exc)
    folder = Path(tempfile.mkdtemp(prefix=kind.temp_prefix))
    problem_here = private_folder_problem(folder)
    if problem_here is not None:  # mkdtemp makes 0700 folders of ours; anything else is odd
        raise StoreError(f"no private folder for {kind.label}: {problem_here}")
    print(f"grid-rbd: {why}, and {base} is not a private folder of this user ({problem}); "
          f"{kind.label} goes to {folder} for this process", file=sys.stderr, flush=True)
    return folder


def reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def is_sound(kind: NativeKind, folder: Path, key: str) -> bool:
    return (folder / INTEGRITY).is_file() and not verify_folder(
        folder, key, (kind.library,), code=(kind.library,))


def built_in(kind: NativeKind, folder: Path, key: str, compile_into: Callable[[Path], None]
             ) -> Path:
    """The verified library in `folder`, made there by `compile_into(target)` first when
    it is missing or fails its check (under the folder's build lock)."""
    target = folder / kind.library
    if is_sound(kind, folder, key):
        return target
    with flock(folder / "build.lock"):
        if not is_sound(kind, folder, key):  # another process may have built it meanwhile
            compile_into(target)
            write_record(folder, key, (kind.library,))
    return target


def library_path(kind: NativeKind, cache_dir: str | None, key: str,
                 compile_into: Callable[[Path], None]) -> Path:
    """The library of `key`, built into the store root of `cache_dir` (or the fallback
    folder when that cannot be written) on first use."""
    try:
        return built_in(kind, store_folder(kind, cache_dir, key), key, compile_into)
    except (OSError, StoreError) as exc:
        # A read-only store root (a sandbox, a shared read-only cache), or one that is not
        # safe: build into a private folder instead, and say so.
        why = f"cannot write {cache_root(cache_dir) / kind.folder} ({reason(exc)})"
    return built_in(kind, fallback_folder(kind, key, why), key, compile_into)


def compile_library(kind: NativeKind, compiler: str, arguments: Sequence[str], target: Path,
                    error: type[Exception] = NativeBuildError) -> None:
    """Run `compiler *arguments -o <temporary>` and publish the result at `target` by a
    rename from the same folder (owner-only, whatever the umask); `error` with the
    compiler's last lines on failure."""
    from grid_codegen.compile import run_compiler

    fd, temporary = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    tmp_dir = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    command = [compiler, *arguments, "-o", temporary]
    print(f"grid-rbd: compiling {kind.label} once ({Path(compiler).name}) into "
          f"{target.parent}", file=sys.stderr, flush=True)
    try:
        returncode, output = run_compiler(command, tmp_dir, [compiler])
        if returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-_LOG_TAIL_LINES:])
            raise error(f"compiling {kind.label} failed (exit {returncode}):\n"
                        f"  {' '.join(command)}\n{tail}")
        os.chmod(temporary, CODE_MODE)
        os.replace(temporary, target)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        if os.path.exists(temporary):
            os.unlink(temporary)
