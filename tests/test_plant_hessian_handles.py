"""`plant_step_hessian` on the numpy, torch and JAX handles of CPU builds (the `fdsva_so`
kernel's blocks and, for a free flyer under semi-implicit euler, the core kernels,
assembled by `grid_rbd._step_hessian`) against the float64 reference
(tests/test_plant_hessian.py checks it against finite differences and Pinocchio): a
floating tree in float64 and float32, iiwa14 in float32; single states; forward-only
on torch and JAX; the refusals (rk4, ball and planar joints on a handle); and (tag
`gpu`) the torch handle of a CUDA build, its output on the device."""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import round_states, tolerance
from joint_type_robots import BALL_CHAIN
from support import ROBOTS, random_states
from test_second_order_kernels import FLOATING_TREE

import grid_rbd
import grid_rbd.reference as reference

BATCH = 5
DT = 0.05
INTEGRATORS = ("euler", "semi_implicit_euler")
CASES = [("so_tree", "float64"), ("so_tree", "float32"), ("iiwa14", "float32")]


@pytest.fixture(scope="module")
def store(shared_store):
    """The session store (tests/conftest.py): test_second_order_kernels registers iiwa14
    in float32 with these algorithms too, compiled once per session."""
    return shared_store


@pytest.fixture(scope="module")
def urdfs(tmp_path_factory):
    """A folder for the URDFs written here (the store holds only what it publishes)."""
    return tmp_path_factory.mktemp("plant_hessian_urdfs")


@pytest.fixture(scope="module", params=CASES, ids=[f"{r}-{d}" for r, d in CASES])
def case(request, store, urdfs):
    robot, dtype = request.param
    if robot == "so_tree":
        path, floating = urdfs / "so_tree.urdf", True
        path.write_text(FLOATING_TREE)
    else:
        path, floating = ROBOTS[robot].path, ROBOTS[robot].floating_base
    handle = grid_rbd.register_robot(f"{robot}_hessian_{dtype}", urdf_path=str(path),
                                     floating_base=floating, dtype=dtype, device="cpu",
                                     algorithm_list=["core", "second_order"],
                                     cache_dir=store)
    ref = reference.load(path, floating_base=floating)
    s = round_states(random_states(ref.model, BATCH, seed=17, max_velocity=6.0), dtype)
    x = np.concatenate([s.q, s.qd], axis=1)
    u = 0.2 * s.u
    # the reference sees exactly the inputs the kernels do
    u = u.astype(dtype).astype(np.float64)
    yield handle, ref, x, u, np.dtype(dtype)
    handle.close()


def _tol(dtype, ref, x):
    # fdsva_so is a solve (Minv) twice over: its float32 error scales with cond(M)^2
    if dtype == np.float32:
        return 3 * tolerance(dtype, "forward_dynamics", ref, x[:, :ref.nq])
    return 1e-9


def _assert_rows_close(got, want, nv, tol, what):
    """Configuration rows and velocity rows each against their own scale, per state."""
    for rows, name in ((slice(0, nv), "q' rows"), (slice(nv, 2 * nv), "qd' rows")):
        g = np.asarray(got, dtype=np.float64)[:, rows].reshape(len(want), -1)
        w = want[:, rows].reshape(len(want), -1)
        scale = np.abs(w).max(axis=1)
        err = np.abs(g - w).max(axis=1)
        assert np.all(err <= tol * scale), f"{what}, {name}: {err / scale} > {tol:.1e}"


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_numpy_handle_matches_the_reference(case, integrator):
    handle, ref, x, u, dtype = case
    want = ref.plant_step_hessian(x, u, DT, integrator)
    got = handle.plant_step_hessian(x.astype(dtype), u.astype(dtype), DT, integrator)
    assert got.shape == (BATCH, 2 * ref.nv, 3 * ref.nv, 3 * ref.nv)
    assert got.dtype == np.float64  # assembled in float64 on a float32 build too
    _assert_rows_close(got, want, ref.nv, _tol(dtype, ref, x), f"numpy {integrator}")
    one = handle.plant_step_hessian(x[1].astype(dtype), u[1].astype(dtype), DT, integrator)
    assert one.shape == want.shape[1:]
    _assert_rows_close(one[None], want[1:2], ref.nv, _tol(dtype, ref, x), "a single state")


def test_torch_handle_matches_the_reference_and_is_forward_only(case):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    handle, ref, x, u, dtype = case
    th = TorchRobotHandle(handle)
    xt, ut = torch.from_numpy(x.astype(dtype)), torch.from_numpy(u.astype(dtype))
    for integrator in INTEGRATORS:
        got = th.plant_step_hessian(xt, ut, DT, integrator)
        assert isinstance(got, torch.Tensor) and got.dtype == th.dtype
        assert got.device == th.torch_device
        _assert_rows_close(got.numpy(), ref.plant_step_hessian(x, u, DT, integrator), ref.nv,
                           _tol(dtype, ref, x), f"torch {integrator}")
    with pytest.raises(RuntimeError, match="plant_step_hessian is forward-only"):
        th.plant_step_hessian(xt.clone().requires_grad_(True), ut, DT)
    with torch.no_grad():
        quiet = th.plant_step_hessian(xt.clone().requires_grad_(True), ut, DT)
    np.testing.assert_array_equal(quiet.numpy(), th.plant_step_hessian(xt, ut, DT).numpy())


def test_jax_handle_matches_the_reference_and_is_forward_only(case):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from grid_rbd.jax import JaxRobotHandle
    handle, ref, x, u, dtype = case
    jh = JaxRobotHandle(handle)
    xj, uj = jnp.asarray(x.astype(dtype)), jnp.asarray(u.astype(dtype))
    for integrator in INTEGRATORS:
        want = ref.plant_step_hessian(x, u, DT, integrator)
        got = jh.plant_step_hessian(xj, uj, DT, integrator)
        assert isinstance(got, jax.Array) and got.dtype == dtype
        _assert_rows_close(np.asarray(got), want, ref.nv, _tol(dtype, ref, x),
                           f"jax {integrator}")
        jitted = jax.jit(lambda a, b, i=integrator: jh.plant_step_hessian(a, b, DT, i))
        _assert_rows_close(np.asarray(jitted(xj, uj)), want, ref.nv, _tol(dtype, ref, x),
                           f"jax.jit {integrator}")
    with pytest.raises(ValueError, match="cannot be differentiated"):
        jax.grad(lambda b: jnp.sum(jh.plant_step_hessian(xj, b, DT)))(uj)


def test_refusals_name_the_problem(case, store, urdfs):
    handle, ref, x, u, dtype = case
    with pytest.raises(ValueError, match="rk4's Hessian is not provided"):
        handle.plant_step_hessian(x.astype(dtype), u.astype(dtype), DT, "rk4")
    with pytest.raises(ValueError, match="dt must be a positive finite time step"):
        handle.plant_step_hessian(x.astype(dtype), u.astype(dtype), -DT)
    if dtype != np.float64 or ref.nq == ref.nv:
        return
    path = urdfs / "ball_chain.urdf"
    path.write_bytes(BALL_CHAIN)
    ball = grid_rbd.register_robot("ball_chain_hessian", urdf_path=str(path), device="cpu",
                                   algorithm_list=["forward_dynamics"], cache_dir=store)
    try:
        with pytest.raises(ValueError, match="has ball, planar or inner free-flyer joints"):
            ball.plant_step_hessian(np.zeros((1, ball.nq + ball.nv)), np.zeros((1, ball.nv)),
                                    DT)
    finally:
        ball.close()


@pytest.mark.gpu
def test_torch_handle_on_cuda_tensors(tmp_path):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    import grid_rbd.torch as gtorch
    path = tmp_path / "so_tree.urdf"
    path.write_text(FLOATING_TREE)
    th = grid_rbd.register_robot("so_tree_hessian_cuda", urdf_path=str(path),
                                 floating_base=True, dtype="float64", backend="torch",
                                 device="cuda", algorithm_list=["core", "second_order"],
                                 cache_dir=tmp_path)
    assert isinstance(th, gtorch.TorchRobotHandle)
    ref = reference.load(path, floating_base=True)
    s = random_states(ref.model, 37, seed=19, max_velocity=6.0)
    x, u = np.concatenate([s.q, s.qd], axis=1), 0.2 * s.u
    xt, ut = torch.from_numpy(x).cuda(), torch.from_numpy(u).cuda()
    for integrator in INTEGRATORS:
        got = th.plant_step_hessian(xt, ut, DT, integrator)
        assert got.is_cuda and got.dtype == torch.float64
        _assert_rows_close(got.cpu().numpy(), ref.plant_step_hessian(x, u, DT, integrator),
                           ref.nv, 1e-9, f"cuda {integrator}")
    th.close()
