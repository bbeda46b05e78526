// ik_solver.cu: batched damped-least-squares inverse kinematics on grid.cuh's device API.
//
// Per target, from its seed q: e = [p* - p(q); wrap(rpy* - rpy(q))], J = d[p, rpy]/dq
// (grid::device::end_effector_pose_gradient: coordinate derivatives, nv columns), and
// the step dq = J^T (J J^T + mu^2 I)^-1 e (damped least squares), its norm capped at
// kMaxStep, kept when it lowers |e|^2 (then mu halves, down to `damping`) and rejected
// otherwise (mu grows 4x), until |e_p| < tol_pos and max|e_rpy| < tol_rot or max_iters.
#include "grid.cuh"
#include "ik_solver.h"

namespace {

namespace gd = grid::device;
typedef float T;
constexpr int kRows = 6;      // one end effector: [x, y, z, roll, pitch, yaw]
constexpr T kMaxStep = T(0.5);  // rad: keeps the linearisation honest far from the target
constexpr T kPi = T(3.14159265358979323846);

GRID_INLINE T wrap_angle(T a) {
  while (a > kPi) a -= 2 * kPi;
  while (a < -kPi) a += 2 * kPi;
  return a;
}

// Solves the symmetric positive definite A x = b (n = kRows) by Cholesky, in place.
GRID_INLINE void spd_solve(T* A, T* b) {
  for (int j = 0; j < kRows; ++j) {
    T d = A[j * kRows + j];
    for (int k = 0; k < j; ++k) d -= A[j * kRows + k] * A[j * kRows + k];
    d = sqrt(d > T(1e-30) ? d : T(1e-30));
    A[j * kRows + j] = d;
    for (int i = j + 1; i < kRows; ++i) {
      T s = A[i * kRows + j];
      for (int k = 0; k < j; ++k) s -= A[i * kRows + k] * A[j * kRows + k];
      A[i * kRows + j] = s / d;
    }
  }
  for (int i = 0; i < kRows; ++i) {  // L y = b
    T s = b[i];
    for (int k = 0; k < i; ++k) s -= A[i * kRows + k] * b[k];
    b[i] = s / A[i * kRows + i];
  }
  for (int i = kRows - 1; i >= 0; --i) {  // L^T x = y
    T s = b[i];
    for (int k = i + 1; k < kRows; ++k) s -= A[k * kRows + i] * b[k];
    b[i] = s / A[i * kRows + i];
  }
}

GRID_INLINE void pose_error(const T* target, const T* pose, T* e, T* err_pos, T* err_rot) {
  T pos2 = 0, rot = 0;
  for (int i = 0; i < 3; ++i) {
    e[i] = target[i] - pose[i];
    pos2 += e[i] * e[i];
    e[3 + i] = wrap_angle(target[3 + i] - pose[3 + i]);
    const T a = e[3 + i] < 0 ? -e[3 + i] : e[3 + i];
    rot = a > rot ? a : rot;
  }
  *err_pos = sqrt(pos2);
  *err_rot = rot;
}

// One target: the whole solve in registers and the stack of one thread.
GRID_INLINE void solve_one(const T* target, const T* seed, T* q_out, T* err_out,
                           int* iters_out, int max_iters, T damping, T tol_pos, T tol_rot) {
  static_assert(gd::kNq == gd::kNv, "this example assumes a fixed-base arm (nq == nv)");
  T q[gd::kNq];
  for (int i = 0; i < gd::kNq; ++i) q[i] = seed[i];
  T pose[gd::kEndEffectorPoseOutSize];
  T J[gd::kEndEffectorPoseGradientOutSize];  // (6 * num_ees, nv), row-major
  T e[kRows], err_pos = 0, err_rot = 0;
  int it = 0;
  gd::end_effector_pose<T>(q, pose);
  pose_error(target, pose, e, &err_pos, &err_rot);
  T cost = 0;
  for (int r = 0; r < kRows; ++r) cost += e[r] * e[r];
  T mu = damping;  // Levenberg-Marquardt: grows on a rejected step, shrinks on a kept one
  bool fresh = true;  // J is of the current q
  for (; it < max_iters && !(err_pos < tol_pos && err_rot < tol_rot); ++it) {
    if (fresh) gd::end_effector_pose_gradient<T>(q, J);
    T A[kRows * kRows];
    for (int r = 0; r < kRows; ++r) {
      for (int c = 0; c <= r; ++c) {
        T s = 0;
        for (int k = 0; k < gd::kNv; ++k) s += J[r * gd::kNv + k] * J[c * gd::kNv + k];
        A[r * kRows + c] = A[c * kRows + r] = s;
      }
      A[r * kRows + r] += mu * mu;
    }
    T y[kRows];
    for (int r = 0; r < kRows; ++r) y[r] = e[r];
    spd_solve(A, y);
    T dq[gd::kNv], norm2 = 0;
    for (int k = 0; k < gd::kNv; ++k) {
      T s = 0;
      for (int r = 0; r < kRows; ++r) s += J[r * gd::kNv + k] * y[r];
      dq[k] = s;
      norm2 += s * s;
    }
    const T norm = sqrt(norm2);
    const T scale = norm > kMaxStep ? kMaxStep / norm : T(1);
    T q_try[gd::kNq], e_try[kRows], pos_try, rot_try, cost_try = 0;
    for (int k = 0; k < gd::kNv; ++k) q_try[k] = q[k] + scale * dq[k];
    gd::end_effector_pose<T>(q_try, pose);
    pose_error(target, pose, e_try, &pos_try, &rot_try);
    for (int r = 0; r < kRows; ++r) cost_try += e_try[r] * e_try[r];
    fresh = cost_try < cost;
    if (fresh) {
      for (int k = 0; k < gd::kNq; ++k) q[k] = q_try[k];
      for (int r = 0; r < kRows; ++r) e[r] = e_try[r];
      cost = cost_try;
      err_pos = pos_try;
      err_rot = rot_try;
      mu = mu * T(0.5) > damping ? mu * T(0.5) : damping;
    } else {
      mu = mu * T(4) < T(1e3) ? mu * T(4) : T(1e3);
    }
  }
  for (int i = 0; i < gd::kNq; ++i) q_out[i] = q[i];
  err_out[0] = err_pos;
  err_out[1] = err_rot;
  *iters_out = it;
}

#if GRID_IS_CUDA
__global__ void __launch_bounds__(128) ik_kernel(const T* targets, const T* seeds, T* q_out,
                                                 T* err_out, int* iters_out, int batch,
                                                 int max_iters, T damping, T tol_pos,
                                                 T tol_rot) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < batch; t += blockDim.x * gridDim.x) {
    solve_one(targets + (size_t)t * 6, seeds + (size_t)t * gd::kNq, q_out + (size_t)t * gd::kNq,
              err_out + (size_t)t * 2, iters_out + t, max_iters, damping, tol_pos, tol_rot);
  }
}
#endif

}  // namespace

extern "C" int ik_solve_device(const float* targets, const float* q_seed, float* q_out,
                               float* err_out, int* iters_out, int batch, int max_iters,
                               float damping, float tol_pos, float tol_rot, void* stream) {
  if (targets == nullptr || q_seed == nullptr || q_out == nullptr || err_out == nullptr ||
      iters_out == nullptr) return GRID_ERROR_NULL_POINTER;
  if (batch < 0 || max_iters < 0) return GRID_ERROR_INVALID_ARGUMENT;
  if (batch == 0) return GRID_OK;
#if GRID_IS_CUDA
  const int threads = 128;
  const int blocks = (batch + threads - 1) / threads;
  ik_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      targets, q_seed, q_out, err_out, iters_out, batch, max_iters, damping, tol_pos, tol_rot);
  return grid::launch_status();
#else
  (void)stream;
#if defined(_OPENMP)
#pragma omp parallel for schedule(dynamic, 64)
#endif
  for (int t = 0; t < batch; ++t) {
    solve_one(targets + (size_t)t * 6, q_seed + (size_t)t * gd::kNq, q_out + (size_t)t * gd::kNq,
              err_out + (size_t)t * 2, iters_out + t, max_iters, damping, tol_pos, tol_rot);
  }
  return GRID_OK;
#endif
}
