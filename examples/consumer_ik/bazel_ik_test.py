"""The grid_consumer-built IK artifact (`$GRID_CONSUMER_ARTIFACT`) solves reachable iiwa14
targets to 1e-4 m against the float64 reference's pose."""

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ik_iiwa14 as ik  # noqa: E402


def test_the_bazel_built_ik_artifact_solves_to_the_reference_pose():
    solver = ik.IKSolver(os.environ["GRID_CONSUMER_ARTIFACT"])
    assert (solver.robot, solver.nq) == ("iiwa14", 7)
    _, targets, seeds = ik.make_problem(1024, seed=5)
    res = solver.solve(targets, seeds)
    pos, rot = ik.pose_errors(res["q"], targets)
    assert np.mean((pos < 1e-4) & (rot < 1e-3)) >= 0.999
    rc, codes = solver.state_selftest()
    assert rc == 0 and codes == [0, 0, 0, 1, 6, 0]
