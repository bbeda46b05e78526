"""The grid_consumer macro's two actions (tools/bazel/grid_consumer.bzl) run directly, as
the Bazel sandbox runs them: generate with --device-api, then consumer-compile; the
artifact solves IK like the build_artifact one. (`bazel test //examples/consumer_ik:all`
runs the macro itself.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from consumer_support import IIWA, IK_DIR

REPO = Path(__file__).resolve().parent.parent
ACTION = REPO / "tools/bazel/codegen_action.py"


def _action(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ACTION), str(REPO / "codegen"), *args],
                          capture_output=True, text=True, timeout=300)


def test_generate_and_consumer_compile_build_a_working_ik_artifact(tmp_path):
    gen = tmp_path / "gen"
    result = _action("generate", str(IIWA), "--out-dir", str(gen), "--device-api",
                     "--algorithms", "end_effector_pose,end_effector_pose_gradient",
                     "--contact-frames", "iiwa_link_7")
    assert result.returncode == 0, result.stderr
    header = (gen / "grid.cuh").read_text()
    assert "namespace device" in header and 'kContactNames[1] = {"iiwa_link_7"}' in header
    so = tmp_path / "ik.so"
    result = _action("consumer-compile", "--backend", "cpu", f"--include={gen}",
                     f"--include={IK_DIR}", f"--src={IK_DIR / 'ik_solver.cu'}",
                     f"--src={IK_DIR / 'ik_api.cu'}", "--output", str(so))
    assert result.returncode == 0, result.stderr
    sys.path.insert(0, str(IK_DIR))
    import ik_iiwa14 as ik

    solver = ik.IKSolver(so)
    _, targets, seeds = ik.make_problem(256, seed=7)
    pos, _ = ik.pose_errors(solver.solve(targets, seeds)["q"], targets)
    assert np.mean(pos < 1e-4) >= 0.99


def test_a_failing_unit_ends_the_action_with_the_compiler_log(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text("#include \"grid.cuh\"\nint f() { return grid::device::kNoSuchThing; }\n")
    gen = tmp_path / "gen"
    assert _action("generate", str(IIWA), "--out-dir", str(gen), "--device-api",
                   "--algorithms", "end_effector_pose").returncode == 0
    result = _action("consumer-compile", "--backend", "cpu", f"--include={gen}",
                     f"--src={bad}", "--output", str(tmp_path / "bad.so"))
    assert result.returncode != 0 and "kNoSuchThing" in result.stderr
    assert not (tmp_path / "bad.so").exists()
