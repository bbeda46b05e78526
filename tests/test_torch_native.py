"""The torch extension (grid_rbd/torch/native_call.cc): eager calls in one C call.

The extension is compiled at first use against the installed torch and takes a plain
positional call; everything else it declines (returns None) to the Python path. Checked
here: it is in use, what it takes gives the float64 reference's numbers (negated views,
strided inputs, an integer or float gravity, omitted optional inputs, matrix outputs),
what it declines still gives the right result or the precise error, its autograd node
(`GridRbdBackward`) gives the reference gradients and keeps the Python path's rules (a
mutation refuses the backward, no double backward, retain_graph), the switch
`GRID_RBD_TORCH_NATIVE=0` and a failed build both fall back to the Python path, and the
library is kept in the store root like the JAX handler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (requirements.lock)")
pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")

from artifact_harness import reference_case  # noqa: E402
from support import ROBOTS, assert_scaled_close, random_states  # noqa: E402

import grid_rbd  # noqa: E402
import grid_rbd.reference as reference  # noqa: E402
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS  # noqa: E402
from grid_rbd.torch import _native  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOL = 1e-9


@pytest.fixture(scope="module")
def arm(shared_store):
    """iiwa14 in float64 with the options of test_torch_backend's (one build a session)."""
    spec = ROBOTS["iiwa14"]
    h = grid_rbd.register_robot("iiwa14-torch", urdf_path=spec.path, dtype="float64",
                                runtime_inertia=True, max_batch_size=64,
                                cache_dir=shared_store, backend="torch")
    return h, reference.load(spec.path)


class _Tagged(torch.Tensor):
    """A subclass with torch's default __torch_function__: its calls are the Python
    path's (the subclass may override what a call means)."""


def _t(h, x):
    return None if x is None else torch.as_tensor(np.ascontiguousarray(x), dtype=h.dtype,
                                                   device=h.torch_device)


def _np(t):
    return t.detach().cpu().numpy()


def test_extension_is_built_in_the_store_and_used(arm, shared_store):
    h, _ = arm
    if not h.native:
        pytest.fail(f"the torch extension is not in use: {_native.why_not()}")
    from grid_rbd import _core

    module = sys.modules[_native.MODULE]
    assert module.LAUNCHER_CALL_VERSION == _core.LAUNCHER_CALL_VERSION
    path = Path(module.__file__)
    assert path.name == _native.LIBRARY and path.parent.parent.name == "torch_native"
    record = json.loads((path.parent / "integrity.json").read_text())
    assert record["files"][_native.LIBRARY]["size"] == path.stat().st_size
    assert path.stat().st_mode & 0o077 == 0, "the library is owner-only"


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_native_call_matches_reference(arm, algorithm):
    """The extension itself (not the Python path) returns the reference's numbers."""
    h, ref = arm
    s = random_states(ref.model, 5, seed=11)
    inputs, expected = reference_case(ref, algorithm, s, f_ext=algorithm != "crba")
    tensors = tuple(_t(h, x) for x in inputs)
    got = h._fast[algorithm](tensors, {})
    assert got is not None, "the extension declined a plain call"
    assert got.shape == (5, *h._output_shapes[algorithm])
    method = getattr(h, algorithm)(*tensors)  # the public call: same numbers, its shape
    assert torch.equal(method.reshape(got.shape), got)
    assert_scaled_close(_np(method), expected, TOL, f"torch extension {algorithm}")


def test_native_call_resolves_views_and_gravity(arm):
    h, ref = arm
    s = random_states(ref.model, 4, seed=5)
    q, qd, qdd = (_t(h, x) for x in (s.q, s.qd, s.qdd))
    expected = ref.inverse_dynamics(s.q, s.qd, s.qdd, None, -3.5)
    fast = h._fast["inverse_dynamics"]
    negated = torch._neg_view(-q)  # the same values through the negation bit
    assert negated.is_neg()
    strided = qd.t().contiguous().t()  # column-major: non-contiguous, the same values
    assert not strided.is_contiguous()
    for args in ((q, qd, qdd), (negated, strided, qdd), (q, qd, qdd, None)):
        got = fast(args, {"gravity": -3.5})
        assert got is not None
        assert_scaled_close(_np(got), expected, TOL, "views")
    whole = fast((q, qd, qdd), {"gravity": -3})  # an int gravity is a float
    assert_scaled_close(_np(whole), ref.inverse_dynamics(s.q, s.qd, s.qdd, None, -3.0), TOL,
                        "int gravity")
    default = fast((q, qd, qdd), None)
    assert_scaled_close(_np(default), ref.inverse_dynamics(s.q, s.qd, s.qdd), TOL, "default")
    bias = fast((q, qd), {})  # qdd omitted: zero (the bias forces)
    assert_scaled_close(_np(bias), ref.inverse_dynamics(s.q, s.qd, 0 * s.qdd), TOL, "bias")


def test_native_call_declines_what_it_does_not_take(arm):
    """Each of these returns None from the extension; the public call then gives the
    right result or the precise error."""
    h, ref = arm
    s = random_states(ref.model, 3, seed=2)
    q, qd, qdd = (_t(h, x) for x in (s.q, s.qd, s.qdd))
    fast = h._fast["inverse_dynamics"]
    expected = ref.inverse_dynamics(s.q, s.qd, s.qdd)
    leaf = q.clone().requires_grad_(True)
    declined = {
        "single states": ((q[0], qd[0], qdd[0]), {}),
        "float32 inputs": ((q.float(), qd.float(), qdd.float()), {}),
        "an unknown keyword": ((q, qd, qdd), {"where": torch.empty(3, 7, dtype=h.dtype)}),
        "a bool gravity": ((q, qd, qdd), {"gravity": True}),
        "a tensor gravity": ((q, qd, qdd), {"gravity": torch.tensor(-9.81)}),
        "a missing input": ((q,), {}),  # qd is required (qdd and f_ext are optional)
        "a wrong width": ((q[:, :6], qd, qdd), {}),
        "two batches": ((q, qd[:2], qdd), {}),
        "batch 0": ((q[:0], qd[:0], qdd[:0]), {}),
        "a tensor subclass": ((q.as_subclass(_Tagged), qd, qdd), {}),
        "f_ext with an input requiring grad": ((leaf, qd, qdd, _t(h, s.f_ext)), {}),
        "only a residual requiring grad": ((q, qd, qdd.clone().requires_grad_(True)), {}),
        "a list": (([q, qd, qdd]), {}),
    }
    for why, (args, kwargs) in declined.items():
        assert fast(args if isinstance(args, tuple) else (args,), kwargs) is None, why
    with torch.no_grad():  # no graph to record: the extension takes it
        assert fast((leaf, qd, qdd), {}).grad_fn is None
    parameter = torch.nn.Parameter(q, requires_grad=False)  # a plain tensor to torch's C++
    assert_scaled_close(_np(fast((parameter, qd, qdd), {})), expected, TOL, "parameter")
    big = torch.zeros(h.max_batch_size + 1, 7, dtype=h.dtype, device=h.torch_device)
    assert fast((big, big, big), {}) is None
    # The public calls behind the declines.
    assert_scaled_close(_np(h.inverse_dynamics(q[0], qd[0], qdd[0])), expected[0], TOL, "1-D")
    assert h.inverse_dynamics(q[:0], qd[:0], qdd[:0]).shape == (0, 7)
    with pytest.raises(ValueError, match="has dtype torch.float32"):
        h.inverse_dynamics(q.float(), qd.float(), qdd.float())
    with pytest.raises(ValueError, match="max_batch_size"):
        h.inverse_dynamics(big, big, big)
    tau = h.inverse_dynamics(leaf, qd, qdd, _t(h, s.f_ext))
    assert type(tau.grad_fn).__name__ == "AnalyticFunctionBackward", "the Python path's"
    assert_scaled_close(_np(tau), ref.inverse_dynamics(s.q, s.qd, s.qdd, s.f_ext), TOL,
                        "autograd forward")


def test_native_call_writes_into_out(arm):
    """`out=` a plain tensor of the output's size (shaped or flat): the extension launches
    into it, bumps its version and returns a view of it in the method's shape; any other
    `out` it declines, and the public call then explains or takes it."""
    h, ref = arm
    s = random_states(ref.model, 3, seed=4)
    q, qd, qdd = (_t(h, x) for x in (s.q, s.qd, s.qdd))
    fast = h._fast["inverse_dynamics"]
    out = torch.full((3, 7), float("nan"), dtype=h.dtype, device=h.torch_device)
    version = out._version
    got = fast((q, qd, qdd), {"out": out, "gravity": -3.5})
    assert got is not None and got.data_ptr() == out.data_ptr() and got.shape == (3, 7)
    assert out._version > version
    assert_scaled_close(_np(out), ref.inverse_dynamics(s.q, s.qd, s.qdd, None, -3.5), TOL,
                        "out")
    flat = torch.empty(3, 49, dtype=h.dtype, device=h.torch_device)
    M = h._fast["crba"]((q,), {"out": flat})
    assert M.shape == (3, 7, 7) and M.data_ptr() == flat.data_ptr()
    assert_scaled_close(_np(M), ref.crba(s.q), TOL, "flat out")
    assert torch.equal(fast((q, qd, qdd), {"out": None}), fast((q, qd, qdd), {}))
    leaf = q.clone().requires_grad_(True)
    declined = {
        "another dtype": ((q, qd, qdd), torch.empty(3, 7, dtype=torch.float32)),
        "another batch": ((q, qd, qdd), torch.empty(4, 7, dtype=h.dtype)),
        "another size": ((q, qd, qdd), torch.empty(3, 8, dtype=h.dtype)),
        "not contiguous": ((q, qd, qdd), torch.empty(7, 3, dtype=h.dtype).t()),
        "an out requiring grad": ((q, qd, qdd),
                                  torch.empty(3, 7, dtype=h.dtype).requires_grad_(True)),
        "an input requiring grad": ((leaf, qd, qdd), torch.empty(3, 7, dtype=h.dtype)),
        "a numpy array": ((q, qd, qdd), np.empty((3, 7))),
    }
    for why, (args, target) in declined.items():
        assert fast(args, {"out": target}) is None, why
    with pytest.raises((ValueError, TypeError), match="float32"):
        h.inverse_dynamics(q, qd, qdd, out=torch.empty(3, 7, dtype=torch.float32))
    strided = torch.empty(7, 3, dtype=h.dtype, device=h.torch_device).t()
    with pytest.raises((ValueError, TypeError), match="contiguous"):
        h.inverse_dynamics(q, qd, qdd, out=strided)


def _recorded_by(h):
    """The grad_fn name of a call the extension records, on CPU and CUDA artifacts."""
    return "GridRbdBackward"


def _leaves(h, *arrays):
    return [_t(h, x).requires_grad_(True) for x in arrays]


@pytest.mark.parametrize("method", ["forward_dynamics", "aba", "inverse_dynamics"])
def test_autograd_node_gives_the_reference_gradients(arm, method):
    """The extension records the call (grad_fn GridRbdBackward); q, qd (and u) get the
    reference Jacobians contracted with the cotangent; a residual gets none."""
    h, ref = arm
    s = random_states(ref.model, 4, seed=21)
    third = s.qdd if method == "inverse_dynamics" else s.u
    q, qd, x = _leaves(h, s.q, s.qd, third)
    out = getattr(h, method)(q, qd, x)
    assert out.grad_fn.name() == _recorded_by(h)
    weights = torch.linspace(-1.0, 2.0, out.numel(), dtype=h.dtype).reshape(out.shape)
    (out * weights.to(out.device)).sum().backward()
    ct = _np(weights)
    if method == "inverse_dynamics":
        jac = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)  # (B, nv, 2 nv)
        expected = np.einsum("bi,bij->bj", ct, jac)
        assert x.grad is None, "qdd is a residual"
    else:
        jac = ref.forward_dynamics_gradient(s.q, s.qd, s.u)
        expected = np.einsum("bi,bij->bj", ct, jac)
        minv = ref.minv(s.q)
        assert_scaled_close(_np(x.grad), np.einsum("bi,bij->bj", ct, minv), 1e-8, "u")
    assert_scaled_close(_np(q.grad), expected[:, :7], 1e-8, f"{method} q")
    assert_scaled_close(_np(qd.grad), expected[:, 7:], 1e-8, f"{method} qd")


@pytest.mark.gpu
def test_autograd_node_on_a_side_stream(arm):
    """On CUDA, a forward recorded on a side stream: autograd runs the node's launch on
    that stream, after the forward and before the gradients are read on the default one."""
    h, ref = arm
    if h.device != "cuda":
        pytest.skip("a CUDA artifact is needed (no GPU here)")
    s = random_states(ref.model, 64, seed=8)
    q, qd, u = _leaves(h, s.q, s.qd, s.u)
    side = torch.cuda.Stream(device=h.torch_device)
    side.wait_stream(torch.cuda.current_stream(h.torch_device))
    with torch.cuda.stream(side):
        out = h.forward_dynamics(q, qd, u)
        assert out.grad_fn.name() == "GridRbdBackward"
        loss = (out * out).sum()
    torch.cuda.current_stream(h.torch_device).wait_stream(side)
    loss.backward()
    jac = ref.forward_dynamics_gradient(s.q, s.qd, s.u)
    ct = 2.0 * ref.forward_dynamics(s.q, s.qd, s.u)
    expected = np.einsum("bi,bij->bj", ct, jac)
    assert_scaled_close(_np(q.grad), expected[:, :7], 1e-8, "q on a side stream")
    assert_scaled_close(_np(qd.grad), expected[:, 7:], 1e-8, "qd on a side stream")
    assert_scaled_close(_np(u.grad), np.einsum("bi,bij->bj", ct, ref.minv(s.q)), 1e-8, "u")


def test_autograd_node_keeps_the_contract(arm):
    h, ref = arm
    s = random_states(ref.model, 3, seed=4)
    q, qd, u = _leaves(h, s.q, s.qd, s.u)
    # Only what requires grad gets a gradient; retain_graph allows a second backward.
    plain_u = _t(h, s.u)
    out = h.forward_dynamics(q, qd.detach(), plain_u)
    out.sum().backward(retain_graph=True)
    first = q.grad.clone()
    out.sum().backward()
    assert torch.allclose(q.grad, 2 * first) and qd.grad is None
    with pytest.raises(RuntimeError, match="backward through the graph a second time|freed"):
        out.sum().backward()
    # A mutation between forward and backward refuses the backward.
    out = h.forward_dynamics(q, qd, u)
    table = h.get_inertia_params()
    try:
        h.set_inertia_params(table * 1.01)
        with pytest.raises(RuntimeError, match="model mutated between forward and backward"):
            out.sum().backward()
    finally:
        h.set_inertia_params(table)
    # No double backward: the gradients of a create_graph backward raise when used.
    out = h.forward_dynamics(q, qd, u)
    (g,) = torch.autograd.grad(out.sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad|once_differentiable"):
        g.sum().backward()
    ct = torch.ones_like(out, requires_grad=True)
    (g,) = torch.autograd.grad(out, q, grad_outputs=ct, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
    # The node's gradients equal the Python path's.
    python_path = type(h)(h.numpy)
    python_path._fast = {name: lambda args, kwargs: None for name in python_path._fast}
    a, b = _leaves(h, s.q, s.qd, s.u), _leaves(h, s.q, s.qd, s.u)
    h.aba(*a).pow(2).sum().backward()
    slow = python_path.aba(*b)
    assert type(slow.grad_fn).__name__ == "AnalyticFunctionBackward"
    slow.pow(2).sum().backward()
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x.grad, y.grad, rtol=1e-12, atol=1e-12)


def test_closed_context_is_refused_with_the_handles_error(arm):
    h, ref = arm
    view = h.context()
    s = random_states(ref.model, 2, seed=1)
    args = tuple(_t(h, x) for x in (s.q, s.qd, s.qdd))
    assert view._fast["inverse_dynamics"](args, {}) is not None
    view.close()
    assert view._fast["inverse_dynamics"](args, {}) is None
    with pytest.raises(RuntimeError, match="closed"):
        view.inverse_dynamics(*args)


def test_switch_and_failed_build_fall_back_to_the_python_path(arm, monkeypatch, capfd):
    h, ref = arm
    monkeypatch.setattr(_native, "_STATE", {})

    def broken(cache_dir=None):
        raise _native.native.NativeBuildError("compiling the torch extension failed (exit 1)")

    monkeypatch.setattr(_native, "library_path", broken)
    python_path = type(h)(h.numpy)
    assert not python_path.native
    assert "the torch extension is not available" in capfd.readouterr().err
    assert "exit 1" in _native.why_not()
    s = random_states(ref.model, 3, seed=9)
    args = tuple(_t(h, x) for x in (s.q, s.qd, s.u))
    assert_scaled_close(_np(python_path.forward_dynamics(*args)),
                        ref.forward_dynamics(s.q, s.qd, s.u), TOL, "python path")
    # An extension built for another launcher call signature is not used.
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setattr(_native, "library_path", lambda cache_dir=None: Path(
        sys.modules[_native.MODULE].__file__))
    monkeypatch.setattr(_native, "_mismatch", lambda module: "built for version 1")
    assert not type(h)(h.numpy).native and "built for version 1" in _native.why_not()
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setenv(_native.SWITCH, "0")
    assert not type(h)(h.numpy).native and "GRID_RBD_TORCH_NATIVE=0" in _native.why_not()


def test_switch_off_in_a_fresh_process(arm, shared_store):
    """`GRID_RBD_TORCH_NATIVE=0` in the environment: no build, the same numbers."""
    script = (
        "import numpy as np, torch, grid_rbd\n"
        "from grid_rbd.torch import _native\n"
        f"h = grid_rbd.register_robot('iiwa14-torch', urdf_path={str(ROBOTS['iiwa14'].path)!r},"
        f" dtype='float64', runtime_inertia=True, max_batch_size=64,"
        f" cache_dir={str(shared_store)!r}, backend='torch')\n"
        "q = torch.linspace(-1, 1, 14, dtype=torch.float64, device=h.torch_device)"
        ".reshape(2, 7)\n"
        "print(h.native, _native.why_not(), h.inverse_dynamics(q, q, q).flatten().tolist())\n")
    env = {**os.environ, _native.SWITCH: "0",
           "PYTHONPATH": os.pathsep.join([str(REPO / "codegen"), str(REPO / "python")])}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    flag, why, values = done.stdout.split(" ", 2)
    assert flag == "False" and why == f"{_native.SWITCH}=0"
    h, ref = arm
    q = np.linspace(-1, 1, 14).reshape(2, 7)
    assert_scaled_close(np.array(json.loads(values)).reshape(2, 7),
                        ref.inverse_dynamics(q, q, q), TOL, "switched off")
