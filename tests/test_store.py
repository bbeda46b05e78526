"""The content-addressed store: layout, the two keys, the identity check, atomic publish,
one compile for concurrent registrations, crash safety, sweeping and progress output.

Builds are small (iiwa14, CRBA only: about a second each) and go through a compiler
wrapper script (`GRID_RBD_CXX`) that counts the compiles it starts and can be slowed
down, so "no compile happened" is asserted directly, not inferred from timing.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ROBOTS

import grid_codegen
import grid_rbd
from grid_codegen.options import CodegenOptions
from grid_rbd import _store
from grid_rbd._build import build_identity, ensure_entry, resolve_toolchain
from grid_rbd._progress import Progress
from grid_rbd._store import ENTRY_FILES, Store, cache_root, content_key, input_key

IIWA = ROBOTS["iiwa14"].path
OPTIONS = CodegenOptions(algorithms=("crba",))
PYTHONPATH = os.pathsep.join(str(Path(m.__file__).resolve().parent.parent)
                             for m in (grid_codegen, grid_rbd))


@dataclass(frozen=True)
class Compiler:
    """A g++ wrapper: appends a line to `count_file` per compile of wrapper.cu and sleeps
    `slow` seconds first while `slow_file` exists (its content)."""

    path: Path
    count_file: Path
    slow_file: Path

    def compiles(self) -> int:
        return len(self.count_file.read_text().split()) if self.count_file.exists() else 0

    def slow(self, seconds: float | None) -> None:
        if seconds is None:
            self.slow_file.unlink(missing_ok=True)
        else:
            self.slow_file.write_text(str(seconds))


def make_compiler(folder: Path, name: str = "cxx") -> Compiler:
    folder.mkdir(parents=True, exist_ok=True)
    count, slow, path = folder / f"{name}.count", folder / f"{name}.slow", folder / name
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in
          *"wrapper.cu -o"*)  # the wrapper's compile (the link names wrapper.cu.o)
            echo "$$" >> "{count}"
            if [ -f "{slow}" ]; then sleep "$(cat "{slow}")"; fi
            ;;
        esac
        exec g++ "$@"
        """))
    path.chmod(0o755)
    return Compiler(path, count, slow)


@pytest.fixture
def cxx(tmp_path, monkeypatch) -> Compiler:
    compiler = make_compiler(tmp_path / "bin")
    monkeypatch.setenv("GRID_RBD_CXX", str(compiler.path))
    for name in ("GRID_RBD_CXXFLAGS", "GRID_RBD_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRID_RBD_PROGRESS", "log")
    return compiler


def ensure(cache: Path, name: str = "iiwa14", options: CodegenOptions = OPTIONS,
           force_rebuild: bool = False):
    return ensure_entry(name, IIWA.read_bytes(), str(IIWA), False, options, "cpu",
                        cache_dir=cache, force_rebuild=force_rebuild)


CHILD = textwrap.dedent("""\
    import json, sys
    from grid_codegen.options import CodegenOptions
    from grid_rbd._build import ensure_entry
    cache, urdf, name = sys.argv[1:4]
    r = ensure_entry(name, open(urdf, "rb").read(), urdf, False,
                     CodegenOptions(algorithms=("crba",)), "cpu", cache_dir=cache)
    print(json.dumps({"outcome": r.outcome, "waited": r.waited,
                      "content_key": r.content_key, "input_key": r.input_key}))
    """)


def spawn(cache: Path, name: str = "iiwa14") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    return subprocess.Popen([sys.executable, "-c", CHILD, str(cache), str(IIWA), name],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def visible(cache: Path) -> tuple[list[str], list[str], dict]:
    store = Store(cache)
    return (sorted(p.name for p in store.entries.iterdir()),
            sorted(p.name for p in store.pointers.iterdir() if not p.name.startswith(".")),
            store.read_manifest())


# -- layout and keys ------------------------------------------------------------------
def test_layout_and_keys(tmp_path, cxx):
    cache = tmp_path / "cache"
    reg = ensure(cache)
    assert reg.outcome == "built" and reg.compiled and cxx.compiles() == 1
    entries, pointers, manifest = visible(cache)
    assert entries == [reg.content_key] and pointers == [reg.input_key]
    assert manifest["iiwa14"]["content_key"] == reg.content_key
    assert manifest["iiwa14"]["input_key"] == reg.input_key
    assert (cache / "manifest.lock").is_file()
    assert list((cache / "staging").iterdir()) == []
    assert (cache / "bykey" / reg.input_key).read_text().strip() == reg.content_key
    entry = cache / "store" / reg.content_key
    units = sorted(p.name for p in entry.glob("unit_*.cu"))  # one translation unit each
    assert units == sorted(f"unit_{a}.cu" for a in OPTIONS.algorithms)
    assert sorted(p.name for p in entry.iterdir()) == sorted([*ENTRY_FILES, *units])

    # build_inputs.json is the identity; both keys recompute from their inputs.
    identity = build_identity(resolve_toolchain("cpu"))
    assert json.loads((entry / "build_inputs.json").read_text()) == identity
    assert identity["compiler"]["path"] == str(cxx.path)
    assert "g++" in identity["compiler"]["version"]
    assert identity["env"]["GRID_RBD_CXX"] == str(cxx.path)
    assert identity["archs"] == ["cpu"] and identity["backend"] == "cpu"
    meta = json.loads((entry / "meta.json").read_text())
    assert input_key(IIWA.read_bytes(), {"codegen": OPTIONS.to_dict(), "floating_base": False},
                     grid_rbd.__version__, identity) == reg.input_key
    files = {n: (entry / n).read_text() for n in ("grid.cuh", "wrapper.cu", *units)}
    names = {k: meta[k] for k in ("robot_name", "joint_names", "body_names", "ee_frames",
                                  "frames", "tree")}
    assert content_key(files, identity, names) == reg.content_key

    import grid_rbd.reference as reference
    ref = reference.load(IIWA)
    assert (meta["nq"], meta["nv"], meta["nb"]) == (ref.nq, ref.nv, ref.nb)
    assert tuple(meta["joint_names"]) == ref.joint_names
    assert tuple(meta["body_names"]) == ref.body_names
    assert meta["options"] == OPTIONS.to_dict() and meta["backend"] == "cpu"
    assert [name for name, _ in meta["build_phases"]] == ["parse", "generate", "compile"]
    assert "[exit 0" in (entry / "robot.build.log").read_text()


def test_second_registration_hits_without_compiling(tmp_path, cxx):
    cache = tmp_path / "cache"
    first = ensure(cache)
    second = ensure(cache, name="iiwa14_again")
    assert second.outcome == "hit" and not second.compiled and second.phases == ()
    assert cxx.compiles() == 1
    assert second.content_key == first.content_key
    _, _, manifest = visible(cache)
    assert manifest["iiwa14_again"]["content_key"] == first.content_key
    assert second.seconds < 0.5 < first.seconds


def test_codegen_change_with_same_output_skips_compile(tmp_path, cxx, monkeypatch):
    cache = tmp_path / "cache"
    first = ensure(cache)
    monkeypatch.setattr(_store, "codegen_sources_hash", lambda: "edited-generator")
    second = ensure(cache)
    assert second.input_key != first.input_key
    assert second.outcome == "content" and second.content_key == first.content_key
    assert cxx.compiles() == 1
    assert [p for p, _ in second.phases] == ["parse", "generate"]
    assert (cache / "bykey" / second.input_key).read_text().strip() == first.content_key


def test_pointer_with_other_identity_is_not_honoured(tmp_path, cxx):
    cache = tmp_path / "cache"
    first = ensure(cache)
    record = first.entry_dir / "build_inputs.json"
    tampered = json.loads(record.read_text())
    tampered["compiler"]["version"] = "g++ 1.0 (another machine)"
    record.write_text(json.dumps(tampered))
    assert Store(cache).lookup(first.input_key, build_identity(resolve_toolchain("cpu"))) is None
    second = ensure(cache)
    assert second.outcome == "built" and cxx.compiles() == 2
    assert second.content_key == first.content_key
    assert json.loads(record.read_text()) == build_identity(resolve_toolchain("cpu"))
    assert ensure(cache).outcome == "hit" and cxx.compiles() == 2


def test_toolchain_and_knob_changes_rekey(tmp_path, cxx, monkeypatch):
    cache = tmp_path / "cache"
    base = ensure(cache)
    other = make_compiler(tmp_path / "bin2", "cxx2")
    monkeypatch.setenv("GRID_RBD_CXX", str(other.path))
    by_compiler = ensure(cache)
    assert by_compiler.outcome == "built" and other.compiles() == 1
    monkeypatch.setenv("GRID_RBD_CXX", str(cxx.path))
    monkeypatch.setenv("GRID_RBD_CXXFLAGS", "-DGRID_RBD_TEST_KNOB=1")
    by_knob = ensure(cache)
    assert by_knob.outcome == "built" and cxx.compiles() == 2
    assert "-DGRID_RBD_TEST_KNOB=1" in (by_knob.entry_dir / "robot.build.log").read_text()
    keys = {(r.input_key, r.content_key) for r in (base, by_compiler, by_knob)}
    assert len({k for k, _ in keys}) == 3 and len({c for _, c in keys}) == 3
    monkeypatch.delenv("GRID_RBD_CXXFLAGS")
    assert ensure(cache).input_key == base.input_key and cxx.compiles() == 2


def test_force_rebuild_republishes(tmp_path, cxx):
    cache = tmp_path / "cache"
    first = ensure(cache)
    inode = (first.entry_dir / "robot.so").stat().st_ino
    again = ensure(cache, force_rebuild=True)
    assert again.outcome == "built" and cxx.compiles() == 2
    assert again.content_key == first.content_key
    assert (again.entry_dir / "robot.so").stat().st_ino != inode
    entries, pointers, _ = visible(cache)
    assert entries == [first.content_key] and pointers == [first.input_key]
    assert list((cache / "staging").iterdir()) == []


def test_cache_root_precedence(tmp_path, monkeypatch, cxx):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home/.cache/grid-rbd"
    monkeypatch.setenv("GRID_RBD_CACHE_DIR", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    reg = ensure_entry("iiwa14", IIWA.read_bytes(), str(IIWA), False, OPTIONS, "cpu")
    assert reg.store_root == tmp_path / "env" and (reg.entry_dir / "robot.so").is_file()
    by_arg = ensure(tmp_path / "arg")
    assert by_arg.store_root == tmp_path / "arg" and by_arg.outcome == "built"
    assert cxx.compiles() == 2


# -- concurrency and crashes ----------------------------------------------------------
def test_two_processes_compile_once(tmp_path, cxx):
    cache = tmp_path / "cache"
    cxx.slow(2)
    children = [spawn(cache), spawn(cache)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert cxx.compiles() == 1
    assert sorted(r["outcome"] for r in results) == ["built", "hit"]
    assert len({r["content_key"] for r in results}) == 1
    entries, pointers, manifest = visible(cache)
    assert entries == [results[0]["content_key"]] and len(pointers) == 1
    assert list((cache / "staging").iterdir()) == []


def test_sigkill_mid_compile_leaves_nothing_visible(tmp_path, cxx):
    cache = tmp_path / "cache"
    cxx.slow(120)
    child = spawn(cache)
    deadline = time.monotonic() + 60
    while cxx.compiles() == 0:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the build never reached the compiler"
        time.sleep(0.05)
    staged = list((cache / "staging").iterdir())
    assert len(staged) == 1 and (staged[0] / "wrapper.cu").is_file()
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    entries, pointers, manifest = visible_without_sweep(cache)
    assert entries == [] and pointers == [] and manifest == {}

    cxx.slow(None)
    reg = ensure(cache)
    assert reg.outcome == "built" and cxx.compiles() == 2
    assert not staged[0].exists(), "the dead build's staging directory was not swept"
    entries, pointers, manifest = visible(cache)
    assert entries == [reg.content_key] and pointers == [reg.input_key]


def visible_without_sweep(cache: Path) -> tuple[list[str], list[str], dict]:
    manifest = cache / "manifest.json"
    return (sorted(p.name for p in (cache / "store").iterdir()),
            sorted(p.name for p in (cache / "bykey").iterdir()),
            json.loads(manifest.read_text()) if manifest.exists() else {})


def test_dead_staging_directories_are_swept(tmp_path):
    cache = tmp_path / "cache"
    store = Store(cache)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    me = _store.Owner.current()
    dead_dir = store.staging / f"{me.host}-{dead_pid}-12345-aaaa"
    recycled = store.staging / f"{me.host}-{os.getpid()}-{me.start_time + 1}-bbbb"
    live = store.staging / f"{me.prefix()}-cccc"
    foreign = store.staging / f"otherhost-{dead_pid}-12345-dddd"
    for folder in (dead_dir, recycled, live, foreign):
        folder.mkdir()
        (folder / "wrapper.cu").write_text("// partial\n")
    swept = Store(cache).swept
    assert sorted(swept) == sorted([dead_dir, recycled])
    assert live.exists() and foreign.exists()


# -- registration surface and progress --------------------------------------------------
def test_progress_log_lines_name_phases_with_times(tmp_path, cxx, capsys):
    ensure(tmp_path / "cache")
    err = capsys.readouterr().err
    for index, phase in enumerate(("parse", "generate", "compile", "publish"), 1):
        assert re.search(rf"\[{index}/4\] {phase}\b.* \.\.\.$", err, re.M), err
        assert re.search(rf"\[{index}/4\] {phase}\b.* done in \d+\.\d\d s$", err, re.M), err
    assert re.search(r"compile \(cpu, cxx\)", err)
    assert re.search(r"built and published [0-9a-f]{12} in \d+\.\d\d s \(parse \d+\.\d\d s, "
                     r"generate .*compile \d+\.\d\d s, publish \d+\.\d\d s\)$", err, re.M), err
    ensure(tmp_path / "cache")
    assert capsys.readouterr().err == "", "a store hit prints nothing"


def test_progress_tty_rewrites_one_line():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress("robot", 2, stream=stream, mode="auto")
    assert progress.mode == "tty"
    with progress.phase("generate"):
        time.sleep(0.25)
    with progress.phase("compile", "cpu, g++"):
        pass
    progress.finish("built")
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith(")\n")
    assert "\rgrid-rbd robot [1/2] generate" in text and "[2/2] compile (cpu, g++)" in text
    assert re.search(r"built in \d+\.\d\d s \(generate 0\.[2-9]\d s, compile", text)


def test_register_robot_argument_errors(tmp_path):
    kw = {"cache_dir": tmp_path / "cache"}
    with pytest.raises(ValueError, match="exactly one of urdf_path= and urdf_string="):
        grid_rbd.register_robot("r", **kw)
    with pytest.raises(ValueError, match="exactly one"):
        grid_rbd.register_robot("r", urdf_path=IIWA, urdf_string="<robot/>", **kw)
    with pytest.raises(FileNotFoundError, match="no URDF at"):
        grid_rbd.register_robot("r", urdf_path=tmp_path / "missing.urdf", **kw)
    with pytest.raises(ValueError, match="backend must be one of"):
        grid_rbd.register_robot("r", urdf_path=IIWA, backend="tf", **kw)
    with pytest.raises(ValueError, match="device must be one of"):
        grid_rbd.register_robot("r", urdf_path=IIWA, device="tpu", **kw)
    with pytest.raises(ValueError, match="unknown algorithms"):
        grid_rbd.register_robot("r", urdf_path=IIWA, algorithm_list=["nope"], **kw)
    with pytest.raises(ValueError, match="dtype"):
        grid_rbd.register_robot("r", urdf_path=IIWA, dtype="float16", **kw)


def test_device_cuda_without_gpu_names_why(tmp_path):
    from grid_rbd._device import cuda_status
    status = cuda_status()
    if status.usable:
        pytest.skip("a CUDA GPU is usable here")
    assert status.reason
    with pytest.raises(RuntimeError, match=r"device='cuda' needs a usable CUDA GPU, but .+"):
        grid_rbd.register_robot("r", urdf_path=IIWA, device="cuda", cache_dir=tmp_path)


def test_get_robot_unknown_name(tmp_path):
    with pytest.raises(KeyError, match="no robot named 'ghost'.*register_robot first"):
        grid_rbd.get_robot("ghost", cache_dir=tmp_path / "cache")


def test_register_get_and_urdf_string(tmp_path, cxx):
    pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the runtime) is not built")
    cache = tmp_path / "cache"
    handle = grid_rbd.register_robot("iiwa14", urdf_path=IIWA, algorithm_list=["crba"],
                                     device="cpu", cache_dir=cache)
    assert handle.registration.outcome == "built" and cxx.compiles() == 1
    by_name = grid_rbd.get_robot("iiwa14", cache_dir=cache)
    assert by_name.path == handle.path and by_name.nv == handle.nv and cxx.compiles() == 1
    from_text = grid_rbd.register_robot("iiwa_text", urdf_string=IIWA.read_text(),
                                        algorithm_list=["crba"], device="cpu",
                                        cache_dir=cache)
    assert from_text.registration.outcome == "hit" and cxx.compiles() == 1
    assert from_text.path == handle.path
    assert grid_rbd.get_robot("iiwa_text", cache_dir=cache).joint_names == handle.joint_names
    assert grid_rbd.load_robot(handle.path.parent).nq == handle.nq


def test_a_missing_framework_is_named(tmp_path, monkeypatch):
    """backend='torch' / 'jax' without the framework installed: an ImportError naming
    the package and the extra to install (the import is made to fail here)."""
    import builtins

    real_import = builtins.__import__

    def no_frameworks(name, *args, **kwargs):
        if name.split(".")[0] in ("torch", "jax") or name in ("grid_rbd.torch", "grid_rbd.jax"):
            missing = name.split(".")[-1] if name.startswith("grid_rbd.") else name
            raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_frameworks)
    for backend in ("torch", "jax"):
        with pytest.raises(ImportError, match=rf"backend='{backend}' needs {backend}, which "
                                              rf"is not installed \(pip install -e "
                                              rf"'\.\[{backend}\]'\)"):
            grid_rbd.register_robot("r", urdf_path=IIWA, backend=backend, device="cpu",
                                    cache_dir=tmp_path / "cache")


def test_warm_hits_verify_from_the_per_process_cache(tmp_path, cxx, monkeypatch):
    """The entry is hashed when it is published; a warm hit re-hashes nothing, and a file
    whose identity changed (here: its mtime) is hashed again before it is used."""
    from grid_rbd import _integrity

    cache = tmp_path / "cache"
    first = ensure(cache)
    hashed: list[int] = []
    real = _integrity.fd_digest

    def counting(fd: int) -> str:
        hashed.append(fd)
        return real(fd)

    monkeypatch.setattr(_integrity, "fd_digest", counting)
    assert ensure(cache).outcome == "hit" and hashed == []
    so = first.entry_dir / "robot.so"
    os.utime(so, ns=(so.stat().st_atime_ns, so.stat().st_mtime_ns + 1000))
    assert ensure(cache).outcome == "hit" and len(hashed) == 1
    record = json.loads((first.entry_dir / "integrity.json").read_text())
    assert record["key"] == first.content_key
    assert record["files"]["robot.so"]["size"] == so.stat().st_size
