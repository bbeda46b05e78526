"""The plant handles' per-call inputs (issue 16, the handle's overhead): the fused step
gradients read the state `x` itself (a `(B, nq + nv)` port, no split into `q`, `qd`) and a
`(B, 1)` column of `dt` the handle keeps (`grid_rbd._step_inputs.StepColumns`); several
steps of `integrator` keep the state split between them. Checked on a float64 CPU build
of iiwa14 against the float64 reference, and bit for bit against the kernel called with
a fresh column, on numpy, torch and JAX: when `dt` or the batch changes between calls,
when the caller changes an input or a result afterwards, and with more step lengths than
the cache keeps."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd._step_inputs import StepColumns, step_columns

FUSED = ("euler", "semi_implicit_euler")
KERNEL = {i: f"plant_step_gradient_{i}" for i in FUSED}
# (batch, dt) between consecutive calls: dt changes, the batch changes, both come back
CALLS = [(5, 0.01), (5, 0.01), (5, 0.02), (3, 0.02), (5, 0.01), (1, 0.005), (5, 0.02)]


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    h = grid_rbd.register_robot("iiwa14_step_inputs", urdf_path=str(ROBOTS["iiwa14"].path),
                                dtype="float64", algorithm_list=["core", "plant"],
                                device="cpu", cache_dir=tmp_path_factory.mktemp("store"))
    yield h
    h.close()


@pytest.fixture(scope="module")
def ref():
    return reference.load(ROBOTS["iiwa14"].path)


def _state(ref, batch, seed):
    s = random_states(ref.model, batch, seed=seed, max_velocity=2.0)
    return np.concatenate([s.q, s.qd], axis=1), 0.1 * s.u


def test_the_kernels_take_the_state(handle):
    import inspect
    for name in KERNEL.values():
        assert list(inspect.signature(getattr(handle, name)).parameters) == \
            ["x", "u", "dt", "gravity", "out"]
    with pytest.raises(ValueError, match=r"^x has width 13; this robot's width nq \+ nv "
                                         r"is 14$"):
        handle.plant_step_gradient_euler(np.zeros((2, 13)), np.zeros((2, 7)),
                                         np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"^x has width 13; the state \[q, qd\] of this "
                                         r"robot has nq \+ nv = 14$"):
        handle.plant_step_gradient(np.zeros((2, 13)), np.zeros((2, 7)), 0.01)


@pytest.mark.parametrize("integrator", FUSED)
def test_numpy_dt_and_batch_changing_between_calls(handle, ref, integrator):
    kernel = getattr(handle, KERNEL[integrator])
    for k, (batch, dt) in enumerate(CALLS):
        x, u = _state(ref, batch, seed=200 + k)
        G = handle.plant_step_gradient(x, u, dt, integrator)
        assert np.array_equal(G, kernel(x, u, np.full((batch, 1), dt)))
        np.testing.assert_allclose(G, ref.plant_step_gradient(x, u, dt, integrator),
                                   rtol=1e-9, atol=1e-9)
    one = handle.plant_step_gradient(x[0], u[0], 0.03, integrator)
    np.testing.assert_allclose(one, ref.plant_step_gradient(x[:1], u[:1], 0.03,
                                                            integrator)[0],
                               rtol=1e-9, atol=1e-9)
    columns = step_columns(handle)
    assert 0 < len(columns) <= StepColumns.SIZE
    for column in columns._columns.values():  # private and read-only
        assert not column.flags.writeable and not np.shares_memory(column, G)


def test_numpy_inputs_and_results_changed_afterwards(handle, ref):
    """The handle keeps nothing of the caller's: an input changed in place after a call,
    or a result overwritten, changes nothing the next call computes."""
    x, u = _state(ref, 4, seed=210)
    G = handle.plant_step_gradient(x, u, 0.01)
    want = ref.plant_step_gradient(x, u, 0.01)
    G[:] = np.nan  # the result is the caller's to write
    x[:, 7:] *= -2.0
    u += 1.0
    again = handle.plant_step_gradient(x, u, 0.01)
    np.testing.assert_allclose(again, ref.plant_step_gradient(x, u, 0.01), rtol=1e-9,
                               atol=1e-9)
    assert not np.allclose(again, want)
    with pytest.raises(ValueError, match="read-only"):
        next(iter(step_columns(handle)._columns.values()))[0, 0] = 1.0


def test_the_cache_keeps_a_bounded_number_of_columns(handle, ref):
    x, u = _state(ref, 2, seed=220)
    for k in range(3 * StepColumns.SIZE):
        dt = 0.001 * (k + 1)
        np.testing.assert_allclose(handle.plant_step_gradient(x, u, dt),
                                   ref.plant_step_gradient(x, u, dt), rtol=1e-9, atol=1e-9)
    assert len(step_columns(handle)) == StepColumns.SIZE


def test_torch(handle, ref):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(handle)
    for k, (batch, dt) in enumerate(CALLS):
        x, u = _state(ref, batch, seed=230 + k)
        # a strided x (a view into a wider tensor), every other call requiring grad
        wide = torch.from_numpy(np.concatenate([x, np.ones((batch, 3))], 1))
        xt = wide.requires_grad_(k % 2 == 1)[:, :14]
        ut = torch.from_numpy(u)
        for integrator in FUSED:
            G = th.plant_step_gradient(xt, ut, dt, integrator)
            assert not G.requires_grad
            fresh = torch.full((batch, 1), dt, dtype=torch.float64)
            assert torch.equal(G, getattr(th, KERNEL[integrator])(
                xt.detach().contiguous(), ut, fresh))
            np.testing.assert_allclose(G.numpy(), ref.plant_step_gradient(x, u, dt,
                                                                          integrator),
                                       rtol=1e-9, atol=1e-9)
    x, u = _state(ref, 3, seed=240)
    xt, ut = torch.from_numpy(x.copy()), torch.from_numpy(u.copy())
    first = th.plant_step_gradient(xt, ut, 0.01)
    xt.mul_(0.5)
    ut.add_(2.0)
    first.zero_()
    np.testing.assert_allclose(th.plant_step_gradient(xt, ut, 0.01).numpy(),
                               ref.plant_step_gradient(0.5 * x, u + 2.0, 0.01),
                               rtol=1e-9, atol=1e-9)
    assert len(step_columns(th)) <= StepColumns.SIZE


def test_jax(handle, ref):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from grid_rbd.jax import JaxRobotHandle
    jh = JaxRobotHandle(handle)
    for k, (batch, dt) in enumerate(CALLS):
        x, u = _state(ref, batch, seed=250 + k)
        for integrator in FUSED:
            G = jh.plant_step_gradient(jnp.asarray(x), u, dt, integrator)
            direct = getattr(jh, KERNEL[integrator])(jnp.asarray(x), jnp.asarray(u),
                                                     jnp.full((batch, 1), dt))
            assert np.array_equal(np.asarray(G), np.asarray(direct))
            traced = jax.jit(lambda xx, uu, i=integrator, d=dt:
                             jh.plant_step_gradient(xx, uu, d, i))(x, u)
            assert np.array_equal(np.asarray(traced), np.asarray(G))
            np.testing.assert_allclose(np.asarray(G),
                                       ref.plant_step_gradient(x, u, dt, integrator),
                                       rtol=1e-9, atol=1e-9)
    # one compiled call per kernel and gravity; dt is an argument of it, not a constant
    assert len(jh._fused_steps) == 2
    assert all(call._cache_size() == len({b for b, _ in CALLS})
               for call in jh._fused_steps.values())


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler", "rk4"])
def test_integrator_is_repeated_plant_steps(handle, ref, integrator):
    """`integrator` keeps the state split between its steps: the same numbers as that
    many `plant_step` calls, bit for bit (numpy and torch)."""
    x, u = _state(ref, 4, seed=260)
    want = x
    for _ in range(3):
        want = handle.plant_step(want, u, 0.01, integrator)
    assert np.array_equal(handle.integrator(x, u, 0.01, 3, integrator), want)
    several = x
    for _ in range(3):
        several = ref.plant_step(several, u, 0.01, integrator)
    np.testing.assert_allclose(want, several, rtol=1e-10, atol=1e-10)
    assert np.array_equal(handle.integrator(x[0], u[0], 0.01, 3, integrator), want[0])
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(handle)
    xt, ut = torch.from_numpy(x), torch.from_numpy(u)
    step = xt
    for _ in range(3):
        step = th.plant_step(step, ut, 0.01, integrator)
    assert torch.equal(th.integrator(xt, ut, 0.01, 3, integrator), step)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        handle.integrator(x, u, 0.01, 0, integrator)
