"""The torch backend (grid_rbd.torch) against the float64 reference and finite differences:
every method, autograd through the analytic backward (reference contractions and
torch.autograd.gradcheck), model-version stamps, captured graphs, contexts, host copies,
torch.compile, and the input checks.

Builds float64 artifacts of iiwa14 (fixed base) and go2 (floating base) with
runtime_inertia, on the GPU where one is usable (tensors then live on cuda) and on the
CPU otherwise: CI runs this suite on the CPU backend, the H200 session on CUDA.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (requirements.lock)")
pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")

from artifact_harness import reference_case  # noqa: E402
from support import ROBOTS, assert_scaled_close, random_states, robot_available  # noqa: E402

import grid_rbd  # noqa: E402
import grid_rbd.reference as reference  # noqa: E402
import grid_rbd.torch as grid_torch  # noqa: E402
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS  # noqa: E402
from grid_rbd.reference.configuration import integrate  # noqa: E402

BATCH = 6
TOL = 1e-9
FORWARD_DYNAMICS = ("forward_dynamics", "aba")


@pytest.fixture(scope="module")
def handles(shared_store):
    """The session store (tests/conftest.py): test_jax_backend's iiwa14 has these options,
    so a CPU session compiles it once."""
    cache = shared_store
    out = {}
    for robot in ("iiwa14", "go2"):
        if not robot_available(robot):
            continue
        spec = ROBOTS[robot]
        h = grid_rbd.register_robot(f"{robot}-torch", urdf_path=spec.path,
                                    floating_base=spec.floating_base, dtype="float64",
                                    runtime_inertia=True, max_batch_size=64,
                                    cache_dir=cache, backend="torch")
        out[robot] = (h, reference.load(spec.path, floating_base=spec.floating_base))
    return out


@pytest.fixture(params=["iiwa14", "go2"])
def robot(request, handles):
    if request.param not in handles:
        pytest.skip(f"{request.param} is not available (example-robot-data missing)")
    return handles[request.param]


def _states(ref, seed=3, batch=BATCH):
    return random_states(ref.model, batch, seed=seed)


def _t(h, x):
    return None if x is None else torch.as_tensor(np.ascontiguousarray(x), dtype=h.dtype,
                                                   device=h.torch_device)


def _np(t):
    return t.detach().cpu().numpy()


# -- forward values ----------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_method_matches_reference(robot, algorithm):
    h, ref = robot
    s = _states(ref)
    inputs, expected = reference_case(ref, algorithm, s, f_ext=algorithm != "crba")
    got = getattr(h, algorithm)(*[_t(h, x) for x in inputs])
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    assert got.device.type == h.torch_device.type and tuple(got.shape) == expected.shape
    assert_scaled_close(_np(got), expected, TOL, f"torch {algorithm}")


def test_surface(robot):
    h, ref = robot
    assert isinstance(h, grid_torch.TorchRobotHandle)
    assert (h.nq, h.nv, h.nb, h.num_ees) == (ref.nq, ref.nv, ref.nb, ref.num_ees)
    assert h.joint_names == ref.joint_names and h.dtype == torch.float64
    assert h.numpy.nq == h.nq and h.floating_base == (ref.nq == ref.nv + 1)
    s = _states(ref)
    q, qd, u = _t(h, s.q), _t(h, s.qd), _t(h, s.u)
    assert torch.equal(h.fd(q, qd, u), h.forward_dynamics(q, qd, u))
    assert torch.equal(h.rnea(q, qd), h.inverse_dynamics(q, qd, None))
    assert_scaled_close(_np(h.forward_dynamics(q, qd, u, gravity=-3.71)),
                        ref.forward_dynamics(s.q, s.qd, s.u, None, -3.71), TOL, "gravity=")
    # Non-contiguous inputs are made contiguous, not misread.
    wide = torch.cat([q, q], dim=1)[:, : h.nq]
    assert not wide.is_contiguous()
    assert torch.equal(h.crba(wide), h.crba(q))
    assert repr(h).startswith(f"<TorchRobotHandle '{h.name}' nq={h.nq}")
    other = grid_torch.load_robot(h.path)
    assert isinstance(other, grid_torch.TorchRobotHandle)
    assert other.numpy._artifact is h.numpy._artifact and other.ctx_id == 0
    assert torch.equal(other.crba(q), h.crba(q))
    assert "backend" not in inspect.signature(grid_torch.register_robot).parameters
    with pytest.raises(TypeError, match="always uses backend='torch'"):
        grid_torch.load_robot(h.path, backend="numpy")


# -- autograd ----------------------------------------------------------------------------
def _leaf(h, x):
    return _t(h, x).requires_grad_()


@pytest.mark.parametrize("method", ["forward_dynamics", "aba", "inverse_dynamics",
                                    "end_effector_pose"])
def test_gradients_match_reference_contractions(robot, method):
    """Tangent-space contractions of the reference Jacobians; on a floating base the
    ambient q gradient is mapped to the tangent through d integrate(q, v)/dv at v = 0."""
    h, ref = robot
    s = _states(ref, seed=11)
    rng = np.random.default_rng(5)
    f_ext = s.f_ext if method != "end_effector_pose" else None
    if method in FORWARD_DYNAMICS:
        args = [_leaf(h, s.q), _leaf(h, s.qd), _leaf(h, s.u), _t(h, f_ext)]
        jac = ref.forward_dynamics_gradient(s.q, s.qd, s.u, f_ext)
    elif method == "inverse_dynamics":
        args = [_leaf(h, s.q), _leaf(h, s.qd), _t(h, s.qdd), _t(h, f_ext)]
        jac = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd, f_ext)
    else:
        args = [_leaf(h, s.q)]
        jac = ref.end_effector_pose_gradient(s.q)
    out = getattr(h, method)(*args)
    ct = rng.normal(size=tuple(out.shape))
    out.backward(_t(h, ct))
    nv = h.nv
    expected_q = np.einsum("bi,bij->bj", ct, jac[:, :, :nv])
    grad_q = _np(args[0].grad)
    if h.floating_base:
        grad_q = np.einsum("bi,bij->bj", grad_q, _integrate_jacobian(ref, s.q))
    assert_scaled_close(grad_q, expected_q, 1e-7, f"{method} dq")
    if method != "end_effector_pose":
        assert_scaled_close(_np(args[1].grad), np.einsum("bi,bij->bj", ct, jac[:, :, nv:]),
                            TOL, f"{method} dqd")
    if method in FORWARD_DYNAMICS:
        assert_scaled_close(_np(args[2].grad), np.einsum("bij,bj->bi", ref.minv(s.q), ct),
                            TOL, f"{method} du = Minv ct")


def _integrate_jacobian(ref, q, eps=1e-6):
    """d integrate(q, v)/dv at v = 0, (B, nq, nv), by central differences."""
    cols = []
    for k in range(ref.nv):
        dv = np.zeros((q.shape[0], ref.nv))
        dv[:, k] = eps
        cols.append((integrate(ref.model, q, dv) - integrate(ref.model, q, -dv)) / (2 * eps))
    return np.stack(cols, axis=2)


@pytest.mark.parametrize("method", ["forward_dynamics", "aba", "inverse_dynamics",
                                    "end_effector_pose"])
def test_gradcheck(robot, method):
    """torch.autograd.gradcheck: finite differences over every input component,
    including an unnormalised quaternion on the floating base."""
    h, ref = robot
    s = _states(ref, seed=21, batch=2)
    q = s.q.copy()
    if h.floating_base:
        q[:, 3:7] *= np.array([[1.3], [0.8]])
    fe = _t(h, s.f_ext)
    if method in FORWARD_DYNAMICS:
        args = (_leaf(h, q), _leaf(h, s.qd), _leaf(h, s.u))
        fn = lambda q, qd, u: getattr(h, method)(q, qd, u, fe)  # noqa: E731
    elif method == "inverse_dynamics":
        qdd = _t(h, s.qdd)
        args = (_leaf(h, q), _leaf(h, s.qd))
        fn = lambda q, qd: h.inverse_dynamics(q, qd, qdd, fe)  # noqa: E731
    else:
        args = (_leaf(h, q),)
        fn = h.end_effector_pose
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-5, rtol=1e-5)


def test_residual_inputs_get_no_gradient(robot):
    h, ref = robot
    s = _states(ref)
    q, qd = _leaf(h, s.q), _leaf(h, s.qd)
    qdd, fe = _leaf(h, s.qdd), _leaf(h, s.f_ext)
    h.inverse_dynamics(q, qd, qdd, fe).sum().backward()
    assert q.grad is not None and qd.grad is not None
    assert qdd.grad is None and fe.grad is None


def test_forward_only_methods_refuse_backward(robot):
    h, ref = robot
    q = _leaf(h, _states(ref).q)
    with pytest.raises(RuntimeError):
        h.crba(q).sum().backward()


def test_double_backward_is_refused(robot):
    h, ref = robot
    s = _states(ref)
    q = _leaf(h, s.q)
    (g,) = torch.autograd.grad(h.end_effector_pose(q).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad|once_differentiable"):
        g.sum().backward()


# -- model versions ----------------------------------------------------------------------
def test_backward_after_a_mutation_is_refused(handles):
    h, ref = handles["iiwa14"]
    with h.context() as view:
        s = _states(ref)
        q, qd, u = _leaf(view, s.q), _leaf(view, s.qd), _leaf(view, s.u)
        before = view.model_version
        qdd = view.forward_dynamics(q, qd, u)
        table = view.get_inertia_params()
        table[:, 0] *= 1.25
        after = view.set_inertia_params(table)
        assert after > before
        with pytest.raises(RuntimeError, match=rf"model mutated between forward and backward "
                                               rf"\(version {before} -> {after}\); recompute "
                                               r"the forward"):
            qdd.sum().backward()
        # Recomputing the forward differentiates the new model.
        qdd = view.forward_dynamics(q, qd, u)
        qdd.backward(torch.ones_like(qdd))
        jac = view.numpy.forward_dynamics_gradient(s.q, s.qd, s.u)
        assert_scaled_close(_np(q.grad), jac[:, :, : view.nv].sum(axis=1), TOL, "new model")
        # A mutation of another context does not stale this one's forward.
        qdd = view.forward_dynamics(q, qd, u)
        h.set_inertia_params(h.get_inertia_params())
        qdd.sum().backward()


# -- contexts ----------------------------------------------------------------------------
def test_context_views_are_isolated(handles):
    h, ref = handles["iiwa14"]
    s = _states(ref)
    q, qd, u = _t(h, s.q), _t(h, s.qd), _t(h, s.u)
    baseline = h.forward_dynamics(q, qd, u)
    view = h.context()
    assert isinstance(view, grid_torch.TorchRobotHandle) and view.ctx_id != 0
    table = torch.as_tensor(view.get_inertia_params(), device=view.torch_device)
    table[:, 0] *= 2.0
    view.set_inertia_params(table)  # a tensor, on the artifact's device, is accepted
    assert np.array_equal(view.get_inertia_params(), _np(table))
    assert not torch.allclose(view.forward_dynamics(q, qd, u), baseline)
    assert torch.equal(h.forward_dynamics(q, qd, u), baseline)
    view.close()
    with pytest.raises(RuntimeError, match="was closed"):
        view.forward_dynamics(q, qd, u)


# -- captured graphs ---------------------------------------------------------------------
def test_capture_replays_like_an_eager_call(robot):
    h, ref = robot
    s, s2 = _states(ref, seed=1), _states(ref, seed=2)
    g = h.capture("forward_dynamics", _t(h, s.q), _t(h, s.qd), _t(h, s.u))
    assert len(g.static_in) == 3 and g.static_out.shape == (BATCH, h.nv)
    assert_scaled_close(_np(g.replay()), ref.forward_dynamics(s.q, s.qd, s.u), TOL, "replay")
    out = g(_t(h, s2.q), _t(h, s2.qd), _t(h, s2.u))
    assert out is g.static_out
    assert_scaled_close(_np(out), ref.forward_dynamics(s2.q, s2.qd, s2.u), TOL, "new inputs")
    g.static_in[0].copy_(_t(h, s.q))
    g.static_in[1].copy_(_t(h, s.qd))
    g.static_in[2].copy_(_t(h, s.u))
    host = grid_torch.pinned_host_like(g.static_out)
    assert g.replay_into(host) is host and host.device.type == "cpu"
    assert_scaled_close(host.numpy(), ref.forward_dynamics(s.q, s.qd, s.u), TOL, "replay_into")
    with pytest.raises(ValueError, match="captured with"):
        g(_t(h, s.q[:2]), _t(h, s.qd[:2]), _t(h, s.u[:2]))


def test_replay_after_a_mutation_or_close_is_refused(handles):
    h, ref = handles["iiwa14"]
    s = _states(ref)
    view = h.context()
    g = view.capture("inverse_dynamics", _t(h, s.q), _t(h, s.qd), gravity=-1.0)
    assert_scaled_close(_np(g.replay()), ref.inverse_dynamics(s.q, s.qd, None, None, -1.0),
                        TOL, "captured gravity")
    version = view.set_inertia_params(view.get_inertia_params())
    with pytest.raises(RuntimeError, match=rf"model mutated since this graph was captured "
                                           rf"\(version {g.captured_version} -> {version}\)"):
        g.replay()
    g = view.capture("inverse_dynamics", _t(h, s.q), _t(h, s.qd))
    g.replay()
    view.close()
    with pytest.raises(RuntimeError, match="context is closed"):
        g.replay()


def test_graph_on_the_default_context_dies_with_its_incarnation(handles):
    h, ref = handles["iiwa14"]
    s = _states(ref)
    g = h.capture("crba", _t(h, s.q))
    assert g.ctx_id != 0 and g.ctx_id == h.numpy._artifact.default_context()
    h.close_arena()  # closes the default incarnation; the next call re-creates it
    assert h.crba(_t(h, s.q)).shape == (BATCH, h.nv, h.nv)
    with pytest.raises(RuntimeError, match="context is closed"):
        g.replay()


# -- host copies, out= -------------------------------------------------------------------
def test_pinned_host_like_and_copy_to_host(robot):
    h, ref = robot
    s = _states(ref)
    grads = (h.forward_dynamics_gradient(_t(h, s.q), _t(h, s.qd), _t(h, s.u)),
             h.minv(_t(h, s.q)))
    host = grid_torch.pinned_host_like(grads)
    assert isinstance(host, tuple) and all(t.device.type == "cpu" for t in host)
    assert grid_torch.copy_to_host(host, grads) is host
    assert_scaled_close(host[0].numpy(), ref.forward_dynamics_gradient(s.q, s.qd, s.u), TOL,
                        "FD gradient to host")
    assert_scaled_close(host[1].numpy(), ref.minv(s.q), TOL, "Minv to host")
    with pytest.raises(ValueError, match="host holds 2 tensor"):
        grid_torch.copy_to_host(host, grads[0])


def test_out_writes_into_the_given_tensor(robot):
    h, ref = robot
    s = _states(ref)
    out = torch.empty(BATCH, 2 * h.nv * h.nv, dtype=h.dtype, device=h.torch_device)
    got = h.forward_dynamics_gradient(_t(h, s.q), _t(h, s.qd), _t(h, s.u), out=out)
    assert got.shape == (BATCH, h.nv, 2 * h.nv) and got.data_ptr() == out.data_ptr()
    assert_scaled_close(_np(got), ref.forward_dynamics_gradient(s.q, s.qd, s.u), TOL, "out=")
    with pytest.raises(ValueError, match="out has shape"):
        h.crba(_t(h, s.q), out=torch.empty(BATCH, 3, dtype=h.dtype, device=h.torch_device))


# -- torch.compile -----------------------------------------------------------------------
def test_torch_compile_traces_the_ops(handles):
    h, ref = handles["iiwa14"]
    s = _states(ref)

    def step(q, qd, u):
        return h.forward_dynamics(q, qd, u).square().sum()

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    q_eager, q_compiled = _leaf(h, s.q), _leaf(h, s.q)
    qd, u = _t(h, s.qd), _t(h, s.u)
    step(q_eager, qd, u).backward()
    value = compiled(q_compiled, qd, u)
    value.backward()
    assert torch.allclose(value, step(q_eager, qd, u).detach())
    assert torch.allclose(q_compiled.grad, q_eager.grad, rtol=1e-12, atol=1e-12)


# -- input checks ------------------------------------------------------------------------
def test_input_checks(handles):
    h, ref = handles["iiwa14"]
    s = _states(ref)
    q, qd, u = _t(h, s.q), _t(h, s.qd), _t(h, s.u)
    with pytest.raises(TypeError, match="must be a torch.Tensor.*torch.from_numpy"):
        h.crba(s.q)
    with pytest.raises(ValueError, match=r"q has shape \(6, 6\); expected \(B, 7\), or "
                                         r"\(7,\) for a single state"):
        h.crba(q[:, :6].contiguous())
    with pytest.raises(ValueError, match="qd is 1-D but q is 2-D; pass every input as a "
                                         "single state"):
        h.forward_dynamics(q, qd[0], u)
    with pytest.raises(ValueError, match="has dtype torch.float32; this robot computes in "
                                         "torch.float64"):
        h.crba(q.float())
    with pytest.raises(ValueError, match="qd has batch 2; q has batch 6"):
        h.forward_dynamics(q, qd[:2], u)
    with pytest.raises(TypeError, match="missing required input 'u'"):
        h.forward_dynamics(q, qd)
    with pytest.raises(ValueError, match="exceeds this artifact's max_batch_size 64"):
        h.crba(torch.zeros(65, h.nq, dtype=h.dtype, device=h.torch_device))
    with pytest.raises(KeyError, match="no method 'nope'"):
        h.capture("nope", q)


# -- streams (GPU) ------------------------------------------------------------------------
@pytest.mark.gpu
def test_calls_run_on_the_current_cuda_stream(handles):
    """A call made under `torch.cuda.stream(side)` queues behind work already on `side`
    and leaves the legacy default stream idle (a launch there would wait for `side`)."""
    h, ref = handles["iiwa14"]
    if h.device != "cuda":
        pytest.skip("no CUDA artifact here (CPU build: no GPU or no nvcc)")
    s = _states(ref)
    q, qd, u = _t(h, s.q), _t(h, s.qd), _t(h, s.u)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time ahead of the launch
        qdd = h.forward_dynamics(q, qd, u)
        assert not side.query()
        assert torch.cuda.default_stream().query()
        g = h.capture("crba", q)  # its warm-up waits for `side`
    side.synchronize()
    assert_scaled_close(_np(qdd), ref.forward_dynamics(s.q, s.qd, s.u), TOL, "side stream")
    assert_scaled_close(_np(g.replay()), ref.crba(s.q), TOL, "graph captured on a stream")


def test_a_graph_keeps_its_handle_alive(handles):
    """The autograd graph of a forward holds its handle: dropping every other reference
    to an explicit-context view before backward still differentiates."""
    import gc

    h, ref = handles["iiwa14"]
    s = _states(ref)
    view = h.context()
    q = _leaf(view, s.q)
    qdd = view.forward_dynamics(q, _t(view, s.qd), _t(view, s.u))
    del view
    gc.collect()
    qdd.sum().backward()
    expected = h.numpy.forward_dynamics_gradient(s.q, s.qd, s.u)[:, :, : h.nv].sum(axis=1)
    assert_scaled_close(_np(q.grad), expected, TOL, "backward after the view was dropped")


# -- never silently wrong or silently non-differentiable ----------------------------------
def _negated(t):
    """A tensor whose value is -t, stored as t with the negation bit set."""
    view = torch._neg_view(t)
    assert view.is_neg() and view.data_ptr() == t.data_ptr()
    return view


def test_negation_and_conjugation_bits_are_read_as_values(robot):
    h, ref = robot
    s = _states(ref)
    q, qd, u = _t(h, s.q), _t(h, s.qd), _t(h, s.u)
    expected = ref.forward_dynamics(s.q, -s.qd, s.u)
    assert_scaled_close(_np(h.forward_dynamics(q, _negated(qd), u)), expected, TOL,
                        "negated view (fast path)")
    assert_scaled_close(_np(h.forward_dynamics(q, qd=_negated(qd), u=u)), expected, TOL,
                        "negated view (checked path)")
    # x.conj().imag of a complex tensor is -imag, as a strided view with the negation bit.
    packed = torch.complex(torch.zeros_like(qd), qd)
    conj_imag = packed.conj().imag
    assert conj_imag.is_neg()
    assert_scaled_close(_np(h.forward_dynamics(q, conj_imag, u)), expected, TOL, "conj().imag")
    # Under autograd: the value and the gradient through the negation.
    leaf = _leaf(h, s.qd)
    out = h.forward_dynamics(q, _negated(leaf), u)
    assert_scaled_close(_np(out), expected, TOL, "negated view under autograd")
    out.sum().backward()
    jac = ref.forward_dynamics_gradient(s.q, -s.qd, s.u)
    assert_scaled_close(_np(leaf.grad), -jac[:, :, h.nv:].sum(axis=1), TOL, "d/dqd via -x")


def test_forward_only_methods_refuse_inputs_that_require_grad(robot):
    h, ref = robot
    s = _states(ref)
    q, qd, u = _leaf(h, s.q), _t(h, s.qd), _t(h, s.u)
    for call in (lambda: h.crba(q), lambda: h.minv(q), lambda: h.end_effector_pose_gradient(q),
                 lambda: h.forward_dynamics_gradient(q, qd, u),
                 lambda: h.inverse_dynamics_gradient(q=q, qd=qd)):
        with pytest.raises(RuntimeError, match="is forward-only .* an input requires grad"):
            call()
    out = torch.empty(BATCH, h.nv, dtype=h.dtype, device=h.torch_device)
    with pytest.raises(ValueError, match="out= records no autograd, but an input requires"):
        h.forward_dynamics(q, qd, u, out=out)
    with torch.no_grad():  # no gradient asked for: the value
        assert_scaled_close(_np(h.crba(q)), ref.crba(s.q), TOL, "crba under no_grad")
    assert_scaled_close(_np(h.crba(q.detach())), ref.crba(s.q), TOL, "crba of a detached q")


def test_an_empty_batch_gives_the_empty_result(robot):
    h, ref = robot
    s = _states(ref)
    for algorithm in ALGORITHMS:
        inputs, expected = reference_case(ref, algorithm, s, f_ext=algorithm != "crba")
        empty = [None if x is None else _t(h, x[:0]) for x in inputs]
        got = getattr(h, algorithm)(*empty)
        assert tuple(got.shape) == (0, *expected.shape[1:]), algorithm
    q, qd, u = (_leaf(h, x[:0]) for x in (s.q, s.qd, s.u))
    out = h.forward_dynamics(q, qd, u)
    assert out.shape == (0, h.nv) and out.requires_grad
    out.sum().backward()
    assert q.grad.shape == (0, h.nq) and u.grad.shape == (0, h.nv)


def test_single_states_are_1d_in_and_out(robot):
    h, ref = robot
    s = _states(ref, batch=2)
    q, qd, u = _leaf(h, s.q[1]), _t(h, s.qd[1]), _t(h, s.u[1])
    out = h.forward_dynamics(q, qd, u)
    assert out.shape == (h.nv,)
    assert_scaled_close(_np(out)[None], ref.forward_dynamics(s.q, s.qd, s.u)[1:], TOL, "1-D")
    out.sum().backward()
    assert q.grad.shape == (h.nq,)
    batched_q = _leaf(h, s.q[1:])
    h.forward_dynamics(batched_q, _t(h, s.qd[1:]), _t(h, s.u[1:])).sum().backward()
    assert torch.allclose(q.grad, batched_q.grad[0], rtol=1e-12, atol=1e-12)
    flat = torch.empty(2 * h.nv * h.nv, dtype=h.dtype, device=h.torch_device)
    jac = h.forward_dynamics_gradient(q.detach(), qd, u, out=flat)
    assert jac.shape == (h.nv, 2 * h.nv) and jac.data_ptr() == flat.data_ptr()
