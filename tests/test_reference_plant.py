"""The float64 plant layer (issue 16, item 1): the SE(3) chart against Pinocchio's
`integrate`, `difference`, `dIntegrate` and `dDifference`; a step against Pinocchio's
`aba` + `integrate`; step gradients and Hessians against central differences (the
floating-base Hessian in tests/test_plant_hessian.py); costs and barriers against finite
differences of their values and their own definitions."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, pinocchio_model, random_states

import grid_rbd.reference as reference
from grid_rbd import interop
from grid_rbd.reference import configuration

pin = pytest.importorskip("pinocchio", reason="pinocchio (pin) is not installed")

INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")
ROBOT_SET = ("iiwa14", "go2")


def _ref(robot):
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


def _state(ref, batch, seed):
    s = random_states(ref.model, batch, seed=seed, max_velocity=2.0)
    return np.concatenate([s.q, s.qd], axis=1), 0.1 * s.u


def test_the_chart_matches_pinocchio():
    ref = _ref("go2")
    model = pinocchio_model(ROBOTS["go2"])
    s = random_states(ref.model, 6, seed=80)
    dq = np.random.default_rng(81).standard_normal((6, ref.nv))
    dq[0, 3:6] *= 1e-5  # near-zero rotations use the Taylor series
    dq[1, 3:6] = 0.0
    dq[2, 3:6] *= 3.0  # beyond pi
    moved = configuration.integrate(ref.model, s.q, dq)
    d_q, d_v = configuration.integrate_jacobians(ref.model, s.q, dq)
    back = configuration.difference(ref.model, s.q, moved)
    D = configuration.difference_jacobian(ref.model, s.q, moved)
    for b in range(6):
        q0 = interop.to_pinocchio(ref, s.q[b:b + 1])[0]
        q1 = interop.to_pinocchio(ref, moved[b:b + 1])[0]
        np.testing.assert_allclose(q1, pin.integrate(model, q0, dq[b]), atol=1e-12)
        np.testing.assert_allclose(d_q[b], pin.dIntegrate(model, q0, dq[b], pin.ARG0),
                                   atol=1e-12)
        np.testing.assert_allclose(d_v[b], pin.dIntegrate(model, q0, dq[b], pin.ARG1),
                                   atol=1e-10)
        np.testing.assert_allclose(back[b], pin.difference(model, q0, q1), atol=1e-10)
        np.testing.assert_allclose(D[b], pin.dDifference(model, q0, q1, pin.ARG1), atol=1e-9)


@pytest.mark.parametrize("robot", ROBOT_SET)
def test_an_euler_step_is_pinocchios_aba_and_integrate(robot):
    ref, model = _ref(robot), pinocchio_model(ROBOTS[robot])
    data = model.createData()
    x, u = _state(ref, 4, seed=82)
    dt = 0.005
    for integrator in ("euler", "semi_implicit_euler"):
        out = ref.plant_step(x, u, dt, integrator)
        for b in range(4):
            q = interop.to_pinocchio(ref, x[b:b + 1, :ref.nq])[0]
            v = x[b, ref.nq:]
            a = pin.aba(model, data, q, v, u[b])
            v_next = v + dt * a
            q_next = pin.integrate(model, q, dt * (v if integrator == "euler" else v_next))
            np.testing.assert_allclose(out[b, ref.nq:], v_next, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(interop.to_pinocchio(ref, out[b:b + 1, :ref.nq])[0],
                                       q_next, atol=1e-12)


def _tangent_step(ref, x, u, dt, integrator, z):
    """`step(x (+) z_x, u + z_u) (-) step(x, u)` in the tangent of the next state."""
    nq, nv = ref.nq, ref.nv
    base = ref.plant_step(x, u, dt, integrator)
    q = configuration.integrate(ref.model, x[:, :nq], z[:, :nv])
    moved = ref.plant_step(np.concatenate([q, x[:, nq:] + z[:, nv:2 * nv]], 1),
                           u + z[:, 2 * nv:], dt, integrator)
    return np.concatenate([configuration.difference(ref.model, base[:, :nq], moved[:, :nq]),
                           moved[:, nq:] - base[:, nq:]], axis=1)


@pytest.mark.parametrize("integrator", INTEGRATORS)
@pytest.mark.parametrize("robot", ROBOT_SET)
def test_step_gradients_against_finite_differences(robot, integrator):
    ref = _ref(robot)
    x, u = _state(ref, 3, seed=83)
    G = ref.plant_step_gradient(x, u, 0.01, integrator)
    assert G.shape == (3, 2 * ref.nv, 3 * ref.nv)
    h = 1e-6
    for k in range(3 * ref.nv):
        z = np.zeros((3, 3 * ref.nv))
        z[:, k] = h
        fd = (_tangent_step(ref, x, u, 0.01, integrator, z)
              - _tangent_step(ref, x, u, 0.01, integrator, -z)) / (2 * h)
        np.testing.assert_allclose(G[:, :, k], fd, atol=1e-6 * (1 + np.abs(G).max()),
                                   err_msg=f"column {k}")


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_step_hessian_against_finite_differences_of_the_gradient(integrator):
    ref = _ref("iiwa14")
    x, u = _state(ref, 2, seed=84)
    H = ref.plant_step_hessian(x, u, 0.01, integrator)
    assert H.shape == (2, 2 * ref.nv, 3 * ref.nv, 3 * ref.nv)
    np.testing.assert_allclose(H, np.swapaxes(H, 2, 3), atol=1e-9 * np.abs(H).max())
    h, nv = 1e-5, ref.nv
    for k in range(3 * nv):
        e = np.zeros(3 * nv)
        e[k] = h
        plus = ref.plant_step_gradient(x + e[None, :2 * nv], u + e[None, 2 * nv:], 0.01,
                                       integrator)
        minus = ref.plant_step_gradient(x - e[None, :2 * nv], u - e[None, 2 * nv:], 0.01,
                                        integrator)
        np.testing.assert_allclose(H[..., k], (plus - minus) / (2 * h),
                                   atol=1e-6 * (1 + np.abs(H).max()), err_msg=f"column {k}")


def test_bad_step_arguments_name_the_problem():
    ref = _ref("iiwa14")
    x, u = _state(ref, 1, seed=85)
    with pytest.raises(ValueError, match="integrator_type 'leapfrog' is not one of"):
        ref.plant_step(x, u, 0.01, "leapfrog")
    for dt in (0.0, -1e-3, float("nan")):
        with pytest.raises(ValueError, match="dt must be a positive finite time step"):
            ref.plant_step(x, u, dt)
    with pytest.raises(ValueError, match="x has width 13"):
        ref.plant_step(x[:, :-1], u, 0.01)
    with pytest.raises(ValueError, match="rk4's Hessian is not provided"):
        ref.plant_step_hessian(x, u, 0.01, "rk4")


def _check_gradient(value_fn, x, grad, tangent_move, h=1e-6, tol=1e-6):
    for k in range(grad.shape[1]):
        d = np.zeros_like(grad)
        d[:, k] = h
        fd = (value_fn(tangent_move(x, d)) - value_fn(tangent_move(x, -d))) / (2 * h)
        np.testing.assert_allclose(grad[:, k], fd, atol=tol * (1 + np.abs(grad).max()))


@pytest.mark.parametrize("robot", ROBOT_SET)
def test_state_and_tracking_costs_against_finite_differences(robot):
    ref = _ref(robot)
    nq, nv = ref.nq, ref.nv
    x, u = _state(ref, 3, seed=87)
    x_des, _ = _state(ref, 3, seed=88)
    Q = np.linspace(1.0, 2.0, 2 * nv)

    def move_state(x, d):
        q = configuration.integrate(ref.model, x[:, :nq], d[:, :nv])
        return np.concatenate([q, x[:, nq:] + d[:, nv:]], 1)

    value, grad, hess = ref.quadratic_state_cost(x, x_des, Q)
    _check_gradient(lambda xx: ref.quadratic_state_cost(xx, x_des, Q)[0], x, grad, move_state)
    assert hess.shape == (3, 2 * nv, 2 * nv)
    np.testing.assert_allclose(ref.quadratic_state_cost(x, x, Q)[0], 0.0, atol=1e-20)
    R = np.diag(np.linspace(0.1, 1.0, nv))
    v_u, g_u, H_u = ref.quadratic_input_cost(u, 0 * u, R)
    np.testing.assert_allclose(v_u, 0.5 * np.einsum("bi,ij,bj->b", u, R, u))
    np.testing.assert_allclose(g_u, u @ R)
    np.testing.assert_allclose(H_u, np.broadcast_to(R, H_u.shape))
    # tracking costs take q; their gradients' velocity part is zero
    q = x[:, :nq]
    target = ref.end_effector_pose(q)[:, :3] + 0.05
    value, grad, hess = ref.ee_pos_cost(q, target, 2.0, frames=[ref.ee_frames[0].name])
    _check_gradient(lambda qq: ref.ee_pos_cost(qq, target, 2.0,
                                               frames=[ref.ee_frames[0].name])[0],
                    q, grad[:, :nv], lambda qq, d: configuration.integrate(ref.model, qq, d))
    assert not grad[:, nv:].any() and hess.shape == (3, 2 * nv, 2 * nv)
    c_target = ref.com(q)[0] - 0.02
    value, grad, hess = ref.com_cost(q, c_target, np.eye(3))
    _check_gradient(lambda qq: ref.com_cost(qq, c_target, np.eye(3))[0], q, grad[:, :nv],
                    lambda qq, d: configuration.integrate(ref.model, qq, d))


def test_momentum_cost_against_finite_differences():
    ref = _ref("go2")
    nq, nv = ref.nq, ref.nv
    x, _ = _state(ref, 2, seed=89)
    h_des = np.array([0.1, -0.2, 0.3, 0.0, 0.1, -0.1])
    value, grad, hess = ref.momentum_cost(x[:, :nq], x[:, nq:], h_des, np.ones(6))

    def value_of(xx):
        return ref.momentum_cost(xx[:, :nq], xx[:, nq:], h_des, np.ones(6))[0]

    def move_state(xx, d):
        q = configuration.integrate(ref.model, xx[:, :nq], d[:, :nv])
        return np.concatenate([q, xx[:, nq:] + d[:, nv:]], 1)

    _check_gradient(value_of, x, grad, move_state)
    np.testing.assert_allclose(hess, np.swapaxes(hess, 1, 2))


def test_barriers():
    ref = _ref("iiwa14")
    rng = np.random.default_rng(90)
    lower, upper = -np.ones(7), 2.0 * np.ones(7)
    x = rng.uniform(-0.9, 1.9, (4, 7))
    value, grad, hess = ref.joint_position_barrier(x, lower, upper, 0.1)
    np.testing.assert_allclose(value, -0.1 * np.sum(np.log(x - lower) + np.log(upper - x), 1))
    h = 1e-7
    for k in range(7):
        d = np.zeros(7)
        d[k] = h
        fd = (ref.joint_position_barrier(x + d, lower, upper, 0.1)[0]
              - ref.joint_position_barrier(x - d, lower, upper, 0.1)[0]) / (2 * h)
        np.testing.assert_allclose(grad[:, k], fd, rtol=1e-6)
        fd2 = (ref.joint_position_barrier(x + d, lower, upper, 0.1)[1][:, k]
               - ref.joint_position_barrier(x - d, lower, upper, 0.1)[1][:, k]) / (2 * h)
        np.testing.assert_allclose(hess[:, k], fd2, rtol=1e-5)
    outside = x.copy()
    outside[0, 3] = 5.0
    assert np.isinf(ref.joint_velocity_barrier(outside, lower, upper, 0.1)[0][0])
    with pytest.raises(ValueError, match="lower < upper; entry 2"):
        bad = lower.copy()
        bad[2] = 3.0
        ref.joint_torque_barrier(x, bad, upper, 0.1)
    with pytest.raises(ValueError, match="mu must be positive"):
        ref.joint_position_barrier(x, lower, upper, 0.0)
