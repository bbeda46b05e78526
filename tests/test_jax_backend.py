"""grid_rbd.jax: every method against the float64 reference (eager, under jax.jit, under
jax.vmap), the analytic VJPs against the reference gradients and against finite
differences (jax.test_util.check_grads, a non-unit quaternion included), the model-version
stamps across set_inertia_params, contexts, input validation, to_host, single states, the
grouped backward and the command-buffer view (the FFI handler's build and its copy of
the runtime's bridge: test_contexts_jax_bridge.py).

Builds (in the session store of tests/conftest.py; the CPU build, or the CUDA one where
JAX runs on a GPU): iiwa14 float64 with runtime_inertia and a small max_batch_size, go2
float64 (floating base). The module turns on JAX's 64-bit mode.
"""

from __future__ import annotations

import inspect
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="JAX is not installed (pip install -e '.[jax]')")
pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from artifact_harness import reference_case  # noqa: E402
from jax.test_util import check_grads  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402
from support import (  # noqa: E402
    ROBOTS,
    assert_scaled_close,
    random_states,
    robot_available,
)

import grid_rbd  # noqa: E402
import grid_rbd.jax as grid_jax  # noqa: E402
import grid_rbd.reference as reference  # noqa: E402
from grid_rbd._methods import METHODS  # noqa: E402
from grid_rbd.jax import _host  # noqa: E402

BATCH = 6
MAX_BATCH = 64
TOL = 1e-9
MUTATED = "model mutated between forward and backward"
CONFIGS = {
    "iiwa14": {"runtime_inertia": True, "max_batch_size": MAX_BATCH},
    "go2": {},
}
DIFFERENTIABLE = ("forward_dynamics", "aba", "inverse_dynamics", "end_effector_pose")
# What a refused launch raises: the handler's ffi::Error surfaces as JaxRuntimeError.
RUNTIME_ERRORS = (jax.errors.JaxRuntimeError, RuntimeError, ValueError)


def _jax_on_gpu() -> bool:
    return jax.default_backend() == "gpu"


@pytest.fixture(scope="module")
def cache(shared_store):
    """The session store (tests/conftest.py): on the CPU, iiwa14 is test_torch_backend's
    build and go2 test_handle_numpy's go2-f64, compiled once per session."""
    return shared_store


@pytest.fixture(scope="module")
def handles(cache):
    """Each robot registered once for JAX, on the platform JAX computes on."""
    device = "cuda" if _jax_on_gpu() else "cpu"

    def register(robot):
        spec = ROBOTS[robot]
        return robot, grid_jax.register_robot(robot, urdf_path=spec.path,
                                               floating_base=spec.floating_base,
                                               dtype="float64", device=device,
                                               cache_dir=cache, **CONFIGS[robot])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(register, [r for r in CONFIGS if robot_available(r)]))


@pytest.fixture(scope="module")
def refs():
    return {r: reference.load(ROBOTS[r].path, floating_base=ROBOTS[r].floating_base)
            for r in CONFIGS if robot_available(r)}


def _get(handles, refs, robot):
    if robot not in handles:
        pytest.skip(f"{robot} is not available (example-robot-data missing)")
    return handles[robot], refs[robot]


def _states(ref, batch=BATCH, seed=5):
    return random_states(ref.model, batch, seed=seed)


def _close(actual, expected, what, tol=TOL):
    assert_scaled_close(np.asarray(actual), np.asarray(expected), tol, what)


# -- values ----------------------------------------------------------------------------
FEXT = {m.name for m in METHODS if any(p.name == "f_ext" for p in m.inputs)}
CASES = [(m.name, f) for m in METHODS if m.profile == "core" for f in (False, True)
         if not f or m.name in FEXT]  # the centroidal profile: test_centroidal_kernels.py


@pytest.mark.parametrize("algorithm,f_ext", CASES,
                         ids=[f"{a}{'-fext' if f else ''}" for a, f in CASES])
@pytest.mark.parametrize("robot", list(CONFIGS))
def test_method_matches_reference(handles, refs, robot, algorithm, f_ext):
    h, ref = _get(handles, refs, robot)
    s = _states(ref)
    inputs, expected = reference_case(ref, algorithm, s, f_ext=f_ext)
    got = getattr(h, algorithm)(*inputs)
    assert isinstance(got, jax.Array) and got.dtype == jnp.float64
    assert got.shape == expected.shape
    _close(got, expected, f"{robot} {algorithm}")


@pytest.mark.parametrize("robot", list(CONFIGS))
def test_jit_matches_reference(handles, refs, robot):
    h, ref = _get(handles, refs, robot)
    s = _states(ref, seed=8)

    @jax.jit
    def everything(q, qd, qdd, u, fe):
        return {"id": h.rnea(q, qd, qdd, fe, gravity=-1.62), "fd": h.fd(q, qd, u),
                "aba": h.aba(q, qd, u, fe), "minv": h.minv(q), "crba": h.crba(q),
                "ee": h.end_effector_pose(q), "ee_grad": h.end_effector_pose_gradient(q),
                "fd_grad": h.forward_dynamics_gradient(q, qd, u, gravity=0.0),
                "id_grad": h.inverse_dynamics_gradient(q, qd, qdd, fe)}

    got = everything(s.q, s.qd, s.qdd, s.u, s.f_ext)
    expected = {"id": ref.inverse_dynamics(s.q, s.qd, s.qdd, s.f_ext, -1.62),
                "fd": ref.forward_dynamics(s.q, s.qd, s.u),
                "aba": ref.aba(s.q, s.qd, s.u, s.f_ext), "minv": ref.minv(s.q),
                "crba": ref.crba(s.q), "ee": ref.end_effector_pose(s.q),
                "ee_grad": ref.end_effector_pose_gradient(s.q),
                "fd_grad": ref.forward_dynamics_gradient(s.q, s.qd, s.u, None, 0.0),
                "id_grad": ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd, s.f_ext)}
    for key, value in expected.items():
        _close(got[key], value, f"{robot} jit {key}")


def test_vmap_folds_into_the_batch(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    outer = 3
    s = _states(ref, batch=outer * BATCH, seed=9)
    stack = lambda x: x.reshape(outer, BATCH, -1)  # noqa: E731
    q, qd, u = stack(s.q), stack(s.qd), stack(s.u)
    flat = h.forward_dynamics(s.q, s.qd, s.u)
    mapped = jax.jit(jax.vmap(h.forward_dynamics))(q, qd, u)
    assert mapped.shape == (outer, BATCH, h.nv)
    _close(mapped.reshape(-1, h.nv), flat, "vmap fd")
    # An unmapped input is broadcast; matrix outputs keep their per-item shape.
    shared = jax.vmap(h.forward_dynamics, in_axes=(0, None, 0))(q, s.qd[:BATCH], u)
    _close(shared[1], h.fd(q[1], s.qd[:BATCH], u[1]), "vmap fd, qd unmapped")
    minv = jax.vmap(h.minv)(q)
    assert minv.shape == (outer, BATCH, h.nv, h.nv)
    _close(minv.reshape(-1, h.nv, h.nv), ref.minv(s.q), "vmap minv")
    # Mapped over axis 1, nested twice.
    nested = jax.vmap(jax.vmap(h.crba), in_axes=1)(q.reshape(outer, BATCH, 1, -1))
    assert nested.shape == (BATCH, outer, 1, h.nv, h.nv)
    _close(nested.transpose(1, 0, 2, 3, 4).reshape(-1, h.nv, h.nv), ref.crba(s.q),
           "nested vmap crba")
    # Every row of a mapped stamp is written.
    _, stamps = jax.vmap(h.forward_dynamics_stamped)(q, qd, u)
    assert stamps.shape == (outer, 2)
    assert {grid_jax.stamp_value(row) for row in np.asarray(stamps)} == {h.model_version}


# -- gradients ---------------------------------------------------------------------------
def _chart_jacobian(q: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d[v_lin, omega]/d[p, quat] (B, 6, 7) of the free flyer's local chart at q, by central
    differences of v_lin = R0^T (p - p0), omega = log(R0^T R(quat / |quat|))."""
    out = np.zeros((q.shape[0], 6, 7))
    for b in range(q.shape[0]):
        p0, r0 = q[b, :3], Rotation.from_quat(q[b, 3:7])

        def chart(x, p0=p0, r0=r0):
            return np.concatenate([r0.inv().apply(x[:3] - p0),
                                   (r0.inv() * Rotation.from_quat(x[3:7])).as_rotvec()])

        for k in range(7):
            step = np.zeros(7)
            step[k] = eps
            out[b, :, k] = (chart(q[b, :7] + step) - chart(q[b, :7] - step)) / (2 * eps)
    return out


def _ambient(ref, q, ct_tangent):
    """The reference's tangent cotangent of q mapped to the configuration layout."""
    if ref.nq == ref.nv:
        return ct_tangent
    base = np.einsum("bi,bij->bj", ct_tangent[:, :6], _chart_jacobian(q))
    return np.concatenate([base, ct_tangent[:, 6:]], axis=1)


def _expected_cotangents(ref, method, s, ct):
    contract = lambda c, j: np.einsum("bi,bij->bj", c, j)  # noqa: E731
    nv = ref.nv
    if method in ("forward_dynamics", "aba"):
        jac = ref.forward_dynamics_gradient(s.q, s.qd, s.u, s.f_ext)
        return (contract(ct, jac[:, :, :nv]), contract(ct, jac[:, :, nv:]),
                contract(ct, ref.minv(s.q)), np.zeros_like(s.f_ext))
    if method == "inverse_dynamics":
        jac = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd, s.f_ext)
        return (contract(ct, jac[:, :, :nv]), contract(ct, jac[:, :, nv:]),
                np.zeros_like(s.qdd), np.zeros_like(s.f_ext))
    return (contract(ct, ref.end_effector_pose_gradient(s.q)),)


def _call_args(method, s):
    if method in ("forward_dynamics", "aba"):
        return (s.q, s.qd, s.u, s.f_ext)
    if method == "inverse_dynamics":
        return (s.q, s.qd, s.qdd, s.f_ext)
    return (s.q,)


@pytest.mark.parametrize("method", DIFFERENTIABLE)
@pytest.mark.parametrize("robot", list(CONFIGS))
def test_vjp_matches_reference_gradient(handles, refs, robot, method):
    h, ref = _get(handles, refs, robot)
    s = _states(ref, seed=13)
    args = _call_args(method, s)
    value, vjp = jax.vjp(getattr(h, method), *args)
    ct = np.random.default_rng(1).normal(size=value.shape)
    got = vjp(jnp.asarray(ct))
    expected = list(_expected_cotangents(ref, method, s, ct))
    expected[0] = _ambient(ref, s.q, expected[0])
    # The base block goes through a finite-difference chart Jacobian (error ~1e-9).
    tol_q = TOL if ref.nq == ref.nv else 1e-7
    _close(got[0], expected[0], f"{robot} {method} ct_q", tol_q)
    for k in range(1, len(args)):
        if not expected[k].any():
            assert not np.asarray(got[k]).any(), f"{method}: input {k} is a residual"
        else:
            _close(got[k], expected[k], f"{robot} {method} cotangent {k}")
    # jax.grad of a scalar loss, jitted, agrees with the VJP.
    grad = jax.jit(jax.grad(lambda q: jnp.vdot(ct, getattr(h, method)(q, *args[1:]))))
    _close(grad(s.q), got[0], f"{robot} {method} jit(grad)")


@pytest.mark.parametrize("method", DIFFERENTIABLE)
@pytest.mark.parametrize("robot", list(CONFIGS))
def test_check_grads_against_finite_differences(handles, refs, robot, method):
    h, ref = _get(handles, refs, robot)
    s = _states(ref, batch=2, seed=21)
    q = s.q.copy()
    if ref.nq != ref.nv:
        q[0, 3:7] *= 1.3  # a non-unit quaternion: the kernels see quat / |quat|
        q[1, 3:7] *= 0.8
    # Smaller forces and velocities keep finite differences well conditioned. qdd (and
    # f_ext) are residuals of inverse dynamics: closed over, not differentiated.
    f = getattr(h, method)
    if method == "inverse_dynamics":
        qdd = 0.1 * s.qdd
        f, args = (lambda q, qd: h.inverse_dynamics(q, qd, qdd)), (q, 0.1 * s.qd)
    elif method == "end_effector_pose":
        args = (q,)
    else:
        args = (q, 0.1 * s.qd, 0.1 * s.u)
    check_grads(f, args, order=1, modes=["rev"], eps=1e-6, atol=1e-5, rtol=1e-5)


def test_vmap_of_grad(handles, refs):
    h, ref = _get(handles, refs, "go2")
    outer = 2
    s = _states(ref, batch=outer * BATCH, seed=4)
    loss = lambda q, qd, u: jnp.sum(h.forward_dynamics(q, qd, u) ** 2)  # noqa: E731
    stack = lambda x: x.reshape(outer, BATCH, -1)  # noqa: E731
    mapped = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2))))(
        stack(s.q), stack(s.qd), stack(s.u))
    for k in range(outer):
        rows = slice(k * BATCH, (k + 1) * BATCH)
        one = jax.grad(loss, argnums=(0, 1, 2))(s.q[rows], s.qd[rows], s.u[rows])
        for a, b in zip(mapped, one, strict=True):
            _close(a[k], b, "vmap(grad) == grad per slice")


# -- stamps and mutation ---------------------------------------------------------------------
def _heavier(h, factor=1.25):
    table = h.get_inertia_params()
    table[:, 0] *= factor
    table[:, 1:] *= factor  # m c and the inertia scale with the mass
    return table


@pytest.mark.parametrize("method", DIFFERENTIABLE)
def test_backward_after_mutation_is_refused(handles, refs, method):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, seed=2)
    with h.context() as ctx:
        value, vjp = jax.vjp(getattr(ctx, method), *_call_args(method, s))
        jax.block_until_ready(value)  # the forward has run (and stamped) before the mutation
        before = ctx.model_version
        after = ctx.set_inertia_params(_heavier(ctx))
        assert after > before
        message = (f"{MUTATED} (version {before} -> {after}); recompute the forward")
        with pytest.raises(RUNTIME_ERRORS, match=re.escape(message)):
            jax.block_until_ready(vjp(jnp.ones_like(value)))
        # A forward recomputed after the mutation differentiates fine.
        value, vjp = jax.vjp(getattr(ctx, method), *_call_args(method, s))
        jax.block_until_ready(vjp(jnp.ones_like(value)))


def test_stamped_and_checked_twins(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, seed=6)
    with h.context() as ctx:
        qdd, stamp = jax.jit(ctx.forward_dynamics_stamped)(s.q, s.qd, s.u)
        assert stamp.dtype == jnp.uint32 and stamp.shape == (2,)
        assert grid_jax.stamp_value(stamp) == ctx.model_version
        _close(qdd, ref.forward_dynamics(s.q, s.qd, s.u), "stamped value")
        checked = jax.jit(ctx.forward_dynamics_gradient_checked)
        _close(checked(s.q, s.qd, s.u, stamp=stamp),
               ref.forward_dynamics_gradient(s.q, s.qd, s.u), "checked gradient")
        before, after = ctx.model_version, ctx.set_inertia_params(_heavier(ctx))
        with pytest.raises(RUNTIME_ERRORS, match=re.escape(f"(version {before} -> {after})")):
            jax.block_until_ready(checked(s.q, s.qd, s.u, stamp=stamp))
        with pytest.raises(TypeError, match="stamp must be the uint32"):
            ctx.fd_checked(s.q, s.qd, s.u, stamp=np.zeros(2, np.int64))
    assert inspect.signature(h.inverse_dynamics_checked).parameters["stamp"].kind == \
        inspect.Parameter.KEYWORD_ONLY


def test_jitted_grad_follows_a_mutation(handles, refs):
    """One compiled function stamps and checks within each execution, so after
    set_inertia_params it differentiates the new model."""
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, seed=7)
    ct = np.random.default_rng(3).normal(size=(BATCH, h.nv))
    with h.context() as ctx:
        grad = jax.jit(jax.grad(lambda q, qd: jnp.vdot(ct, ctx.fd(q, qd, s.u)),
                                argnums=(0, 1)))

        def expected():
            jac = ctx.numpy.forward_dynamics_gradient(s.q, s.qd, s.u)
            return (np.einsum("bi,bij->bj", ct, jac[:, :, :h.nv]),
                    np.einsum("bi,bij->bj", ct, jac[:, :, h.nv:]))

        old = grad(s.q, s.qd)
        for got, want in zip(old, expected(), strict=True):
            _close(got, want, "before the mutation")
        ctx.set_inertia_params(_heavier(ctx, 1.5))
        new = grad(s.q, s.qd)
        for got, want in zip(new, expected(), strict=True):
            _close(got, want, "after the mutation (new model)")
        assert not np.allclose(np.asarray(old[0]), np.asarray(new[0]))


def test_contexts_are_isolated(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, seed=10)
    default_before = np.asarray(h.fd(s.q, s.qd, s.u))
    ctx = h.context()
    assert isinstance(ctx, grid_jax.JaxRobotHandle) and ctx.ctx_id not in (0, h.ctx_id)
    ctx.set_inertia_params(_heavier(ctx, 2.0))
    changed = np.asarray(ctx.fd(s.q, s.qd, s.u))
    assert not np.allclose(changed, default_before)
    np.testing.assert_array_equal(np.asarray(h.fd(s.q, s.qd, s.u)), default_before)
    _close(changed, ctx.numpy.forward_dynamics(s.q, s.qd, s.u), "context fd == its numpy")
    jitted = jax.jit(ctx.fd)
    jax.block_until_ready(jitted(s.q, s.qd, s.u))
    ctx.close()
    assert ctx.closed
    with pytest.raises(RuntimeError, match="was closed; open a new one"):
        ctx.fd(s.q, s.qd, s.u)
    with pytest.raises(RUNTIME_ERRORS, match="context is closed"):  # compiled before close
        jax.block_until_ready(jitted(s.q, s.qd, s.u))


# -- validation ---------------------------------------------------------------------------------
def test_input_validation(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, batch=4)
    q, qd, u = s.q, s.qd, s.u
    with pytest.raises(ValueError, match=r"^qd has width 6; this robot's tangent width nv is 7$"):
        h.forward_dynamics(q, qd[:, :6], u)
    with pytest.raises(ValueError, match=r"u has dtype float32; this robot computes in float64 "
                                         r"\(pass u.astype\(jnp.float64\)"):
        h.forward_dynamics(q, qd, jnp.asarray(u, jnp.float32))
    with pytest.raises(ValueError, match=r"q must be \(B, 7\) with the batch on axis 0, or "
                                         r"\(7,\) for a single state; got shape \(4, 1, 7\)"):
        h.crba(q[:, None, :])
    with pytest.raises(ValueError, match=r"^u is a single state \(1-D\) but q is batched"):
        h.forward_dynamics(q, qd, u[0])
    with pytest.raises(ValueError, match=r"^qd is 2-D but q is a single state"):
        h.forward_dynamics(q[0], qd, u[0])
    with pytest.raises(ValueError, match=r"^u has batch 3; q has batch 4"):
        h.forward_dynamics(q, qd, u[:3])
    with pytest.raises(TypeError, match="q must be a jax.Array or numpy.ndarray"):
        h.crba(q.tolist())
    with pytest.raises(TypeError, match="missing required input 'u'"):
        h.forward_dynamics(q, qd)
    with pytest.raises(TypeError, match="out= is not supported on the JAX backend.*"
                                        "donate_argnums"):
        h.forward_dynamics(q, qd, u, out=np.empty_like(u))
    with pytest.raises(TypeError, match="out= is not supported"):
        h.forward_dynamics_stamped(q, qd, u, out=np.empty_like(u))
    with pytest.raises(TypeError, match="gravity must be a static Python float"):
        jax.jit(h.forward_dynamics)(q, qd, u, gravity=-1.0)
    static = jax.jit(h.forward_dynamics, static_argnames="gravity")
    _close(static(q, qd, u, gravity=-1.0), ref.forward_dynamics(q, qd, u, None, -1.0),
           "static gravity")
    big = np.zeros((MAX_BATCH + 1, h.nq))
    with pytest.raises(ValueError, match=f"batch {MAX_BATCH + 1} exceeds this artifact's "
                                         f"max_batch_size {MAX_BATCH}"):
        h.crba(big)
    # Under vmap the mapped axes fold into the batch, which the runtime bounds.
    with pytest.raises(RUNTIME_ERRORS, match=f"batch {3 * 32} is outside \\[0, {MAX_BATCH}\\]"):
        jax.block_until_ready(jax.vmap(h.crba)(np.zeros((3, 32, h.nq))))


def test_float64_needs_x64(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    q = _states(ref, batch=2).q
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ValueError, match=r"computes in float64.*jax_enable_x64"):
            h.crba(q)
    finally:
        jax.config.update("jax_enable_x64", True)


def test_empty_batch(handles, refs):
    h, _ = _get(handles, refs, "iiwa14")
    empty = np.zeros((0, h.nq))
    assert h.crba(empty).shape == (0, h.nv, h.nv)
    value, stamp = h.forward_dynamics_stamped(empty, empty, empty)
    assert value.shape == (0, h.nv) and grid_jax.stamp_value(stamp) == h.model_version
    assert jax.grad(lambda q: h.fd(q, empty, empty).sum())(empty).shape == (0, h.nq)


def test_f_ext_broadcast_forms(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, batch=4, seed=12)
    row = s.f_ext[1]
    full = np.broadcast_to(row, s.f_ext.shape).copy()
    expected = ref.forward_dynamics(s.q, s.qd, s.u, full)
    for form in (row, row[None, :], jnp.asarray(row)):
        _close(h.fd(s.q, s.qd, s.u, form), expected, f"f_ext of shape {form.shape}")
    grads = jax.grad(lambda u: h.fd(s.q, s.qd, u, row).sum())(s.u)
    assert grads.shape == s.u.shape
    with pytest.raises(ValueError, match=r"^f_ext has batch 2; q has batch 4"):
        h.fd(s.q, s.qd, s.u, s.f_ext[:2])
    with pytest.raises(ValueError, match=r"f_ext must be \(B, 42\), \(42,\) or \(1, 42\)"):
        h.fd(s.q, s.qd, s.u, s.f_ext[None])


# -- surface -----------------------------------------------------------------------------------
def test_surface_and_registration(handles, refs, cache):
    h, _ = _get(handles, refs, "iiwa14")
    for method in METHODS:
        for name in (method.name, *method.aliases):
            assert callable(getattr(h, name)), name
            assert callable(getattr(h, f"{name}_stamped")), name
            assert callable(getattr(h, f"{name}_checked")), name
    assert h.rnea.__name__ == "rnea" and "Alias of `inverse_dynamics`" in h.rnea.__doc__
    params = list(inspect.signature(h.forward_dynamics_stamped).parameters)
    assert params == ["q", "qd", "u", "f_ext", "gravity"]
    ours = inspect.signature(grid_jax.register_robot).parameters
    theirs = dict(inspect.signature(grid_rbd.register_robot).parameters)
    del theirs["backend"]
    assert list(ours) == list(theirs)
    assert all(ours[k].default == theirs[k].default for k in ours)
    for other in (grid_rbd.get_robot("iiwa14", cache_dir=cache, backend="jax"),
                  grid_jax.get_robot("iiwa14", cache_dir=cache),
                  grid_jax.load_robot(h.path)):
        assert isinstance(other, grid_jax.JaxRobotHandle)
        assert other.numpy._artifact is h.numpy._artifact and other.ctx_id == 0
    assert repr(h).startswith("<JaxRobotHandle 'iiwa14' nq=7 nv=7")


# -- to_host -----------------------------------------------------------------------------------
def test_to_host_routes(monkeypatch):
    small = jnp.arange(10.0)
    large = jnp.arange(float(_host.PINNED_THRESHOLD_BYTES // 8 + 1))  # just over 256 KiB
    tree = {"small": small, "large": (large, np.ones(3)), "none": None, "n": 3}
    kinds = []
    real_put = jax.device_put

    def spy(x, device=None, **kwargs):
        kinds.append(getattr(device, "memory_kind", None))
        return real_put(x, device, **kwargs)

    monkeypatch.setattr(jax, "device_put", spy)

    def check(pinned, expected_kinds):
        kinds.clear()
        host = grid_jax.to_host(tree, pinned=pinned)
        assert isinstance(host["small"], np.ndarray) and isinstance(host["large"][0],
                                                                    np.ndarray)
        np.testing.assert_array_equal(host["small"], np.arange(10.0))
        np.testing.assert_array_equal(host["large"][0], np.asarray(large))
        assert host["large"][1] is tree["large"][1] and host["n"] == 3 and host["none"] is None
        assert kinds == expected_kinds, pinned

    pinned = _host.has_pinned_host(small)
    check("auto", ["pinned_host"] if pinned else [])
    check(True, ["pinned_host"] * 2 if pinned else [])
    check(False, [])
    monkeypatch.setattr(_host, "has_pinned_host", lambda array: False)
    check(True, [])  # no pinned_host memory: jax.device_get whatever `pinned` says
    with pytest.raises(ValueError, match="pinned must be"):
        grid_jax.to_host(tree, pinned="yes")
    with pytest.raises(TypeError, match="outside jax.jit"):
        jax.jit(grid_jax.to_host)(small)


# -- GPU: the platform of the arrays must be the artifact's ---------------------------------------
@pytest.mark.gpu
def test_gpu_artifact_refuses_cpu_arrays(handles, refs):
    if not _jax_on_gpu():
        pytest.skip("JAX has no CUDA backend here (jax[cuda] and a GPU are needed)")
    h, ref = _get(handles, refs, "iiwa14")
    assert h.device == "cuda"
    q = jax.device_put(_states(ref, batch=2).q, jax.devices("cpu")[0])
    with pytest.raises(RUNTIME_ERRORS, match="artifact is a CUDA build, but the call runs "
                                             "on the CPU"):
        jax.block_until_ready(h.crba(q))


def test_reverse_mode_only(handles, refs):
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, batch=2)
    # jax.jacrev maps the backward over the output's basis.
    jac = jax.jacrev(lambda q: h.fd(q, s.qd, s.u))(s.q)  # (B, nv, B, nq)
    expected = ref.forward_dynamics_gradient(s.q, s.qd, s.u)[:, :, :h.nv]
    _close(np.stack([jac[b, :, b, :] for b in range(2)]), expected, "jacrev(fd)")
    assert not np.asarray(jac[0, :, 1, :]).any()
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(lambda q: h.fd(q, s.qd, s.u), (s.q,), (s.q,))
    loss = lambda q: h.fd(q, s.qd, s.u).sum()  # noqa: E731
    with pytest.raises(ValueError, match="cannot be differentiated"):
        jax.grad(lambda q: jax.grad(loss)(q).sum())(s.q)
    with pytest.raises(ValueError, match="cannot be differentiated"):  # forward-only method
        jax.grad(lambda q: h.crba(q).sum())(s.q)


# -- single states, one stamp read, command buffers ----------------------------------------
def test_single_states_are_1d_in_and_out(handles, refs):
    h, ref = _get(handles, refs, "go2")
    s = _states(ref, batch=2, seed=14)
    for method in ("crba", "forward_dynamics_gradient"):
        inputs, expected = reference_case(ref, method, s, f_ext=method != "crba")
        one = [None if x is None else x[1] for x in inputs]
        got = getattr(h, method)(*one)
        assert got.shape == expected.shape[1:]
        _close(np.asarray(got)[None], expected[1:], f"{method} on a single state")
    q, qd, u = s.q[0], s.qd[0], s.u[0]
    value = jax.jit(h.fd)(q, qd, u)
    assert value.shape == (h.nv,)
    _close(np.asarray(value)[None], ref.forward_dynamics(s.q, s.qd, s.u)[:1], "jit, 1-D")
    grad = jax.grad(lambda q: h.fd(q, qd, u).sum())(q)
    batched = jax.grad(lambda q: h.fd(q, s.qd[:1], s.u[:1]).sum())(s.q[:1])
    assert grad.shape == (h.nq,)
    _close(np.asarray(grad)[None], batched, "grad on a single state")
    per_state = jax.vmap(lambda q, qd, u: h.fd(q, qd, u))(s.q, s.qd, s.u)
    _close(per_state, ref.forward_dynamics(s.q, s.qd, s.u), "vmap over single states")


def test_a_forward_dynamics_backward_is_one_call(handles, refs):
    """Its two launches (the gradient and M^-1 ct) are one FFI call: one admission and
    one stamp read (the jaxpr of the backward holds a single grid_rbd call)."""
    h, ref = _get(handles, refs, "iiwa14")
    s = _states(ref, batch=2, seed=15)
    grad = jax.grad(lambda u: h.fd(s.q, s.qd, u).sum())
    text = str(jax.make_jaxpr(grad)(s.u))
    assert text.count("ffi_call") == 2, text  # the forward, then one backward group
    expected = np.einsum("bij,bj->bi", ref.minv(s.q), np.ones_like(s.u))
    _close(grad(s.u), expected, "du = M^-1 ct from the grouped backward")


def test_the_graphable_view(handles, refs):
    """On a CPU artifact the command-buffer view computes what the handle computes and
    keeps the stamp rules (the CUDA graph capture itself runs in the GPU session)."""
    h, ref = _get(handles, refs, "iiwa14")
    g = h.graphable()
    assert g.command_buffers and not h.command_buffers and g.ctx_id == h.ctx_id
    s = _states(ref, batch=3, seed=16)
    _close(jax.jit(g.fd)(s.q, s.qd, s.u), ref.forward_dynamics(s.q, s.qd, s.u), "graphable")
    dq = jax.grad(lambda q: g.fd(q, s.qd, s.u).sum())(s.q)
    _close(dq, ref.forward_dynamics_gradient(s.q, s.qd, s.u)[:, :, :h.nv].sum(axis=1),
           "graphable grad")
    with g.context() as ctx:
        assert ctx.command_buffers
        qdd, vjp = jax.vjp(ctx.fd, s.q, s.qd, s.u)
        jax.block_until_ready(qdd)
        ctx.set_inertia_params(ctx.get_inertia_params())
        with pytest.raises(RUNTIME_ERRORS, match=MUTATED):
            jax.block_until_ready(vjp(jnp.ones_like(qdd)))
