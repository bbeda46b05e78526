"""The grid_robot macro's generate action (tools/bazel/codegen_action.py) run directly: the
names the macro passes through are checked by the generator, whose message ends the
action; a good call writes the three files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
