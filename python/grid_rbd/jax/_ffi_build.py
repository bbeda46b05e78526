"""Building the XLA FFI handler (ffi_handler.cc) once per machine.

The handler is compiled at first use with the host C++ compiler against the headers jaxlib
ships (`jax.ffi.include_dir()`), never with nvcc, in the scrubbed compile environment.
Where it is kept and how it is checked (`<root>/jax_ffi/<key>/grid_rbd_jax_ffi.so`, keyed
by the handler source, the jaxlib version, the compiler and the flags) is
`grid_rbd._native_library`'s, shared with the torch extension.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from grid_rbd import _native_library as native
from grid_rbd._native_library import store_root_of  # noqa: F401  (the handle imports it here)

SOURCE = Path(__file__).with_name("ffi_handler.cc")
LIBRARY = "grid_rbd_jax_ffi.so"
FLAGS = ("-O2", "-shared", "-fPIC", "-std=c++17")
KIND = native.NativeKind("jax_ffi", LIBRARY, "the JAX FFI handler", "grid-rbd-jax-")


class HandlerBuildError(native.NativeBuildError):
    """The host compiler failed on the FFI handler; the message ends with its output."""


def host_compiler() -> str:
    """The C++ compiler: `$CXX` when set, else `c++`, else `g++` (absolute path)."""
    try:
        return native.host_compiler("the JAX backend compiles a small C++ handler at first "
                                    "use")
    except native.NativeBuildError as exc:
        raise HandlerBuildError(str(exc)) from None


def build_key(source: bytes, jaxlib_version: str, compiler: str, compiler_version: str,
              flags: tuple[str, ...] = FLAGS) -> str:
    """The cache key of one handler binary (hex SHA-256, truncated to 24 digits)."""
    return native.build_key(source, jaxlib_version, compiler, compiler_version,
                            " ".join(flags))


@functools.cache
def handler_library(cache_dir: str | None = None) -> Path:
    """The path of the compiled handler, building it on the first call on this machine.

    cache_dir: the store root to cache it in (default: `cache_root()`)."""
    import jaxlib

    compiler = host_compiler()
    key = build_key(SOURCE.read_bytes(), jaxlib.__version__, compiler,
                    native.compiler_version(compiler))
    return native.library_path(KIND, cache_dir, key, _compile_into(compiler))


def _compile_into(compiler: str) -> Callable[[Path], None]:
    """How a handler is compiled into a target path (module-level `compile_handler`,
    looked up at the call)."""
    def compile_into(target: Path) -> None:
        import jax

        compile_handler(compiler, jax.ffi.include_dir(), SOURCE, target)

    return compile_into


def compile_handler(compiler: str, include_dir: str, source: Path, target: Path) -> None:
    """Compile `source` into `target` (published by a rename, owner-only);
    `HandlerBuildError` with the compiler's last lines on failure."""
    native.compile_library(KIND, compiler, [*FLAGS, "-isystem", include_dir, str(source)],
                           target, HandlerBuildError)
