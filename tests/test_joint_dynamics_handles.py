"""Joint dynamics through the handles: `register_robot(use_joint_dynamics=...,
runtime_joint_dynamics=...)`, `set_joint_dynamics` (exclusive admission, a model version
bump, refused stale torch backwards), bad tables, and the GPU build (tag `gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built")

from artifact_harness import states_in  # noqa: E402
from support import cuda_available, random_states, scaled_error  # noqa: E402
from test_joint_dynamics import DAMPING, FRICTION, iiwa_urdf, model_of, reference  # noqa: E402

import grid_rbd  # noqa: E402

ALGORITHMS = ["inverse_dynamics", "forward_dynamics", "inverse_dynamics_gradient",
              "forward_dynamics_gradient"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("grid_rbd_store")


def _register(tmp_path, device="cpu", backend="numpy", **kw):
    """The runtime-table build (one store entry per module: the store caches it)."""
    return grid_rbd.register_robot(
        "iiwa_jd", urdf_string=iiwa_urdf(DAMPING, FRICTION), dtype="float64",
        algorithm_list=ALGORITHMS, device=device, backend=backend,
        cache_dir=tmp_path, runtime_joint_dynamics=True, friction_model="tanh",
        friction_width=0.3, strategy="thread", **kw)


def _check(h, ref, s, tol):
    s = states_in(s, h.dtype)  # the handle's dtype; the reference sees the same values
    assert scaled_error(h.inverse_dynamics(s.q, s.qd, s.qdd),
                        ref.inverse_dynamics(s.q, s.qd, s.qdd)) < tol
    assert scaled_error(h.forward_dynamics(s.q, s.qd, s.u),
                        ref.forward_dynamics(s.q, s.qd, s.u)) < tol
    assert scaled_error(h.inverse_dynamics_gradient(s.q, s.qd, s.qdd),
                        ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)) < tol
    assert scaled_error(h.forward_dynamics_gradient(s.q, s.qd, s.u),
                        ref.forward_dynamics_gradient(s.q, s.qd, s.u)) < tol


def _edit_and_check(h, tol):
    model = model_of()
    s = random_states(model, 8, seed=7, max_velocity=2.0)
    ref, _ = reference(model, "tanh", 0.3)
    _check(h, ref, s, tol)
    got = h.get_joint_dynamics()
    assert np.allclose(got["damping"], DAMPING) and np.allclose(got["friction"], FRICTION)
    damping = np.array([0.05, 1.5, 0.0, 2.0, 0.7, 0.3, 0.9])
    friction = np.array([0.3, 0.0, 2.5, 0.1, 0.4, 1.2, 0.6])
    before = h.model_version
    after = h.set_joint_dynamics(damping=damping, friction=friction)
    assert after > before and h.model_version == after
    ref2, _ = reference(model_of(list(damping), list(friction)), "tanh", 0.3)
    _check(h, ref2, s, tol)
    h.set_joint_dynamics(friction=np.zeros(7))  # damping kept
    assert np.allclose(h.get_joint_dynamics()["damping"], damping)


def test_numpy_handle_follows_set_joint_dynamics(store):
    h = _register(store)
    assert h.runtime_joint_dynamics
    _edit_and_check(h, 1e-9)


@pytest.mark.parametrize("bad, message", [
    ({"damping": np.ones(6)}, "has shape (6,)"),
    ({"damping": -np.ones(7)}, "non-negative"),
    ({"friction": np.full(7, np.nan)}, "finite"),
    ({"friction": np.array(["a"] * 7)}, "expected real numbers"),
])
def test_bad_tables_are_refused(store, bad, message):
    h = _register(store)
    version = h.model_version
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        h.set_joint_dynamics(**bad)
    assert h.model_version == version


def test_baked_build_refuses_set_joint_dynamics(tmp_path):
    h = grid_rbd.register_robot("iiwa_jd_baked", urdf_string=iiwa_urdf(DAMPING, FRICTION),
                                dtype="float64", algorithm_list=["inverse_dynamics"],
                                device="cpu", cache_dir=tmp_path, use_joint_dynamics=True,
                                strategy="thread")
    model = model_of()
    s = random_states(model, 4, seed=8)
    ref, _ = reference(model)
    assert scaled_error(h.inverse_dynamics(s.q, s.qd, s.qdd),
                        ref.inverse_dynamics(s.q, s.qd, s.qdd)) < 1e-9
    with pytest.raises(RuntimeError, match="runtime_joint_dynamics=True"):
        h.set_joint_dynamics(damping=np.zeros(7))
    with pytest.raises(ValueError, match="friction_model='sign' has none"):
        grid_rbd.register_robot("x", urdf_string=iiwa_urdf(DAMPING, FRICTION), device="cpu",
                                cache_dir=tmp_path, use_joint_dynamics=True,
                                friction_width=0.1)


def test_torch_backward_after_set_joint_dynamics_is_refused(store):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    h = _register(store, backend="torch")
    s = random_states(model_of(), 4, seed=9, max_velocity=2.0)
    q, qd, u = (torch.tensor(x, requires_grad=True) for x in (s.q, s.qd, s.u))
    before = h.model_version
    qdd = h.forward_dynamics(q, qd, u)
    after = h.set_joint_dynamics(damping=np.full(7, 0.9))
    with pytest.raises(RuntimeError, match=rf"model mutated between forward and backward "
                                           rf"\(version {before} -> {after}\)"):
        qdd.sum().backward()
    qdd = h.forward_dynamics(q, qd, u)
    qdd.sum().backward()
    jac = h.numpy.forward_dynamics_gradient(s.q, s.qd, s.u)
    assert scaled_error(qd.grad.numpy(), jac[:, :, 7:].sum(axis=1)) < 1e-9


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no usable CUDA GPU (tag gpu: run on the "
                    "GPU machine)")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gpu_joint_dynamics_every_strategy(tmp_path, dtype):
    tol = 1e-9 if dtype == "float64" else 2e-3
    for strategy in ("thread", "warp", "block"):
        h = grid_rbd.register_robot(
            f"iiwa_jd_{strategy}", urdf_string=iiwa_urdf(DAMPING, FRICTION), dtype=dtype,
            algorithm_list=ALGORITHMS, device="cuda", cache_dir=tmp_path,
            runtime_joint_dynamics=True, friction_model="tanh", friction_width=0.3,
            strategy=strategy)
        _edit_and_check(h, tol)


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_fused_step_gradients_follow_the_joint_dynamics(store, integrator):
    """The plant profile's fused step gradient on a build with joint dynamics (damping and
    tanh friction from the run-time table): every variant of the kernel (thread and the
    level forms of emit.plant_level; the tangents form is not built with joint dynamics)
    against the reference with the same joint dynamics, which differs from the one
    without them."""
    h = grid_rbd.register_robot(
        "iiwa_jd_plant", urdf_string=iiwa_urdf(DAMPING, FRICTION), dtype="float64",
        algorithm_list=["plant"], device="cpu", cache_dir=store,
        runtime_joint_dynamics=True, friction_model="tanh", friction_width=0.3)
    model = model_of()
    s = random_states(model, 6, seed=11, max_velocity=2.0)
    ref, plain = reference(model, "tanh", 0.3)
    x = np.concatenate([s.q, s.qd], axis=1)
    want = ref.plant_step_gradient(x, s.u, 0.01, integrator)
    assert scaled_error(plain.plant_step_gradient(x, s.u, 0.01, integrator), want) > 1e-4
    kernel = f"plant_step_gradient_{integrator}"
    ctx = h.context()
    try:
        variants = tuple(ctx.variants(kernel))
        assert {"thread", "warp", "block"} <= set(variants), variants
        for variant in variants:
            ctx.set_variant_for(kernel, variant)
            error = scaled_error(ctx.plant_step_gradient(x, s.u, 0.01, integrator), want)
            assert error < 1e-9, (variant, error)
    finally:
        ctx.close()
        h.close()
