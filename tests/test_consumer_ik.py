"""The batched damped-least-squares IK consumer (examples/consumer_ik) built with
build_artifact, loaded with ctypes, judged by the float64 reference's pose; plus the
device state calls and the contact-frame kinematics of `grid::device`."""

from __future__ import annotations

import ctypes
import sys

import numpy as np
import pytest
from consumer_support import IIWA, IK_DIR

sys.path.insert(0, str(IK_DIR))
import ik_iiwa14 as ik  # noqa: E402

import grid_rbd  # noqa: E402
from grid_rbd import reference  # noqa: E402

SOLVED = 0.999  # of random reachable targets; the rest are reported, never hidden


@pytest.fixture(scope="module")
def cpu_solver(tmp_path_factory):
    art = ik.build(tmp_path_factory.mktemp("ik_cache"), backend="cpu")
    return art, ik.IKSolver(art.path)


def _check_solution(solver: ik.IKSolver, batch: int, seed: int) -> None:
    _, targets, seeds = ik.make_problem(batch, seed=seed)
    res = solver.solve(targets, seeds)
    pos, rot = ik.pose_errors(res["q"], targets)
    solved = (pos < 1e-4) & (rot < 1e-3)
    assert solved.mean() >= SOLVED, f"only {solved.mean():.4%} of {batch} targets solved"
    assert np.median(pos) < 2e-5
    # The solver's own error report agrees with the reference at its answer: a target it
    # calls converged is converged, and one it did not solve is not passed off as solved.
    np.testing.assert_allclose(res["err"][:, 0], pos, atol=5e-6)
    reported = (res["err"][:, 0] < ik.TOL_POS) & (res["err"][:, 1] < ik.TOL_ROT)
    assert np.all(solved[reported])
    assert np.all(res["iters"][~reported] == ik.MAX_ITERS)


def test_ik_solves_reachable_targets_to_the_reference_pose_on_the_cpu(cpu_solver):
    art, solver = cpu_solver
    assert (solver.robot, solver.nq, solver.nv, solver.num_ees) == ("iiwa14", 7, 7, 1)
    assert not solver.gpu and art.arch == "cpu"
    _check_solution(solver, 2048, seed=1)


def test_ik_starts_solved_targets_in_zero_iterations(cpu_solver):
    _, solver = cpu_solver
    q_true, targets, _ = ik.make_problem(64, seed=2)
    res = solver.solve(targets, q_true)
    assert np.all(res["iters"] <= 1)
    np.testing.assert_allclose(res["q"], q_true, atol=1e-3)


def test_the_device_state_is_created_checked_freed_and_a_small_slab_refused(cpu_solver):
    _, solver = cpu_solver
    rc, codes = solver.state_selftest()
    ok, invalid, oom = 0, 1, 6  # GRID_OK, GRID_ERROR_INVALID_ARGUMENT, _OUT_OF_MEMORY
    assert rc == ok
    # create, check, free, check after free, slab one byte short, slab of state_bytes
    assert codes == [ok, ok, ok, invalid, oom, ok]


CONTACT_UNIT = """#include "grid.cuh"
extern "C" __attribute__((visibility("default")))
int contact_kinematics(const double* q, double* pos, double* jac) {
  grid::device::contact_positions<double>(q, pos);
  grid::device::contact_jacobians<double>(q, jac);
  return grid::device::kNumContacts;
}
"""


def test_contact_frame_positions_and_jacobians_match_the_reference(tmp_path):
    unit = tmp_path / "contacts.cpp"
    unit.write_text(CONTACT_UNIT)
    frames = ["iiwa_link_4", "iiwa_link_7"]
    art = grid_rbd.build_artifact("contacts", "iiwa14", IIWA, sources=[unit],
                                  cache_dir=tmp_path / "c", backend="cpu", dtype="float64",
                                  algorithm_list=["world_kinematics"],
                                  contact_frames=frames)
    assert "kContactNames[2] = {\"iiwa_link_4\", \"iiwa_link_7\"}" in art.header.read_text()
    lib = ctypes.CDLL(str(art.path))
    lib.contact_kinematics.argtypes = [ctypes.c_void_p] * 3
    ref = reference.load(IIWA)
    q = np.array([0.4, -0.3, 0.8, 1.2, -0.6, 0.5, -0.9])
    pos, jac = np.zeros(6), np.zeros(2 * 3 * 7)
    assert lib.contact_kinematics(q.ctypes.data, pos.ctypes.data, jac.ctypes.data) == 2
    jac = jac.reshape(2, 3, 7)
    for c, frame in enumerate(frames):
        body = ref.model.body_names.index(frame)
        placements = ref.forward_kinematics(q[None])[0, body]
        np.testing.assert_allclose(pos[3 * c:3 * c + 3], placements[:3, 3], atol=1e-12)
        # Linear Jacobian by central differences of the reference's world position.
        fd = np.zeros((3, 7))
        for j in range(7):
            dq = np.zeros(7)
            dq[j] = 1e-6
            plus = ref.forward_kinematics((q + dq)[None])[0, body, :3, 3]
            minus = ref.forward_kinematics((q - dq)[None])[0, body, :3, 3]
            fd[:, j] = (plus - minus) / 2e-6
        np.testing.assert_allclose(jac[c], fd, atol=1e-7)
    assert np.all(jac[0][:, 4:] == 0.0)  # link 4 does not move with joints 5..7


def _cuda_reason() -> str | None:
    from grid_rbd._device import cuda_status

    status = cuda_status()
    return None if status.usable and status.nvcc else f"no usable CUDA build here: " \
        f"{status.reason}"


@pytest.mark.gpu
def test_ik_solves_on_the_gpu(tmp_path):
    reason = _cuda_reason()
    if reason:
        pytest.skip(reason)
    art = ik.build(tmp_path / "c", backend="cuda")
    solver = ik.IKSolver(art.path)
    assert solver.gpu and art.arch.startswith("sm_")
    rc, codes = solver.state_selftest()
    assert rc == 0 and codes == [0, 0, 0, 1, 6, 0]
    _check_solution(solver, 65536, seed=3)
    loaded = grid_rbd.load_artifact("ik_dls", "iiwa14", cache_dir=tmp_path / "c")
    assert loaded.path == art.path
    with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="architecture"):
        grid_rbd.load_artifact("ik_dls", "iiwa14", cache_dir=tmp_path / "c", arch="cpu")


COOPERATIVE_UNIT = r"""#include "grid.cuh"
namespace gd = grid::device;
// One item per thread, per warp and per block: the three forms of end_effector_pose.
__global__ void forms(const float* q, float* by_thread, float* by_warp, float* by_block,
                      int batch) {
  extern __shared__ float s[];
  const int warps = blockDim.x / 32, lane_warp = threadIdx.x / 32;
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < batch) gd::end_effector_pose<float>(q + t * gd::kNq, by_thread + t * 6);
  const int w = blockIdx.x * warps + lane_warp;  // one item per warp (uniform per warp)
  if (w < batch) gd::end_effector_pose_warp<float>(
      s + lane_warp * gd::kEndEffectorPoseWarpScratch, q + w * gd::kNq, by_warp + w * 6);
  __syncthreads();
  if (blockIdx.x < batch) gd::end_effector_pose_block<float>(  // one item per block
      s, q + blockIdx.x * gd::kNq, by_block + blockIdx.x * 6);
}
extern "C" __attribute__((visibility("default")))
int run_forms(const float* q, float* out, int batch) {  // host arrays, out (3, batch, 6)
  const size_t nq = sizeof(float) * gd::kNq * batch, no = sizeof(float) * 6 * batch;
  float *d_q, *d_o;
  if (cudaMalloc(&d_q, nq) != cudaSuccess || cudaMalloc(&d_o, 3 * no) != cudaSuccess) return 6;
  cudaMemcpy(d_q, q, nq, cudaMemcpyHostToDevice);
  const int threads = 128;
  size_t shared = sizeof(float) * (gd::kEndEffectorPoseWarpScratch * (threads / 32));
  if (shared < sizeof(float) * gd::kEndEffectorPoseBlockScratch)
    shared = sizeof(float) * gd::kEndEffectorPoseBlockScratch;
  const int blocks = batch;  // enough blocks for the block form's one item each
  forms<<<blocks, threads, shared>>>(d_q, d_o, d_o + 6 * batch, d_o + 12 * batch, batch);
  const int rc = cudaDeviceSynchronize() == cudaSuccess ? 0 : 5;
  cudaMemcpy(out, d_o, 3 * no, cudaMemcpyDeviceToHost);
  cudaFree(d_q);
  cudaFree(d_o);
  return rc;
}
"""


@pytest.mark.gpu
def test_thread_warp_and_block_forms_agree_with_the_reference_on_the_gpu(tmp_path):
    reason = _cuda_reason()
    if reason:
        pytest.skip(reason)
    unit = tmp_path / "forms.cu"
    unit.write_text(COOPERATIVE_UNIT)
    art = grid_rbd.build_artifact("forms", "iiwa14", IIWA, sources=[unit],
                                  cache_dir=tmp_path / "c", backend="cuda",
                                  algorithm_list=["end_effector_pose"])
    lib = ctypes.CDLL(str(art.path))
    lib.run_forms.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    batch = 300
    q = np.random.default_rng(4).uniform(-2, 2, (batch, 7)).astype(np.float32)
    out = np.zeros((3, batch, 6), np.float32)
    assert lib.run_forms(q.ctypes.data, out.ctypes.data, batch) == 0
    want = reference.load(IIWA).end_effector_pose(q.astype(np.float64))[:, :6]
    for form in range(3):
        np.testing.assert_allclose(out[form, :, :3], want[:, :3], atol=5e-5)
        rpy = (out[form, :, 3:] - want[:, 3:] + np.pi) % (2 * np.pi) - np.pi  # +-pi alike
        np.testing.assert_allclose(rpy, 0.0, atol=2e-4)
