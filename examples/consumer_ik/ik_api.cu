// ik_api.cu: the host side of the IK consumer: host-array marshalling (device buffers on
// the GPU build), the robot's dimensions and a self-test of grid::device's state calls.
#include "grid.cuh"
#include "ik_solver.h"

namespace gd = grid::device;

extern "C" int ik_solve(const float* targets, const float* q_seed, float* q_out,
                        float* err_out, int* iters_out, int batch, int max_iters,
                        float damping, float tol_pos, float tol_rot) {
#if GRID_IS_CUDA
  if (batch <= 0) return batch == 0 ? GRID_OK : GRID_ERROR_INVALID_ARGUMENT;
  const size_t nt = sizeof(float) * 6 * batch, nq = sizeof(float) * gd::kNq * batch;
  const size_t ne = sizeof(float) * 2 * batch, ni = sizeof(int) * batch;
  char* buffer = static_cast<char*>(grid::device_alloc(nt + 2 * nq + ne + ni));
  if (buffer == nullptr) return GRID_ERROR_OUT_OF_MEMORY;
  float* d_t = reinterpret_cast<float*>(buffer);
  float* d_seed = reinterpret_cast<float*>(buffer + nt);
  float* d_q = reinterpret_cast<float*>(buffer + nt + nq);
  float* d_e = reinterpret_cast<float*>(buffer + nt + 2 * nq);
  int* d_i = reinterpret_cast<int*>(buffer + nt + 2 * nq + ne);
  int rc = grid::copy_to_device(d_t, targets, nt);
  if (rc == GRID_OK) rc = grid::copy_to_device(d_seed, q_seed, nq);
  if (rc == GRID_OK) rc = ik_solve_device(d_t, d_seed, d_q, d_e, d_i, batch, max_iters,
                                          damping, tol_pos, tol_rot, nullptr);
  if (rc == GRID_OK) rc = grid::copy(q_out, d_q, nq, GRID_COPY_DEVICE_TO_HOST, nullptr);
  if (rc == GRID_OK) rc = grid::copy(err_out, d_e, ne, GRID_COPY_DEVICE_TO_HOST, nullptr);
  if (rc == GRID_OK) rc = grid::copy(iters_out, d_i, ni, GRID_COPY_DEVICE_TO_HOST, nullptr);
  if (rc == GRID_OK) rc = grid::synchronize(nullptr);
  grid::device_free(buffer);
  return rc;
#else
  return ik_solve_device(targets, q_seed, q_out, err_out, iters_out, batch, max_iters,
                         damping, tol_pos, tol_rot, nullptr);
#endif
}

extern "C" int ik_dims(int* nq, int* nv, int* num_ees) {
  if (nq == nullptr || nv == nullptr || num_ees == nullptr) return GRID_ERROR_NULL_POINTER;
  *nq = gd::kNq;
  *nv = gd::kNv;
  *num_ees = gd::kNumEes;
  return GRID_IS_CUDA ? 1 : 0;
}

extern "C" const char* ik_robot_name(void) { return gd::kRobotName; }

extern "C" int ik_state_selftest(int* codes) {
  if (codes == nullptr) return GRID_ERROR_NULL_POINTER;
  gd::State<float> state = {};
  codes[0] = gd::create_state<float>(&state);
  codes[1] = gd::check_state<float>(&state);
  codes[2] = gd::free_state<float>(&state);
  codes[3] = gd::check_state<float>(&state);
  const size_t need = gd::state_bytes<float>();
  void* slab = grid::device_alloc(need + 256);
  if (slab == nullptr) return GRID_ERROR_OUT_OF_MEMORY;
  gd::State<float> small = {};
  codes[4] = gd::create_state<float>(&small, slab, need - 1);
  gd::State<float> fitted = {};
  codes[5] = gd::create_state<float>(&fitted, slab, need);
  const int owned = fitted.owns_memory;
  gd::free_state<float>(&fitted);
  grid::device_free(slab);  // the slab stays the caller's: free_state left it alone
  return owned == 0 && small.magic == 0 ? GRID_OK : GRID_ERROR_INVALID_ARGUMENT;
}
