"""Packaging: one version, the licence, typing marker, package data, the console script,
and lock files that keep the main job's install to the core."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
import subprocess
from pathlib import Path

import tomllib

import grid_rbd
from grid_rbd import cli, interop
from grid_rbd.data import BUNDLED, bundled_urdf

REPO = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)


def pins(lock: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in _PIN.finditer((REPO / lock).read_text())}


def test_the_version_is_written_once():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    provider = PYPROJECT["tool"]["scikit-build"]["metadata"]["version"]
    source = (REPO / provider["input"]).read_text()
    [written] = re.findall(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    assert grid_rbd.__version__ == written
    assert importlib.metadata.version("grid-rbd") == written
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    others = [f for f in tracked if f != provider["input"] and f.endswith(
        (".py", ".toml", ".bazel", ".bzl", ".txt", ".cfg")) and (REPO / f).is_file()
        and re.search(r'^\s*(__version__|version)\s*=\s*"\d+\.\d+', (REPO / f).read_text(
            errors="ignore"), re.MULTILINE)]
    assert others == [], f"a version is also written in {others}"


def test_licence_and_typing_marker():
    assert PYPROJECT["project"]["license"] == "BSD-3-Clause"
    assert "BSD 3-Clause License" in (REPO / "LICENSE").read_text()
    assert (Path(grid_rbd.__file__).parent / "py.typed").is_file()


def test_public_functions_are_typed():
    functions = [grid_rbd.register_robot, grid_rbd.get_robot, grid_rbd.load_robot,
                 bundled_urdf, cli.main] + [getattr(interop, n) for n in interop.__all__
                                            if inspect.isfunction(getattr(interop, n))]
    for f in functions:
        sig = inspect.signature(f)
        untyped = [p for p, v in sig.parameters.items() if v.annotation is inspect._empty]
        assert not untyped and sig.return_annotation is not inspect._empty, f.__qualname__


def test_bundled_urdf_is_the_in_tree_robot():
    assert set(BUNDLED) == {"iiwa14"}
    assert bundled_urdf("iiwa14").read_bytes() == (REPO / "robots/iiwa14/iiwa14.urdf"
                                                   ).read_bytes()


def test_console_script_is_the_cli():
    assert PYPROJECT["project"]["scripts"] == {"grid-rbd": "grid_rbd.cli:main"}
    [script] = [e for e in importlib.metadata.entry_points(group="console_scripts")
                if e.name == "grid-rbd"]
    assert script.load() is cli.main


def test_locks_keep_the_main_job_to_the_core():
    core, test = pins("requirements-core.lock"), pins("requirements-test.lock")
    frameworks, cuda = pins("requirements-frameworks.lock"), pins(
        "requirements-frameworks-cuda.lock")
    assert set(core) == {"numpy", "scikit-build-core", "pybind11", "cmake", "ninja",
                         "packaging", "pathspec", "trimesh"}
    assert not {"torch", "jax", "jaxlib"} & (set(core) | set(test))
    assert {"pytest", "pin", "example-robot-data"} <= set(test)
    assert frameworks["torch"] == "2.13.0"  # a version, no local build label
    assert {"jax", "jaxlib"} <= set(frameworks)
    assert cuda and all(re.match(r"nvidia-|cuda-|triton$", name) for name in cuda)
    # One pin per package across the layers, and every pin hash-checked.
    for name in set(core) & (set(test) | set(frameworks)):
        assert core[name] == test.get(name, core[name]) == frameworks.get(name, core[name])
    for lock in ("core", "test", "frameworks", "frameworks-cuda"):
        text = (REPO / f"requirements-{lock}.lock").read_text()
        blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 1)[1])
        for block in blocks:
            if _PIN.match(block):
                assert "--hash=sha256:" in block, block.splitlines()[0]
        assert "+cpu" not in text and "--index-url" not in text and "--find-links" not in text


def _fake_apt(tmp_path: Path, failures: int, message: str) -> tuple[dict, Path]:
    """An apt-get that fails `failures` times with `message`, then succeeds; it counts its
    calls in a file."""
    calls = tmp_path / "calls"
    fake = tmp_path / "apt-get"
    fake.write_text(f"""#!/bin/sh
n=$(cat {calls} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {calls}
[ "$n" -gt {failures} ] && exit 0
echo "{message}" >&2
exit 100
""")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "GRID_RBD_APT_GET": str(fake), "GRID_RBD_APT_POLL_S": "0.05"}
    return env, calls


def test_apt_waits_for_a_held_lock_and_fails_on_anything_else(tmp_path):
    script = str(REPO / "tools/ci/apt_get.sh")
    lock = "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242"
    (tmp_path / "a").mkdir()
    env, calls = _fake_apt(tmp_path / "a", 3, lock)
    done = subprocess.run([script, "install", "-y", "bazel-bootstrap"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().strip() == "4" and "waiting for it" in done.stderr
    (tmp_path / "b").mkdir()
    env, calls = _fake_apt(tmp_path / "b", 3, "E: Unable to locate package bazel-bootstrap")
    failed = subprocess.run([script, "install", "-y", "bazel-bootstrap"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert failed.returncode == 100 and calls.read_text().strip() == "1"
    assert "Unable to locate package" in failed.stderr
    (tmp_path / "c").mkdir()
    env, calls = _fake_apt(tmp_path / "c", 1000, lock)
    timed_out = subprocess.run([script, "update"], env={**env, "GRID_RBD_APT_WAIT_S": "1"},
                               capture_output=True, text=True, timeout=60)
    assert timed_out.returncode == 100 and "Could not get lock" in timed_out.stderr
