"""The centroidal profile on the CUDA build against the float64 reference (tag `gpu`):
the matrix of test_centroidal_kernels through torch CUDA tensors, a batch that is not a
warp multiple, every robot in float64 and three in float32. Skipped, with the reason
shown, where nvcc, torch or a GPU is missing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from artifact_harness import build_cached, prebuild, round_states, tolerance
from support import ROBOTS, assert_scaled_close, random_states
from test_centroidal_kernels import CENTROIDAL, OPTIONS, expected
from test_codegen_gpu import _require_cuda

import grid_rbd.reference as reference
from grid_codegen.registry import algorithm

pytestmark = pytest.mark.gpu

CONFIGS = ([(r, "float64") for r in sorted(ROBOTS)]
           + [(r, "float32") for r in ("iiwa14", "go2", "g1")])


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    _require_cuda()
    prebuild([(r, "cuda", {"dtype": d, **OPTIONS}) for r, d in CONFIGS])


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def case(request):
    torch = _require_cuda()
    robot, dtype = request.param
    artifact, _ = build_cached(robot, backend="cuda", dtype=dtype, **OPTIONS)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    s = round_states(random_states(ref.model, 37, seed=len(robot)), artifact.dtype)
    yield torch, ref, state, s
    state.close()


def _run(torch, state, ref, name, s, gravity=-9.81):
    inputs, want = expected(ref, name, s, gravity)
    device = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs]
    kwargs = {"gravity": gravity} if algorithm(name).uses_gravity else {}
    out = state.call(name, *device, **kwargs)
    torch.cuda.synchronize()
    got = out.cpu().numpy().reshape(len(s.q), -1)
    assert_scaled_close(got, want, tolerance(state.artifact.dtype, name, ref, s.q),
                        f"{name} (cuda, {state.artifact.dtype})")


@pytest.mark.parametrize("name", CENTROIDAL)
def test_matches_reference(case, name):
    torch, ref, state, s = case
    _run(torch, state, ref, name, s)
    if algorithm(name).uses_gravity:
        _run(torch, state, ref, name, s, gravity=3.71)


def test_zero_velocity_and_batch_one(case):
    torch, ref, state, s = case
    still = dataclasses.replace(s, qd=np.zeros_like(s.qd))
    one = dataclasses.replace(s, **{k: getattr(s, k)[:1] for k in ("q", "qd", "qdd")})
    for name in CENTROIDAL:
        _run(torch, state, ref, name, still)
        _run(torch, state, ref, name, one)
