"""Runtime contexts on the GPU (tagged gpu; skipped with the reason elsewhere): each
context's own stream (two pipelines overlap), the staging path's large-call branch, the
memory a captured graph addresses kept after its context closes, and JAX command
buffers (XLA told to record custom calls into CUDA graphs, in a process of its own).

Run on the GPU machine: `pytest -m gpu tests/test_contexts_gpu.py`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from support import REPO, ROBOTS, random_states, scaled_error

import grid_rbd
import grid_rbd.reference as reference

pytestmark = pytest.mark.gpu


def _cuda_handle(tmp_path_factory, **kwargs):
    from grid_rbd._device import cuda_status

    status = cuda_status()
    if not status.usable:
        pytest.skip(f"no CUDA GPU: {status.reason}")
    cache = tmp_path_factory.mktemp("gpu_store")
    return grid_rbd.register_robot("iiwa14-gpu-contexts", urdf_path=ROBOTS["iiwa14"].path,
                                   device="cuda", dtype="float32", cache_dir=cache, **kwargs)


@pytest.fixture(scope="module")
def gpu(tmp_path_factory):
    return _cuda_handle(tmp_path_factory, max_batch_size=32768)


@pytest.fixture(scope="module")
def ref():
    return reference.load(ROBOTS["iiwa14"].path)


def _pipeline(handle, states, calls: int) -> None:
    q, qd, u = (np.ascontiguousarray(x, np.float32) for x in (states.q, states.qd, states.u))
    out = handle.pinned_empty((q.shape[0], handle.nv, 2 * handle.nv))
    for _ in range(calls):
        handle.forward_dynamics_gradient(q, qd, u, out=out)


def test_gpu_contexts_own_streams_and_overlap(gpu, ref):
    """Two threads, each a numpy pipeline on its own context: with a stream per context
    the GPU runs both at once, so together they take clearly less than one after the
    other (with every context on the legacy default stream they would serialise)."""
    a, b = gpu.context(), gpu.context()
    for ctx in (a, b):
        profile = ctx.device_profile
        assert profile["own_stream"], profile["stream_note"]
    s = random_states(ref.model, 64, seed=1)
    calls = 200
    for ctx in (a, b):
        _pipeline(ctx, s, 5)  # warm-up
    t0 = time.perf_counter()
    _pipeline(a, s, calls)
    _pipeline(b, s, calls)
    serial = time.perf_counter() - t0
    threads = [threading.Thread(target=_pipeline, args=(ctx, s, calls)) for ctx in (a, b)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    concurrent = time.perf_counter() - t0
    print(f"two contexts: serial {serial * 1e3:.1f} ms, concurrent {concurrent * 1e3:.1f} ms, "
          f"speed-up {serial / concurrent:.2f}x")
    assert serial / concurrent > 1.3, (serial, concurrent)
    a.close()
    b.close()


def test_gpu_large_host_calls_copy_straight(gpu, ref):
    """Above the packed-staging limit (4 MiB) a host call copies straight from and into
    the caller's arrays; the numbers are the same."""
    s = random_states(ref.model, 20000, seed=2)
    q, qd, u = (np.ascontiguousarray(x, np.float32) for x in (s.q, s.qd, s.u))
    got = gpu.forward_dynamics_gradient(q, qd, u)  # 20000 x 7 x 14 floats: 7.8 MB
    expected = ref.forward_dynamics_gradient(q.astype(np.float64), qd.astype(np.float64),
                                             u.astype(np.float64))
    assert scaled_error(got, expected) < 1e-3


@pytest.mark.parametrize("batch", [1, 16, 300])
def test_gpu_small_host_calls_run_on_the_mapped_mirror(gpu, ref, batch):
    """Up to 64 KiB a host call runs its kernel on the page-locked mirror itself (the
    device reads and writes it over the bus; batches 1 and 16 here), above it copies in
    and out (300: 300 x 7 x 14 floats of output); the numbers are the same, every
    algorithm, with an omitted optional input too."""
    assert gpu.device_profile["mapped_staging"] is True, gpu.device_profile
    s = random_states(ref.model, batch, seed=5)
    q, qd, qdd, u = (np.ascontiguousarray(x, np.float32) for x in (s.q, s.qd, s.qdd, s.u))
    d = [x.astype(np.float64) for x in (q, qd, qdd, u)]
    checks = [(gpu.inverse_dynamics(q, qd, qdd), ref.inverse_dynamics(d[0], d[1], d[2])),
              (gpu.inverse_dynamics(q, qd), ref.inverse_dynamics(d[0], d[1], None)),
              (gpu.forward_dynamics(q, qd, u), ref.forward_dynamics(d[0], d[1], d[3])),
              (gpu.forward_dynamics_gradient(q, qd, u),
               ref.forward_dynamics_gradient(d[0], d[1], d[3]))]
    for got, expected in checks:
        assert scaled_error(got, expected) < 1e-3


@pytest.mark.parametrize("batch", [1, 5, 300])
def test_gpu_fd_gradient_tangents_strategy(gpu, ref, batch):
    """The FD gradient's tangents strategy (one thread per column, a forward-mode pass
    seeded at run time) on the GPU against the reference, without and with f_ext."""
    ctx = gpu.context()
    try:
        assert "tangents" in ctx.variants("forward_dynamics_gradient")
        ctx.set_variant_for("forward_dynamics_gradient", "tangents")
        s = random_states(ref.model, batch, seed=6)
        q, qd, u, fe = (np.ascontiguousarray(x, np.float32) for x in (s.q, s.qd, s.u, s.f_ext))
        d = [x.astype(np.float64) for x in (q, qd, u, fe)]
        assert scaled_error(ctx.forward_dynamics_gradient(q, qd, u),
                            ref.forward_dynamics_gradient(d[0], d[1], d[2])) < 1e-3
        assert scaled_error(ctx.forward_dynamics_gradient(q, qd, u, fe),
                            ref.forward_dynamics_gradient(*d)) < 1e-3
    finally:
        ctx.close()


def test_gpu_a_closed_contexts_captured_memory_is_kept(gpu, ref):
    """A torch.cuda.graph the caller recorded around a torch call cannot be refused by
    the runtime: after the context closes, its replay must not touch freed memory (the
    context's state is kept), and it keeps computing what it computed."""
    torch = pytest.importorskip("torch")
    import grid_rbd.torch  # the submodule, whatever other tests imported before

    view = grid_rbd.torch.TorchRobotHandle(gpu.context())
    s = random_states(ref.model, 8, seed=3)
    q, qd, u = (torch.as_tensor(x, dtype=torch.float32, device="cuda")
                for x in (s.q, s.qd, s.u))
    view.forward_dynamics(q, qd, u)  # warm-up off the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = view.forward_dynamics(q, qd, u)
    graph.replay()
    before = out.clone()
    view.close()
    junk = [torch.full((1 << 20,), float("nan"), device="cuda") for _ in range(16)]
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, before) and len(junk) == 16


_COMMAND_BUFFER_SCRIPT = r"""
import json, sys
import numpy as np
import jax
import grid_rbd, grid_rbd.jax as grid_jax
sys.path.insert(0, sys.argv[2])
from support import ROBOTS, random_states
import grid_rbd.reference as reference
ref = reference.load(ROBOTS["iiwa14"].path)
h = grid_jax.register_robot("iiwa14-cmdbuf", urdf_path=ROBOTS["iiwa14"].path,
                            device="cuda", dtype="float32", runtime_inertia=True,
                            cache_dir=sys.argv[1])
s = random_states(ref.model, 8, seed=4)
q, qd, u = (np.asarray(x, np.float32) for x in (s.q, s.qd, s.u))
g = h.graphable().context()
step = jax.jit(lambda q, qd, u: g.fd(q, qd, u) * 2.0 + 1.0)
errors = []
for _ in range(5):
    value = (np.asarray(step(q, qd, u)) - 1.0) / 2.0
    errors.append(float(np.abs(value - g.numpy.fd(q, qd, u)).max()))
table = g.get_inertia_params(); table[:, 0] *= 1.5; g.set_inertia_params(table)
after = float(np.abs((np.asarray(step(q, qd, u)) - 1.0) / 2.0 - g.numpy.fd(q, qd, u)).max())
grad = jax.jit(jax.grad(lambda u: g.fd(q, qd, u).sum()))
du = np.asarray(grad(u))
minv = g.numpy.minv(q)
grad_error = float(np.abs(du - np.einsum("bij,bj->bi", minv, np.ones_like(u))).max())
print(json.dumps({"errors": errors, "after": after, "grad_error": grad_error}))
"""


def test_gpu_jax_command_buffers(tmp_path):
    """XLA told to put custom calls into command buffers (CUDA graphs): a jitted function
    of the graphable view replays correctly, follows set_inertia_params (its tables are
    updated in place) and a jitted grad across the mutation differentiates the new
    model."""
    pytest.importorskip("jax")
    from grid_rbd._device import cuda_status

    if not cuda_status().usable:
        pytest.skip("no CUDA GPU")
    env = dict(os.environ, XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL "
                                     "--xla_gpu_graph_min_graph_size=1")
    done = subprocess.run([sys.executable, "-c", _COMMAND_BUFFER_SCRIPT, str(tmp_path),
                           str(REPO / "tests")], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    if "jax has no CUDA" in done.stderr or "Unable to initialize backend 'cuda'" in done.stderr:
        pytest.skip("JAX has no CUDA backend here")
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert max(result["errors"]) < 1e-4 and result["after"] < 1e-4, result
    assert result["grad_error"] < 1e-3, result


def test_gpu_launch_overrides_reach_the_kernel(gpu, ref):
    """Every variant and a few block widths give the reference's numbers, a batch above
    the slot cap included (with ABI 4 these are the launch configuration's variant,
    threads and grid cap; with ABI 3 the compiled launch)."""
    s = random_states(ref.model, 300, seed=5)
    q, qd, u = (np.ascontiguousarray(x, np.float32) for x in (s.q, s.qd, s.u))
    expected = ref.forward_dynamics_gradient(s.q, s.qd, s.u)
    with gpu.context(workspace_slots=40) as ctx:
        with pytest.raises(ValueError, match="multiple of 32"):
            ctx.set_threads_for("forward_dynamics_gradient", 48)
        for variant in ctx.variants("forward_dynamics_gradient"):
            ctx.set_variant_for("forward_dynamics_gradient", variant)
            for threads in (0, 64, 256):
                ctx.set_threads_for("forward_dynamics_gradient", threads)
                got = ctx.forward_dynamics_gradient(q, qd, u)
                assert scaled_error(got, expected) < 1e-3, (variant, threads)
