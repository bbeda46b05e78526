"""Building the XLA FFI handler (ffi_handler.cc) once per machine.

The handler is compiled at first use with the host C++ compiler against the headers jaxlib
ships (`jax.ffi.include_dir()`), never with nvcc. The result is cached in the grid-rbd
store root (`cache_root()`, so `$GRID_RBD_CACHE_DIR` moves it too) at
`<root>/jax_ffi/<key>/grid_rbd_jax_ffi.so`, where the key hashes everything the binary
depends on: the handler source, the jaxlib version, the compiler (path and `--version`)
and the flags. Concurrent builders serialise on a file lock, and the library is published
by a rename, so a reader never sees a partial file.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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
            return path
    raise HandlerBuildError("the JAX backend compiles a small C++ handler at first use, but "
                            "no C++ compiler was found (set $CXX or install g++)")


def _compiler_version(compiler: str) -> str:
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip()


def build_key(source: bytes, jaxlib_version: str, compiler: str, compiler_version: str,
              flags: tuple[str, ...] = FLAGS) -> str:
    """The cache key of one handler binary (hex SHA-256, truncated to 24 digits)."""
    digest = hashlib.sha256()
    for part in (hashlib.sha256(source).hexdigest(), jaxlib_version, compiler,
                 compiler_version, " ".join(flags)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


@functools.cache
def handler_library(cache_dir: str | None = None) -> Path:
    """The path of the compiled handler, building it on the first call on this machine."""
    import jax
    import jaxlib

    compiler = host_compiler()
    source = SOURCE.read_bytes()
    key = build_key(source, jaxlib.__version__, compiler, _compiler_version(compiler))
    folder = cache_root(cache_dir) / "jax_ffi" / key
    target = folder / LIBRARY
    if target.is_file():
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / "build.lock", "w")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        # A read-only store root (a sandbox, a shared read-only cache): build into a
        # per-user folder of the temporary directory instead, and say so.
        fallback = Path(tempfile.gettempdir()) / f"grid-rbd-{os.getuid()}" / "jax_ffi" / key
        print(f"grid-rbd: cannot write {folder} ({exc.strerror}); the JAX FFI handler goes "
              f"to {fallback}", file=sys.stderr, flush=True)
        folder, target = fallback, fallback / LIBRARY
        if target.is_file():
            return target
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / "build.lock", "w")  # noqa: SIM115
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not target.is_file():  # another process may have built it meanwhile
            compile_handler(compiler, jax.ffi.include_dir(), SOURCE, target)
    return target


def compile_handler(compiler: str, include_dir: str, source: Path, target: Path) -> None:
    """Compile `source` into `target`, published by a rename from a temporary file in the
    same folder; `HandlerBuildError` with the compiler's last lines on failure."""
    fd, temporary = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    command = [compiler, *FLAGS, "-isystem", include_dir, str(source), "-o", temporary]
    print(f"grid-rbd: compiling the JAX FFI handler once ({Path(compiler).name}) into "
          f"{target.parent}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = (done.stdout + done.stderr).strip().splitlines()
            tail = "\n".join(log[-_LOG_TAIL_LINES:])
            raise HandlerBuildError(
                f"compiling the JAX FFI handler failed (exit {done.returncode}):\n"
                f"  {' '.join(command)}\n{tail}")
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
