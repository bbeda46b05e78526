"""The plant layer on the handles (issue 16, item 2): `plant_step`, `plant_step_gradient`,
`integrator`, the costs and barriers on the numpy, torch and JAX handles of CPU builds,
against the float64 reference (tests/test_reference_plant.py checks it against Pinocchio
and finite differences), and the torch/JAX gradients of `plant_step` and `integrator`
against the reference's Jacobian and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd._step_inputs import plan_of

INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")
DYNAMICS = ["forward_dynamics", "forward_dynamics_gradient", "minv"]
ALGORITHMS = {"iiwa14": DYNAMICS + ["world_kinematics"],
              "go2": DYNAMICS + ["world_kinematics", "com", "ccrba", "dccrba"]}


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    out = {robot: grid_rbd.register_robot(
        f"{robot}_plant", urdf_path=str(ROBOTS[robot].path),
        floating_base=ROBOTS[robot].floating_base, dtype="float64",
        algorithm_list=algorithms, device="cpu", cache_dir=store)
        for robot, algorithms in ALGORITHMS.items()}
    yield out
    for h in out.values():
        h.close()


def _ref(robot):
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


def _state(ref, batch, seed):
    s = random_states(ref.model, batch, seed=seed, max_velocity=2.0)
    return np.concatenate([s.q, s.qd], axis=1), 0.1 * s.u


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("robot", sorted(ALGORITHMS))
def test_steps_and_gradients_match_the_reference(handles, robot, integrator):
    h, ref = handles[robot], _ref(robot)
    x, u = _state(ref, 5, seed=100)
    np.testing.assert_allclose(h.plant_step(x, u, 0.01, integrator),
                               ref.plant_step(x, u, 0.01, integrator), rtol=1e-11, atol=1e-11)
    G = h.plant_step_gradient(x, u, 0.01, integrator)
    np.testing.assert_allclose(G, ref.plant_step_gradient(x, u, 0.01, integrator),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(h.plant_step(x[0], u[0], 0.01, integrator),
                               h.plant_step(x, u, 0.01, integrator)[0], atol=1e-14)
    several = h.integrator(x, u, 0.01, steps=3, integrator_type=integrator)
    want = x
    for _ in range(3):
        want = ref.plant_step(want, u, 0.01, integrator)
    np.testing.assert_allclose(several, want, rtol=1e-10, atol=1e-10)


def test_costs_and_barriers_match_the_reference(handles):
    h, ref = handles["go2"], _ref("go2")
    nq, nv = ref.nq, ref.nv
    x, u = _state(ref, 4, seed=101)
    x_des, _ = _state(ref, 4, seed=102)
    q, qd = x[:, :nq], x[:, nq:]
    cases = [
        ("quadratic_state_cost", (x, x_des, np.linspace(1.0, 2.0, 2 * nv)), {}),
        ("quadratic_input_cost", (u, 0.5 * u, 0.3), {}),
        ("ee_pos_cost", (q, np.zeros((4, 6)), np.arange(1.0, 7.0)),
         {"frames": ["FL_foot", "RR_foot"]}),
        ("com_cost", (q, np.ones((4, 3)), np.eye(3)), {}),
        ("momentum_cost", (q, qd, np.full((4, 6), 0.1), 2.0), {}),
    ]
    for name, args, kwargs in cases:
        got = getattr(h, name)(*args, **kwargs)
        want = getattr(ref, name)(*args, **kwargs)
        for g, w, what in zip(got, want, ("value", "grad", "hess"), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10, err_msg=f"{name} {what}")
    lower, upper = -np.ones(nv) * 20, np.ones(nv) * 20
    for name in ("joint_position_barrier", "joint_velocity_barrier", "joint_torque_barrier"):
        got = getattr(h, name)(qd, lower, upper, 0.1)
        want = getattr(ref, name)(qd, lower, upper, 0.1)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12)
    with pytest.raises(ValueError, match="lower < upper"):
        h.joint_velocity_barrier(qd, upper, lower, 0.1)
    with pytest.raises(ValueError, match="integrator_type 'rk45'"):
        h.plant_step(x, u, 0.01, "rk45")
    with pytest.raises(ValueError, match="dt must be a positive"):
        h.plant_step(x, u, -0.01)
    with pytest.raises(ValueError, match="Q has shape"):
        h.quadratic_state_cost(x, x_des, np.ones(3))


def test_missing_kernels_are_named(tmp_path):
    h = grid_rbd.register_robot("iiwa14_fd_only", urdf_path=str(ROBOTS["iiwa14"].path),
                                dtype="float64", algorithm_list=["forward_dynamics"],
                                device="cpu", cache_dir=tmp_path)
    x, u = _state(_ref("iiwa14"), 1, seed=103)
    h.plant_step(x, u, 0.01)  # the step needs forward dynamics only
    with pytest.raises(RuntimeError, match="lacks forward_dynamics_gradient, minv"):
        h.plant_step_gradient(x, u, 0.01)
    h.close()


def test_torch_plant_step_is_differentiable(handles):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th, ref = TorchRobotHandle(handles["iiwa14"]), _ref("iiwa14")
    x, u = _state(ref, 4, seed=104)
    w = np.random.default_rng(105).standard_normal((4, 2 * ref.nv))
    for integrator in INTEGRATORS:
        xt = torch.from_numpy(x).requires_grad_(True)
        ut = torch.from_numpy(u).requires_grad_(True)
        (th.plant_step(xt, ut, 0.01, integrator) * torch.from_numpy(w)).sum().backward()
        G = ref.plant_step_gradient(x, u, 0.01, integrator)  # fixed base: tangent = ambient
        ct = np.einsum("bi,bij->bj", w, G)
        np.testing.assert_allclose(xt.grad.numpy(), ct[:, :2 * ref.nv], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ut.grad.numpy(), ct[:, 2 * ref.nv:], rtol=1e-9, atol=1e-9)
    G = th.plant_step_gradient(torch.from_numpy(x), torch.from_numpy(u), 0.01)
    np.testing.assert_allclose(G.numpy(), ref.plant_step_gradient(x, u, 0.01), atol=1e-10)


def test_torch_integrator_on_a_floating_base_against_finite_differences(handles):
    """The floating base's gradient flows through the quaternion in q's own layout: the
    autograd result against central differences of the same function in those
    coordinates."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th, ref = TorchRobotHandle(handles["go2"]), _ref("go2")
    x, u = _state(ref, 2, seed=106)
    w = torch.from_numpy(np.random.default_rng(107).standard_normal((2, ref.nq + ref.nv)))

    def loss(xx, uu):
        return (th.integrator(xx, uu, 0.01, steps=2, integrator_type="semi_implicit_euler")
                * w).sum()

    xt = torch.from_numpy(x).requires_grad_(True)
    ut = torch.from_numpy(u).requires_grad_(True)
    loss(xt, ut).backward()
    h = 1e-6
    with torch.no_grad():
        for k in list(range(0, ref.nq + ref.nv, 3)):
            e = torch.zeros_like(xt)
            e[:, k] = h
            fd = (loss(torch.from_numpy(x) + e, torch.from_numpy(u))
                  - loss(torch.from_numpy(x) - e, torch.from_numpy(u))) / (2 * h)
            assert abs(float(xt.grad[:, k].sum()) - float(fd)) <= 1e-5 * (1 + abs(float(fd)))
        for k in range(0, ref.nv, 4):
            e = torch.zeros_like(ut)
            e[:, k] = h
            fd = (loss(torch.from_numpy(x), torch.from_numpy(u) + e)
                  - loss(torch.from_numpy(x), torch.from_numpy(u) - e)) / (2 * h)
            assert abs(float(ut.grad[:, k].sum()) - float(fd)) <= 1e-5 * (1 + abs(float(fd)))


def test_jax_plant_step_gradient_and_costs(handles):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from grid_rbd.jax import JaxRobotHandle
    jh, ref = JaxRobotHandle(handles["iiwa14"]), _ref("iiwa14")
    x, u = _state(ref, 3, seed=108)
    w = jnp.asarray(np.random.default_rng(109).standard_normal((3, 2 * ref.nv)))
    g_u = jax.jit(jax.grad(lambda uu: jnp.sum(w * jh.plant_step(x, uu, 0.01, "rk4"))))(u)
    G = ref.plant_step_gradient(x, u, 0.01, "rk4")
    np.testing.assert_allclose(np.asarray(g_u),
                               np.einsum("bi,bij->bj", np.asarray(w), G)[:, 2 * ref.nv:],
                               rtol=1e-9, atol=1e-9)
    value, grad, hess = jh.quadratic_state_cost(jnp.asarray(x), jnp.asarray(x[::-1]), 1.0)
    want = ref.quadratic_state_cost(x, x[::-1], 1.0)
    np.testing.assert_allclose(np.asarray(grad), want[1], atol=1e-12)


def test_cost_frames_are_the_default_of_ee_pos_cost(tmp_path):
    ref = _ref("go2")
    kw = dict(urdf_path=str(ROBOTS["go2"].path), floating_base=True, dtype="float64",
              algorithm_list=["world_kinematics"], device="cpu", cache_dir=tmp_path)
    h = grid_rbd.register_robot("go2_costs", cost_frames=["FL_foot", "RR_foot"], **kw)
    assert h.cost_frames == ("FL_foot", "RR_foot")
    x, _ = _state(ref, 3, seed=110)
    q = np.ascontiguousarray(x[:, :ref.nq])
    target = np.zeros((3, 6))
    got = h.ee_pos_cost(q, target, 1.0)
    want = ref.ee_pos_cost(q, target, 1.0, frames=["FL_foot", "RR_foot"])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)
    plain = grid_rbd.register_robot("go2_no_costs", **kw)
    assert plain.cost_frames == plain.ee_names
    assert plain.registration.entry_dir != h.registration.entry_dir
    with pytest.raises(ValueError, match="cost_frames: .*no frame 'paw'"):
        grid_rbd.register_robot("go2_bad_costs", cost_frames=["paw"], **kw)
    h.close()
    plain.close()


def _check_variants(handle, integrator, x, u, dt, want, tol):
    """Every variant of the fused kernel: the thread form, the level-synchronous forms
    (warp, block: `emit.plant_level`) and the tangents form (one forward-mode pass per
    (item, column)), each chosen explicitly on a context of its own, against `want`."""
    kernel = f"plant_step_gradient_{integrator}"
    ctx = handle.context()
    try:
        variants = tuple(ctx.variants(kernel))
        assert variants == ("thread", "warp", "block", "tangents"), variants
        for variant in variants:
            ctx.set_variant_for(kernel, variant)
            assert_scaled_close(ctx.plant_step_gradient(x, u, dt, integrator), want, tol,
                                f"{kernel} ({variant})")
            assert_scaled_close(ctx.plant_step_gradient(x[-1], u[-1], dt, integrator),
                                want[-1], tol, f"{kernel} ({variant}, one state)")
    finally:
        ctx.close()


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_fused_step_gradient_kernel(shared_store, integrator):
    """emit_plant=True: plant_step_gradient is one kernel, equal to the reference
    (iiwa14, float64), for a batch and a single state, in every variant; rk4 is refused."""
    urdf = str(ROBOTS["iiwa14"].path)
    # The session store (tests/conftest.py): one build for both integrators.
    fused = grid_rbd.register_robot("iiwa14_fused_plant", urdf_path=urdf, dtype="float64",
                                    algorithm_list=["plant"], cache_dir=shared_store)
    assert "plant_step_gradient_euler" in fused.algorithms
    ref = reference.load(ROBOTS["iiwa14"].path)
    s = random_states(ref.model, 7, seed=21)
    x = np.concatenate([s.q, s.qd], axis=1)
    got = fused.plant_step_gradient(x, s.u, 0.02, integrator)
    want = ref.plant_step_gradient(x, s.u, 0.02, integrator)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    one = fused.plant_step_gradient(x[0], s.u[0], 0.02, integrator)
    np.testing.assert_allclose(one, want[0], rtol=1e-9, atol=1e-9)
    _check_variants(fused, integrator, x, s.u, 0.02, want, 1e-9)
    with pytest.raises(RuntimeError, match="plant_step_gradient needs"):
        fused.plant_step_gradient(x, s.u, 0.02, "rk4")
    fused.close()


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_fused_step_gradient_kernel_on_a_free_flyer(shared_store, integrator):
    """A free-flyer root: the fused kernel (the root's rows through the SE(3) chart's
    Jacobians, `symbolic.lie`) against the reference, at rest, at small root rotations
    per step (the Taylor side of the chart's coefficients) and large ones (the closed
    forms), and exactly at the switch between them; every variant of the kernel."""
    urdf = str(ROBOTS["iiwa14"].path)
    fused = grid_rbd.register_robot("iiwa14_fused_plant_ff", urdf_path=urdf,
                                    floating_base=True, dtype="float64",
                                    algorithm_list=["plant"], cache_dir=shared_store)
    assert plan_of(fused).fused[integrator] == f"plant_step_gradient_{integrator}"
    ref = reference.load(ROBOTS["iiwa14"].path, floating_base=True)
    s = random_states(ref.model, 9, seed=22)
    qd = s.qd.copy()
    dt = 0.02
    qd[0] = 0.0  # at rest
    for k, angle in enumerate((1e-4, 0.3, 0.5, 0.7, 2.0), start=1):  # |dt w| per step
        qd[k, 3:6] *= angle / dt / np.linalg.norm(qd[k, 3:6])
    x = np.concatenate([s.q, qd], axis=1)
    got = fused.plant_step_gradient(x, s.u, dt, integrator)
    want = ref.plant_step_gradient(x, s.u, dt, integrator)
    assert_scaled_close(got, want, 1e-9, f"fused {integrator} on a free flyer")
    _check_variants(fused, integrator, x, s.u, dt, want, 1e-9)
    fused.close()
