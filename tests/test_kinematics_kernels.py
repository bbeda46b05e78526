"""The kinematics profile (issue 13, items 2 and 5) on the CPU build for every robot of
the test set and, tagged `gpu`, on the CUDA build:

* `fk_batched`, the position and unit quaternion of the first end-effector frame, against
  the float64 reference's frame placement (through `interop.frame_placement`) and
  Pinocchio's `SE3ToXYZQUAT` (the sign of a quaternion is free: compared up to it);
* `end_effector_pose_hessian` against the reference's and against central differences of
  the reference's pose gradient along the chart (the free flyer's exponential included).
"""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import build_cached, prebuild, round_states
from support import ROBOTS, assert_scaled_close, pinocchio_model, random_states

import grid_rbd.reference as reference
from grid_rbd import interop
from grid_rbd.reference import configuration

CONFIGS = [(r, "float64") for r in sorted(ROBOTS)] + [("iiwa14", "float32"),
                                                     ("go2", "float32")]
OPTIONS = {"algorithms": ("kinematics",)}


def _rotation(quat_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(quat_wxyz, -1, 0)
    return np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                     2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                     2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
                    axis=-1).reshape(quat_wxyz.shape[:-1] + (3, 3))


def _check_pose(out: np.ndarray, ref, q: np.ndarray, tol: float, what: str) -> None:
    R, p = interop.frame_placement(ref, q, ref.ee_frames[0].name)
    scale = 1.0 + np.abs(p).max()
    assert np.abs(out[:, :3] - p).max() <= tol * scale, what
    np.testing.assert_allclose(np.linalg.norm(out[:, 3:], axis=1), 1.0, atol=tol,
                               err_msg=f"{what}: unit quaternion")
    np.testing.assert_allclose(_rotation(out[:, 3:]), R, atol=4 * tol, err_msg=what)


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    prebuild([(r, "cpu", {"dtype": d, **OPTIONS}) for r, d in CONFIGS])


@pytest.mark.parametrize("robot,dtype", CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def test_fk_batched_matches_the_reference(robot, dtype):
    artifact, _ = build_cached(robot, dtype=dtype, **OPTIONS)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    s = round_states(random_states(ref.model, 29, seed=60), artifact.dtype)
    state = artifact.state()
    out = state.call("fk_batched", s.q)
    one = state.call("fk_batched", s.q[:1])
    state.close()
    tol = 1e-12 if dtype == "float64" else 2e-6
    _check_pose(out, ref, s.q, tol, f"{robot} {dtype}")
    np.testing.assert_array_equal(one, out[:1])


@pytest.mark.parametrize("robot,dtype", CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def test_pose_hessian_matches_the_reference(robot, dtype):
    artifact, _ = build_cached(robot, dtype=dtype, **OPTIONS)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    s = round_states(random_states(ref.model, 13, seed=64), artifact.dtype)
    state = artifact.state()
    H = state.call("end_effector_pose_hessian", s.q).reshape(13, -1, ref.nv, ref.nv)
    state.close()
    np.testing.assert_array_equal(H, np.swapaxes(H, -1, -2))
    tol = 1e-9 if dtype == "float64" else 2e-5
    assert_scaled_close(H, ref.end_effector_pose_hessian(s.q), tol, f"{robot} {dtype}")


def test_pose_hessian_against_finite_differences_of_the_gradient():
    """Central differences of the reference's pose gradient along the chart: column j is
    `d/dh grad(q (+) h e_j)`. Joint coordinates add, so that is the Hessian's column; the
    free flyer's exponentials compose with a Lie bracket term that is antisymmetric in
    (i, j), so the symmetric part of the differences is the Hessian."""
    artifact, _ = build_cached("go2", dtype="float64", **OPTIONS)
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    s = random_states(ref.model, 3, seed=65)
    state = artifact.state()
    H = state.call("end_effector_pose_hessian", s.q).reshape(3, -1, ref.nv, ref.nv)
    state.close()
    h = 1e-6
    fd = np.zeros_like(H)
    for j in range(ref.nv):
        e = np.zeros((3, ref.nv))
        e[:, j] = h
        plus = ref.end_effector_pose_gradient(configuration.integrate(ref.model, s.q, e))
        minus = ref.end_effector_pose_gradient(configuration.integrate(ref.model, s.q, -e))
        fd[..., j] = (plus - minus) / (2 * h)
    symmetric = 0.5 * (fd + np.swapaxes(fd, -1, -2))
    np.testing.assert_allclose(H, symmetric, atol=1e-6 * (1 + np.abs(H).max()))
    joints = slice(6, None)  # joint-joint entries need no symmetrisation
    np.testing.assert_allclose(H[..., joints, joints], fd[..., joints, joints],
                               atol=1e-6 * (1 + np.abs(H).max()))


def test_fk_batched_of_a_placed_frame_against_pinocchio():
    """A fixed-joint frame with its own placement (panda's TCP), compared with Pinocchio's
    XYZQUAT up to the quaternion's sign."""
    pin = pytest.importorskip("pinocchio", reason="pinocchio (pin) is not installed")
    robot = ROBOTS["panda"]
    artifact, _ = build_cached("panda", dtype="float64", ee_joint_names=("panda_hand_tcp",),
                               **OPTIONS)
    ref = reference.load(robot.path, ee_joint_names=["panda_hand_tcp"])
    s = random_states(ref.model, 6, seed=61)
    state = artifact.state()
    out = state.call("fk_batched", s.q)
    state.close()
    _check_pose(out, ref, s.q, 1e-12, "panda TCP")
    model = pinocchio_model(robot)
    data = model.createData()
    frame = model.getFrameId("panda_hand_tcp")
    q_pin = interop.to_pinocchio(ref, s.q)
    for b in range(6):
        pin.framesForwardKinematics(model, data, q_pin[b])
        xyzquat = pin.SE3ToXYZQUAT(data.oMf[frame])  # [x, y, z, qx, qy, qz, qw]
        want = np.concatenate([xyzquat[:3], xyzquat[6:], xyzquat[3:6]])
        sign = 1.0 if want[3:] @ out[b, 3:] >= 0 else -1.0
        np.testing.assert_allclose(out[b, :3], want[:3], atol=1e-12)
        np.testing.assert_allclose(out[b, 3:], sign * want[3:], atol=1e-12)


def test_the_quaternion_sign_is_continuous_along_a_motion():
    artifact, _ = build_cached("go2", dtype="float64", **OPTIONS)
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    s = random_states(ref.model, 1, seed=62)
    path = np.repeat(s.q, 200, axis=0)
    path[:, 7:] += np.linspace(0.0, 2.0, 200)[:, None]  # every joint turns by 2 rad
    state = artifact.state()
    out = state.call("fk_batched", path)
    state.close()
    steps = np.linalg.norm(np.diff(out[:, 3:], axis=0), axis=1)
    assert steps.max() < 0.1, "the quaternion flipped sign between neighbouring states"


@pytest.mark.gpu
@pytest.mark.parametrize("robot", ["iiwa14", "go2", "g1"])
def test_kinematics_on_the_gpu(robot):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    artifact, _ = build_cached(robot, backend="cuda", dtype="float64", **OPTIONS)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    s = random_states(ref.model, 37, seed=63)
    state = artifact.state()
    q = torch.from_numpy(s.q).cuda()
    out = state.call("fk_batched", q)
    H = state.call("end_effector_pose_hessian", q)
    torch.cuda.synchronize()
    state.close()
    _check_pose(out.cpu().numpy(), ref, s.q, 1e-12, f"{robot} cuda")
    assert_scaled_close(H.cpu().numpy().reshape(37, -1, ref.nv, ref.nv),
                        ref.end_effector_pose_hessian(s.q), 1e-9, f"{robot} cuda Hessian")
