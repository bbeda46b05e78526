"""The chart the plant layer integrates on comes from the artifact's recorded one, not from
counting coordinates: a fixed base with one ball joint and an arm with an inner floating
joint both have nq == nv + 1, like a free-flyer root, and the handles (numpy, torch, JAX:
one `PlantMethods`) refuse them by name instead of moving `q[3:7]` as a quaternion; a
URDF whose root joint is `floating` (floating_base=False) is a free-flyer root and steps
as the float64 reference does, its gradient against central differences on the chart."""

from __future__ import annotations

import numpy as np
import pytest
from joint_type_robots import _joint, _link, _robot, states

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd.reference import configuration

INTEGRATORS = ("euler", "semi_implicit_euler", "rk4")
DYNAMICS = ["forward_dynamics", "forward_dynamics_gradient", "minv"]
DT = 0.01

# A fixed base, a revolute joint, a ball joint, two revolute joints: nq 7, nv 6.
BALL_ARM = _robot("ball_arm", _link("base"), _link("a"), _link("b"), _link("c"), _link("d"),
                  _joint("j1", "base", "a"), _joint("ball", "a", "b", "spherical"),
                  _joint("j3", "b", "c", axis="1 0 0"), _joint("j4", "c", "d", axis="0 1 0"))
# A revolute joint, then a floating joint: an inner free flyer, nq 8, nv 7.
INNER_FLYER = _robot("inner_flyer", _link("base"), _link("a"), _link("b"), _link("c"),
                     _joint("j1", "base", "a"), _joint("fly", "a", "b", "floating"),
                     _joint("j3", "b", "c", axis="1 0 0"))
# The URDF's own root joint is floating (no floating_base=True): a free-flyer root.
ROOT_FLYER = _robot("root_flyer", _link("world", 0.0), _link("base"), _link("a"), _link("b"),
                    _joint("fly", "world", "base", "floating"), _joint("j1", "base", "a"),
                    _joint("j2", "a", "b", axis="1 0 0"))
ROBOTS = {"ball_arm": BALL_ARM, "inner_flyer": INNER_FLYER, "root_flyer": ROOT_FLYER}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    store = tmp_path_factory.mktemp("plant_charts")
    out = {}
    for name, urdf in ROBOTS.items():
        path = store / f"{name}.urdf"
        path.write_bytes(urdf)
        handle = grid_rbd.register_robot(f"{name}_charts", urdf_path=str(path), device="cpu",
                                         dtype="float64", algorithm_list=DYNAMICS,
                                         cache_dir=store)
        out[name] = (handle, reference.load(path))
    yield out
    for handle, _ in out.values():
        handle.close()


def _state(ref, batch: int, seed: int):
    q, qd, _, u = states(ref.model, batch, seed, ref.nq, ref.nv)
    return np.concatenate([q, qd], axis=1), u


def _refused(handle, joint: str, torch=None):
    x = np.zeros((2, handle.nq + handle.nv))
    u = np.zeros((2, handle.nv))
    if torch is not None:
        x, u = torch.from_numpy(x), torch.from_numpy(u)
    calls = {
        "plant_step": lambda: handle.plant_step(x, u, DT),
        "plant_step_gradient": lambda: handle.plant_step_gradient(x, u, DT, "rk4"),
        "plant_step_hessian": lambda: handle.plant_step_hessian(x, u, DT),
        "integrator": lambda: handle.integrator(x, u, DT, steps=2),
        "quadratic_state_cost": lambda: handle.quadratic_state_cost(x, x, 1.0),
    }
    for method, call in calls.items():
        with pytest.raises(ValueError, match=f"{method} is provided for a vector "
                           f"configuration and a free-flyer root; .*{joint}"):
            call()


@pytest.mark.parametrize("robot, joint", [("ball_arm", r"spherical at q\[1\], v\[1\]"),
                                          ("inner_flyer", r"free_flyer at q\[1\], v\[1\]")])
def test_other_charts_with_one_more_coordinate_are_refused(built, robot, joint):
    handle, ref = built[robot]
    assert handle.nq == handle.nv + 1 == ref.nq
    _refused(handle, joint)
    # What the refusal stands in for: the reference steps these robots on their chart.
    x, u = _state(ref, 2, seed=1)
    G = ref.plant_step_gradient(x, u, DT, "semi_implicit_euler")
    np.testing.assert_allclose(G, _central_differences(ref, x, u, "semi_implicit_euler"),
                               rtol=1e-6, atol=1e-6)


def test_torch_and_jax_views_refuse_too(built):
    handle, _ = built["ball_arm"]
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    _refused(TorchRobotHandle(handle), "spherical", torch)
    pytest.importorskip("jax", reason="jax is not installed")
    from grid_rbd.jax import JaxRobotHandle
    _refused(JaxRobotHandle(handle), "spherical")


def _central_differences(ref, x, u, integrator: str, h: float = 1e-6) -> np.ndarray:
    """`(B, 2nv, 3nv)`: the step's Jacobian in the tangent, `z = [dq, dqd, du]` acting as
    `(q (+) dq, qd + dqd, u + du)` and the outputs differenced on the chart at `x'`."""
    model, nq, nv = ref.model, ref.nq, ref.nv
    q, qd = x[:, :nq], x[:, nq:]

    def step(dz):
        moved = np.concatenate([configuration.integrate(model, q, dz[:, :nv]),
                                qd + dz[:, nv:2 * nv]], 1)
        return ref.plant_step(moved, u + dz[:, 2 * nv:], DT, integrator)

    out = np.zeros((len(x), 2 * nv, 3 * nv))
    for k in range(3 * nv):
        dz = np.zeros((len(x), 3 * nv))
        dz[:, k] = h
        plus, minus = step(dz), step(-dz)
        out[:, :nv, k] = configuration.difference(model, minus[:, :nq], plus[:, :nq]) / (2 * h)
        out[:, nv:, k] = (plus[:, nq:] - minus[:, nq:]) / (2 * h)
    return out


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_a_root_floating_joint_steps_on_the_free_flyer_chart(built, integrator):
    handle, ref = built["root_flyer"]
    assert ref.model.joints[0].type.value == "free_flyer" and handle.nq == handle.nv + 1
    x, u = _state(ref, 4, seed=2)
    np.testing.assert_allclose(handle.plant_step(x, u, DT, integrator),
                               ref.plant_step(x, u, DT, integrator), rtol=1e-11, atol=1e-11)
    G = handle.plant_step_gradient(x, u, DT, integrator)
    np.testing.assert_allclose(G, ref.plant_step_gradient(x, u, DT, integrator),
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(G, _central_differences(ref, x, u, integrator),
                               rtol=1e-6, atol=1e-6)
    want = x
    for _ in range(3):
        want = ref.plant_step(want, u, DT, integrator)
    np.testing.assert_allclose(handle.integrator(x, u, DT, steps=3, integrator_type=integrator),
                               want, rtol=1e-10, atol=1e-10)
