"""Layer 3: the generated CUDA build against the float64 reference (tag `gpu`).

The same numeric matrix as `test_codegen_cpu`, through torch CUDA tensors (device
pointers, the current stream). Skipped, with the reason shown, where nvcc, torch or a
GPU is missing.
"""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from artifact_harness import build_cached, prebuild, reference_case, round_states, tolerance
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd.reference as reference
from grid_codegen.emit import BUILDERS
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS

pytestmark = pytest.mark.gpu

CONFIGS = [(r, d) for d in ("float64", "float32") for r in sorted(ROBOTS)]
WITH_FEXT = ("inverse_dynamics", "forward_dynamics", "aba", "inverse_dynamics_gradient",
             "forward_dynamics_gradient")


def _require_cuda():
    if shutil.which("nvcc") is None:
        pytest.skip("no CUDA GPU: nvcc is not on PATH")
    try:
        import torch
    except ImportError:
        pytest.skip("no CUDA GPU: torch is not installed (needed for device tensors)")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: torch.cuda.is_available() is False")
    return torch


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    _require_cuda()
    prebuild([(r, "cuda", {"dtype": d}) for r, d in CONFIGS])


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def case(request):
    torch = _require_cuda()
    robot, dtype = request.param
    artifact, _ = build_cached(robot, backend="cuda", dtype=dtype)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    s = round_states(random_states(ref.model, 37, seed=len(robot)), artifact.dtype)
    yield torch, artifact, ref, state, s
    state.close()


def _run(torch, state, ref, algorithm, s, f_ext=False, gravity=-9.81):
    inputs, expected = reference_case(ref, algorithm, s, f_ext, gravity)
    device_inputs = [None if x is None else torch.from_numpy(np.ascontiguousarray(x)).cuda()
                     for x in inputs]
    out = state.call(algorithm, *device_inputs, gravity=gravity)
    torch.cuda.synchronize()
    tol = tolerance(state.artifact.dtype, algorithm, ref, s.q)
    assert_scaled_close(out.cpu().numpy(), expected, tol, f"{algorithm} (cuda)")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_matches_reference(case, algorithm):
    torch, _, ref, state, s = case
    _run(torch, state, ref, algorithm, s)


@pytest.mark.parametrize("algorithm", WITH_FEXT)
def test_external_forces_and_gravity(case, algorithm):
    torch, _, ref, state, s = case
    _run(torch, state, ref, algorithm, s, f_ext=True)
    _run(torch, state, ref, algorithm, s, gravity=3.71)


def test_zero_velocity_and_batch_one(case):
    torch, _, ref, state, s = case
    still = dataclasses.replace(s, qd=np.zeros_like(s.qd))
    one = dataclasses.replace(s, **{k: getattr(s, k)[:1]
                                    for k in ("q", "qd", "qdd", "u", "f_ext")})
    for algorithm in ALGORITHMS:
        _run(torch, state, ref, algorithm, still)
        _run(torch, state, ref, algorithm, one)


def test_descriptor_and_device(case):
    _, artifact, _, _, _ = case
    assert artifact.is_gpu and "sm_90" in artifact.archs
    info = artifact.query_device()
    assert info.is_gpu == 1 and info.multiprocessors > 0
    assert f"sm_{info.cc_major}{info.cc_minor}" in artifact.archs.split(",")


VARIANT_ROBOTS = ("iiwa14", "go2", "g1")


@pytest.mark.parametrize("strategy", ["thread", "warp", "block", "tangents"])
@pytest.mark.parametrize("robot", VARIANT_ROBOTS)
def test_every_strategy_matches_reference(robot, strategy):
    """Every variant of the `auto` artifact (float64), chosen per call, on the GPU; the
    batch of 37 is below, across and above one warp and not a block multiple."""
    torch = _require_cuda()
    artifact, _ = build_cached(robot, backend="cuda", dtype="float64")
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    s = random_states(ref.model, 37, seed=7)
    ran = 0
    for algorithm in ALGORITHMS:
        if strategy not in artifact.algorithms[algorithm].variants:
            continue  # auto leaves out a thread variant past its size limit
        inputs, expected = reference_case(ref, algorithm, s, algorithm in WITH_FEXT)
        device = [None if x is None else torch.from_numpy(np.ascontiguousarray(x)).cuda()
                  for x in inputs]
        out = state.call(algorithm, *device, variant=strategy)
        torch.cuda.synchronize()
        assert_scaled_close(out.cpu().numpy(), expected,
                            tolerance(artifact.dtype, algorithm, ref, s.q),
                            f"{algorithm} ({strategy}, cuda)")
        ran += 1
    # Every algorithm with a level-synchronous emitter has its warp and block forms (the
    # reverse-mode kernels are thread-only); auto keeps at least 5 thread forms; the FD
    # gradient has the tangents form.
    level = [a for a in ALGORITHMS if a in BUILDERS]
    least = {"thread": 5, "tangents": 1}.get(strategy, len(level))
    assert ran >= least, (ran, strategy)
    state.close()


def test_launch_widths_and_grid_caps():
    """A non-default launch width and a capped grid (the rest grid-strides) give the same
    numbers, per strategy."""
    torch = _require_cuda()
    artifact, _ = build_cached("go2", backend="cuda", dtype="float64")
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    state = artifact.state()
    s = random_states(ref.model, 300, seed=8)
    inputs, expected = reference_case(ref, "aba", s)
    device = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in inputs[:3]]
    for strategy, threads, cap in (("thread", 64, 0), ("thread", 256, 0), ("thread", 32, 2),
                                   ("warp", 64, 0), ("warp", 256, 3), ("block", 64, 0),
                                   ("block", 0, 5)):
        out = state.call("aba", *device, variant=strategy, threads=threads, max_blocks=cap)
        torch.cuda.synchronize()
        assert_scaled_close(out.cpu().numpy(), expected, 1e-9,
                            f"aba {strategy} x{threads}, at most {cap or 'any'} blocks")
    state.close()


def test_large_batch():
    torch = _require_cuda()
    artifact, _ = build_cached("iiwa14", backend="cuda", dtype="float32")
    ref = reference.load(ROBOTS["iiwa14"].path)
    state = artifact.state()
    s = round_states(random_states(ref.model, 65536, seed=2), artifact.dtype)
    for algorithm in ("inverse_dynamics", "minv", "aba"):
        _run(torch, state, ref, algorithm, s)
    state.close()
