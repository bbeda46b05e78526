"""Constant cleaning: the model snaps round-off (a pi/2 rotation is exactly 0/1), and
the traced code folds the exact zeros and ones away."""

from __future__ import annotations

import re

import numpy as np
import pytest

from grid_codegen import parse_urdf
from grid_codegen.generate import generate
from grid_codegen.model import SNAP_TOLERANCE, Placement
from grid_codegen.options import CodegenOptions


def _chain(rpy: str, axis: str = "0 0 1") -> str:
    links = "".join(f'<link name="l{i}"><inertial><mass value="{1 + i}"/>'
                    f'<origin xyz="0.01 0.02 0.1"/><inertia ixx="0.01" ixy="0" ixz="0" '
                    f'iyy="0.02" iyz="0" izz="0.03"/></inertial></link>' for i in range(4))
    joints = "".join(f'<joint name="j{i}" type="revolute"><parent link="l{i}"/>'
                     f'<child link="l{i + 1}"/><origin xyz="0 0 0.3" rpy="{rpy}"/>'
                     f'<axis xyz="{axis}"/><limit lower="-1" upper="1" effort="1" '
                     f'velocity="1"/></joint>' for i in range(3))
    return f'<robot name="chain">{links}{joints}</robot>'


def test_a_quarter_turn_origin_is_exact():
    model = parse_urdf(_chain("1.5707963267948966 0 -1.5707963267948966").encode())
    R = model.joints[0].placement.R
    assert set(np.unique(R)) <= {-1.0, 0.0, 1.0}
    assert np.array_equal(np.abs(R).sum(axis=0), np.ones(3))  # a signed permutation
    np.testing.assert_array_equal(R @ R.T, np.eye(3))


def test_snapping_keeps_real_values():
    R = np.array([[1.0, 1e-6, 0.0], [-1e-6, 1.0, 0.0], [0.0, 0.0, 1.0]])
    kept = Placement(R, np.array([1e-9, 0.5, 1e-13]))
    assert kept.R[0, 1] == 1e-6 and kept.p[0] == 1e-9
    assert kept.p[2] == 0.0  # below SNAP_TOLERANCE metres
    assert SNAP_TOLERANCE == 1e-12


@pytest.mark.parametrize("rpy", ["1.5707963267948966 0 0", "0 1.5707963267948966 0",
                                 "3.141592653589793 0 1.5707963267948966"])
@pytest.mark.parametrize("strategy", ["thread", "warp"])
def test_generated_code_carries_no_round_off(rpy, strategy):
    """Every literal in the code of a chain built from quarter turns is a genuine value:
    the round-off of cos(pi/2) and its products (4.7e-32 and the like) are gone, in the
    traced code (`S(...)`) and in the level-synchronous code's baked placements
    (`T(...)`)."""
    model = parse_urdf(_chain(rpy).encode())
    text = generate(model, CodegenOptions(strategy=strategy, dtype="float64",
                                          algorithms=("inverse_dynamics", "crba")))["grid.cuh"]
    literals = [float(x) for x in re.findall(r"\b[ST]\((-?[0-9.]+(?:e-?[0-9]+)?)\)", text)]
    assert len(literals) > 20
    assert min(abs(x) for x in literals if x != 0.0) > 1e-9
