"""Sensitivities to the inertial parameters (issue 14, item 3): the numpy, torch and JAX
`forward_dynamics_parameter_gradient` and the torch/JAX `inverse_dynamics_wrt_params`
and `forward_dynamics_wrt_params`, against central differences in the parameters of the
float64 reference (a model rebuilt from the perturbed parameters) and against the
reference's regressor.

CPU builds: iiwa14 with every algorithm (the q/qd/u cotangents need the gradient
kernels) and go2 with the few the parameter paths use.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen.model import Inertia, RobotModel
from grid_rbd.reference import ReferenceRobot

GO2_ALGORITHMS = ["forward_dynamics", "minv", "inverse_dynamics",
                  "inverse_dynamics_regressor"]


@pytest.fixture(scope="module")
def store(shared_store):
    """The session store (tests/conftest.py): test_second_order_kernels registers iiwa14
    in float64 with every algorithm too, compiled once per session."""
    return shared_store


@pytest.fixture(scope="module")
def handles(store):
    out = {
        "iiwa14": grid_rbd.register_robot(
            "iiwa14_params", urdf_path=str(ROBOTS["iiwa14"].path), dtype="float64",
            algorithm_list=["all"], device="cpu", cache_dir=store),
        "go2": grid_rbd.register_robot(
            "go2_params", urdf_path=str(ROBOTS["go2"].path), floating_base=True,
            dtype="float64", algorithm_list=GO2_ALGORITHMS, device="cpu", cache_dir=store),
    }
    yield out
    for h in out.values():
        h.close()


def _reference(robot: str) -> ReferenceRobot:
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


def _parameters(model: RobotModel) -> np.ndarray:
    return np.concatenate([b.inertia.dynamic_parameters() for b in model.bodies])


def _inertia(p: np.ndarray) -> Inertia:
    """The inverse of `Inertia.dynamic_parameters`."""
    m, c = p[0], p[1:4] / p[0]
    I0 = np.array([[p[4], p[5], p[7]], [p[5], p[6], p[8]], [p[7], p[8], p[9]]])
    return Inertia(m, c, I0 - m * (c @ c * np.eye(3) - np.outer(c, c)))


def _with_parameters(model: RobotModel, pi: np.ndarray) -> ReferenceRobot:
    bodies = [dataclasses.replace(b, inertia=_inertia(pi[10 * k:10 * k + 10]))
              for k, b in enumerate(model.bodies)]
    return ReferenceRobot(dataclasses.replace(model, bodies=tuple(bodies)))


def _fd_along(ref: ReferenceRobot, s, direction: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """`d qdd / d pi . direction` by central differences of the reference."""
    pi = _parameters(ref.model)
    plus = _with_parameters(ref.model, pi + h * direction).forward_dynamics(s.q, s.qd, s.u)
    minus = _with_parameters(ref.model, pi - h * direction).forward_dynamics(s.q, s.qd, s.u)
    return (plus - minus) / (2 * h)


def test_the_parameter_round_trip_is_exact():
    ref = _reference("go2")
    pi = _parameters(ref.model)
    np.testing.assert_allclose(_parameters(_with_parameters(ref.model, pi).model), pi,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("robot", ["iiwa14", "go2"])
def test_numpy_fd_parameter_gradient_matches_finite_differences(handles, robot):
    h, ref = handles[robot], _reference(robot)
    s = random_states(ref.model, 6, seed=40)
    G = h.forward_dynamics_parameter_gradient(s.q, s.qd, s.u)
    assert G.shape == (6, ref.nv, 10 * ref.nb)
    rng = np.random.default_rng(41)
    pi = _parameters(ref.model)
    for _ in range(3):
        direction = rng.standard_normal(pi.shape) * np.maximum(np.abs(pi), 1e-3)
        assert_scaled_close(G @ direction, _fd_along(ref, s, direction), 1e-5,
                            f"{robot}: -M^-1 Y . d")
    single = h.forward_dynamics_parameter_gradient(s.q[0], s.qd[0], s.u[0])
    np.testing.assert_allclose(single, G[0], rtol=1e-12, atol=1e-12)


def test_a_missing_kernel_names_the_profiles(store):
    h = grid_rbd.register_robot("iiwa14_core", urdf_path=str(ROBOTS["iiwa14"].path),
                                dtype="float64", algorithm_list=["forward_dynamics", "minv"],
                                device="cpu", cache_dir=store)
    s = random_states(_reference("iiwa14").model, 2, seed=42)
    with pytest.raises(RuntimeError, match="lacks inverse_dynamics_regressor.*'centroidal'"):
        h.forward_dynamics_parameter_gradient(s.q, s.qd, s.u)
    h.close()


def test_torch_wrt_params(handles):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th, ref = TorchRobotHandle(handles["iiwa14"]), _reference("iiwa14")
    s = random_states(ref.model, 5, seed=43)
    pi = _parameters(ref.model)
    w = np.random.default_rng(44).standard_normal((5, ref.nv))
    q = torch.from_numpy(s.q).requires_grad_(True)
    qd = torch.from_numpy(s.qd).requires_grad_(True)
    params = torch.from_numpy(pi.reshape(ref.nb, 10)).requires_grad_(True)
    tau = th.inverse_dynamics_wrt_params(q, qd, params)
    np.testing.assert_allclose(tau.detach().numpy(), ref.inverse_dynamics(s.q, s.qd),
                               rtol=1e-12, atol=1e-10)
    (tau * torch.from_numpy(w)).sum().backward()
    Y = ref.inverse_dynamics_regressor(s.q, s.qd)
    np.testing.assert_allclose(params.grad.numpy().reshape(-1),
                               np.einsum("bi,bij->j", w, Y), rtol=1e-9, atol=1e-9)
    q2 = torch.from_numpy(s.q).requires_grad_(True)
    qd2 = torch.from_numpy(s.qd).requires_grad_(True)
    (th.inverse_dynamics(q2, qd2) * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), q2.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(qd.grad.numpy(), qd2.grad.numpy(), rtol=1e-12, atol=1e-12)

    # forward dynamics, per-item parameters: each item's cotangent is its own row
    per_item = torch.from_numpy(np.tile(pi, (5, 1))).requires_grad_(True)
    u = torch.from_numpy(s.u).requires_grad_(True)
    qdd = th.forward_dynamics_wrt_params(torch.from_numpy(s.q), torch.from_numpy(s.qd), u,
                                         per_item)
    np.testing.assert_allclose(qdd.detach().numpy(), ref.forward_dynamics(s.q, s.qd, s.u),
                               rtol=1e-10, atol=1e-10)
    (qdd * torch.from_numpy(w)).sum().backward()
    direction = np.random.default_rng(45).standard_normal(pi.shape) * np.abs(pi)
    assert_scaled_close(per_item.grad.numpy() @ direction,
                        np.einsum("bi,bi->b", w, _fd_along(ref, s, direction)), 1e-5,
                        "torch FD parameter cotangent")
    assert u.grad is not None and torch.isfinite(u.grad).all()
    with pytest.raises(ValueError, match=r"params has shape \(7, 9\)"):
        th.inverse_dynamics_wrt_params(q, qd, torch.zeros(7, 9, dtype=torch.float64,
                                                          requires_grad=True))
    # without a parameter gradient asked, the plain forward is returned
    with torch.no_grad():
        plain = th.forward_dynamics_wrt_params(q, qd, u, params)
    np.testing.assert_allclose(plain.numpy(), ref.forward_dynamics(s.q, s.qd, s.u),
                               rtol=1e-10, atol=1e-10)


def test_torch_fd_wrt_params_on_a_floating_base(handles):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th, ref = TorchRobotHandle(handles["go2"]), _reference("go2")
    s = random_states(ref.model, 4, seed=46)
    pi = _parameters(ref.model)
    params = torch.from_numpy(pi).requires_grad_(True)
    w = np.random.default_rng(47).standard_normal((4, ref.nv))
    qdd = th.forward_dynamics_wrt_params(*(torch.from_numpy(x) for x in (s.q, s.qd, s.u)),
                                         params)
    (qdd * torch.from_numpy(w)).sum().backward()
    direction = np.random.default_rng(48).standard_normal(pi.shape) * np.abs(pi)
    want = float(np.einsum("bi,bi->", w, _fd_along(ref, s, direction)))
    got = float(params.grad.numpy() @ direction)
    assert abs(got - want) <= 1e-5 * max(1.0, abs(want)), (got, want)


def test_jax_wrt_params(handles):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from grid_rbd.jax import JaxRobotHandle
    jh, ref = JaxRobotHandle(handles["iiwa14"]), _reference("iiwa14")
    s = random_states(ref.model, 5, seed=49)
    pi = _parameters(ref.model)
    w = jnp.asarray(np.random.default_rng(50).standard_normal((5, ref.nv)))

    def id_loss(params, q, qd):
        return jnp.sum(w * jh.inverse_dynamics_wrt_params(q, qd, params))

    g_params, g_q = jax.jit(jax.grad(id_loss, argnums=(0, 1)))(jnp.asarray(pi), s.q, s.qd)
    Y = ref.inverse_dynamics_regressor(s.q, s.qd)
    np.testing.assert_allclose(np.asarray(g_params), np.einsum("bi,bij->j", np.asarray(w), Y),
                               rtol=1e-9, atol=1e-9)
    g_q_plain = jax.grad(lambda q: jnp.sum(w * jh.inverse_dynamics(q, s.qd)))(s.q)
    np.testing.assert_allclose(np.asarray(g_q), np.asarray(g_q_plain), rtol=1e-12,
                               atol=1e-12)

    def fd_loss(params):
        return jnp.sum(w * jh.forward_dynamics_wrt_params(s.q, s.qd, s.u, params))

    g = np.asarray(jax.grad(fd_loss)(jnp.asarray(pi)))
    direction = np.random.default_rng(51).standard_normal(pi.shape) * np.abs(pi)
    want = float(np.einsum("bi,bi->", np.asarray(w), _fd_along(ref, s, direction)))
    assert abs(g @ direction - want) <= 1e-5 * max(1.0, abs(want))
    G = jh.forward_dynamics_parameter_gradient(s.q, s.qd, s.u)
    assert G.shape == (5, ref.nv, 10 * ref.nb)
