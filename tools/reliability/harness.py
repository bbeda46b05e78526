"""What the store cases share: a tiny robot, a counting compiler, child processes that
register (and can be paused at a chosen phase), and the store invariants.

The invariants (`check_store`) are what a reader may rely on at any moment: every
published entry verifies, every pointer and manifest record names an entry that exists
(or is reported and ignored), the manifest parses, and nothing outside the store root
was touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Two moving joints, one fixed: compiles in well under a second with one algorithm.
TINY_URDF = """<?xml version="1.0"?>
<robot name="tiny">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0 0 0.2"/><mass value="1.5"/>
    <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.001"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0 0 0.15"/><mass value="0.8"/>
    <inertia ixx="0.01" ixy="0.001" ixz="0" iyy="0.01" iyz="0" izz="0.0005"/></inertial></link>
  <link name="tool"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="10" velocity="5"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 0.4" rpy="0.1 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="lower"/><child link="tool"/>
    <origin xyz="0 0 0.3"/></joint>
</robot>
"""
# The codegen options of every case (the children's too): one algorithm, one strategy.
OPTIONS = {"algorithms": ["crba"], "strategy": "block"}


def pythonpath() -> str:
    import grid_codegen
    import grid_rbd

    return os.pathsep.join(str(Path(m.__file__).resolve().parent.parent)
                           for m in (grid_codegen, grid_rbd))


@dataclass(frozen=True)
class Compiler:
    """A g++ wrapper that logs one line per compile of wrapper.cu in `count_file` and,
    while `slow_file` exists, sleeps that many seconds first."""

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


def environment(compiler: Compiler) -> dict[str, str]:
    """The environment children and in-process builds share (same compiler, same keys)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_RBD_")}
    inherited = os.environ.get("PYTHONPATH")
    env.update(GRID_RBD_CXX=str(compiler.path), GRID_RBD_PROGRESS="off",
               PYTHONPATH=pythonpath() + (os.pathsep + inherited if inherited else ""))
    return env


def ensure(cache: Path, name: str = "tiny", urdf: str = TINY_URDF, force: bool = False):
    """`ensure_entry` of `urdf` in this process (the caller set GRID_RBD_CXX)."""
    from grid_codegen.options import CodegenOptions
    from grid_rbd._build import ensure_entry

    return ensure_entry(name, urdf.encode(), "<urdf string>", False,
                        CodegenOptions(**OPTIONS), "cpu", cache_dir=cache,
                        force_rebuild=force)


# A child that registers `tiny`, optionally pausing at one phase: it writes the marker
# file and sleeps, so the parent can kill it exactly there.
CHILD = textwrap.dedent('''\
    import json, os, sys, time
    cache, name, phase, marker, force, swap, urdf_file, options = sys.argv[1:9]
    OPTIONS = json.loads(options)

    linger = phase.startswith("linger-")  # sleep a moment at the phase, then go on
    phase = phase.removeprefix("linger-")

    def pause():
        if linger:
            time.sleep(0.5)
            return
        with open(marker, "w") as fh:
            fh.write(str(os.getpid()))
        time.sleep(300)

    import grid_codegen, grid_codegen.compile, grid_codegen.generate
    import grid_rbd._store as store_module
    from grid_rbd._store import Store

    def before(owner, attr):
        real = getattr(owner, attr)
        def hooked(*a, **k):
            pause()
            return real(*a, **k)
        setattr(owner, attr, hooked)

    def after(owner, attr):
        real = getattr(owner, attr)
        def hooked(*a, **k):
            out = real(*a, **k)
            pause()
            return out
        setattr(owner, attr, hooked)

    if swap == "0":
        store_module.exchange = lambda a, b: False
    if phase == "parse":
        before(grid_codegen, "parse_urdf")
    elif phase == "generate":
        before(grid_codegen.generate, "generate")
    elif phase == "compile":
        before(grid_codegen.compile, "run_compiler")
    elif phase == "publish":
        before(Store, "publish")
    elif phase == "integrity":
        after(store_module, "write_record")
    elif phase == "swap":
        after(store_module, "exchange")
    elif phase == "rename":
        real_rename = os.rename
        def rename(src, dst, *a, **k):
            real_rename(src, dst, *a, **k)
            if os.path.dirname(os.fspath(src)).endswith("store") or \\
                    os.path.dirname(os.fspath(dst)).endswith("store"):
                pause()
        store_module.os.rename = rename
    elif phase == "pointer":
        before(Store, "write_pointer")
    elif phase == "manifest":
        before(Store, "record")
    elif phase != "none":
        raise SystemExit("unknown phase " + phase)

    from grid_codegen.options import CodegenOptions
    from grid_rbd._build import ensure_entry
    data = open(urdf_file, "rb").read()
    r = ensure_entry(name, data, "<urdf string>", False, CodegenOptions(**OPTIONS), "cpu",
                     cache_dir=cache, force_rebuild=force == "1")
    print(json.dumps({"outcome": r.outcome, "content_key": r.content_key,
                      "input_key": r.input_key}))
    ''')


def spawn(cache: Path, compiler: Compiler, name: str = "tiny", phase: str = "none",
          force: bool = False, swap: bool = True, urdf: str = TINY_URDF,
          marker: Path | None = None) -> tuple[subprocess.Popen, Path]:
    """A child registering `urdf` under `name` into `cache`, paused at `phase`."""
    marker = marker or cache.parent / f"marker-{name}-{phase}-{time.monotonic_ns()}"
    urdf_file = cache.parent / f"{name}-{hashlib.sha256(urdf.encode()).hexdigest()[:12]}.urdf"
    if not urdf_file.exists():
        urdf_file.write_text(urdf)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cache), name, phase, str(marker), str(int(force)),
         str(int(swap)), str(urdf_file), json.dumps(OPTIONS)], env=environment(compiler),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    return child, marker


def kill(child: subprocess.Popen) -> None:
    """SIGKILL the child's whole process group (its compiler too) and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.communicate(timeout=60)


def wait_for(marker: Path, child: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if child.poll() is not None:
            out, err = child.communicate()
            raise AssertionError(f"the child ended before its pause (rc {child.returncode})"
                                 f":\n{out}\n{err[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the child never reached its pause ({marker.name})")
        time.sleep(0.02)


def result(child: subprocess.Popen, timeout: float = 180.0) -> dict:
    out, err = child.communicate(timeout=timeout)
    if child.returncode != 0:
        raise AssertionError(f"child failed (rc {child.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def check_store(cache: Path, names: tuple[str, ...] = ()) -> dict:
    """Assert the store invariants (module doc); `names` must each resolve to a sound
    entry. Returns the manifest."""
    from grid_rbd._store import Store

    store = Store(cache)  # sweeps dead staging, restores an entry a killed rebuild moved
    report = store.verify_all()
    bad = {item: problems for item, problems in report.items() if problems}
    assert not bad, f"the store has damaged items after the event: {bad}"
    assert not any(store.staging.iterdir()), \
        f"staging left behind: {sorted(p.name for p in store.staging.iterdir())}"
    manifest = store.read_manifest()
    for name in names:
        assert name in manifest, f"{name!r} lost its manifest record: {sorted(manifest)}"
        entry = store.entry(manifest[name]["content_key"])
        assert entry is not None, f"{name!r} has no entry"
    return manifest
