"""Building the XLA FFI handler (ffi_handler.cc) once per machine.

The handler is compiled at first use with the host C++ compiler against the headers jaxlib
ships (`jax.ffi.include_dir()`), never with nvcc, in the scrubbed compile environment.
It is cached in the grid-rbd store root (`cache_root(cache_dir)`: the store of the robot
whose handle first needs it, else `$GRID_RBD_CACHE_DIR` or ~/.cache/grid-rbd) at
`<root>/jax_ffi/<key>/grid_rbd_jax_ffi.so`, where the key hashes everything the binary
depends on: the handler source, the jaxlib version, the compiler (path and `--version`)
and the flags. Concurrent builders serialise on a lock file (never opened through a
link), the library is made owner-only and published by a rename, and its size and
SHA-256 (`integrity.json` beside it) are checked before it is loaded; a damaged one is
rebuilt.

Only folders this user owns are used: every folder on the way is a real directory of
this user that no one else can write. When the store cannot be written (a sandbox, a
read-only cache), the handler goes to `<tmp>/grid-rbd-<uid>/`, used only when it is a
private folder of this user (mode 0700, not a link); when it is not (someone else made
it), a fresh `tempfile.mkdtemp` folder of this process is used instead.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
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

SOURCE = Path(__file__).with_name("ffi_handler.cc")
LIBRARY = "grid_rbd_jax_ffi.so"
FLAGS = ("-O2", "-shared", "-fPIC", "-std=c++17")
_LOG_TAIL_LINES = 40


class HandlerBuildError(RuntimeError):
    """The host compiler failed on the FFI handler; the message ends with its output."""


def host_compiler() -> str:
    """The C++ compiler: `$CXX` when set, else `c++`, else `g++` (absolute path)."""
    candidates = [os.environ.get("CXX", "").strip(), "c++", "g++"]
    for name in filter(None, candidates):
        path = shutil.which(name)
        if path:
            return os.path.abspath(path)
    raise HandlerBuildError("the JAX backend compiles a small C++ handler at first use, but "
                            "no C++ compiler was found (set $CXX or install g++)")


def _compiler_version(compiler: str) -> str:
    from grid_codegen.compile import compile_environment

    done = subprocess.run([compiler, "--version"], capture_output=True, check=False,
                          env=compile_environment(None, [compiler]),
                          stdin=subprocess.DEVNULL)
    return done.stdout.decode("utf-8", "backslashreplace").strip()


def build_key(source: bytes, jaxlib_version: str, compiler: str, compiler_version: str,
              flags: tuple[str, ...] = FLAGS) -> str:
    """The cache key of one handler binary (hex SHA-256, truncated to 24 digits)."""
    digest = hashlib.sha256()
    for part in (hashlib.sha256(source).hexdigest(), jaxlib_version, compiler,
                 compiler_version, " ".join(flags)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def store_root_of(so_path: str | os.PathLike) -> str | None:
    """The store root holding the artifact `so_path` (`<root>/store/<key>/robot.so`), or
    None when it is not in a store."""
    path = Path(so_path).absolute()
    if path.parent.parent.name == "store" and is_digest(path.parent.name):
        return str(path.parent.parent.parent)
    return None


def _store_folder(cache_dir: str | None, key: str) -> Path:
    root = secure_folder(cache_root(cache_dir), follow=True)
    return secure_folder(secure_folder(root / "jax_ffi") / key)


def _fallback_folder(key: str, why: str) -> Path:
    """`<tmp>/grid-rbd-<uid>/jax_ffi/<key>` when that is this user's private folder,
    else a fresh private folder of this process."""
    base = Path(tempfile.gettempdir()) / f"grid-rbd-{os.getuid()}"
    base.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    problem = private_folder_problem(base)
    if problem is None:
        try:
            folder = secure_folder(secure_folder(base / "jax_ffi") / key)
            print(f"grid-rbd: {why}; the JAX FFI handler goes to {folder}", file=sys.stderr,
                  flush=True)
            return folder
        except (OSError, StoreError) as exc:
            problem = str(exc)
    folder = Path(tempfile.mkdtemp(prefix="grid-rbd-jax-"))
    problem_here = private_folder_problem(folder)
    if problem_here is not None:  # mkdtemp makes 0700 folders of ours; anything else is odd
        raise StoreError(f"no private folder for the JAX FFI handler: {problem_here}")
    print(f"grid-rbd: {why}, and {base} is not a private folder of this user ({problem}); "
          f"the JAX FFI handler goes to {folder} for this process", file=sys.stderr,
          flush=True)
    return folder


def _sound(folder: Path, key: str) -> bool:
    return (folder / INTEGRITY).is_file() and not verify_folder(folder, key, (LIBRARY,),
                                                                 code=(LIBRARY,))


@functools.cache
def handler_library(cache_dir: str | None = None) -> Path:
    """The path of the compiled handler, building it on the first call on this machine.

    cache_dir: the store root to cache it in (default: `cache_root()`)."""
    import jaxlib

    compiler = host_compiler()
    source = SOURCE.read_bytes()
    key = build_key(source, jaxlib.__version__, compiler, _compiler_version(compiler))
    try:
        return _built(_store_folder(cache_dir, key), key, compiler)
    except (OSError, StoreError) as exc:
        # A read-only store root (a sandbox, a shared read-only cache), or one that is not
        # safe: build into a private folder instead, and say so.
        why = f"cannot write {cache_root(cache_dir) / 'jax_ffi'} ({_reason(exc)})"
    return _built(_fallback_folder(key, why), key, compiler)


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _built(folder: Path, key: str, compiler: str) -> Path:
    """The verified handler in `folder`, compiled there first when it is missing or
    fails its check (under the folder's build lock)."""
    import jax

    target = folder / LIBRARY
    if _sound(folder, key):
        return target
    with flock(folder / "build.lock"):
        if not _sound(folder, key):  # another process may have built it meanwhile
            compile_handler(compiler, jax.ffi.include_dir(), SOURCE, target)
            write_record(folder, key, (LIBRARY,))
    return target


def compile_handler(compiler: str, include_dir: str, source: Path, target: Path) -> None:
    """Compile `source` into `target`, published by a rename from a temporary file in the
    same folder (owner-only, whatever the umask); `HandlerBuildError` with the compiler's
    last lines on failure."""
    from grid_codegen.compile import run_compiler

    fd, temporary = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    tmp_dir = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    command = [compiler, *FLAGS, "-isystem", include_dir, str(source), "-o", temporary]
    print(f"grid-rbd: compiling the JAX FFI handler once ({Path(compiler).name}) into "
          f"{target.parent}", file=sys.stderr, flush=True)
    try:
        returncode, output = run_compiler(command, tmp_dir, [compiler])
        if returncode != 0:
            tail = "\n".join(output.strip().splitlines()[-_LOG_TAIL_LINES:])
            raise HandlerBuildError(
                f"compiling the JAX FFI handler failed (exit {returncode}):\n"
                f"  {' '.join(command)}\n{tail}")
        os.chmod(temporary, CODE_MODE)
        os.replace(temporary, target)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        if os.path.exists(temporary):
            os.unlink(temporary)
