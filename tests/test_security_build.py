"""The build's environment and files (issue 12): the compiler runs with a scrubbed,
documented environment (what could change its output either never reaches it or is in
the key), code files are owner-only whatever the umask, and the JAX handler is built only
in folders this user owns, through lock files that are never followed."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from grid_codegen.compile import compile_artifact, compile_environment, keyed_environment

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from reliability import harness  # noqa: E402

HOSTILE_ENV = {
    "CPATH": "/evil/include", "C_INCLUDE_PATH": "/evil", "CPLUS_INCLUDE_PATH": "/evil",
    "LIBRARY_PATH": "/evil/lib", "LD_PRELOAD": "/evil/libpwn.so", "GCC_EXEC_PREFIX": "/evil/",
    "COMPILER_PATH": "/evil/bin", "NVCC_PREPEND_FLAGS": "-DPWN", "NVCC_APPEND_FLAGS": "-DPWN",
    "NVCC_CCBIN": "/evil/gcc", "DEPENDENCIES_OUTPUT": "/evil/deps", "CCACHE_DIR": "/evil",
    "SOURCE_DATE_EPOCH": "1", "LANG": "de_DE.UTF-8", "LC_ALL": "de_DE.UTF-8",
    "PATH": "/evil/bin:/usr/bin", "TMPDIR": "/evil/tmp", "HOME": "/home/me",
    "LD_LIBRARY_PATH": "/opt/toolchain/lib",
}


def test_compile_environment_is_built_from_nothing():
    env = compile_environment("/private/tmp", ["/opt/cuda/bin/nvcc", "/usr/bin/g++"],
                              environ=HOSTILE_ENV)
    assert env == {
        "PATH": "/opt/cuda/bin:/usr/bin:/usr/local/bin:/bin",
        "TMPDIR": "/private/tmp", "TMP": "/private/tmp", "TEMP": "/private/tmp",
        "LANG": "C", "LC_ALL": "C", "HOME": "/home/me",
        "LD_LIBRARY_PATH": "/opt/toolchain/lib",
    }
    assert keyed_environment(HOSTILE_ENV) == {"LD_LIBRARY_PATH": "/opt/toolchain/lib"}
    assert keyed_environment({}) == {"LD_LIBRARY_PATH": None}


def _env_dumping_compiler(folder: Path) -> Path:
    """A g++ wrapper that records the environment it was started with."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "envcxx"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in *wrapper.cu*) env > "{folder}/env.txt" ;; esac
        exec g++ "$@"
        """))
    script.chmod(0o755)
    return script


def test_include_path_variables_never_reach_the_compiler(tmp_path, monkeypatch):
    """A header planted through CPATH / CPLUS_INCLUDE_PATH would shadow the system's
    (the review's stale-key finding): the build ignores them and keeps its keys."""
    from grid_codegen.options import CodegenOptions
    from grid_rbd._build import ensure_entry

    evil = tmp_path / "evil"
    evil.mkdir()
    for header in ("cmath", "cstdint", "cstddef", "math.h", "stdint.h"):
        (evil / header).write_text('#error "a shadowed system header was used"\n')
    script = _env_dumping_compiler(tmp_path / "bin")
    monkeypatch.setenv("GRID_RBD_CXX", str(script))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    options = CodegenOptions(algorithms=("crba",), strategy="block")

    def register(cache: Path):
        return ensure_entry("tiny", harness.TINY_URDF.encode(), "<urdf string>", False,
                            options, "cpu", cache_dir=cache)

    clean = register(tmp_path / "clean")
    for name in ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"):
        monkeypatch.setenv(name, str(evil))
    monkeypatch.setenv("LD_PRELOAD", str(evil / "libnothing.so"))
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", "-DPWN")
    dirty = register(tmp_path / "dirty")
    assert dirty.outcome == "built"
    assert (dirty.input_key, dirty.content_key) == (clean.input_key, clean.content_key)
    seen = dict(line.split("=", 1) for line in
                (tmp_path / "bin" / "env.txt").read_text().splitlines() if "=" in line)
    for name in ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "LD_PRELOAD",
                 "NVCC_PREPEND_FLAGS"):
        assert name not in seen, f"{name} reached the compiler"
    assert seen["LANG"] == "C" and seen["PATH"].endswith("/usr/local/bin:/usr/bin:/bin")
    assert seen["TMPDIR"].startswith(str(tmp_path / "dirty" / "staging"))


def test_a_variable_that_reaches_the_compiler_is_in_the_key(tmp_path, monkeypatch):
    from grid_rbd._build import build_identity, resolve_toolchain

    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    before = build_identity(resolve_toolchain("cpu"))
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    after = build_identity(resolve_toolchain("cpu"))
    assert before["compile_env"] == {"LD_LIBRARY_PATH": None}
    assert after["compile_env"] == {"LD_LIBRARY_PATH": str(tmp_path)}


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_code_files_and_folders_are_owner_only_under_umask_000(tmp_path, monkeypatch):
    compiler = harness.make_compiler(tmp_path / "bin")
    monkeypatch.setenv("GRID_RBD_CXX", str(compiler.path))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    old = os.umask(0)
    try:
        reg = harness.ensure(tmp_path / "cache")
        direct = compile_artifact({"wrapper.cu": 'extern "C" int grid_probe() { return 1; }\n'},
                                  tmp_path / "direct", backend="cpu", openmp=False)
    finally:
        os.umask(old)
    root = tmp_path / "cache"
    for folder in (root, root / "store", root / "bykey", root / "staging", root / "locks",
                   root / "logs", root / "quarantine", reg.entry_dir):
        assert _mode(folder) == 0o700, (folder, oct(_mode(folder)))
    assert _mode(reg.entry_dir / "robot.so") == 0o700
    for name in ("grid.cuh", "wrapper.cu", "meta.json", "build_inputs.json", "robot.build.log",
                 "integrity.json"):
        assert _mode(reg.entry_dir / name) == 0o600, name
    for path in (root / "manifest.json", root / "bykey" / reg.input_key,
                 root / "manifest.lock"):
        assert not _mode(path) & 0o077, path
    assert _mode(direct.so_path) == 0o700 and _mode(tmp_path / "direct") == 0o700
    assert _mode(tmp_path / "direct" / "wrapper.cu") == 0o600


def test_store_folders_writable_by_others_are_tightened_or_refused(tmp_path):
    from grid_rbd._store import Store, StoreError

    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    Store(root)
    assert _mode(root) == 0o755  # ours: group and other write removed
    (root / "store").rmdir()
    (root / "store").symlink_to(tmp_path)
    with pytest.raises(StoreError, match=r"store is a symbolic link"):
        Store(root)
    if os.getuid() == 0:  # only root can hand a folder to another user
        other = tmp_path / "other"
        other.mkdir()
        os.chown(other, 4242, 4242)
        with pytest.raises(StoreError, match=r"belongs to uid 4242"):
            Store(other)


def test_a_planted_staging_link_is_removed_not_followed(tmp_path):
    from grid_rbd._store import Owner, Store

    store = Store(tmp_path / "cache")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    link = store.staging / f"{Owner.current().host}-999999999-1-abcd"
    link.symlink_to(outside)
    Store(tmp_path / "cache")  # the sweep: the owner (pid 999999999) is gone
    assert not os.path.lexists(link) and (outside / "keep.txt").read_text() == "keep"


# -- the JAX handler's folders --------------------------------------------------------------
def test_jax_fallback_uses_the_per_user_folder_only_when_private(tmp_path, monkeypatch, capfd):
    from grid_rbd import _native_library as native
    from grid_rbd.jax import _ffi_build

    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    base = tmp_path / f"grid-rbd-{os.getuid()}"
    folder = native.fallback_folder(_ffi_build.KIND, "k" * 24, "test")
    assert folder == base / "jax_ffi" / ("k" * 24) and _mode(base) == 0o700
    # Planted by someone else (here: too open, or a link): never used.
    for plant in ("open", "link"):
        import shutil

        shutil.rmtree(base)
        if plant == "open":
            base.mkdir()
            base.chmod(0o777)
        else:
            (tmp_path / "elsewhere").mkdir(exist_ok=True)
            base.symlink_to(tmp_path / "elsewhere")
        folder = native.fallback_folder(_ffi_build.KIND, "k" * 24, "test")
        assert base not in (folder, *folder.parents) and folder.parent == tmp_path
        assert folder.name.startswith("grid-rbd-jax-") and _mode(folder) == 0o700
        assert "is not a private folder of this user" in capfd.readouterr().err
        if plant == "link":
            base.unlink()


def test_jax_handler_is_built_in_cache_dir_verified_and_rebuilt_when_damaged(
        tmp_path, monkeypatch):
    """`handler_library(cache_dir)` builds into that store (not the default one), makes the
    library owner-only, records its digest, and rebuilds a library that was damaged."""
    pytest.importorskip("jax")
    from grid_rbd.jax import _ffi_build

    built = []

    def fake_compile(compiler, include_dir, source, target):  # stands in for the compiler
        built.append(target)
        target.write_bytes(b"\x7fELF not really a library, but %d bytes" % len(built))
        target.chmod(0o700)

    monkeypatch.setattr(_ffi_build, "compile_handler", fake_compile)
    monkeypatch.setenv("GRID_RBD_CACHE_DIR", str(tmp_path / "default"))
    library = _ffi_build.handler_library.__wrapped__(str(tmp_path / "mine"))
    assert library.is_relative_to(tmp_path / "mine" / "jax_ffi") and len(built) == 1
    assert not (tmp_path / "default").exists()
    record = json.loads((library.parent / "integrity.json").read_text())
    assert record["files"][_ffi_build.LIBRARY]["size"] == library.stat().st_size
    assert _ffi_build.handler_library.__wrapped__(str(tmp_path / "mine")) == library
    assert len(built) == 1, "a sound library is not rebuilt"
    library.write_bytes(library.read_bytes()[:10])  # truncated
    assert _ffi_build.handler_library.__wrapped__(str(tmp_path / "mine")) == library
    assert len(built) == 2 and "really" in library.read_text(errors="replace")


def test_jax_lock_file_is_never_followed(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    from grid_rbd import _native_library as native
    from grid_rbd._integrity import StoreError
    from grid_rbd.jax import _ffi_build

    folder = tmp_path / "handler"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (folder / "build.lock").symlink_to(victim)
    monkeypatch.setattr(_ffi_build, "compile_handler",
                        lambda *a: pytest.fail("compiled through a followed lock"))
    with pytest.raises(StoreError, match=r"symbolic link"):
        native.built_in(_ffi_build.KIND, folder, "k" * 24,
                        _ffi_build._compile_into("/usr/bin/g++"))
    assert victim.read_text() == "precious"
