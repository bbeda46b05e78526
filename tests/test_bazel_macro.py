"""The grid_robot macro's actions (tools/bazel/codegen_action.py) run directly: the names
the macro passes through are checked by the generator, whose message ends the action; a
good call writes the three files and, with --split-dir, the split build that
`compile --source-dir` turns into the artifact the robot tests check (asked of Bazel,
analysis only, where it is on PATH)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grid_codegen.options import ALGORITHMS

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "tools/bazel/codegen_action.py"
URDF = REPO / "robots/iiwa14/iiwa14.urdf"


def generate(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ACTION), str(REPO / "codegen"), "generate",
                           str(URDF), "--out-dir", str(tmp_path / "out"), *flags],
                          capture_output=True, text=True, timeout=300)


def test_unknown_algorithm_ends_the_action_naming_the_valid_ones(tmp_path):
    result = generate(tmp_path, "--algorithms", "inverse_dynamics,teleport")
    assert result.returncode == 2
    assert "grid_robot: unknown algorithms ['teleport']" in result.stderr
    assert all(name in result.stderr for name in ALGORITHMS)
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_a_bad_urdf_ends_the_action_with_the_parser_message(tmp_path):
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='r'><link name='a'/><joint name='j' type='screw'>"
                   "<parent link='a'/><child link='b'/></joint><link name='b'/></robot>")
    result = subprocess.run([sys.executable, str(ACTION), str(REPO / "codegen"), "generate",
                             str(bad), "--out-dir", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "grid_robot: " in result.stderr
    assert "joint 'j'" in result.stderr and "Traceback" not in result.stderr


def test_a_good_call_writes_the_three_files_and_no_architecture(tmp_path):
    result = generate(tmp_path, "--algorithms", "inverse_dynamics")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["grid.cuh", "options.json", "wrapper.cu"]
    options = json.loads((out / "options.json").read_text())
    assert options["algorithms"] == ["inverse_dynamics"]
    assert "gpu_arch" not in options and "archs" not in json.dumps(options)


# -- the split build (generate --split-dir, compile --source-dir) ---------------------------
SPLIT_ALGORITHMS = "inverse_dynamics,crba,forward_dynamics"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ACTION), str(REPO / "codegen"), *args],
                          capture_output=True, text=True, timeout=600)


def test_split_dir_adds_the_units_and_leaves_the_three_files_as_they_were(tmp_path):
    plain = generate(tmp_path / "plain", "--algorithms", SPLIT_ALGORITHMS)
    assert plain.returncode == 0, plain.stderr
    split = generate(tmp_path / "split", "--algorithms", SPLIT_ALGORITHMS,
                     "--split-dir", str(tmp_path / "split/out/units"))
    assert split.returncode == 0, split.stderr
    out, units = tmp_path / "split/out", tmp_path / "split/out/units"
    for name in ("grid.cuh", "options.json", "wrapper.cu"):
        assert (out / name).read_bytes() == (tmp_path / "plain/out" / name).read_bytes()
    # Named by the registry's algorithms only (the URDF names none of them).
    assert sorted(p.name for p in units.iterdir()) == [
        "grid.cuh", "unit_crba.cu", "unit_forward_dynamics.cu", "unit_inverse_dynamics.cu",
        "wrapper.cu"]
    assert (units / "grid.cuh").read_bytes() == (out / "grid.cuh").read_bytes()
    assert (units / "wrapper.cu").read_text() != (out / "wrapper.cu").read_text()


def test_compile_source_dir_refuses_a_folder_that_is_not_a_split_build(tmp_path):
    folder = tmp_path / "units"
    folder.mkdir()
    for name in ("grid.cuh", "wrapper.cu", "unit_x.cu", "evil;rm.cu"):
        (folder / name).write_text("// nothing\n")
    result = _run("compile", "--backend", "cpu", "--source-dir", str(folder), "--output",
                  str(tmp_path / "robot.so"))
    assert result.returncode == 2 and "is not a split build" in result.stderr
    assert not (tmp_path / "robot.so").exists()


def test_the_split_build_computes_what_the_single_unit_build_does(tmp_path):
    """The grid_robot artifacts are built with --source-dir; the numbers are those of the
    one-unit build of the same sources (the Bazel path before it was split)."""
    import numpy as np
    from artifact_harness import Artifact
    from support import random_states

    from grid_codegen.urdf import parse_urdf

    out = tmp_path / "out"
    result = generate(tmp_path, "--algorithms", SPLIT_ALGORITHMS, "--split-dir",
                      str(out / "units"))
    assert result.returncode == 0, result.stderr
    built = {}
    for how, flag, source in (("one", "--source", out / "wrapper.cu"),
                              ("split", "--source-dir", out / "units")):
        so = tmp_path / f"{how}.so"
        log = tmp_path / f"{how}.log"
        result = _run("compile", "--backend", "cpu", flag, str(source), "--output", str(so),
                      "--log", str(log))
        assert result.returncode == 0, result.stderr[-4000:]
        built[how] = Artifact(so).state()
    assert log.read_text().count(" -c ") == 4  # wrapper.cu and three units, then a link
    s = random_states(parse_urdf(URDF), 37, seed=3)
    for name, inputs in (("inverse_dynamics", (s.q, s.qd, s.qdd)), ("crba", (s.q,)),
                         ("forward_dynamics", (s.q, s.qd, s.u))):
        one, split = (built[how].call(name, *inputs) for how in ("one", "split"))
        assert np.isfinite(one).all()
        np.testing.assert_allclose(split, one, rtol=1e-6, atol=1e-6, err_msg=name)


BAZEL = shutil.which("bazel")


@pytest.mark.skipif(BAZEL is None, reason="bazel is not on PATH")
@pytest.mark.skipif("TEST_SRCDIR" in os.environ,
                    reason="runs Bazel on the workspace; not from inside a Bazel test")
def test_the_robot_tests_check_the_artifact_of_the_split_build():
    """Analysis only (aquery): the one CPU compile behind //robots/iiwa14:iiwa14_cpu_test
    builds iiwa14_cpu.so from the generate action's units folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_CUDA_")}
    result = subprocess.run(
        [BAZEL, "aquery", "mnemonic('GridCompileCpu|GridGenerate', "
         "deps(//robots/iiwa14:iiwa14_cpu_test))", "--//cuda:enabled=false"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    actions = {}
    for block in result.stdout.split("\n\n"):
        mnemonic = re.search(r"Mnemonic: (\S+)", block)
        if mnemonic:
            actions.setdefault(mnemonic.group(1), []).append(
                " ".join(block.replace("\\\n", " ").replace("'", "").split()))
    assert sorted(actions) == ["GridCompileCpu", "GridGenerate"]
    assert len(actions["GridCompileCpu"]) == len(actions["GridGenerate"]) == 1
    units = re.search(r"--split-dir (\S+/iiwa14_generated/units) ", actions["GridGenerate"][0])
    assert units, actions["GridGenerate"][0]
    compile_ = actions["GridCompileCpu"][0]
    assert f"--source-dir {units.group(1)} " in compile_ and " --source " not in compile_
    assert re.search(r"--output \S+/robots/iiwa14/iiwa14_cpu\.so ", compile_), compile_
