"""The thread strategy's staged stores on the GPU (tag `gpu`): outputs between
STAGE_MIN_WIDTH and STAGE_MAX_WIDTH scalars leave the kernel through shared memory, the
warp's rows stored linearly. Rows up to SHARED_ROW_MAX_BYTES are written by the item
straight into shared memory (iiwa14 in float32: 49, 98 and the step's 147 scalars;
in float64: 49); wider ones go through the thread's stack and a tile of 32 (float32) or
16 (float64) columns (go2: 324 and 648; iiwa14 in float64: 98 and 147). Checked against
the float64 reference at batches that end mid-warp and mid-block."""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import build_cached, reference_case, round_states, tolerance
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen.emit.kernels import (
    SHARED_ROW_MAX_BYTES,
    STAGE_MAX_WIDTH,
    STAGE_MIN_WIDTH,
    shared_row_pitch,
)
from grid_codegen.emit.thread_parts import part_ranges
from grid_codegen.registry import Dims, algorithm

pytestmark = pytest.mark.gpu

CHECKED = ("crba", "minv", "inverse_dynamics_gradient", "forward_dynamics_gradient")


@pytest.mark.parametrize(("robot", "dtype"), [("iiwa14", "float32"), ("go2", "float32"),
                                              ("iiwa14", "float64")])
def test_staged_thread_kernels_match_the_reference(tmp_path, robot, dtype):
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    spec = ROBOTS[robot]
    plant = ["plant"]  # the fused step gradients, a free-flyer root (go2) included
    np_dtype = np.dtype(dtype)
    th = grid_rbd.register_robot(f"{robot}_staged", urdf_path=str(spec.path),
                                 floating_base=spec.floating_base, dtype=dtype,
                                 backend="torch", device="cuda", strategy="thread",
                                 algorithm_list=["core", *plant], cache_dir=tmp_path)
    ref = reference.load(spec.path, floating_base=spec.floating_base)
    for batch in (1, 45, 300):
        s = round_states(random_states(ref.model, batch, seed=batch), dtype)
        dev = {k: torch.from_numpy(getattr(s, k).astype(np_dtype)).cuda()
               for k in ("q", "qd", "qdd", "u")}
        for name in CHECKED:
            args = {"crba": ("q",), "minv": ("q",),
                    "inverse_dynamics_gradient": ("q", "qd", "qdd"),
                    "forward_dynamics_gradient": ("q", "qd", "u")}[name]
            got = getattr(th, name)(*(dev[a] for a in args)).cpu().numpy()
            want = getattr(ref, name)(*(getattr(s, a) for a in args))
            assert_scaled_close(got.reshape(batch, -1), want.reshape(batch, -1),
                                tolerance(np_dtype, name, ref, s.q), f"{name} B={batch}")
        if plant:
            # Both integrators: on a vector configuration V staged and the position rows
            # written with it (`<alg>_store`); on go2's free flyer the whole item row.
            x = torch.cat([dev["q"], dev["qd"]], 1)
            x_host = np.concatenate([s.q, s.qd], 1)
            for integrator in ("euler", "semi_implicit_euler"):
                got = th.plant_step_gradient(x, dev["u"], 0.01, integrator)
                want = ref.plant_step_gradient(x_host, s.u, 0.01, integrator)
                assert_scaled_close(got.cpu().numpy().reshape(batch, -1),
                                    want.reshape(batch, -1),
                                    tolerance(np_dtype, "forward_dynamics_gradient", ref,
                                              s.q), f"plant_step_gradient {integrator} B={batch}")
            # The kernels take a step per item: each item's rows use its own.
            steps = torch.linspace(0.005, 0.02, batch, device="cuda",
                                   dtype=dev["q"].dtype).reshape(batch, 1)
            for integrator in ("euler", "semi_implicit_euler"):
                got = getattr(th, f"plant_step_gradient_{integrator}")(x, dev["u"], steps)
                for b in sorted({0, batch // 2, batch - 1}):
                    want = ref.plant_step_gradient(x_host[b:b + 1], s.u[b:b + 1],
                                                   float(steps[b, 0]), integrator)
                    assert_scaled_close(got[b:b + 1].cpu().numpy().reshape(1, -1),
                                        want.reshape(1, -1),
                                        tolerance(np_dtype, "forward_dynamics_gradient",
                                                  ref, s.q),
                                        f"{integrator} per-item dt, item {b} B={batch}")
    th.close()
    assert STAGE_MIN_WIDTH <= 49 and 648 <= STAGE_MAX_WIDTH  # the widths above are staged
    # ... and both staging paths are taken: rows in shared memory and rows on the stack.
    assert shared_row_pitch(147) * 4 <= SHARED_ROW_MAX_BYTES < shared_row_pitch(98) * 8
    assert shared_row_pitch(49) * 8 <= SHARED_ROW_MAX_BYTES < shared_row_pitch(324) * 4


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_thread_parts_at_every_width_and_grid_cap(tmp_path, dtype):
    """go2's CRBA and end-effector gradient run as parts (a warp per part of 32 items,
    `emit.thread_parts`; its M^-1 stays whole): in shared-memory rows (float32) or stack
    rows (float64), at launch widths of one to eight warps and with capped grids whose
    warps stride over the parts, at batches that end mid-warp."""
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    artifact, _ = build_cached("go2", backend="cuda", dtype=dtype, strategy="thread",
                               algorithms=("crba", "minv", "end_effector_pose_gradient"))
    dims = Dims(artifact.nq, artifact.nv, artifact.nb, artifact.num_ees)
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    state = artifact.state()
    for batch in (1, 33, 300):
        s = round_states(random_states(ref.model, batch, seed=batch + 5), dtype)
        for name in ("crba", "minv", "end_effector_pose_gradient"):
            assert part_ranges(algorithm(name), dims) != []  # wide enough to be cut
            inputs, expected = reference_case(ref, name, s)
            device = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs[:1]]
            for threads, cap in ((0, 0), (32, 0), (64, 3), (256, 0), (128, 1)):
                out = state.call(name, *device, variant="thread", threads=threads,
                                 max_blocks=cap)
                torch.cuda.synchronize()
                assert_scaled_close(out.cpu().numpy(), expected,
                                    tolerance(np.dtype(dtype), name, ref, s.q),
                                    f"{name} B={batch} x{threads}, at most {cap or 'any'} "
                                    "blocks")
    state.close()
