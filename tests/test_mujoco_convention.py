"""`output_convention="mujoco"` against MuJoCo itself (the `mujoco` package): mj_rne,
qfrc_bias, mj_fullM, mj_forward's qacc, and central differences of them along MuJoCo's
own position chart (mj_integratePos) for the gradients; on the fixed-base iiwa14 and a
small floating robot written here (hinge and slide joints, a branch). numpy, torch and
JAX handles; the JAX/torch pullback through the conversion is checked against the
converted gradients and by finite differences. Float64 CPU builds, one per robot."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
from support import REPO

import grid_rbd

mujoco = pytest.importorskip("mujoco", reason="the mujoco package is not installed "
                             "(requirements-test.lock)")

ALGORITHMS = ["core", "nonlinear_effects", "generalized_gravity", "com"]
TOY = """<robot name="toy_free">
 <link name="base"><inertial><origin xyz="0.01 0.02 -0.03" rpy="0.1 0.2 0.3"/>
  <mass value="3.0"/><inertia ixx="0.05" ixy="0.001" ixz="0.002" iyy="0.06" iyz="0.003"
  izz="0.07"/></inertial></link>
 <link name="thigh"><inertial><origin xyz="0 0.1 0.05"/><mass value="1.0"/>
  <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>
 <link name="shin"><inertial><origin xyz="0.05 0 -0.1" rpy="0.2 0 0"/><mass value="0.5"/>
  <inertia ixx="0.004" ixy="0.0002" ixz="0" iyy="0.003" iyz="0" izz="0.002"/></inertial>
 </link>
 <link name="slider"><inertial><origin xyz="0 0 0.02"/><mass value="0.7"/>
  <inertia ixx="0.003" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.004"/></inertial></link>
 <joint name="hip" type="revolute"><parent link="base"/><child link="thigh"/>
  <origin xyz="0.2 0 0.1" rpy="0.3 0 0.1"/><axis xyz="0 1 0"/>
  <limit lower="-3" upper="3" effort="10" velocity="10"/></joint>
 <joint name="knee" type="continuous"><parent link="thigh"/><child link="shin"/>
  <origin xyz="0 0.1 -0.2"/><axis xyz="0.6 0 -0.8"/></joint>
 <joint name="rail" type="prismatic"><parent link="base"/><child link="slider"/>
  <origin xyz="-0.1 0.05 0.0" rpy="0 0.4 0"/><axis xyz="0 0 -1"/>
  <limit lower="-1" upper="1" effort="10" velocity="10"/></joint>
</robot>"""


def _mujoco_model(urdf: str, floating: bool):
    """MuJoCo's model of `urdf` (meshes and limits dropped, every constraint off, no
    armature/damping/friction: rigid-body dynamics only), plus a free joint at the root
    when `floating`."""
    urdf = re.sub(r"<(visual|collision)\b.*?</\1>", "", urdf, flags=re.S)
    spec = mujoco.MjSpec.from_string(urdf)
    spec.compiler.balanceinertia = False
    spec.compiler.discardvisual = True
    spec.compiler.fusestatic = False
    if floating:
        spec.worldbody.first_body().add_freejoint()
    m = spec.compile()
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    # The URDF's <dynamics damping=...> is not rigid-body dynamics (nor Pinocchio's RNEA).
    m.dof_damping[:], m.dof_frictionloss[:], m.dof_armature[:] = 0.0, 0.0, 0.0
    m.opt.gravity[:] = (0.0, 0.0, -9.81)
    assert not m.dof_armature.any() and not m.dof_damping.any()
    assert not m.dof_frictionloss.any()
    return m


class Case:
    def __init__(self, handle, m, floating):
        self.h, self.m, self.floating = handle, m, floating
        self.d = mujoco.MjData(m)


def register_pair(robot: str, prefix: str, algorithms: list, store) -> tuple:
    """`(handle, MjModel, floating)` of `robot` ("iiwa14" or "toy_free"): a float64 CPU
    handle in the MuJoCo convention and MuJoCo's model of the same URDF."""
    floating = robot == "toy_free"
    urdf = TOY if floating else (REPO / "robots/iiwa14/iiwa14.urdf").read_text()
    h = grid_rbd.register_robot(f"{prefix}_{robot}", urdf_string=urdf,
                                floating_base=floating, dtype="float64", device="cpu",
                                algorithm_list=algorithms, output_convention="mujoco",
                                cache_dir=store)
    return h, _mujoco_model(urdf, floating), floating


@pytest.fixture(scope="module", params=["iiwa14", "toy_free"])
def case(request, tmp_path_factory):
    h, m, floating = register_pair(request.param, "mj", ALGORITHMS,
                                   tmp_path_factory.mktemp("store"))
    # Joint order and sign: MuJoCo's hinge/slide coordinates are ours, in URDF order.
    names = [m.joint(j).name for j in range(m.njnt) if m.jnt_type[j] != 0]
    assert names == list(h.joint_names)[-len(names):]
    assert (m.nq, m.nv) == (h.nq, h.nv)
    yield Case(h, m, floating)
    h.close()


def _states(case, batch, seed):
    rng = np.random.default_rng(seed)
    m = case.m
    q = rng.uniform(-1.2, 1.2, (batch, m.nq))
    if case.floating:
        quat = rng.normal(size=(batch, 4))
        q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    qd, qdd, u = (rng.uniform(-2, 2, (batch, m.nv)) for _ in range(3))
    return q, qd, qdd, u


def _rne(case, q, qd, qdd):
    d = case.d
    d.qpos[:], d.qvel[:] = q, qd
    mujoco.mj_forward(case.m, d)
    d.qacc[:] = qdd
    out = np.zeros(case.m.nv)
    mujoco.mj_rne(case.m, d, 1, out)
    return out


def _qacc(case, q, qd, u):
    d = case.d
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, qd, u
    mujoco.mj_forward(case.m, d)
    return d.qacc.copy()


def _mass(case, q):
    d = case.d
    d.qpos[:] = q
    mujoco.mj_forward(case.m, d)
    full = np.zeros((case.m.nv, case.m.nv))
    mujoco.mj_fullM(case.m, d, full)  # MuJoCo 4: (m, d, dst)
    return full, d.qfrc_bias.copy()


def _moved(case, q, k, eps):
    dq = np.zeros(case.m.nv)
    dq[k] = eps
    out = q.copy()
    mujoco.mj_integratePos(case.m, out, dq, 1.0)
    return out


def _central(case, f, q, x, eps=1e-6):
    """[df/d(mj_integratePos tangent) | df/dx] by central differences."""
    nv = case.m.nv
    cols = [(f(_moved(case, q, k, eps), x) - f(_moved(case, q, k, -eps), x)) / (2 * eps)
            for k in range(nv)]
    for k in range(nv):
        e = np.zeros(nv)
        e[k] = eps
        cols.append((f(q, x + e) - f(q, x - e)) / (2 * eps))
    return np.stack(cols, axis=1)


def _close(actual, expected, tol=1e-9):
    err = np.abs(np.asarray(actual) - expected).max() / (1.0 + np.abs(expected).max())
    assert err < tol, err


def test_dynamics_and_matrices_match_mujoco(case):
    q, qd, qdd, u = _states(case, 4, seed=150)
    h = case.h
    tau, qacc = h.inverse_dynamics(q, qd, qdd), h.forward_dynamics(q, qd, u)
    M, Minv, nle = h.crba(q), h.minv(q), h.nonlinear_effects(q, qd)
    for b in range(len(q)):
        _close(tau[b], _rne(case, q[b], qd[b], qdd[b]))
        _close(qacc[b], _qacc(case, q[b], qd[b], u[b]), 1e-8)
        full, _ = _mass(case, q[b])
        _close(M[b], full)
        _close(Minv[b], np.linalg.inv(full), 1e-8)
        d = case.d
        d.qpos[:], d.qvel[:] = q[b], qd[b]
        mujoco.mj_forward(case.m, d)
        _close(nle[b], d.qfrc_bias)
        d.qvel[:] = 0
        mujoco.mj_forward(case.m, d)
        _close(h.generalized_gravity(q[b]), d.qfrc_bias)
    _close(h.aba(q, qd, u), qacc, 1e-8)
    _close(h.rnea(q[0], qd[0], None), _rne(case, q[0], qd[0], np.zeros(case.m.nv)))
    com, jac = h.com(q)
    ids = [case.m.body(name).id for name in h.body_names]  # the moving bodies
    mass = case.m.body_mass[ids]
    for b in range(len(q)):
        case.d.qpos[:] = q[b]
        mujoco.mj_forward(case.m, case.d)
        _close(com[b], mass @ case.d.xipos[ids] / mass.sum())


def test_end_effector_positions_match_mujoco_bodies(case):
    h = case.h
    q, *_ = _states(case, 3, seed=151)
    pose = h.end_effector_pose(q).reshape(len(q), -1, 6)
    frames = h.pinocchio._meta["ee_frames"]
    for b in range(len(q)):
        case.d.qpos[:] = q[b]
        mujoco.mj_forward(case.m, case.d)
        for e, frame in enumerate(frames):
            body = h.body_names[frame["body"]]
            _close(pose[b, e, :3], case.d.xpos[case.m.body(body).id])


def test_gradients_match_mujoco_differences(case):
    h = case.h
    q, qd, qdd, u = _states(case, 2, seed=152)
    g_id = h.inverse_dynamics_gradient(q, qd, qdd)
    g_fd = h.forward_dynamics_gradient(q, qd, u)
    g_ee = h.end_effector_pose_gradient(q)
    for b in range(len(q)):
        want = _central(case, lambda qq, v, b=b: _rne(case, qq, v, qdd[b]), q[b], qd[b])
        _close(g_id[b], want, 1e-6)
        want = _central(case, lambda qq, v, b=b: _qacc(case, qq, v, u[b]), q[b], qd[b])
        _close(g_fd[b], want, 1e-6)
        nv = case.m.nv
        ee = _central(case, lambda qq, v: h.end_effector_pose(qq), q[b], qd[b])[:, :nv]
        _close(g_ee[b], ee, 1e-6)


def test_single_states_out_and_errors(case):
    h = case.h
    q, qd, qdd, u = _states(case, 2, seed=153)
    out = np.empty((2, case.m.nv))
    view = h.forward_dynamics(q, qd, u, out=out)
    assert np.shares_memory(view, out)
    _close(h.forward_dynamics(q[1], qd[1], u[1]), out[1])
    assert h.output_convention == "mujoco" and "MuJoCo" in repr(h)
    with pytest.raises(TypeError, match="unexpected keyword"):
        h.inverse_dynamics(q, qd, qddd=qdd)
    if case.floating:
        with pytest.raises(NotImplementedError, match="Pinocchio's state"):
            h.plant_step_gradient_euler  # noqa: B018 - the refusal is on access
        with pytest.raises(RuntimeError, match="world_kinematics"):  # converted; not built
            h.frame_jacobian(q, "thigh")
        q_pin, qd_pin = grid_rbd.mujoco_to_pinocchio(q, qd)
        _close(h.pinocchio.inverse_dynamics(q_pin, qd_pin, None),
               h.pinocchio.nonlinear_effects(q_pin, qd_pin))


def test_option_checks_and_keys(case, tmp_path):
    with pytest.raises(ValueError, match="mutually exclusive"):
        grid_rbd.register_robot("x", urdf_string=TOY, output_convention="mujoco",
                                enable_mujoco_kernels=False, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="output_convention"):
        grid_rbd.register_robot("x", urdf_string=TOY, output_convention="mjx",
                                cache_dir=tmp_path)
    # The convention and the flag leave the build alone: same entry, same keys.
    reg = case.h.registration
    store = reg.store_root
    again = [grid_rbd.register_robot(
        case.h.name, urdf_string=TOY if case.floating else
        (REPO / "robots/iiwa14/iiwa14.urdf").read_text(), floating_base=case.floating,
        dtype="float64", device="cpu", algorithm_list=ALGORITHMS, cache_dir=store,
        **kw) for kw in ({}, {"enable_mujoco_kernels": False})]
    for h in again:
        assert h.registration.input_key == reg.input_key
        assert h.registration.content_key == reg.content_key
        assert h.registration.outcome == "hit"
    with pytest.raises(ValueError, match="enable_mujoco_kernels=False"):
        grid_rbd.as_mujoco(again[1])
    assert isinstance(grid_rbd.as_mujoco(again[0]), grid_rbd.MujocoHandle)


def test_other_joint_charts_are_refused(tmp_path):
    """A ball joint has nq == nv + 1 as a free-flyer root does: the MuJoCo convention,
    written for a free-flyer root, must not take it for one."""
    urdf = ('<robot name="one_ball"><link name="a"/><link name="b"><inertial><mass '
            'value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>'
            '</inertial></link><joint name="ball" type="spherical"><parent link="a"/>'
            '<child link="b"/></joint></robot>')
    with pytest.raises(ValueError, match="free-flyer root"):
        grid_rbd.register_robot("mj_one_ball", urdf_string=urdf, dtype="float64",
                                device="cpu", algorithm_list=["inverse_dynamics"],
                                output_convention="mujoco", cache_dir=tmp_path)


def _tangent_directional(q, k, eps):
    """q moved by eps along MuJoCo's tangent k (world dp, local dtheta), numpy."""
    q = q.copy()
    if k < 3 or not _FLOATING[0]:
        q[:, k] += eps
        return q
    if k < 6:
        w, v = q[:, 3], q[:, 4:7]
        c, s = np.cos(eps / 2), np.sin(eps / 2)  # q (x) exp(eps axis / 2), wxyz
        e = np.zeros(3)
        e[k - 3] = s
        q[:, 3] = w * c - v @ e
        q[:, 4:7] = w[:, None] * e + c * v + np.cross(v, e)
        return q
    q[:, k + 1] += eps
    return q


_FLOATING = [True]  # the case a directional derivative is taken on (set by the tests)


def test_torch_autograd_through_the_conversion(case):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    th = grid_rbd.as_mujoco(grid_rbd._register.with_backend(case.h.pinocchio, "torch"))
    _FLOATING[0] = case.floating
    q, qd, qdd, u = _states(case, 3, seed=154)
    w = np.random.default_rng(155).normal(size=(3, case.m.nv))
    tq = torch.tensor(q, requires_grad=True)
    tqd = torch.tensor(qd, requires_grad=True)
    tu = torch.tensor(u, requires_grad=True)
    acc = th.forward_dynamics(tq, tqd, tu)
    _close(acc.detach().numpy(), case.h.forward_dynamics(q, qd, u))
    (acc * torch.from_numpy(w)).sum().backward()
    grad = case.h.forward_dynamics_gradient(q, qd, u)
    nv = case.m.nv
    _close(tqd.grad.numpy(), np.einsum("bi,bij->bj", w, grad[..., nv:]), 1e-8)
    _close(tu.grad.numpy(), np.einsum("bi,bij->bj", w, case.h.minv(q)), 1e-8)
    g_q = tq.grad.numpy()
    if case.floating:
        assert np.abs((g_q[:, 3:7] * q[:, 3:7]).sum(1)).max() < 1e-9  # on-manifold
    eps = 1e-6
    for k in range(nv):
        step = (case.h.forward_dynamics(_tangent_directional(q, k, eps), qd, u) -
                case.h.forward_dynamics(_tangent_directional(q, k, -eps), qd, u)) / (2 * eps)
        dq = (_tangent_directional(q, k, 1e-7) - q) / 1e-7
        _close((g_q * dq).sum(1), (w * step).sum(1), 1e-5)


def test_jax_autograd_through_the_conversion(case):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    base = case.h.pinocchio
    jh = grid_rbd.as_mujoco(grid_rbd._register.with_backend(base, "jax"))
    _FLOATING[0] = case.floating
    q, qd, qdd, u = _states(case, 3, seed=156)
    w = np.random.default_rng(157).normal(size=(3, case.m.nv))

    def loss(q, qd):
        return (jh.inverse_dynamics(q, qd, jnp.asarray(qdd)) * w).sum()

    _close(np.asarray(jh.inverse_dynamics(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd))),
           case.h.inverse_dynamics(q, qd, qdd))
    g_q, g_qd = jax.grad(loss, argnums=(0, 1))(jnp.asarray(q), jnp.asarray(qd))
    grad = case.h.inverse_dynamics_gradient(q, qd, qdd)
    nv = case.m.nv
    _close(np.asarray(g_qd), np.einsum("bi,bij->bj", w, grad[..., nv:]), 1e-8)
    g_q = np.asarray(g_q)
    for k in range(nv):
        dq = (_tangent_directional(q, k, 1e-7) - _tangent_directional(q, k, -1e-7)) / 2e-7
        _close((g_q * dq).sum(1), np.einsum("bi,bi->b", w, grad[:, :, k]), 1e-5)


@pytest.mark.gpu
def test_cuda_build_matches_mujoco(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("no CUDA GPU: nvcc is not on PATH")
    from grid_rbd._device import cuda_status
    if not cuda_status().usable:
        pytest.skip(f"no CUDA GPU: {cuda_status().reason}")
    h = grid_rbd.register_robot("mj_toy_gpu", urdf_string=TOY, floating_base=True,
                                device="cuda", algorithm_list=ALGORITHMS,
                                output_convention="mujoco", cache_dir=tmp_path)
    case = Case(h, _mujoco_model(TOY, True), True)
    q, qd, qdd, u = _states(case, 64, seed=158)
    f32 = [x.astype(np.float32) for x in (q, qd, qdd, u)]
    tau = h.inverse_dynamics(f32[0], f32[1], f32[2])
    qacc = h.forward_dynamics(f32[0], f32[1], f32[3])
    g = h.inverse_dynamics_gradient(f32[0], f32[1], f32[2])
    for b in range(0, 64, 9):
        _close(tau[b], _rne(case, q[b], qd[b], qdd[b]), 2e-5)
        _close(qacc[b], _qacc(case, q[b], qd[b], u[b]), 2e-4)
        want = _central(case, lambda qq, v, b=b: _rne(case, qq, v, qdd[b]), q[b], qd[b])
        _close(g[b], want, 2e-4)
    h.close()
