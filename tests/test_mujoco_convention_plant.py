"""The plant layer, costs, collision and autograd in `output_convention="mujoco"`,
against MuJoCo itself: `plant_step` / `integrator` are MuJoCo's integrators over its own
chart (mj_step with mjINT_EULER for semi-implicit euler and mjINT_RK4 for rk4, MuJoCo
4's, which integrates a free joint's rotation in its Lie algebra; explicit euler from
mj_forward's qacc and mj_integratePos), `plant_step_gradient`
against mjd_transitionFD (and central differences of mj_step over qfrc_applied), the step
Hessian against differences of that gradient along MuJoCo's chart, the state cost
against mj_differentiatePos, the tracking costs' gradients against differences through
mj_integratePos, the collision methods against sphere centres placed by MuJoCo's body
poses, and the torch / JAX backward through the plant and the parameter operands. On
the fixed-base iiwa14 and the floating toy of test_mujoco_convention.py; float64 CPU
builds."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco package is not installed "
                             "(requirements-test.lock)")
from test_mujoco_convention import TOY, _mujoco_model  # noqa: E402
from test_mujoco_convention_methods import FRAMES, Case, _close, _states, registered  # noqa: E402

import grid_rbd  # noqa: E402
from grid_rbd._register import with_backend  # noqa: E402

INTEGRATORS = {"semi_implicit_euler": mujoco.mjtIntegrator.mjINT_EULER,
               "rk4": mujoco.mjtIntegrator.mjINT_RK4}
MUJOCO_4 = int(mujoco.__version__.split(".")[0]) >= 4  # its RK4 is the rk4 oracle
DT = 0.01


@pytest.fixture(scope="module", params=["iiwa14", "toy_free"])
def case(request, shared_store):
    case = registered(request.param, shared_store)
    case.cost_frame = FRAMES[request.param][0]
    yield case
    case.h.close()


def _mj_step(case, x, u, dt, integrator):
    m, d, nq = case.m, case.d, case.m.nq
    if integrator == "euler":  # explicit: MuJoCo's qacc and mj_integratePos
        qacc = case.qacc(x[:nq], x[nq:], u)
        return np.concatenate([case.moved(x[:nq], x[nq:], dt), x[nq:] + dt * qacc])
    m.opt.integrator, m.opt.timestep = INTEGRATORS[integrator], dt
    mujoco.mj_resetData(m, d)
    d.qpos[:], d.qvel[:], d.qfrc_applied[:] = x[:nq], x[nq:], u
    mujoco.mj_step(m, d)
    return np.concatenate([d.qpos, d.qvel])


def _state_difference(case, x0, x1):
    """x1 (-) x0 in MuJoCo's state tangent [mj_differentiatePos, dqvel]."""
    nq = case.m.nq
    dq = np.zeros(case.nv)
    mujoco.mj_differentiatePos(case.m, dq, 1.0, x0[:nq], x1[:nq])
    return np.concatenate([dq, x1[nq:] - x0[nq:]])


def _state_moved(case, x, dz):
    nq, nv = case.m.nq, case.nv
    return np.concatenate([case.moved(x[:nq], dz[:nv]), x[nq:] + dz[nv:]])


def _step_differences(case, step, x, u, s=1e-6):
    """[A | B] of `step(x, u)` by central differences in MuJoCo's state tangent."""
    nv = case.nv
    cols = []
    for k in range(3 * nv):
        dz = np.zeros(3 * nv)
        dz[k] = s
        hi = step(_state_moved(case, x, dz[:2 * nv]), u + dz[2 * nv:])
        lo = step(_state_moved(case, x, -dz[:2 * nv]), u - dz[2 * nv:])
        cols.append(_state_difference(case, lo, hi) / (2 * s))
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler", "rk4"])
def test_plant_step_is_mujocos_integrator(case, integrator):
    if integrator == "rk4" and not MUJOCO_4:
        pytest.skip("MuJoCo 4's RK4 is the oracle (requirements-test.lock pins 4.0.0)")
    h = case.h
    q, v, _, u = _states(case, 2, seed=400)
    x = np.concatenate([q, v], 1)
    out = h.plant_step(x, u, DT, integrator)
    for b in range(len(x)):
        _close(out[b], _mj_step(case, x[b], u[b], DT, integrator), 1e-11, "next state")
    three = h.integrator(x, u, DT, 3, integrator)
    for b in range(len(x)):
        want = x[b]
        for _ in range(3):
            want = _mj_step(case, want, u[b], DT, integrator)
        _close(three[b], want, 1e-10, "three steps")


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler", "rk4"])
def test_plant_step_gradient_matches_mujoco(case, integrator):
    if integrator == "rk4" and not MUJOCO_4:
        pytest.skip("MuJoCo 4's RK4 is the oracle (requirements-test.lock pins 4.0.0)")
    h = case.h
    q, v, _, u = _states(case, 2, seed=401)
    x = np.concatenate([q, v], 1)
    G = h.plant_step_gradient(x, u, DT, integrator)
    nv = case.nv
    for b in range(len(x)):
        want = _step_differences(case, lambda x_, u_: _mj_step(case, x_, u_, DT,
                                                                integrator), x[b], u[b])
        _close(G[b], want, 1e-7, "[A | B] against mj_step differences")
        if integrator == "semi_implicit_euler":  # MuJoCo's own transition derivative
            case.m.opt.integrator, case.m.opt.timestep = INTEGRATORS[integrator], DT
            d = case.d
            mujoco.mj_resetData(case.m, d)
            d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q[b], v[b], u[b]
            A = np.zeros((2 * nv, 2 * nv))
            mujoco.mjd_transitionFD(case.m, d, 1e-7, 1, A, None, None, None)
            _close(G[b, :, :2 * nv], A, 1e-6, "mjd_transitionFD")


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_plant_step_hessian_differentiates_the_gradient(case, integrator):
    """H[r, i, k] = d/dz_k G[r, i] at (x (+) z, u + du), z along MuJoCo's chart."""
    h = case.h
    q, v, _, u = _states(case, 1, seed=402)
    x = np.concatenate([q, v], 1)[0]
    H = h.plant_step_hessian(x, u[0], DT, integrator)
    nv, s = case.nv, 1e-6
    want = np.zeros_like(H)
    for k in range(3 * nv):
        dz = np.zeros(3 * nv)
        dz[k] = s
        hi = h.plant_step_gradient(_state_moved(case, x, dz[:2 * nv]), u[0] + dz[2 * nv:],
                                   DT, integrator)
        lo = h.plant_step_gradient(_state_moved(case, x, -dz[:2 * nv]), u[0] - dz[2 * nv:],
                                   DT, integrator)
        want[:, :, k] = (hi - lo) / (2 * s)
    _close(H, want, 1e-7, "step Hessian")
    with pytest.raises(ValueError, match="rk4"):
        h.plant_step_hessian(x, u[0], DT, "rk4")


# -- costs -------------------------------------------------------------------------------
def _tracking_checks(case, cost, state, f_residual, W, what):
    """value = 1/2 r^T W r, gradient and Gauss-Newton Hessian from the residual's
    central differences in MuJoCo's state tangent (state = [q, qvel])."""
    value, grad, hess = cost
    r = f_residual(state)
    _close(value, 0.5 * r @ W @ r, 1e-12, f"{what} value")
    s = 1e-6
    J = np.stack([(f_residual(_state_moved(case, state, s * e))
                   - f_residual(_state_moved(case, state, -s * e))) / (2 * s)
                  for e in np.eye(2 * case.nv)], axis=1)
    _close(grad, J.T @ W @ r, 1e-7, f"{what} gradient")
    _close(hess, J.T @ W @ J, 1e-7, f"{what} Gauss-Newton Hessian")


def test_state_cost_uses_mj_differentiatePos(case):
    h, nv = case.h, case.nv
    q, v, _, _ = _states(case, 2, seed=403)
    q_des, v_des, _, _ = _states(case, 2, seed=404)
    x, x_des = np.concatenate([q, v], 1), np.concatenate([q_des, v_des], 1)
    W = np.diag(np.random.default_rng(405).uniform(0.5, 2.0, 2 * nv))
    value, grad, hess = h.quadratic_state_cost(x, x_des, W)
    for b in range(len(x)):
        _tracking_checks(case, (value[b], grad[b], hess[b]), x[b],
                         lambda s, b=b: _state_difference(case, x_des[b], s), W, "state cost")


def test_tracking_costs_match_mujoco(case):
    h, nq = case.h, case.m.nq
    q, v, _, _ = _states(case, 2, seed=406)
    rng = np.random.default_rng(407)
    W3, W6 = np.diag(rng.uniform(0.5, 2, 3)), np.diag(rng.uniform(0.5, 2, 6))
    p_des, h_des = rng.normal(size=(2, 3)), rng.normal(size=(2, 6))
    ids = [case.body(n) for n in h.body_names]
    masses = case.m.body_mass[ids]

    def ee(s, b):
        return case.pose(s[:nq], case.cost_frame)[0] - p_des[b]

    def com(s, b):
        d = case.forward(s[:nq])
        return masses @ d.xipos[ids] / masses.sum() - p_des[b]

    def momentum(s, b):
        c = com(s, b) + p_des[b]
        d = case.forward(s[:nq], s[nq:])
        mujoco.mj_subtreeVel(case.m, d)
        mass = case.m.body_subtreemass[0]
        lin = mass * d.subtree_linvel[0]
        ang = d.subtree_angmom[0] + np.cross(d.subtree_com[0] - c, lin)
        return np.concatenate([lin, ang]) - h_des[b]

    costs = {"ee_pos_cost": (h.ee_pos_cost(q, p_des, W3), ee, W3),
             "com_cost": (h.com_cost(q, p_des, W3), com, W3),
             "momentum_cost": (h.momentum_cost(q, v, h_des, W6), momentum, W6)}
    for name, (cost, f, W) in costs.items():
        for b in range(len(q)):
            _tracking_checks(case, tuple(c[b] for c in cost), np.concatenate([q[b], v[b]]),
                             lambda s, b=b, f=f: f(s, b), W, name)


# -- autograd through the MuJoCo chart ----------------------------------------------------
def _ambient_direction(case, q, k, s=1e-7):
    """d mj_integratePos(q, s e_k) / ds: the k-th MuJoCo tangent direction in q's layout."""
    e = np.eye(case.nv)[k]
    return (case.moved(q, e, s) - case.moved(q, e, -s)) / (2 * s)


def test_torch_backward_through_the_plant(case):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    th = grid_rbd.as_mujoco(with_backend(case.h.pinocchio, "torch"))
    q, v, _, u = _states(case, 2, seed=408)
    x = np.concatenate([q, v], 1)
    w = np.random.default_rng(409).normal(size=x.shape)
    tx, tu = torch.tensor(x, requires_grad=True), torch.tensor(u, requires_grad=True)
    out = th.plant_step(tx, tu, DT, "semi_implicit_euler")
    _close(out.detach().numpy(), case.h.plant_step(x, u, DT, "semi_implicit_euler"), 1e-13)
    (out * torch.from_numpy(w)).sum().backward()
    G = case.h.plant_step_gradient(x, u, DT, "semi_implicit_euler")
    nq, nv = case.m.nq, case.nv
    for b in range(len(x)):
        # the output cotangent in MuJoCo's tangent at x': w's q part through d x'/d(dz)
        x1 = case.h.plant_step(x[b], u[b], DT, "semi_implicit_euler")
        out_dirs = np.stack([_ambient_direction(case, x1[:nq], k) for k in range(nv)], 1)
        w_tangent = np.concatenate([out_dirs.T @ w[b, :nq], w[b, nq:]])
        dirs = np.stack([_ambient_direction(case, q[b], k) for k in range(nv)], 1)
        g_q = tx.grad.numpy()[b, :nq] @ dirs  # the q cotangent along MuJoCo's tangent
        _close(g_q, w_tangent @ G[b, :, :nv], 1e-6, "q")
        _close(tx.grad.numpy()[b, nq:], w_tangent @ G[b, :, nv:2 * nv], 1e-8, "qvel")
        _close(tu.grad.numpy()[b], w_tangent @ G[b, :, 2 * nv:], 1e-8, "u")


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_parameter_operands(case, backend):
    """*_wrt_params: the params cotangent is ct . Y_mj (inverse dynamics; Y_mj pi is the
    MuJoCo-convention torque) and ct . dqacc/dpi (forward dynamics)."""
    h = case.h
    q, v, a, u = _states(case, 2, seed=410)
    pi = h.get_inertia_params().reshape(-1)
    Y = h.inverse_dynamics_regressor(q, v, a)
    _close(Y @ pi, h.inverse_dynamics(q, v, a), 1e-11, "Y pi")
    for b in range(len(q)):
        _close((Y @ pi)[b], case.rne(q[b], v[b], a[b]), 1e-9, "Y pi against mj_rne")
    dF = h.forward_dynamics_parameter_gradient(q, v, u)
    ct = np.random.default_rng(411).normal(size=(2, case.nv))
    if backend == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed")
        vh = grid_rbd.as_mujoco(with_backend(h.pinocchio, "torch"))
        grads = []
        for call in (lambda p: vh.inverse_dynamics_wrt_params(*map(torch.tensor, (q, v)), p,
                                                              torch.tensor(a)),
                     lambda p: vh.forward_dynamics_wrt_params(*map(torch.tensor, (q, v, u)),
                                                              p)):
            p = torch.tensor(pi, requires_grad=True)
            (call(p) * torch.tensor(ct)).sum().backward()
            grads.append(p.grad.numpy())
    else:
        jax = pytest.importorskip("jax", reason="jax is not installed")
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        vh = grid_rbd.as_mujoco(with_backend(h.pinocchio, "jax"))
        J = [jnp.asarray(x) for x in (q, v, a, u)]
        grads = [np.asarray(jax.grad(lambda p: (vh.inverse_dynamics_wrt_params(
                     J[0], J[1], p, J[2]) * ct).sum())(jnp.asarray(pi))),
                 np.asarray(jax.grad(lambda p: (vh.forward_dynamics_wrt_params(
                     J[0], J[1], J[3], p) * ct).sum())(jnp.asarray(pi)))]
    _close(grads[0], np.einsum("bi,bik->k", ct, Y), 1e-10, f"{backend} ID params")
    _close(grads[1], np.einsum("bi,bik->k", ct, dF), 1e-10, f"{backend} FD params")


# -- collision ----------------------------------------------------------------------------
COLLIDING = TOY.replace(
    '<link name="thigh">', '<link name="thigh"><collision><origin xyz="0 0.1 0.05"/>'
    '<geometry><sphere radius="0.06"/></geometry></collision>').replace(
    '<link name="slider">', '<link name="slider"><collision><origin xyz="0 0 0.02"/>'
    '<geometry><sphere radius="0.05"/></geometry></collision>').replace(
    '<link name="shin">', '<link name="shin"><collision><origin xyz="0.05 0 -0.1"/>'
    '<geometry><sphere radius="0.04"/></geometry></collision>')


@pytest.fixture(scope="module")
def colliding(tmp_path_factory):
    h = grid_rbd.register_robot("mjp_colliding", urdf_string=COLLIDING, floating_base=True,
                                dtype="float64", device="cpu",
                                algorithm_list=["core", "kinematics"], collision=True,
                                output_convention="mujoco",
                                cache_dir=tmp_path_factory.mktemp("store"))
    case = Case("colliding", h, _mujoco_model(COLLIDING, True), True)
    yield case
    h.close()


def test_collision_methods_in_mujocos_chart(colliding):
    case, h = colliding, colliding.h
    q, *_ = _states(case, 2, seed=412)
    spheres = h.collision_spheres
    assert len(spheres) >= 3 and h.collision_pairs

    def centres(x):
        d = case.forward(x)
        return np.stack([d.xpos[case.body(s.link)] + d.xmat[case.body(s.link)].reshape(3, 3)
                         @ np.asarray(s.center) for s in spheres])

    obstacles, radii = np.array([[0.3, 0.1, 0.2], [-0.2, 0.0, 0.4]]), np.array([0.1, 0.2])
    P, dP = h.sphere_positions(q), h.sphere_positions_gradient(q)
    for b in range(len(q)):
        _close(P[b], centres(q[b]), 1e-12, "sphere centres")
        _close(dP[b], case.tangent_differences(centres, q[b]), 1e-8, "their gradient")
        for name, value, grad in (
                ("self", lambda x: h.self_collision_distance(x[None])[0],
                 h.self_collision_distance_gradient(q)[b]),
                ("world", lambda x: h.world_collision_distance(x[None], obstacles, radii)[0],
                 h.world_collision_distance_gradient(q, obstacles, radii)[b]),
                ("cost", lambda x: h.collision_cost(x[None], 0.5, 2.0, obstacles, radii)[0][0],
                 h.collision_cost(q, 0.5, 2.0, obstacles, radii)[1][b, :case.nv])):
            _close(grad, case.tangent_differences(value, q[b]), 1e-7, f"{name} gradient")
