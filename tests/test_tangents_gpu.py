"""Every variant of the FD gradient and the fused step gradients on the GPU (tagged gpu;
skipped with the reason elsewhere): thread, warp, block (the step's level form,
`emit.plant_level`) and tangents (one forward-mode pass per (item, column)), each chosen
explicitly on a context and checked against the float64 reference on a fixed base and a
free-flyer root, at batches that fill part of a warp, several warps and several blocks.

Run on the GPU machine: `pytest -m gpu tests/test_tangents_gpu.py`.
"""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, random_states, scaled_error

import grid_rbd
import grid_rbd.reference as reference

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("floating", [False, True])
def test_gpu_gradient_variants_match_the_reference(tmp_path, floating):
    from grid_rbd._device import cuda_status

    status = cuda_status()
    if not status.usable:
        pytest.skip(f"no CUDA GPU: {status.reason}")
    path = ROBOTS["iiwa14"].path
    h = grid_rbd.register_robot("iiwa14-tangents", urdf_path=path, floating_base=floating,
                                device="cuda", dtype="float32", cache_dir=tmp_path,
                                algorithm_list=["core", "plant"])
    ref = reference.load(path, floating_base=floating)
    ctx = h.context()
    kernels = ("forward_dynamics_gradient", "plant_step_gradient_euler",
               "plant_step_gradient_semi_implicit_euler")
    try:
        for kernel in kernels:
            assert ctx.variants(kernel)[-1] == "tangents", (kernel, ctx.variants(kernel))
        plant = [k for k in kernels if k.startswith("plant")]
        assert all("warp" in ctx.variants(k) for k in plant), [ctx.variants(k) for k in plant]
        variants = sorted({v for k in kernels for v in ctx.variants(k)})
        for variant in variants:
            for kernel in kernels:
                if variant in ctx.variants(kernel):
                    ctx.set_variant_for(kernel, variant)
            for batch in (1, 9, 300):
                s = random_states(ref.model, batch, seed=batch + 40)
                q, qd, u, fe = (np.ascontiguousarray(x, np.float32)
                                for x in (s.q, s.qd, s.u, s.f_ext))
                d = [x.astype(np.float64) for x in (q, qd, u, fe)]
                assert scaled_error(ctx.forward_dynamics_gradient(q, qd, u),
                                    ref.forward_dynamics_gradient(d[0], d[1], d[2])) < 1e-3
                assert scaled_error(ctx.forward_dynamics_gradient(q, qd, u, fe),
                                    ref.forward_dynamics_gradient(*d)) < 1e-3
                x = np.concatenate([q, qd], axis=1)
                for integrator in ("euler", "semi_implicit_euler"):
                    got = ctx.plant_step_gradient(x, u, 0.02, integrator)
                    want = ref.plant_step_gradient(x.astype(np.float64), d[2], 0.02,
                                                   integrator)
                    assert scaled_error(got, want) < 1e-3, (variant, integrator, batch)
        if not floating:
            _check_torch_streams_and_capture(h, ref)
    finally:
        ctx.close()
        h.close()


def _check_torch_streams_and_capture(h, ref):
    """The torch handle's fused step on two CUDA streams and inside a captured graph: each
    stream gets its own cached `dt` column (the fill is ordered on the stream that reads
    it), a capture keeps none (its fill runs when the graph does), and every result
    matches the reference."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd._step_inputs import step_columns
    from grid_rbd.torch import TorchRobotHandle

    th = TorchRobotHandle(h)
    s = random_states(ref.model, 64, seed=77)
    x = np.concatenate([s.q, s.qd], axis=1).astype(np.float32)
    u = s.u.astype(np.float32)
    xt, ut = (torch.from_numpy(a).cuda() for a in (x, u))

    def want(dt):
        return ref.plant_step_gradient(x.astype(np.float64), u.astype(np.float64), dt,
                                       "euler")
    main = torch.cuda.current_stream()
    got = [th.plant_step_gradient(xt, ut, 0.02)]
    side = torch.cuda.Stream()
    side.wait_stream(main)
    with torch.cuda.stream(side):
        got.append(th.plant_step_gradient(xt, ut, 0.02))
    main.wait_stream(side)
    streams = {key[3] for key in step_columns(th)._columns}
    assert streams == {main.cuda_stream, side.cuda_stream}, streams
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = th.plant_step_gradient(xt, ut, 0.03)
    assert len(step_columns(th)) == 2
    graph.replay()
    torch.cuda.synchronize()
    for G in got:
        assert scaled_error(G.cpu().numpy(), want(0.02)) < 1e-3
    assert scaled_error(captured.cpu().numpy(), want(0.03)) < 1e-3
