"""The JAX FFI handler against the runtime's C bridge: its copy of the bridge's
declarations (version 2: launch groups), its build (cached, keyed, failures reported)
and the fallback folder when the store root cannot be written."""

from __future__ import annotations

import re
import tempfile

import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install -e '.[jax]')")
pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")

from support import REPO  # noqa: E402

from grid_rbd.jax import _ffi_build  # noqa: E402


# -- the FFI handler -------------------------------------------------------------------------------
def _typedef(text: str) -> str:
    """The grid_rbd_bridge typedef, without comments and with whitespace collapsed."""
    block = re.search(r"typedef struct grid_rbd_bridge \{.*?\} grid_rbd_bridge;", text,
                      re.S).group(0)
    block = re.sub(r"/\*.*?\*/|//[^\n]*", "", block, flags=re.S)
    return " ".join(block.split())


def _call_typedef(text: str) -> str:
    block = re.search(r"typedef struct grid_rbd_bridge_call \{.*?\} grid_rbd_bridge_call;",
                      text, re.S).group(0)
    return " ".join(re.sub(r"/\*.*?\*/|//[^\n]*", "", block, flags=re.S).split())


def test_handler_declares_the_runtimes_bridge():
    header = (REPO / "runtime/include/grid_rbd/bridge.h").read_text()
    handler = _ffi_build.SOURCE.read_text()
    assert _typedef(handler) == _typedef(header), "ffi_handler.cc drifted from bridge.h"
    assert _call_typedef(handler) == _call_typedef(header), "grid_rbd_bridge_call drifted"
    version = re.search(r"#define GRID_RBD_BRIDGE_VERSION (\d+)", header).group(1)
    assert f"constexpr int32_t kBridgeVersion = {version};" in handler
    inputs = re.search(r"#define GRID_RBD_BRIDGE_MAX_INPUTS (\d+)", header).group(1)
    assert f"#define GRID_RBD_BRIDGE_MAX_INPUTS {inputs}" in handler
    from grid_rbd import _core

    assert _core.bridge_address() != 0


def test_handler_build_is_cached_and_reports_failures(tmp_path, capfd):
    source = _ffi_build.SOURCE.read_bytes()
    compiler = _ffi_build.host_compiler()
    key = _ffi_build.build_key(source, "0.10.2", compiler, "g++ 13")
    assert key == _ffi_build.build_key(source, "0.10.2", compiler, "g++ 13")
    assert len({key, _ffi_build.build_key(source + b" ", "0.10.2", compiler, "g++ 13"),
                _ffi_build.build_key(source, "0.11.2", compiler, "g++ 13"),
                _ffi_build.build_key(source, "0.10.2", compiler, "g++ 14"),
                _ffi_build.build_key(source, "0.10.2", compiler, "g++ 13", ("-O3",))}) == 5
    # The handler this process registered lives under the store root, keyed.
    built = _ffi_build.handler_library()
    assert built.name == _ffi_build.LIBRARY and built.parent.parent.name == "jax_ffi"
    assert not list(built.parent.glob(".build-*")), "a temporary file was left behind"
    broken = tmp_path / "broken.cc"
    broken.write_text("int main() { return undefined_name; }\n")
    with pytest.raises(_ffi_build.HandlerBuildError, match="undefined_name"):
        _ffi_build.compile_handler(compiler, jax.ffi.include_dir(), broken, tmp_path / "x.so")
    assert "compiling the JAX FFI handler" in capfd.readouterr().err
    assert not (tmp_path / "x.so").exists() and not list(tmp_path.glob(".build-*"))


def test_handler_falls_back_to_the_temporary_folder_when_the_store_is_unwritable(
        tmp_path, monkeypatch, capfd):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")  # a store root below a file cannot be created, even by root
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    built = _ffi_build.handler_library.__wrapped__(str(blocker / "store"))
    assert built.is_file() and built.is_relative_to(tmp_path / "tmp")
    assert built.name == _ffi_build.LIBRARY
    assert "cannot write" in capfd.readouterr().err
