"""The FFI target of grid_rbd in this process: the handler library loaded and registered
with XLA once, for the CPU platform and, where JAX has a CUDA backend, for CUDA."""

from __future__ import annotations

import ctypes
import threading

#: The custom-call target every grid_rbd launch lowers to (one name, one handler per
#: platform).
TARGET = "grid_rbd_launch"
#: The CUDA target XLA may record into a command buffer (CUDA graph): the same handler
#: for calls that read no stamp, declared command-buffer compatible.
GRAPH_TARGET = "grid_rbd_launch_graph"

_LOCK = threading.Lock()
_LIBRARY: ctypes.CDLL | None = None  # kept loaded for the process' lifetime


def _has_cuda_backend() -> bool:
    import jax

    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:  # no CUDA plugin, or no visible GPU
        return False


def ensure_registered(cache_dir: str | None = None) -> None:
    """Build (first use on this machine) and register the handler (first use in this
    process), cached in the store root `cache_dir` (default: `cache_root()`; the first
    call of the process decides). Thread-safe; later calls return at once."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    with _LOCK:
        if _LIBRARY is not None:
            return
        import jax

        from grid_rbd.jax._ffi_build import handler_library

        library = ctypes.cdll.LoadLibrary(str(handler_library(cache_dir)))
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(library.grid_rbd_launch_cpu),
                                    platform="cpu")
        if _has_cuda_backend():
            jax.ffi.register_ffi_target(
                TARGET, jax.ffi.pycapsule(library.grid_rbd_launch_cuda), platform="CUDA")
            jax.ffi.register_ffi_target(
                GRAPH_TARGET, jax.ffi.pycapsule(library.grid_rbd_launch_cuda_graph),
                platform="CUDA")
        _LIBRARY = library
