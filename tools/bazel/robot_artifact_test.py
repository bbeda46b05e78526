"""A Bazel-built robot artifact against the float64 reference (the grid_robot tests).

grid_robot's `<robot>_cpu_test` and `<robot>_gpu_test` run this file with:
  GRID_RBD_ARTIFACT        the .so (runfiles path)
  GRID_RBD_BACKEND         "cpu" (host pointers) or "cuda" (device memory)
  GRID_RBD_URDF            the URDF it was generated from
  GRID_RBD_FLOATING_BASE   "1" for a free-flyer root
  GRID_RBD_OPTIONS         options.json written by the generator (canonical options)
Every algorithm in the artifact is checked on random states (high velocities, external
forces, signed gravity) with the scale-aware tolerances of tests/artifact_harness.py.
The CUDA artifact is driven through its own ABI memory entry points (no torch needed);
without a usable GPU its tests skip, with the reason in the summary (-rs).
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

# The shared harness lives in tests/ (this file's runfiles root is two folders up).
sys.path.insert(0, str(Path(os.path.abspath(__file__)).parents[2] / "tests"))

from artifact_harness import (  # noqa: E402
    Artifact,
    reference_case,
    round_states,
    tolerance,
)
from support import assert_scaled_close, random_states  # noqa: E402

import grid_rbd.reference as reference  # noqa: E402

BATCH = 37  # not a multiple of any block or warp size
WITH_FEXT = ("inverse_dynamics", "forward_dynamics", "aba", "inverse_dynamics_gradient",
             "forward_dynamics_gradient")
COPY_HOST_TO_DEVICE, COPY_DEVICE_TO_HOST = 0, 1


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise RuntimeError(f"{name} is not set: run this file through a grid_robot test "
                           "target (tools/bazel/grid_robot.bzl)")
    return value


BACKEND = _env("GRID_RBD_BACKEND")
SO_PATH = Path(_env("GRID_RBD_ARTIFACT"))
OPTIONS = json.loads(Path(_env("GRID_RBD_OPTIONS")).read_text())


@pytest.fixture(scope="module")
def artifact() -> Artifact:
    art = Artifact(SO_PATH)
    if BACKEND == "cuda":
        _require_gpu(art)
    return art


@pytest.fixture(scope="module")
def ref():
    return reference.load(_env("GRID_RBD_URDF"),
                          floating_base=_env("GRID_RBD_FLOATING_BASE") == "1",
                          ee_joint_names=OPTIONS["ee_joint_names"] or None)


@pytest.fixture(scope="module")
def states(ref, artifact):
    return round_states(random_states(ref.model, BATCH, seed=ref.nv), artifact.dtype)


@pytest.fixture(scope="module")
def state(artifact):
    s = artifact.state()
    yield s
    s.close()


def _require_gpu(art: Artifact) -> None:
    from artifact_harness import GridError
    try:
        info = art.query_device()
    except GridError as err:
        pytest.skip(f"no usable CUDA GPU for {SO_PATH.name}: {err}")
    if not info.is_gpu:
        pytest.skip(f"no usable CUDA GPU for {SO_PATH.name}: query_device reports none")


def _call(state, name: str, *inputs, gravity: float = -9.81) -> np.ndarray:
    """`state.call` on host arrays; on a CUDA artifact through device buffers that the
    artifact allocates and copies itself (its ABI's device_alloc / copy / synchronize)."""
    if BACKEND == "cpu":
        return state.call(name, *inputs, gravity=gravity)
    art = state.artifact
    desc, info = art.desc, art.algorithms[name]
    batch = int(np.asarray(inputs[0]).reshape(-1, info.inputs[0][1]).shape[0])
    buffers: list[int] = []

    def device_copy(host: np.ndarray) -> int:
        ptr = desc.device_alloc(max(host.nbytes, 1))
        assert ptr, f"device_alloc({host.nbytes}) failed"
        buffers.append(ptr)
        art.check(desc.copy(ptr, host.ctypes.data, host.nbytes, COPY_HOST_TO_DEVICE, None))
        return ptr

    try:
        pointers = []
        for (_, width, _), x in zip(info.inputs, list(inputs) + [None] * 4, strict=False):
            host = None if x is None else np.ascontiguousarray(
                np.asarray(x).reshape(batch, width), dtype=art.dtype)
            pointers.append(0 if host is None else device_copy(host))
        out = np.zeros((batch, *info.output_shape), dtype=art.dtype)
        device_out = device_copy(out)
        art.check(state.launch_raw(name, pointers, device_out, batch, gravity))
        art.check(desc.synchronize(None))
        art.check(desc.copy(out.ctypes.data, device_out, out.nbytes, COPY_DEVICE_TO_HOST,
                            None))
        art.check(desc.synchronize(None))
        return out
    finally:
        for ptr in buffers:
            desc.device_free(ctypes.c_void_p(ptr))


def _check(state, ref, algorithm, s, f_ext=False, gravity=-9.81, what=""):
    inputs, expected = reference_case(ref, algorithm, s, f_ext, gravity)
    actual = _call(state, algorithm, *inputs, gravity=gravity)
    tol = tolerance(state.artifact.dtype, algorithm, ref, s.q)
    assert_scaled_close(actual, expected, tol,
                        f"{algorithm}{what} ({BACKEND}, {state.artifact.dtype})")
    return actual


def test_descriptor(artifact, ref):
    assert (artifact.nq, artifact.nv, artifact.nb) == (ref.nq, ref.nv, ref.nb)
    assert artifact.num_ees == ref.num_ees
    assert artifact.options_json == json.dumps(OPTIONS, sort_keys=True, separators=(",", ":"))
    assert list(artifact.algorithms) == OPTIONS["algorithms"]
    assert artifact.dtype == np.dtype(OPTIONS["dtype"])
    assert artifact.max_batch == OPTIONS["max_batch_size"]
    if BACKEND == "cpu":
        assert artifact.archs == "cpu" and not artifact.is_gpu
    else:
        archs = artifact.archs.split(",")
        assert artifact.is_gpu and archs and all(a.startswith("sm_") for a in archs)


@pytest.mark.parametrize("algorithm", OPTIONS["algorithms"])
def test_matches_reference(state, ref, states, algorithm):
    _check(state, ref, algorithm, states)
    if algorithm in WITH_FEXT:
        _check(state, ref, algorithm, states, f_ext=True, what=" with f_ext")
        _check(state, ref, algorithm, states, gravity=3.71, what=" gravity +3.71")


def test_batch_one_at_rest(state, ref, states):
    one = dataclasses.replace(states, **{k: getattr(states, k)[:1]
                                         for k in ("q", "qd", "qdd", "u", "f_ext")})
    one = dataclasses.replace(one, qd=np.zeros_like(one.qd))
    for algorithm in OPTIONS["algorithms"]:
        _check(state, ref, algorithm, one, what=" batch 1 at rest")


def test_runtime_inertia_table(artifact, ref, states):
    """The dynamics are linear in the inertial parameters: doubling every body's table
    row doubles the joint torques of inverse dynamics."""
    if not OPTIONS["runtime_inertia"]:
        pytest.skip("built without runtime_inertia")
    if "inverse_dynamics" not in OPTIONS["algorithms"]:
        pytest.skip("built without inverse_dynamics")
    table = np.stack([b.inertia.dynamic_parameters() for b in ref.model.bodies])
    state = artifact.state()
    try:
        _check(state, ref, "inverse_dynamics", states, what=" URDF table")
        state.set_inertia_table(2.0 * table)
        inputs, expected = reference_case(ref, "inverse_dynamics", states)
        tol = tolerance(artifact.dtype, "inverse_dynamics", ref, states.q)
        assert_scaled_close(_call(state, "inverse_dynamics", *inputs), 2.0 * expected, tol,
                            "inverse_dynamics with a doubled inertia table")
    finally:
        state.close()


def test_loads_through_grid_rbd_load_robot(ref, states):
    """The same file through the runtime: `grid_rbd.load_robot(path)` and its handle.

    Under Bazel, `grid_rbd._core` must be the Bazel build of the runtime extension
    (//runtime:_core.so, shipped by //python:grid_rbd_core; GRID_RUNTIME_DEPS in
    tools/bazel/grid_robot.bzl), whose runfiles path the macro passes in GRID_RBD_CORE:
    not the in-tree build of `pip install -e .` or tools/build_core.sh in the source
    package python/grid_rbd/. Run by pytest directly (no Bazel, no GRID_RBD_CORE), it
    uses whichever `grid_rbd._core` Python finds, and skips without one."""
    expected_core = os.environ.get("GRID_RBD_CORE")
    if not expected_core and importlib.util.find_spec("grid_rbd._core") is None:
        pytest.skip("grid_rbd._core (the runtime extension) is not built: run "
                    "tools/setup.sh (pip install -e .) or tools/build_core.sh")
    import grid_rbd
    import grid_rbd._core as core
    if expected_core:
        # The module Python imported is the runfiles file of the Bazel target...
        assert os.path.abspath(core.__file__) == os.path.abspath(expected_core), (
            f"grid_rbd._core imported from {core.__file__}, not the Bazel-built "
            f"{expected_core}")
        # ... and that file is a Bazel output (bazel-out/<config>/bin/python/grid_rbd/,
        # or bin/external/grid_rbd/python/grid_rbd/ in a workspace that pulls grid-rbd
        # in), not the git-ignored in-tree build in the source package.
        real = Path(os.path.realpath(core.__file__))
        bin_dir = real.parts.index("bin") if "bin" in real.parts else -1
        assert "bazel-out" in real.parts[:bin_dir] and real.parent.parts[-2:] == (
            "python", "grid_rbd"), real
    handle = grid_rbd.load_robot(SO_PATH)
    assert (handle.nq, handle.nv, handle.nb) == (ref.nq, ref.nv, ref.nb)
    dtype = np.dtype(OPTIONS["dtype"])
    for algorithm in OPTIONS["algorithms"]:
        inputs, expected = reference_case(ref, algorithm, states)
        inputs = tuple(np.ascontiguousarray(x, dtype=dtype) for x in inputs if x is not None)
        tol = tolerance(dtype, algorithm, ref, states.q)
        assert_scaled_close(np.asarray(getattr(handle, algorithm)(*inputs)), expected, tol,
                            f"{algorithm} through grid_rbd.load_robot")
