"""The `frame_jacobian_indexed` kernel (issue 13, item 3): the Jacobian of any frame of
the artifact's table, chosen per item, in Pinocchio's three reference frames, on the CPU
build against the float64 reference (checked against Pinocchio's getFrameJacobian in
test_reference_kinematics*.py); `frame_jacobian` on every handle takes it where it was
built; a bad index or code gives NaN; a mimic-coupled robot gets its reduced columns.
"""

from __future__ import annotations

import numpy as np
import pytest
from joint_type_robots import BALL_CHAIN, GRIPPER
from joint_type_robots import artifact as coupled_artifact
from joint_type_robots import states as joint_states
from support import ROBOTS, random_states, robot_available

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen.registry import REFERENCE_FRAME_CODES
from grid_codegen.urdf import parse_urdf
from grid_rbd import interop

ROBOTS_TESTED = tuple(r for r in ROBOTS if robot_available(r))  # the whole test set
CODES = tuple(REFERENCE_FRAME_CODES.items())


def _register(robot: str, dtype: str, cache_dir, algorithms=("frame_jacobian_indexed",)):
    return grid_rbd.register_robot(
        f"{robot}_fjk", urdf_path=str(ROBOTS[robot].path),
        floating_base=ROBOTS[robot].floating_base, dtype=dtype,
        algorithm_list=list(algorithms), device="cpu", cache_dir=cache_dir)


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    """One build per robot, built when a test first asks for it (go2's with minv, for
    osc_inertia)."""
    store = tmp_path_factory.mktemp("store")
    out: dict = {}

    def get(robot: str):
        if robot not in out:
            extra = ("minv",) if robot == "go2" else ()
            out[robot] = _register(robot, "float64", store,
                                   ("frame_jacobian_indexed", *extra))
        return out[robot]

    yield get
    for h in out.values():
        h.close()


def _ref(robot: str):
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


def _table_names(h) -> list[str]:
    """Every frame of the kernel's table by an unambiguous name, in index order."""
    table = h._frame_table()
    return ([f"joint:{n}" for n in table.joint_names]
            + [f"{kind}:{name}" for name, kind, *_ in table.frames])


@pytest.mark.parametrize("robot", ROBOTS_TESTED)
def test_every_frame_of_the_table_in_every_reference_frame(handles, robot):
    h, ref = handles(robot), _ref(robot)
    s = random_states(ref.model, 4, seed=80)
    names = _table_names(h)
    assert len(names) == ref.model.nb + len(ref.model.frames)
    for index, name in enumerate(names):
        assert h._frame_table().resolve(name).index == index
        for rf, code in CODES:
            want = ref.frame_jacobian(s.q, name, rf)
            by_index = h.frame_jacobian_indexed(s.q, np.tile([index, code], (4, 1)) * 1.0)
            np.testing.assert_allclose(by_index, want, atol=1e-12, err_msg=f"{name} {rf}")
            np.testing.assert_array_equal(h.frame_jacobian(s.q, name, rf), by_index)


def test_each_item_takes_its_own_frame(handles):
    """One call, a different frame and reference frame per item (each row its own)."""
    h, ref = handles("go2"), _ref("go2")
    names = _table_names(h)
    rng = np.random.default_rng(81)
    batch = 23
    s = random_states(ref.model, batch, seed=82)
    picks = rng.integers(0, len(names), batch)
    codes = rng.integers(0, 3, batch)
    J = h.frame_jacobian_indexed(s.q, np.stack([picks, codes], 1).astype(np.float64))
    rf_of = {code: rf for rf, code in CODES}
    for b in range(batch):
        want = ref.frame_jacobian(s.q[b:b + 1], names[picks[b]], rf_of[codes[b]])[0]
        np.testing.assert_allclose(J[b], want, atol=1e-12, err_msg=f"item {b}")


def test_a_bad_selector_gives_nan_and_leaves_the_others(handles):
    h, ref = handles("panda"), _ref("panda")
    size = len(_table_names(h))
    bad = [[size, 0], [-1, 0], [1.5, 2], [np.nan, 1], [np.inf, 0], [0, 3], [0, -1], [0, 0.5],
           [2, np.nan]]
    selector = np.array(bad + [[2, 1]], dtype=np.float64)
    s = random_states(ref.model, len(selector), seed=83)
    J = h.frame_jacobian_indexed(s.q, selector)
    assert np.isnan(J[:-1]).all()
    np.testing.assert_allclose(J[-1], ref.frame_jacobian(s.q[-1:], "joint:panda_joint3",
                                                         "LOCAL")[0], atol=1e-12)


def test_float32_build(tmp_path):
    h, ref = _register("go2", "float32", tmp_path), _ref("go2")
    s = random_states(ref.model, 8, seed=84)
    for name in ("FL_foot", "RR_calf_joint", "base", "joint:FL_hip_joint"):
        for rf, _ in CODES:
            want = ref.frame_jacobian(s.q, name, rf)
            got = h.frame_jacobian(s.q.astype(np.float32), name, rf)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, atol=2e-6 * (1 + np.abs(want).max()),
                                       err_msg=f"{name} {rf}")
    h.close()


def test_frames_the_kernel_does_not_know_are_assembled(tmp_path):
    """An offset target (`end_effector_pose_runtime`'s offsets, a tool tip) has no table
    index: frame_jacobian assembles it from world_kinematics where that was built."""
    from grid_rbd._frames import offset_frame

    h = grid_rbd.register_robot(
        "panda_fjk_both", urdf_path=str(ROBOTS["panda"].path), dtype="float64",
        algorithm_list=["frame_jacobian_indexed", "world_kinematics"], device="cpu",
        cache_dir=tmp_path)
    table = h._frame_table()
    f = table.resolve("panda_hand_tcp")
    tip = offset_frame(f, [0.0, 0.0, 0.1])
    assert tip.index == -1
    table.extra["tip"] = tip
    ref = _ref("panda")
    s = random_states(ref.model, 3, seed=85)
    # The tip is 0.1 m along the tcp's z: its LOCAL_WORLD_ALIGNED columns are the
    # reference's tcp columns with the lever arm of that offset.
    J_tcp = ref.frame_jacobian(s.q, "panda_hand_tcp", "LOCAL_WORLD_ALIGNED")
    J_tip = h.frame_jacobian(s.q, "tip", "LOCAL_WORLD_ALIGNED")
    Rf, _ = interop.frame_placement(ref, s.q, "panda_hand_tcp")
    arm = Rf @ np.array([0.0, 0.0, 0.1])
    want = J_tcp.copy()
    want[:, :3] += np.cross(J_tcp[:, 3:].transpose(0, 2, 1), arm[:, None, :]).transpose(0, 2, 1)
    np.testing.assert_allclose(J_tip, want, atol=1e-12)
    h.close()


def test_mimic_coupled_robot_gets_its_reduced_columns():
    model = parse_urdf(GRIPPER, mimic=True)
    ref = reference.CoupledReference(model)
    artifact = coupled_artifact(model, "cpu", ("frame_jacobian_indexed",))
    state = artifact.state()
    try:
        rng = np.random.default_rng(86)
        q = rng.uniform(-1.0, 1.0, (5, ref.nq))
        names = ([f"joint:{n}" for n in model.joint_names]
                 + [f"{f.kind}:{f.name}" for f in model.frames])
        for index, name in enumerate(names):
            for rf, code in CODES:
                got = state.call("frame_jacobian_indexed", q,
                                 np.tile([index, code], (5, 1)).astype(np.float64))
                want = ref.full.frame_jacobian(ref.expand_q(q), name, rf) @ ref.G
                np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-12,
                                           err_msg=f"{name} {rf}")
    finally:
        state.close()


def test_spherical_and_planar_joints():
    """A chain of a planar root, a ball joint and revolutes (test_joint_types' robot):
    every frame of its table, every reference frame."""
    model = parse_urdf(BALL_CHAIN)
    ref = reference.ReferenceRobot(model)
    artifact = coupled_artifact(model, "cpu", ("frame_jacobian_indexed",))
    state = artifact.state()
    try:
        q = joint_states(model, 5, 4, model.nq, model.nv)[0]
        names = ([f"joint:{n}" for n in model.joint_names]
                 + [f"{f.kind}:{f.name}" for f in model.frames])
        for index, name in enumerate(names):
            for rf, code in CODES:
                got = state.call("frame_jacobian_indexed", q,
                                 np.tile([index, code], (5, 1)).astype(np.float64))
                want = ref.frame_jacobian(q, name, rf)
                np.testing.assert_allclose(got.reshape(want.shape), want, atol=1e-12,
                                           err_msg=f"{name} {rf}")
    finally:
        state.close()


def test_torch_and_jax_take_the_kernel(handles):
    h, ref = handles("go2"), _ref("go2")
    s = random_states(ref.model, 3, seed=87)
    want = {rf: h.frame_jacobian(s.q, "FL_foot", rf) for rf, _ in CODES}
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(h)
    for rf, _ in CODES:
        np.testing.assert_array_equal(
            th.frame_jacobian(torch.from_numpy(s.q), "FL_foot", rf).numpy(), want[rf])
    np.testing.assert_allclose(th.osc_inertia(torch.from_numpy(s.q), "FL_foot").numpy(),
                               ref.osc_inertia(s.q, "FL_foot"), rtol=1e-9)
    with pytest.raises(RuntimeError, match="forward-only"):
        th.frame_jacobian(torch.from_numpy(s.q).requires_grad_(True), "FL_foot")
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    from grid_rbd.jax import JaxRobotHandle
    jh = JaxRobotHandle(h)
    for rf, _ in CODES:
        jitted = jax.jit(lambda q, rf=rf: jh.frame_jacobian(q, "FL_foot", rf))
        np.testing.assert_array_equal(np.asarray(jitted(s.q)), want[rf])


@pytest.mark.gpu
def test_the_kernel_on_cuda_tensors(tmp_path):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    ref = _ref("go2")
    s = random_states(ref.model, 300, seed=88)
    q = torch.from_numpy(s.q).cuda()
    for dtype, tol in (("float64", 1e-12), ("float32", 2e-6)):
        th = grid_rbd.register_robot(
            f"go2_fjk_cuda_{dtype}", urdf_path=str(ROBOTS["go2"].path), floating_base=True,
            dtype=dtype, backend="torch", algorithm_list=["frame_jacobian_indexed"],
            device="cuda", cache_dir=tmp_path)
        qd = q.to(getattr(torch, dtype))
        for name in ("FL_foot", "base", "RR_calf_joint"):
            for rf, _ in CODES:
                want = ref.frame_jacobian(s.q, name, rf)
                got = th.frame_jacobian(qd, name, rf).cpu().numpy()
                np.testing.assert_allclose(got, want, atol=tol * (1 + np.abs(want).max()),
                                           err_msg=f"{dtype} {name} {rf}")
        th.close()
