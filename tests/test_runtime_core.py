"""grid_rbd._core: loading, the descriptor's info, every algorithm through the host
(numpy) call path against the float64 reference, `out=` of any shape, argument errors,
page-locked arrays. CPU artifacts in CI; the tests tagged `gpu` run the same path on a CUDA
artifact (staging arena, copies, device profile, arch mismatch) and skip, with the
reason, where there is no GPU.

Artifacts come from `artifact_harness.build_cached` (the configurations
test_codegen_cpu.py also builds, so one pytest session compiles each once).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
from artifact_harness import build_cached, load_model, reference_case
from support import REPO, ROBOTS, assert_scaled_close, random_states

import grid_rbd.reference as reference
from grid_codegen.compile import compile_artifact, detect_cuda_arch
from grid_codegen.emit.prelude import header
from grid_codegen.emit.wrapper import ABI_VERSION
from grid_codegen.generate import generate
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS
from grid_codegen.options import CodegenOptions

try:
    from grid_rbd import _core
except ImportError as exc:  # pragma: no cover - a checkout without the extension
    raise ImportError("grid_rbd._core is not built: run tools/build_core.sh (in-tree) or "
                      "pip install -e .") from exc

ROBOTS_UNDER_TEST = ("iiwa14", "go2")  # fixed and floating base
WITH_FEXT = {"inverse_dynamics", "forward_dynamics", "aba", "inverse_dynamics_gradient",
             "forward_dynamics_gradient"}
BATCH = 37
EDGE_MAX_BATCH = 300  # the go2 build test_codegen_cpu.py uses for its batch edges
TOL = 1e-9


@pytest.fixture(scope="module", params=ROBOTS_UNDER_TEST)
def loaded(request):
    """(artifact, reference, states) for one float64 CPU build."""
    robot = ROBOTS[request.param]
    harness, _ = build_cached(robot.name, dtype="float64")
    ref = reference.load(robot.path, floating_base=robot.floating_base)
    artifact = _core.load_artifact(str(harness.path))
    return artifact, ref, random_states(ref.model, BATCH, seed=11)


@pytest.fixture(scope="module")
def iiwa():
    harness, _ = build_cached("iiwa14", dtype="float64")
    ref = reference.load(ROBOTS["iiwa14"].path)
    return _core.load_artifact(str(harness.path)), ref, random_states(ref.model, 5, seed=3)


def test_core_is_the_bazel_build_under_bazel():
    """Under Bazel (//tests:test_runtime_core), the `_core` these tests exercise is the
    Bazel build //runtime:_core.so that //python:grid_rbd ships (its runfiles path is in
    GRID_RBD_CORE), not the in-tree build in the source package python/grid_rbd/."""
    expected = os.environ.get("GRID_RBD_CORE")
    if not expected:
        pytest.skip("not run by Bazel (GRID_RBD_CORE unset): _core is " + _core.__file__)
    assert os.path.abspath(_core.__file__) == os.path.abspath(expected), _core.__file__
    real = Path(os.path.realpath(_core.__file__))
    assert "bazel-out" in real.parts and real.parent.parts[-3:] == ("bin", "python",
                                                                   "grid_rbd"), real


def _call(artifact, algorithm, inputs, batch, gravity=-9.81, out=None):
    shape = artifact.info["algorithms"][algorithm]["output_shape"]
    out = np.full((batch, *shape), np.nan) if out is None else out
    artifact.call(0, algorithm, [None if x is None else np.ascontiguousarray(x)
                                 for x in inputs], out, gravity=gravity)
    return out


def test_runtime_and_generator_share_one_abi_header():
    """The runtime includes the generator's grid/abi.h (no copy to keep in step), and
    every generated grid.cuh inlines the same text."""
    runtime = (REPO / "runtime/include/grid_rbd/abi.h").read_text()
    assert '#include "grid/abi.h"' in runtime and "typedef struct" not in runtime
    files = generate(load_model("iiwa14"), CodegenOptions(algorithms=("crba",),
                                                          strategy="warp"))
    assert header("abi.h") in files["grid.cuh"]
    assert _core.ABI_VERSION == ABI_VERSION == 5


def test_info_describes_the_artifact(loaded):
    artifact, ref, _ = loaded
    info = artifact.info
    model = ref.model
    assert (info["nq"], info["nv"], info["nb"]) == (model.nq, model.nv, model.nb)
    assert info["robot_name"] == model.name
    assert info["dtype"] == "float64" and info["archs"] == "cpu"
    assert info["is_gpu"] is False and info["runtime_inertia"] is False
    assert info["strategy"] == "auto" and info["max_batch"] == 65536
    assert info["options"]["dtype"] == "float64" and info["options"]["algorithms"] == list(
        ALGORITHMS)
    assert list(info["algorithms"]) == list(ALGORITHMS)
    fd = info["algorithms"]["forward_dynamics"]
    assert fd["id"] == ALGORITHMS.index("forward_dynamics")
    assert fd["inputs"] == [("q", model.nq, True), ("qd", model.nv, True),
                            ("u", model.nv, True), ("f_ext", 6 * model.nb, False)]
    assert fd["output_shape"] == (model.nv,) and fd["uses_gravity"] is True
    assert info["algorithms"]["crba"]["output_shape"] == (model.nv, model.nv)
    assert info["algorithms"]["crba"]["uses_gravity"] is False
    assert info["num_ees"] == ref.num_ees
    assert Path(artifact.path).is_file() and 0 <= artifact.salt < 2**64


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_matches_the_reference(loaded, algorithm):
    artifact, ref, states = loaded
    inputs, expected = reference_case(ref, algorithm, states, f_ext=algorithm in WITH_FEXT)
    actual = _call(artifact, algorithm, inputs, BATCH)
    assert_scaled_close(actual, expected, TOL, f"{ref.model.name} {algorithm}")


def test_gravity_and_omitted_optional_inputs(iiwa):
    artifact, ref, s = iiwa
    expected = ref.inverse_dynamics(s.q, s.qd, s.qdd, None, -3.5)
    full = _call(artifact, "inverse_dynamics", [s.q, s.qd, s.qdd, None], 5, gravity=-3.5)
    short = _call(artifact, "inverse_dynamics", [s.q, s.qd, s.qdd], 5, gravity=-3.5)
    assert_scaled_close(full, expected, TOL, "ID at gravity -3.5")
    np.testing.assert_array_equal(full, short)


@pytest.mark.parametrize("shape", [(5 * 49,), (49, 5), (5, 7, 7), (1, 5, 1, 49)])
def test_out_of_any_shape_with_the_right_size(iiwa, shape):
    artifact, ref, s = iiwa
    out = np.full(shape, np.nan)
    artifact.call(0, "crba", [s.q], out)
    assert_scaled_close(out.reshape(5, 7, 7), ref.crba(s.q), TOL, f"crba into {shape}")


def test_batch_zero_is_a_no_op(iiwa):
    artifact, _, _ = iiwa
    out = np.empty((0, 7))
    artifact.call(0, "forward_dynamics", [np.empty((0, 7))] * 3, out)


def test_calls_from_many_threads(iiwa):
    artifact, ref, _ = iiwa
    s = random_states(ref.model, 64, seed=5)
    expected = ref.forward_dynamics(s.q, s.qd, s.u)
    ctx = artifact.create_context()
    errors = []

    def worker():
        for _ in range(20):
            out = np.empty((64, 7))
            artifact.call(ctx, "forward_dynamics", [s.q, s.qd, s.u], out)
            errors.append(np.abs(out - expected).max())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 80 and max(errors) < 1e-9
    artifact.close_context(ctx)


# -- argument errors -----------------------------------------------------------------------
def _fd_args(batch=4, nq=7, nv=7):
    rng = np.random.default_rng(0)
    return [rng.normal(size=(batch, nq)), rng.normal(size=(batch, nv)),
            rng.normal(size=(batch, nv))]


@pytest.mark.parametrize("mutate, message", [
    (lambda a: [a[0], a[1][:, :6].copy(), a[2]], "qd has width 6; this robot's width for qd is 7"),
    (lambda a: [a[0].astype(np.float32), a[1], a[2]], "q has dtype float32.*float64"),
    (lambda a: [a[0], np.asfortranarray(a[1]), a[2]], "qd is not C-contiguous"),
    (lambda a: [a[0], a[1], a[2][:2]], "u has batch 2 but q has batch 4"),
    (lambda a: [a[0].reshape(-1), a[1], a[2]], r"q has shape \(28,\).*\(B, 7\)"),
    (lambda a: [None, a[1], a[2]], "input q is required"),
    (lambda a: [a[0], a[1], a[2], None, a[0]], "takes 4 inputs"),
    (lambda a: [a[0].tolist(), a[1], a[2]], "must be a numpy array or None, got list"),
])
def test_bad_inputs_raise_value_error_naming_the_width(iiwa, mutate, message):
    artifact, _, _ = iiwa
    with pytest.raises(ValueError, match=message):
        artifact.call(0, "forward_dynamics", mutate(_fd_args()), np.empty((4, 7)))


@pytest.mark.parametrize("out, message", [
    (np.empty((4, 6)), r"out has shape \(4, 6\) \(24 elements\).*28 elements"),
    (np.empty((4, 7), dtype=np.float32), "out has dtype float32"),
    (np.empty((7, 4)).T, "out is not C-contiguous"),
    (None, "out must be a numpy array or None|out is required"),
])
def test_bad_out_raises_value_error(iiwa, out, message):
    artifact, _, _ = iiwa
    with pytest.raises(ValueError, match=message):
        artifact.call(0, "forward_dynamics", _fd_args(), out)


def test_read_only_out_and_unknown_algorithm(iiwa):
    artifact, _, _ = iiwa
    out = np.empty((4, 7))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        artifact.call(0, "forward_dynamics", _fd_args(), out)
    with pytest.raises(ValueError, match="unknown algorithm 'rnea'.*inverse_dynamics"):
        artifact.call(0, "rnea", _fd_args(), np.empty((4, 7)))


def test_batch_above_max_batch():
    harness, _ = build_cached("go2", dtype="float64", max_batch_size=EDGE_MAX_BATCH,
                              strategy="warp")  # test_codegen_cpu's build: compiled once
    artifact = _core.load_artifact(str(harness.path))
    assert artifact.info["max_batch"] == EDGE_MAX_BATCH
    nq, nv = artifact.info["nq"], artifact.info["nv"]
    q = np.zeros((EDGE_MAX_BATCH + 1, nq))
    q[:, 6] = 1.0
    with pytest.raises(ValueError, match="batch 301 exceeds this artifact's max_batch 300"):
        artifact.call(0, "crba", [q], np.empty((EDGE_MAX_BATCH + 1, nv, nv)))
    out = np.empty((EDGE_MAX_BATCH, nv, nv))
    artifact.call(0, "crba", [q[:EDGE_MAX_BATCH]], out)
    assert np.isfinite(out).all()


# -- loading -------------------------------------------------------------------------------
def test_load_failures_name_the_path(tmp_path):
    missing = tmp_path / "nope.so"
    with pytest.raises(RuntimeError, match=f"cannot load artifact {missing}"):
        _core.load_artifact(str(missing))
    with pytest.raises(RuntimeError, match="exports no grid_get_descriptor"):
        _core.load_artifact(_core.__file__)


def test_an_old_abi_is_refused(tmp_path):
    source = tmp_path / "old.cc"
    source.write_text('extern "C" const void* grid_get_descriptor(void) {\n'
                      "  static const int v1[16] = {1, 200};\n  return v1;\n}\n")
    so = tmp_path / "old.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(source), "-o", str(so)], check=True)
    with pytest.raises(RuntimeError, match=rf"{so}: its ABI version is 1; this runtime "
                                           rf"reads ABI {ABI_VERSION}"):
        _core.load_artifact(str(so))


# -- page-locked arrays ----------------------------------------------------------------------
def test_pinned_empty_is_a_usable_out(iiwa):
    artifact, ref, s = iiwa
    out = artifact.pinned_empty((5, 7))
    assert out.shape == (5, 7) and out.dtype == np.float64
    assert out.flags.c_contiguous and out.flags.writeable and not out.flags.owndata
    assert out.ctypes.data % 64 == 0 and out.base.nbytes == 5 * 7 * 8
    artifact.call(0, "forward_dynamics", [s.q, s.qd, s.u], out)
    assert_scaled_close(out, ref.forward_dynamics(s.q, s.qd, s.u), TOL, "FD into pinned out")
    assert artifact.pinned_empty(3).shape == (3,)
    assert artifact.pinned_empty(()).shape == ()
    with pytest.raises(ValueError, match="negative dimension"):
        artifact.pinned_empty((2, -1))
    with pytest.raises(ValueError, match="overflows"):
        artifact.pinned_empty((2**62, 2**62))


def test_pinned_memory_outlives_its_artifact():
    harness, _ = build_cached("iiwa14", dtype="float64")
    artifact = _core.load_artifact(str(harness.path))
    block = artifact.pinned_empty((1000,))
    view = block[10:20]
    del artifact, block
    gc.collect()
    view[:] = 1.5  # the block is still alive (the view's base holds it, and the .so)
    assert view.sum() == 15.0


# -- GPU artifacts (tag gpu): the staging path, page-locked memory, the device profile ------
def _require_gpu() -> str:
    """The detected `sm_XY`, or skip with the reason."""
    if shutil.which("nvcc") is None:
        pytest.skip("no CUDA GPU: nvcc is not on PATH")
    arch = detect_cuda_arch()
    if arch is None:
        pytest.skip("no CUDA GPU: nvidia-smi reports none")
    return arch


@pytest.fixture(scope="module")
def gpu_iiwa():
    _require_gpu()
    harness, _ = build_cached("iiwa14", backend="cuda", dtype="float64", runtime_inertia=True)
    ref = reference.load(ROBOTS["iiwa14"].path)
    return _core.load_artifact(str(harness.path)), ref


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_gpu_every_algorithm_matches_the_reference(gpu_iiwa, algorithm):
    artifact, ref = gpu_iiwa
    assert artifact.info["is_gpu"] is True
    for batch, seed in ((1, 1), (BATCH, 2), (1000, 3)):  # the staging arena grows
        s = random_states(ref.model, batch, seed=seed)
        inputs, expected = reference_case(ref, algorithm, s, f_ext=algorithm in WITH_FEXT)
        actual = _call(artifact, algorithm, inputs, batch)
        assert_scaled_close(actual, expected, TOL, f"GPU {algorithm} at batch {batch}")


@pytest.mark.gpu
def test_gpu_pinned_out_and_device_profile(gpu_iiwa):
    artifact, ref = gpu_iiwa
    s = random_states(ref.model, 64, seed=4)
    out = artifact.pinned_empty((64, 7))
    artifact.call(0, "forward_dynamics", [s.q, s.qd, s.u], out)
    assert_scaled_close(out, ref.forward_dynamics(s.q, s.qd, s.u), TOL, "GPU FD, pinned out")
    profile = artifact.device_profile(0)
    assert profile["is_gpu"] is True and profile["name"]
    assert profile["device_arch"] == _require_gpu()
    assert profile["device_arch"] in profile["compiled_archs"]
    assert profile["total_memory"] >= profile["free_memory"] > 0
    assert profile["shared_memory_optin"] > 48 * 1024 and profile["multiprocessors"] > 0


@pytest.mark.gpu
def test_gpu_arch_mismatch_refuses_the_context(tmp_path):
    arch = _require_gpu()
    foreign = "sm_80" if not arch.startswith("sm_8") else "sm_90"
    model = load_model("iiwa14")
    files = generate(model, CodegenOptions(dtype="float64", algorithms=("crba",)))
    result = compile_artifact(files, tmp_path, backend="cuda", gpu_archs=(foreign,),
                              detect_arch=False)
    artifact = _core.load_artifact(str(result.so_path))
    with pytest.raises(RuntimeError, match=f"compiled for {foreign} but device .* is {arch}"):
        artifact.create_context()
    with pytest.raises(RuntimeError, match=f"compiled for {foreign}"):
        artifact.call(0, "crba", [np.zeros((1, 7))], np.empty((1, 7, 7)))
