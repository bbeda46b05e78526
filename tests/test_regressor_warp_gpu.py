"""The inverse-dynamics regressor's warp strategy on the CUDA build (tag `gpu`): its two
kernels (the terms per thread into the head of each item's output, then the rows per
warp, `grid_codegen.emit.regressor_warp`) against the float64 reference, on artifacts
that build the regressor alone (g1's whole centroidal profile takes minutes of nvcc).
The default launch, 64 threads per block with a capped grid (items strided over warps
and over the terms kernel's threads), batch 1, and an absent `qdd`. Skipped, with the
reason shown, where nvcc, torch or a GPU is missing; the CPU build of the same variant
is checked in test_centroidal_kernels.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from artifact_harness import build_cached, prebuild, round_states, tolerance
from support import ROBOTS, assert_scaled_close, random_states
from test_centroidal_kernels import expected
from test_codegen_gpu import _require_cuda

import grid_rbd.reference as reference

pytestmark = pytest.mark.gpu

NAME = "inverse_dynamics_regressor"
OPTIONS = {"algorithms": (NAME,)}
CONFIGS = [(r, d) for r in ("iiwa14", "go2", "g1") for d in ("float32", "float64")]


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    _require_cuda()
    prebuild([(r, "cuda", {"dtype": d, **OPTIONS}) for r, d in CONFIGS])


@pytest.mark.parametrize(("robot", "dtype"), CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def test_warp_strategy_matches_reference(robot, dtype):
    torch = _require_cuda()
    artifact, _ = build_cached(robot, backend="cuda", dtype=dtype, **OPTIONS)
    assert "warp" in artifact.algorithms[NAME].variants
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    s = round_states(random_states(ref.model, 37, seed=len(robot)), artifact.dtype)

    def first(n):
        return dataclasses.replace(s, **{k: getattr(s, k)[:n] for k in ("q", "qd", "qdd")})

    resting = dataclasses.replace(s, qdd=np.zeros_like(s.qdd))
    capped = {"threads": 64, "max_blocks": 2}
    state = artifact.state()
    try:
        # 37 items: four whole tiles of 8 (the two-kernel path) and a partial one (the
        # warps compute their own terms); 8: tiles only; 5 and 1: a partial tile only; a
        # capped grid of the tile width strides over tiles; another width runs every
        # item as a partial tile's.
        for states, gravity, launch, absent, what in (
                (s, 3.71, {}, False, "default launch"),
                (s, -9.81, capped, False, "capped grid, 64 threads"),
                (s, -9.81, {"threads": 256, "max_blocks": 2}, False, "capped grid, tiles"),
                (first(8), -9.81, {}, False, "one whole tile"),
                (first(5), -9.81, {}, False, "batch 5"),
                (first(1), -9.81, {}, False, "batch 1"),
                (resting, -9.81, {}, True, "qdd absent")):
            inputs, want = expected(ref, NAME, states, gravity)
            if absent:
                inputs = inputs[:2]
            device = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs]
            for variant in artifact.algorithms[NAME].variants:
                out = state.call(NAME, *device, gravity=gravity, variant=variant, **launch)
                torch.cuda.synchronize()
                got = out.cpu().numpy().reshape(len(states.q), -1)
                assert_scaled_close(got, want, tolerance(artifact.dtype, NAME, ref, states.q),
                                    f"{robot} {variant} {what} ({dtype})")
    finally:
        state.close()
