"""The torch extension (native_call.cc): a handle's eager call in one C call.

A torch call through Python costs its interpreter frames, the tensor checks and the
output allocation, several times the launch itself at small batches. The extension does
all of it in C++ against the installed torch: it is compiled at first use on this machine
(about 15 s, once) with the host C++ compiler against torch's headers and libraries, and
kept like the JAX FFI handler (`grid_rbd._native_library`: `<root>/torch_native/<key>/`,
keyed by the source, the torch version and location, Python's ABI, the compiler and the
flags; owner-only, digest-checked before it is loaded).

`GRID_RBD_TORCH_NATIVE=0` turns it off (calls take the Python path, same results). When
it cannot be built (no compiler, a torch without headers), the reason is printed once and
the Python path is used.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
import threading
from pathlib import Path
from typing import Any

import torch

from grid_rbd import _native_library as native

SOURCE = Path(__file__).with_name("native_call.cc")
LIBRARY = "grid_rbd_torch_native.so"
MODULE = "grid_rbd_torch_native"
KIND = native.NativeKind("torch_native", LIBRARY, "the torch extension", "grid-rbd-torch-")
SWITCH = "GRID_RBD_TORCH_NATIVE"
BASE_FLAGS = ("-O2", "-shared", "-fPIC", "-std=c++17")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}  # "module": the loaded extension or None; "why": why not


def enabled() -> bool:
    """False when `GRID_RBD_TORCH_NATIVE` is 0 / false / off / no."""
    return os.environ.get(SWITCH, "").strip().lower() not in ("0", "false", "off", "no")


def compile_arguments() -> list[str]:
    """Flags, include and library arguments for the installed torch (the source last but
    one: the linker's libraries follow it)."""
    torch_dir = Path(torch.__file__).resolve().parent
    include, lib = torch_dir / "include", torch_dir / "lib"
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [*BASE_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            "-isystem", str(include), "-isystem", str(include / "torch/csrc/api/include"),
            "-isystem", sysconfig.get_paths()["include"], str(SOURCE),
            f"-L{lib}", f"-Wl,-rpath,{lib}", "-ltorch_python", "-ltorch", "-ltorch_cpu",
            "-lc10"]


def build_key(compiler: str) -> str:
    return native.build_key(SOURCE.read_bytes(), torch.__version__,
                            str(Path(torch.__file__).resolve().parent),
                            sysconfig.get_config_var("SOABI") or sys.version, compiler,
                            native.compiler_version(compiler), " ".join(compile_arguments()))


def library_path(cache_dir: str | None = None) -> Path:
    """The compiled extension, built on the first call on this machine."""
    compiler = native.host_compiler("the torch backend compiles a small C++ extension at "
                                    "first use")

    def compile_into(target: Path) -> None:
        native.compile_library(KIND, compiler, compile_arguments(), target)

    return native.library_path(KIND, cache_dir, build_key(compiler), compile_into)


def load(cache_dir: str | None = None) -> Any:
    """The extension module (built and loaded on the first call of this process; the
    first caller's store root keeps it), or None when it is switched off or cannot be
    built: then `why_not()` says why."""
    if "module" in _STATE:
        return _STATE["module"]
    with _LOCK:
        if "module" in _STATE:
            return _STATE["module"]
        module, why = None, f"{SWITCH}={os.environ.get(SWITCH)}"
        if enabled():
            try:
                path = library_path(cache_dir)
                spec = importlib.util.spec_from_file_location(MODULE, path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                why = _mismatch(module)
                if why:
                    raise ImportError(why)
            except (native.NativeBuildError, native.StoreError, OSError, ImportError) as exc:
                module, why = None, str(exc)
                lines = [line.strip() for line in why.splitlines() if line.strip()] or ["?"]
                detail = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
                print(f"grid-rbd: the torch extension is not available ({detail}); torch "
                      "calls take the Python path (same results, more host time per call; "
                      "grid_rbd.torch._native.why_not() has the whole reason)",
                      file=sys.stderr, flush=True)
        _STATE["why"] = why
        _STATE["module"] = module
        return module


def _mismatch(module: Any) -> str:
    """Why `module` cannot call this runtime ("" when it can)."""
    from grid_rbd._handle import _core

    built, runtime = getattr(module, "LAUNCHER_CALL_VERSION", None), \
        getattr(_core(), "LAUNCHER_CALL_VERSION", None)
    if built != runtime:
        return (f"it was built for launcher call version {built}, the runtime has "
                f"{runtime}")
    return ""


def why_not() -> str:
    """Why the extension is not in use ("" when it is, or was not asked for yet)."""
    return _STATE.get("why", "")
