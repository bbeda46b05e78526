"""The GPU's float32 sine and cosine of joint angles (`sincos_` in grid/spatial.h: a
reduction and polynomials inline, the library's out of line past |x| = 105615) against
numpy's float64 ones, over a sweep of angles from 0 to 1e7 with the signs, the
neighbourhoods of multiples of pi/2, and inf and NaN (tag gpu; skipped with the reason
elsewhere). Read through `world_kinematics` (the generated pass: one `sincos_` per angle)
and through the block strategy's mass matrix (grid/spatial.h's `sin_` and `cos_`) against
the float64 reference.

Run on the GPU machine: `pytest -m gpu tests/test_sincos_gpu.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import assert_scaled_close
from test_codegen_gpu import _require_cuda

import grid_rbd
import grid_rbd.reference as reference

pytestmark = pytest.mark.gpu

# Two links: joint a about z at the origin, joint b about x, 0.3 m further along x.
URDF = """<robot name="sincos_pair">
  <link name="base"/>
  <link name="a">
    <inertial><origin xyz="0.1 0.02 0"/><mass value="1.5"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial>
  </link>
  <link name="b">
    <inertial><origin xyz="0.05 0.1 0.03"/><mass value="0.8"/>
      <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.005"/></inertial>
  </link>
  <joint name="ja" type="revolute"><parent link="base"/><child link="a"/>
    <origin xyz="0 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="jb" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0.3 0 0"/><axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
</robot>"""


def _angles() -> np.ndarray:
    """float32 angles: a log sweep to 1e7 with both signs, points at and beside k pi/2
    (where the reduction's remainder vanishes), and the library path's edge 105615."""
    rng = np.random.default_rng(7)
    sweep = np.concatenate([[0.0], np.geomspace(1e-8, 1e7, 400), rng.uniform(-4, 4, 200)])
    k = np.arange(-64, 65)
    near = np.concatenate([k * np.pi / 2 + d for d in (0.0, 1e-6, -1e-6, 1e-3)])
    edge = np.array([105614.0, 105615.0, 105616.0, 2e5, 3.4e6])
    x = np.concatenate([sweep, -sweep, near, edge, -edge])
    return x.astype(np.float32)


def _register(tmp_path, algorithms, strategy="auto"):
    return grid_rbd.register_robot(
        f"sincos-{strategy}", urdf_string=URDF, dtype="float32", backend="torch",
        device="cuda", algorithm_list=list(algorithms), strategy=strategy,
        cache_dir=tmp_path / "store")


def test_joint_rotation_is_float64_sine_and_cosine_to_two_ulp(tmp_path):
    torch = _require_cuda()
    h = _register(tmp_path, ["world_kinematics"])
    x = _angles()
    q = torch.from_numpy(np.stack([x, np.zeros_like(x)], 1)).cuda()
    rotations = h.world_kinematics(q)[0].cpu().numpy().astype(np.float64)
    # body 0 turns about z at the origin: R = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    c, s = np.cos(x.astype(np.float64)), np.sin(x.astype(np.float64))
    ulp = np.float64(np.finfo(np.float32).eps)  # 2^-23: one ulp of values in [1, 2)
    assert np.abs(rotations[:, 0, 0, 0] - c).max() <= 2 * ulp
    assert np.abs(rotations[:, 0, 1, 0] - s).max() <= 2 * ulp
    assert np.abs(rotations[:, 0, 0, 1] + s).max() <= 2 * ulp
    # relative to the value where it is small (near the zeros of sin and cos: 2 ulp of it)
    small = np.abs(s) < 0.5
    rel = np.abs(rotations[small, 0, 1, 0] - s[small]) / np.maximum(np.abs(s[small]), 1e-30)
    assert rel.max() <= 4 * ulp, f"sin's relative error near its zeros: {rel.max():.2e}"
    # not finite in, NaN out
    bad = torch.tensor([[np.inf, 0.0], [-np.inf, 0.0], [np.nan, 0.0]], device="cuda")
    assert np.isnan(h.world_kinematics(bad)[0].cpu().numpy()[:, 0, :2, :2]).all()


@pytest.mark.parametrize("strategy", ["block", "thread"])
def test_mass_matrix_over_the_sweep_matches_the_reference(tmp_path, strategy):
    torch = _require_cuda()
    h = _register(tmp_path, ["crba"], strategy)
    ref = reference.load(URDF.encode())
    x = _angles()
    q = np.stack([np.flip(x), x], 1)
    M = h.crba(torch.from_numpy(q).cuda()).cpu().numpy()
    expected = ref.crba(q.astype(np.float64))
    assert_scaled_close(M, expected, 1e-5, f"crba ({strategy}) over the angle sweep")
