"""The float64 plant-step Hessian (issue 16): `plant_step_hessian` of the reference for
euler and semi-implicit euler, fixed base, floating base, ball and planar joints, against

* central differences of the reference's own `plant_step_gradient`, taken along the
  group (`configuration.integrate` moves the state, the gradient is differenced as is);
* central differences of a step gradient built from Pinocchio alone (`aba`,
  `computeABADerivatives`, `integrate`, `dIntegrate`);
* second differences of the step's values (`plant_step` and `configuration.difference`
  only), through the bracket terms that turn the iterated Hessian into the symmetric one;

and its SE(3) pieces (`grid_rbd._step_hessian`): the series/closed-form coefficients
against mpmath, the derivatives of the integration's Jacobians against central
differences of Pinocchio's `dIntegrate`."""

from __future__ import annotations

import numpy as np
import pytest
from joint_type_robots import BALL_CHAIN
from support import ROBOTS, pinocchio_model, random_states
from test_second_order_kernels import FLOATING_TREE

import grid_rbd.reference as reference
from grid_rbd import _step_hessian, interop
from grid_rbd._array_ops import ArrayOps
from grid_rbd.reference import configuration

pin = pytest.importorskip("pinocchio", reason="pinocchio (pin) is not installed")

HESSIAN_INTEGRATORS = ("euler", "semi_implicit_euler")


@pytest.fixture(scope="module")
def robots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hessian_robots")
    (folder / "so_tree.urdf").write_text(FLOATING_TREE)
    (folder / "ball_chain.urdf").write_bytes(BALL_CHAIN)
    out = {name: reference.load(ROBOTS[name].path, floating_base=ROBOTS[name].floating_base)
           for name in ("iiwa14", "go2")}
    out["so_tree"] = reference.load(folder / "so_tree.urdf", floating_base=True)
    out["ball_chain"] = reference.load(folder / "ball_chain.urdf")
    return out


def _state(ref, batch, seed, max_velocity):
    s = random_states(ref.model, batch, seed=seed, max_velocity=max_velocity)
    q = s.q.copy()
    for j in ref.model.joints:  # random_states leaves ball and planar blocks uniform
        if j.type.value == "spherical":
            quat = np.random.default_rng(seed).normal(size=(batch, 4))
            q[:, j.idx_q:j.idx_q + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
        elif j.type.value == "planar":
            t = np.random.default_rng(seed).uniform(-np.pi, np.pi, batch)
            q[:, j.idx_q + 2], q[:, j.idx_q + 3] = np.cos(t), np.sin(t)
    return np.concatenate([q, s.qd], axis=1), 0.1 * s.u


def _move(ref, x, u, z):
    """`(x (+) z_x, u + z_u)` for `z (B, 3nv)`."""
    nq, nv = ref.nq, ref.nv
    q = configuration.integrate(ref.model, x[:, :nq], z[:, :nv])
    return np.concatenate([q, x[:, nq:] + z[:, nv:2 * nv]], 1), u + z[:, 2 * nv:]


def _gradient_differences(gradient, ref, x, u, h=1e-5):
    """`(B, 2nv, 3nv, 3nv)`: `[..., k]` the central difference of `gradient` along
    `z_k` (through `_move`)."""
    columns = []
    for k in range(3 * ref.nv):
        z = np.zeros((len(x), 3 * ref.nv))
        z[:, k] = h
        columns.append((gradient(*_move(ref, x, u, z)) - gradient(*_move(ref, x, u, -z)))
                       / (2 * h))
    return np.stack(columns, axis=3)


def _assert_rows_close(H, want, nv, tol, what):
    """Configuration rows and velocity rows each against their own scale (the first are
    dt times smaller)."""
    for rows, name in ((slice(0, nv), "q' rows"), (slice(nv, 2 * nv), "qd' rows")):
        scale = np.abs(want[:, rows]).max()
        err = np.abs(H[:, rows] - want[:, rows]).max()
        assert err <= tol * (1e-3 + scale), f"{what}, {name}: {err:.3e} (scale {scale:.3e})"


# dt 0.01 at velocities up to 2; dt 0.1 at up to 8: rotation steps past the series cutoffs
STEPS = [(0.01, 2.0), (0.1, 8.0)]


@pytest.mark.parametrize("dt,max_velocity", STEPS, ids=["small-step", "large-rotation"])
@pytest.mark.parametrize("integrator", HESSIAN_INTEGRATORS)
@pytest.mark.parametrize("robot", ["iiwa14", "so_tree", "go2", "ball_chain"])
def test_hessian_is_the_difference_of_the_gradient_along_the_group(robots, robot, integrator,
                                                                   dt, max_velocity):
    ref = robots[robot]
    x, u = _state(ref, 2, seed=91, max_velocity=max_velocity)
    H = ref.plant_step_hessian(x, u, dt, integrator)
    assert H.shape == (2, 2 * ref.nv, 3 * ref.nv, 3 * ref.nv)
    want = _gradient_differences(
        lambda xx, uu: ref.plant_step_gradient(xx, uu, dt, integrator), ref, x, u)
    _assert_rows_close(H, want, ref.nv, 1e-7, f"{robot} {integrator} dt {dt}")
    if ref.nq == ref.nv:
        np.testing.assert_allclose(H, np.swapaxes(H, 2, 3), atol=1e-12 * np.abs(H).max())
        return
    # On a Lie-group joint the chart's second-order terms are what makes it right: the
    # additive assembly (fdsva_so's blocks alone) misses the configuration rows.
    additive = _step_hessian.step_hessian(ArrayOps(x), ref.fdsva_so(x[:, :ref.nq],
                                          x[:, ref.nq:], u), dt, integrator)
    miss = np.abs(additive[:, :ref.nv] - want[:, :ref.nv]).max()
    assert miss > 1e-3 * np.abs(want[:, :ref.nv]).max()


def _pinocchio_step_gradient(model, data, q, v, u, dt, integrator):
    """`[A | B]` `(2nv, 3nv)` of one step from Pinocchio's functions alone."""
    nv = model.nv
    a = pin.aba(model, data, q, v, u)
    pin.computeABADerivatives(model, data, q, v, u)
    Minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
    Gv = np.hstack([dt * data.ddq_dq, np.eye(nv) + dt * data.ddq_dv, dt * Minv])
    if integrator == "euler":
        w, Jw = v, np.hstack([np.zeros((nv, nv)), np.eye(nv), np.zeros((nv, nv))])
    else:
        w, Jw = v + dt * a, Gv
    step = dt * w
    Gq = dt * pin.dIntegrate(model, q, step, pin.ARG1) @ Jw
    Gq[:, :nv] += pin.dIntegrate(model, q, step, pin.ARG0)
    return np.vstack([Gq, Gv])


@pytest.mark.parametrize("integrator", HESSIAN_INTEGRATORS)
def test_hessian_against_differences_of_pinocchios_step_gradient(robots, integrator):
    ref = robots["go2"]
    model = pinocchio_model(ROBOTS["go2"])
    data = model.createData()
    x, u = _state(ref, 2, seed=92, max_velocity=6.0)
    dt, nv, h = 0.05, ref.nv, 1e-5
    H = ref.plant_step_hessian(x, u, dt, integrator)
    for b in range(2):
        q = interop.to_pinocchio(ref, x[b:b + 1, :ref.nq])[0]
        v = x[b, ref.nq:]
        want = np.zeros((2 * nv, 3 * nv, 3 * nv))
        for k in range(3 * nv):
            e = np.zeros(3 * nv)
            e[k] = h
            plus = _pinocchio_step_gradient(model, data, pin.integrate(model, q, e[:nv]),
                                            v + e[nv:2 * nv], u[b] + e[2 * nv:], dt,
                                            integrator)
            minus = _pinocchio_step_gradient(model, data, pin.integrate(model, q, -e[:nv]),
                                             v - e[nv:2 * nv], u[b] - e[2 * nv:], dt,
                                             integrator)
            want[:, :, k] = (plus - minus) / (2 * h)
        _assert_rows_close(H[b:b + 1], want[None], nv, 1e-7, f"go2 {integrator} state {b}")


def _ad(twist):
    """`ad([v; w]) = [[w^, v^], [0, w^]]` `(6, 6)` (one twist)."""
    def hat(a):
        return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = hat(twist[3:])
    out[:3, 3:] = hat(twist[:3])
    return out


@pytest.mark.parametrize("integrator", HESSIAN_INTEGRATORS)
def test_symmetric_second_derivative_from_step_values(robots, integrator):
    """`F(z) = step(x (+) z) (-) step(x)`: its second derivative (second differences of
    values) is the iterated Hessian plus the brackets of the two charts' right Jacobians,
    `F''[:, i, k] = H[:, i, k] + 1/2 ad(G e_k) G[:, i] - 1/2 G ad(e_k) e_i` (the first on
    the base rows of the output, the second on the base columns of the input)."""
    ref = robots["so_tree"]
    nq, nv, n = ref.nq, ref.nv, 3 * ref.nv
    x, u = _state(ref, 1, seed=93, max_velocity=5.0)
    dt, h = 0.05, 1e-4
    base = ref.plant_step(x, u, dt, integrator)
    pairs = [(i, k) for i in range(n) for k in range(i, n)]
    signs = [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    z = np.zeros((len(pairs) * 4, n))
    for p, (i, k) in enumerate(pairs):
        for s, (si, sk) in enumerate(signs):
            z[4 * p + s, i] += si * h
            z[4 * p + s, k] += sk * h
    xs, us = _move(ref, np.repeat(x, len(z), 0), np.repeat(u, len(z), 0), z)
    moved = ref.plant_step(xs, us, dt, integrator)
    F = np.concatenate([configuration.difference(ref.model, np.repeat(base[:, :nq], len(z), 0),
                                                 moved[:, :nq]),
                        moved[:, nq:] - base[:, nq:]], 1).reshape(len(pairs), 4, 2 * nv)
    second = (F[:, 0] - F[:, 1] - F[:, 2] + F[:, 3]) / (4 * h * h)
    want = np.zeros((2 * nv, n, n))
    for p, (i, k) in enumerate(pairs):
        want[:, i, k] = want[:, k, i] = second[p]
    H = ref.plant_step_hessian(x, u, dt, integrator)[0]
    G = ref.plant_step_gradient(x, u, dt, integrator)[0]
    got = H.copy()
    for k in range(n):
        got[:6, :, k] += 0.5 * _ad(G[:6, k]) @ G[:6]
        if k < 6:
            got[:, :6, k] -= 0.5 * G[:, :6] @ _ad(np.eye(6)[k])
    np.testing.assert_allclose(got, np.swapaxes(got, 1, 2), atol=1e-10 * np.abs(got).max())
    _assert_rows_close(got[None], want[None], nv, 1e-6, f"so_tree {integrator}")


def test_coefficients_against_mpmath():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 120  # the closed forms cancel up to t^7 (t = 1e-7: 49 digits)
    closed = {"a": lambda t: mp.sin(t) / t, "b": lambda t: (1 - mp.cos(t)) / t**2,
              "c": lambda t: (t - mp.sin(t)) / t**3,
              "d": lambda t: (t**2 + 2 * mp.cos(t) - 2) / (2 * t**4),
              "e": lambda t: (2 * t - 3 * mp.sin(t) + t * mp.cos(t)) / (2 * t**5)}
    thetas = np.array([1e-7, 1e-3, 0.2, 0.49, 0.51, 0.99, 1.01, 2.0, 3.1])
    got = _step_hessian.coefficients(ArrayOps(thetas), thetas)
    for n, theta in enumerate(thetas):
        t = mp.mpf(float(theta))
        for name, f in closed.items():
            want = f(t)
            dwant = mp.diff(f, t) / t
            assert abs(got[name][n] - want) <= 1e-14 * abs(want), (name, theta)
            if name != "a":  # (a's derivative is not used)
                assert abs(got["d" + name][n] - dwant) <= 1e-13 * abs(dwant), \
                    ("d" + name, theta)


def test_integration_jacobian_derivatives_against_pinocchio():
    """`increment_jacobians`: `Jr` is dIntegrate's ARG1 and its derivatives (and those
    of ARG0, `Ad(exp xi)^-1`) are the central differences of Pinocchio's, over
    increments whose rotation angles span both sides of the series cutoffs."""
    model = pin.Model()
    model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    rng = np.random.default_rng(94)
    xi = rng.standard_normal((6, 6))
    for b, angle in enumerate([0.0, 1e-4, 0.4, 0.8, 1.5, 3.0]):
        w = xi[b, 3:]
        xi[b, 3:] = angle * w / np.linalg.norm(w)
    Jr, dD1, dD0 = _step_hessian.increment_jacobians(ArrayOps(xi), xi)
    q0 = pin.randomConfiguration(model, -np.ones(7), np.ones(7))
    h = 1e-6
    for b in range(6):
        np.testing.assert_allclose(Jr[b], pin.dIntegrate(model, q0, xi[b], pin.ARG1),
                                   atol=1e-12)
        for m in range(6):
            e = h * np.eye(6)[m]
            for got, arg in ((dD1, pin.ARG1), (dD0, pin.ARG0)):
                fd = (pin.dIntegrate(model, q0, xi[b] + e, arg)
                      - pin.dIntegrate(model, q0, xi[b] - e, arg)) / (2 * h)
                np.testing.assert_allclose(got[b, :, :, m], fd, atol=1e-8,
                                           err_msg=f"increment {b}, direction {m}")


def test_bad_hessian_arguments_name_the_problem(robots):
    ref = robots["so_tree"]
    x, u = _state(ref, 1, seed=95, max_velocity=1.0)
    with pytest.raises(ValueError, match="rk4's Hessian is not provided"):
        ref.plant_step_hessian(x, u, 0.01, "rk4")
    with pytest.raises(ValueError, match="dt must be a positive finite time step"):
        ref.plant_step_hessian(x, u, 0.0, "euler")
    with pytest.raises(ValueError, match="x has width 18"):
        ref.plant_step_hessian(x[:, :-1], u, 0.01)
