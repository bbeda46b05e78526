"""The JAX and torch backwards of forward/inverse dynamics through the reverse-mode
kernels (one launch per backward; see tests/test_vjp_kernels.py for the kernels): the
same cotangents as the Jacobian-kernel backward of the same artifact (which the handles
take when an f_ext is given, here zero), a stale forward refused, and the fallback on an
artifact built without the reverse-mode kernels.

CPU builds in CI; on a GPU machine the tensors live on CUDA (the `gpu` twins run there).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")

from support import ROBOTS, cuda_available, random_states  # noqa: E402

import grid_rbd  # noqa: E402
import grid_rbd.reference as reference  # noqa: E402

BASE = ("forward_dynamics", "aba", "inverse_dynamics", "forward_dynamics_gradient",
        "inverse_dynamics_gradient")
DEVICE = "cuda" if cuda_available() else "cpu"


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    """iiwa14 on a floating base (quaternion q), with and without the reverse-mode
    kernels."""
    cache = tmp_path_factory.mktemp("grid_rbd_store")
    spec = ROBOTS["iiwa14"]
    out = {}
    for name, extra in (("vjp", ("forward_dynamics_vjp", "inverse_dynamics_vjp")),
                        ("jacobians", ())):
        out[name] = grid_rbd.register_robot(
            f"iiwa14-fb-{name}", urdf_path=spec.path, floating_base=True, dtype="float64",
            runtime_inertia=True, max_batch_size=16, cache_dir=cache, device=DEVICE,
            algorithm_list=[*BASE, *extra])
    ref = reference.load(spec.path, floating_base=True)
    return out, ref


def _inputs(ref, seed: int = 4):
    s = random_states(ref.model, 5, seed=seed, max_velocity=2.0)
    q, qd, qdd, u = s.q.copy(), s.qd, s.qdd, s.u
    q[:, 3:7] *= 1.3  # off the unit sphere: the kernels read q / |q|
    rng = np.random.default_rng(seed)
    return q, qd, qdd, u, rng.uniform(-1, 1, qd.shape), np.zeros((5, 6 * ref.nb))


def test_default_profile_builds_the_reverse_mode_kernels():
    from grid_codegen.registry import PROFILES

    assert {"forward_dynamics_vjp", "inverse_dynamics_vjp"} <= set(PROFILES["core"])


def test_torch_backward_matches_the_jacobian_path(handles):
    torch = pytest.importorskip("torch")
    import grid_rbd.torch as grid_torch

    (hs, ref) = handles
    q, qd, qdd, u, w, zero_f = _inputs(ref)
    th = grid_torch.TorchRobotHandle(hs["vjp"])
    assert "forward_dynamics" in th._vjps and "inverse_dynamics" in th._vjps
    assert grid_torch.TorchRobotHandle(hs["jacobians"])._vjps == {}
    dev = th.torch_device

    def grads(method, f_ext, *values):
        xs = [torch.tensor(v, device=dev, requires_grad=True) for v in values]
        weights = torch.tensor(w, device=dev)
        extra = [torch.tensor(f_ext, device=dev)] if f_ext is not None else []
        if method == "inverse_dynamics":
            out = th.inverse_dynamics(xs[0], xs[1], torch.tensor(qdd, device=dev), *extra)
        else:
            out = getattr(th, method)(*xs, *extra)
        (out * weights).sum().backward()
        return [x.grad.cpu().numpy() for x in xs]

    for method, values in (("forward_dynamics", (q, qd, u)), ("aba", (q, qd, u)),
                           ("inverse_dynamics", (q, qd))):
        fast = grads(method, None, *values)  # reverse mode
        slow = grads(method, zero_f, *values)  # Jacobian kernels + ambient pullback
        for a, b, name in zip(fast, slow, ("q", "qd", "u"), strict=False):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9,
                                       err_msg=f"{method} d{name}")


def test_torch_stale_forward_is_refused_on_the_reverse_mode_path(handles):
    torch = pytest.importorskip("torch")
    import grid_rbd.torch as grid_torch

    (hs, ref) = handles
    q, qd, _, u, _, _ = _inputs(ref, seed=7)
    th = grid_torch.TorchRobotHandle(hs["vjp"])
    dev = th.torch_device
    xs = [torch.tensor(v, device=dev, requires_grad=True) for v in (q, qd, u)]
    out = th.forward_dynamics(*xs)
    th.set_inertia_params(th.get_inertia_params())
    with pytest.raises(RuntimeError, match="model mutated between forward and backward"):
        out.sum().backward()


def test_jax_grad_matches_the_jacobian_path(handles):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import grid_rbd.jax as grid_jax

    (hs, ref) = handles
    q, qd, qdd, u, w, zero_f = _inputs(ref, seed=9)
    jh = grid_jax.JaxRobotHandle(hs["vjp"])
    weights = jnp.asarray(w)

    def loss_fd(f_ext):
        return lambda a, b, c: (weights * jh.forward_dynamics(a, b, c, f_ext)).sum()

    def loss_id(f_ext):
        return lambda a, b: (weights * jh.inverse_dynamics(a, b, jnp.asarray(qdd),
                                                           f_ext)).sum()

    for loss, args in ((loss_fd, (q, qd, u)), (loss_id, (q, qd))):
        argnums = tuple(range(len(args)))
        fast = jax.jit(jax.grad(loss(None), argnums=argnums))(*args)
        slow = jax.jit(jax.grad(loss(jnp.asarray(zero_f)), argnums=argnums))(*args)
        for a, b in zip(fast, slow, strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-9)
