"""The `frame_jacobian_dot_indexed` kernel (issue 13, item 3): the time derivative of the
Jacobian of any frame of the artifact's table along `qd`, chosen per item, in Pinocchio's
three reference frames, on the CPU build against the float64 reference's
`frame_jacobian_dot` (checked against Pinocchio's getFrameJacobianTimeVariation in
test_reference_kinematics*.py); `frame_jacobian_dot` on every handle takes it where it
was built; a bad index or code gives NaN; a mimic-coupled robot gets its reduced columns.
"""

from __future__ import annotations

import numpy as np
import pytest
from joint_type_robots import BALL_CHAIN, GRIPPER
from joint_type_robots import artifact as coupled_artifact
from joint_type_robots import states as joint_states
from support import ROBOTS, random_states, robot_available
from test_frame_jacobian_kernel import CODES, _ref, _register, _table_names

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen.urdf import parse_urdf

ROBOTS_TESTED = tuple(r for r in ROBOTS if robot_available(r))  # the whole test set
KERNEL = ("frame_jacobian_dot_indexed",)


def _close(actual, expected, tol: float, what: str) -> None:
    """Within `tol` of the expected values' own scale (rates grow as qd squared)."""
    np.testing.assert_allclose(actual, expected, atol=tol * (1.0 + np.abs(expected).max()),
                               err_msg=what)


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    out: dict = {}

    def get(robot: str):
        if robot not in out:
            out[robot] = _register(robot, "float64", store, KERNEL)
        return out[robot]

    yield get
    for h in out.values():
        h.close()


@pytest.mark.parametrize("robot", ROBOTS_TESTED)
def test_every_frame_of_the_table_in_every_reference_frame(handles, robot):
    h, ref = handles(robot), _ref(robot)
    s = random_states(ref.model, 4, seed=90)
    for index, name in enumerate(_table_names(h)):
        for rf, code in CODES:
            want = ref.frame_jacobian_dot(s.q, s.qd, name, rf)
            got = h.frame_jacobian_dot_indexed(s.q, s.qd, np.tile([index, code], (4, 1)) * 1.0)
            _close(got, want, 1e-13, f"{robot} {name} {rf}")
            np.testing.assert_array_equal(h.frame_jacobian_dot(s.q, s.qd, name, rf), got)


def test_each_item_takes_its_own_frame_and_one_state_works(handles):
    h, ref = handles("go2"), _ref("go2")
    names = _table_names(h)
    rng = np.random.default_rng(91)
    batch = 19
    s = random_states(ref.model, batch, seed=92)
    picks, codes = rng.integers(0, len(names), batch), rng.integers(0, 3, batch)
    dJ = h.frame_jacobian_dot_indexed(s.q, s.qd,
                                      np.stack([picks, codes], 1).astype(np.float64))
    rf_of = {code: rf for rf, code in CODES}
    for b in range(batch):
        want = ref.frame_jacobian_dot(s.q[b:b + 1], s.qd[b:b + 1], names[picks[b]],
                                      rf_of[codes[b]])[0]
        _close(dJ[b], want, 1e-13, f"item {b}")
    one = h.frame_jacobian_dot(s.q[0], s.qd[0], "FL_foot", "LOCAL")
    _close(one, ref.frame_jacobian_dot(s.q[:1], s.qd[:1], "FL_foot", "LOCAL")[0], 1e-13,
           "one state")


def test_zero_velocity_gives_zero_and_a_bad_selector_nan(handles):
    h, ref = handles("panda"), _ref("panda")
    size = len(_table_names(h))
    selector = np.array([[size, 0], [-1, 0], [1.5, 2], [np.nan, 1], [0, 3], [0, 0.5],
                         [4, 1], [4, 1]], dtype=np.float64)
    s = random_states(ref.model, len(selector), seed=93)
    qd = s.qd.copy()
    qd[-1] = 0.0
    dJ = h.frame_jacobian_dot_indexed(s.q, qd, selector)
    assert np.isnan(dJ[:-2]).all()
    _close(dJ[-2], ref.frame_jacobian_dot(s.q[-2:-1], qd[-2:-1], "joint:panda_joint5",
                                          "LOCAL")[0], 1e-13, "the good row")
    np.testing.assert_array_equal(dJ[-1], 0.0)


def test_float32_build(tmp_path):
    h, ref = _register("go2", "float32", tmp_path, KERNEL), _ref("go2")
    s = random_states(ref.model, 8, seed=94)
    for name in ("FL_foot", "RR_calf_joint", "base", "joint:FL_hip_joint"):
        for rf, _ in CODES:
            want = ref.frame_jacobian_dot(s.q, s.qd, name, rf)
            got = h.frame_jacobian_dot(s.q.astype(np.float32), s.qd.astype(np.float32),
                                       name, rf)
            assert got.dtype == np.float32
            # a rate sums products of twists and columns: float32 rounds at |qd| |J|
            _close(got, want, 4e-6 * (1 + np.abs(s.qd).max()), f"{name} {rf}")
    h.close()


def test_mimic_coupled_robot_gets_its_reduced_columns():
    """`d/dt (J_full G) = Jdot_full G` along the full velocity `G qd` (G is constant)."""
    model = parse_urdf(GRIPPER, mimic=True)
    ref = reference.CoupledReference(model)
    rng = np.random.default_rng(95)
    q, qd = rng.uniform(-1.0, 1.0, (5, ref.nq)), rng.uniform(-2.0, 2.0, (5, ref.nv))
    _every_frame(model, q, qd, lambda name, rf: ref.full.frame_jacobian_dot(
        ref.expand_q(q), qd @ ref.G.T, name, rf) @ ref.G)


def _every_frame(model, q, qd, want) -> None:
    """The kernel of `model`'s CPU artifact against `want(name, rf)` for every frame of
    its table (`joint_type_robots`' builds) in every reference frame."""
    state = coupled_artifact(model, "cpu", KERNEL).state()
    try:
        names = ([f"joint:{n}" for n in model.joint_names]
                 + [f"{f.kind}:{f.name}" for f in model.frames])
        for index, name in enumerate(names):
            for rf, code in CODES:
                got = state.call("frame_jacobian_dot_indexed", q, qd,
                                 np.tile([index, code], (len(q), 1)).astype(np.float64))
                expected = want(name, rf)
                _close(got.reshape(expected.shape), expected, 1e-13, f"{name} {rf}")
    finally:
        state.close()


def test_spherical_and_planar_joints():
    model = parse_urdf(BALL_CHAIN)
    ref = reference.ReferenceRobot(model)
    q, qd = joint_states(model, 5, 4, model.nq, model.nv)[:2]
    _every_frame(model, q, qd, lambda name, rf: ref.frame_jacobian_dot(q, qd, name, rf))


def test_torch_and_jax_take_the_kernel(handles):
    h, ref = handles("go2"), _ref("go2")
    s = random_states(ref.model, 3, seed=96)
    want = {rf: h.frame_jacobian_dot(s.q, s.qd, "FL_foot", rf) for rf, _ in CODES}
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(h)
    q, qd = torch.from_numpy(s.q), torch.from_numpy(s.qd)
    for rf, _ in CODES:
        np.testing.assert_array_equal(th.frame_jacobian_dot(q, qd, "FL_foot", rf).numpy(),
                                      want[rf])
    with pytest.raises(RuntimeError, match="forward-only"):
        th.frame_jacobian_dot(q, qd.clone().requires_grad_(True), "FL_foot")
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    from grid_rbd.jax import JaxRobotHandle
    jh = JaxRobotHandle(h)
    for rf, _ in CODES:
        jitted = jax.jit(lambda q, qd, rf=rf: jh.frame_jacobian_dot(q, qd, "FL_foot", rf))
        np.testing.assert_array_equal(np.asarray(jitted(s.q, s.qd)), want[rf])


@pytest.mark.gpu
def test_the_kernel_on_cuda_tensors(tmp_path):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    ref = _ref("go2")
    s = random_states(ref.model, 300, seed=97)
    for dtype, tol in (("float64", 1e-12), ("float32", 4e-6 * (1 + np.abs(s.qd).max()))):
        th = grid_rbd.register_robot(
            f"go2_fjdk_cuda_{dtype}", urdf_path=str(ROBOTS["go2"].path), floating_base=True,
            dtype=dtype, backend="torch", algorithm_list=list(KERNEL), device="cuda",
            cache_dir=tmp_path)
        q, qd = (torch.from_numpy(x).cuda().to(getattr(torch, dtype)) for x in (s.q, s.qd))
        for name in ("FL_foot", "base", "RR_calf_joint"):
            for rf, _ in CODES:
                _close(th.frame_jacobian_dot(q, qd, name, rf).cpu().numpy(),
                       ref.frame_jacobian_dot(s.q, s.qd, name, rf), tol,
                       f"{dtype} {name} {rf}")
        th.close()
