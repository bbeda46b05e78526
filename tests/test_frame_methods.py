"""Frames chosen at call time (issue 13, items 3 and 4): `frame_jacobian`,
`frame_jacobian_dot`, `osc_inertia`, `end_effector_pose_runtime` and its gradient, on the
numpy, torch and JAX handles over the `world_kinematics` kernel (CPU build), against the
float64 reference (itself checked against Pinocchio's getFrameJacobian,
getFrameJacobianTimeVariation and computeMinverse in test_reference_kinematics*.py),
for every reference frame and every way of naming a frame.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd import interop

ALGORITHMS = ["world_kinematics", "minv"]
REFERENCE_FRAMES = ("WORLD", "LOCAL", "LOCAL_WORLD_ALIGNED")
FRAMES = {  # per robot: a link welded by a fixed joint, that joint, a moving joint, a link
    "panda": ["panda_hand_tcp", "panda_hand_tcp_joint", "panda_joint4", "panda_link3", 5],
    "go2": ["FL_foot", "FR_calf_joint", "base", "RL_thigh", 0],
    "anymal_c": ["joint:LF_HAA", "link:LF_HAA", "LF_FOOT", 3],
}


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    out = {robot: grid_rbd.register_robot(
        f"{robot}_frames", urdf_path=str(ROBOTS[robot].path),
        floating_base=ROBOTS[robot].floating_base, dtype="float64",
        algorithm_list=ALGORITHMS, device="cpu", cache_dir=store) for robot in FRAMES}
    yield out
    for h in out.values():
        h.close()


def _ref(robot: str):
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


@pytest.mark.parametrize("robot", sorted(FRAMES))
def test_frame_jacobians_match_the_reference(handles, robot):
    h, ref = handles[robot], _ref(robot)
    s = random_states(ref.model, 5, seed=70)
    for frame in FRAMES[robot]:
        for rf in REFERENCE_FRAMES:
            J = h.frame_jacobian(s.q, frame, rf)
            assert J.shape == (5, 6, ref.nv)
            np.testing.assert_allclose(J, ref.frame_jacobian(s.q, frame, rf), atol=1e-12,
                                       err_msg=f"{robot} {frame} {rf}")
            dJ = h.frame_jacobian_dot(s.q, s.qd, frame, rf)
            np.testing.assert_allclose(dJ, ref.frame_jacobian_dot(s.q, s.qd, frame, rf),
                                       atol=1e-11 * (1 + np.abs(dJ).max()),
                                       err_msg=f"{robot} {frame} {rf} dot")
    frame = FRAMES[robot][0]
    np.testing.assert_allclose(h.frame_jacobian(s.q[0], frame), h.frame_jacobian(s.q, frame)[0],
                               atol=1e-15)


def test_the_default_reference_frame_is_local_world_aligned(handles):
    h, ref = handles["go2"], _ref("go2")
    s = random_states(ref.model, 2, seed=71)
    np.testing.assert_array_equal(h.frame_jacobian(s.q, "FL_foot"),
                                  h.frame_jacobian(s.q, "FL_foot", "local_world_aligned"))


def test_osc_inertia(handles):
    for robot, frame in (("panda", "panda_hand_tcp"), ("go2", "FL_foot")):
        h, ref = handles[robot], _ref(robot)
        s = random_states(ref.model, 4, seed=72)
        Lam = h.osc_inertia(s.q, frame)
        want = ref.osc_inertia(s.q, frame)
        np.testing.assert_allclose(Lam, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
        np.testing.assert_array_equal(Lam, np.swapaxes(Lam, 1, 2))
    with pytest.raises(ValueError, match="'panda_link3' is moved by 3 dofs"):
        handles["panda"].osc_inertia(random_states(_ref("panda").model, 1).q, "panda_link3")


def test_runtime_end_effector_poses_and_offsets(handles):
    h, ref = handles["go2"], _ref("go2")
    names = ["FL_foot", "RR_calf_joint", "base"]
    s = random_states(ref.model, 6, seed=73)
    by_name = reference.load(ROBOTS["go2"].path, floating_base=True, ee_joint_names=names)
    np.testing.assert_allclose(h.end_effector_pose_runtime(s.q, names),
                               by_name.end_effector_pose(s.q), atol=1e-12)
    np.testing.assert_allclose(h.end_effector_pose_gradient_runtime(s.q, names),
                               by_name.end_effector_pose_gradient(s.q), atol=1e-11)
    offsets = np.array([[0.0, 0.0, -0.02], [0.1, 0.05, 0.0], [0.2, -0.1, 0.3]])
    moved = h.end_effector_pose_runtime(s.q, names, offsets).reshape(6, 3, 6)
    for k, name in enumerate(names):
        R, p = interop.frame_placement(ref, s.q, name)
        np.testing.assert_allclose(moved[:, k, :3], p + R @ offsets[k], atol=1e-12)
        np.testing.assert_allclose(moved[:, k, 3:],
                                   by_name.end_effector_pose(s.q).reshape(6, 3, 6)[:, k, 3:],
                                   atol=1e-12)
    # the offset targets' gradient against central differences along the chart
    from grid_rbd.reference import configuration
    G = h.end_effector_pose_gradient_runtime(s.q, names, offsets)
    eps = 1e-6
    for j in range(ref.nv):
        e = np.zeros((6, ref.nv))
        e[:, j] = eps
        plus = h.end_effector_pose_runtime(configuration.integrate(ref.model, s.q, e), names,
                                           offsets)
        minus = h.end_effector_pose_runtime(configuration.integrate(ref.model, s.q, -e),
                                            names, offsets)
        np.testing.assert_allclose(G[..., j], (plus - minus) / (2 * eps), atol=1e-6)
    np.testing.assert_array_equal(h.end_effector_pose_runtime(s.q, ee_joint_names=names),
                                  h.end_effector_pose_runtime(s.q, names))
    with pytest.raises(TypeError, match="not both"):
        h.end_effector_pose_runtime(s.q, names, ee_joint_names=names)
    default = h.end_effector_pose_runtime(s.q)
    assert default.shape == (6, 6 * h.num_ees)
    with pytest.raises(ValueError, match=r"ee_offsets has shape \(2, 3\); expected \(3, 3\)"):
        h.end_effector_pose_runtime(s.q, names, offsets[:2])


def test_frame_names_are_checked(handles):
    h = handles["anymal_c"]
    q = random_states(_ref("anymal_c").model, 1).q
    with pytest.raises(ValueError, match="'LF_HAA' is ambiguous; pass one of 'joint:LF_HAA', "
                                         "'link:LF_HAA'"):
        h.frame_jacobian(q, "LF_HAA")
    with pytest.raises(KeyError, match="no frame 'tool0'; name a link .*LF_FOOT"):
        h.frame_jacobian(q, "tool0")
    with pytest.raises(IndexError, match="body index 99"):
        h.frame_jacobian(q, 99)
    with pytest.raises(ValueError, match="reference_frame 'BODY' is not one of"):
        h.frame_jacobian(q, "LF_FOOT", "BODY")


def test_a_build_without_the_kernel_names_its_profile(tmp_path):
    h = grid_rbd.register_robot("iiwa14_nokin", urdf_path=str(ROBOTS["iiwa14"].path),
                                dtype="float64", algorithm_list=["minv"], device="cpu",
                                cache_dir=tmp_path)
    with pytest.raises(RuntimeError, match="profile 'kinematics'"):
        h.frame_jacobian(np.zeros((1, 7)), "iiwa_link_7")
    h.close()


def test_torch_and_jax_give_the_numpy_values(handles):
    h, ref = handles["go2"], _ref("go2")
    s = random_states(ref.model, 3, seed=74)
    want = h.frame_jacobian_dot(s.q, s.qd, "FL_foot", "LOCAL")
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(h)
    got = th.frame_jacobian_dot(torch.from_numpy(s.q), torch.from_numpy(s.qd), "FL_foot",
                                "LOCAL")
    np.testing.assert_allclose(got.numpy(), want, atol=1e-13)
    np.testing.assert_allclose(th.osc_inertia(torch.from_numpy(s.q), "FL_foot").numpy(),
                               h.osc_inertia(s.q, "FL_foot"), rtol=1e-10)
    with pytest.raises(RuntimeError, match="world_kinematics is forward-only"):
        th.frame_jacobian(torch.from_numpy(s.q).requires_grad_(True), "FL_foot")
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    from grid_rbd.jax import JaxRobotHandle
    jh = JaxRobotHandle(h)
    jitted = jax.jit(lambda q, qd: jh.frame_jacobian_dot(q, qd, "FL_foot", "LOCAL"))
    np.testing.assert_allclose(np.asarray(jitted(s.q, s.qd)), want, atol=1e-13)
    np.testing.assert_allclose(np.asarray(jh.end_effector_pose_runtime(s.q, ["base"])),
                               h.end_effector_pose_runtime(s.q, ["base"]), atol=1e-13)


@pytest.mark.gpu
def test_frame_methods_on_cuda_tensors(tmp_path):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    ref = _ref("go2")
    th = grid_rbd.register_robot("go2_frames_cuda", urdf_path=str(ROBOTS["go2"].path),
                                 floating_base=True, dtype="float64", backend="torch",
                                 algorithm_list=ALGORITHMS, device="cuda", cache_dir=tmp_path)
    s = random_states(ref.model, 37, seed=75)
    q, qd = torch.from_numpy(s.q).cuda(), torch.from_numpy(s.qd).cuda()
    for rf in REFERENCE_FRAMES:
        np.testing.assert_allclose(th.frame_jacobian(q, "FL_foot", rf).cpu().numpy(),
                                   ref.frame_jacobian(s.q, "FL_foot", rf), atol=1e-12)
        np.testing.assert_allclose(th.frame_jacobian_dot(q, qd, "FL_foot", rf).cpu().numpy(),
                                   ref.frame_jacobian_dot(s.q, s.qd, "FL_foot", rf),
                                   atol=1e-10)
    np.testing.assert_allclose(th.osc_inertia(q, "FL_foot").cpu().numpy(),
                               ref.osc_inertia(s.q, "FL_foot"), rtol=1e-8)
    th.close()


@pytest.mark.parametrize("transpose", [False, True])
def test_rotation_products_agree_on_both_paths(monkeypatch, transpose):
    """`ArrayOps.apply3`: the GPU path (broadcast products) against the CPU path (matmul),
    on numpy arrays with the GPU path forced, and against einsum."""
    from grid_rbd._array_ops import ArrayOps
    rng = np.random.default_rng(3)
    R, x = rng.standard_normal((5, 3, 3)), rng.standard_normal((5, 3, 4))
    ops = ArrayOps(R)
    cpu = ops.apply3(R, x, transpose)
    monkeypatch.setattr(ArrayOps, "on_gpu", property(lambda self: True))
    gpu = ops.apply3(R, x, transpose)
    want = np.einsum("bki,bkc->bic" if transpose else "bik,bkc->bic", R, x)
    np.testing.assert_allclose(cpu, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(gpu, want, rtol=1e-13, atol=1e-13)
    C = rng.standard_normal((1, 3, 3))  # a constant (a frame's offset) over the batch
    np.testing.assert_allclose(ops.apply3(R, C), R @ C, rtol=1e-13, atol=1e-13)
