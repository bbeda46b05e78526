// ik_solver.h: the C interface of the batched damped-least-squares IK consumer
// (examples/consumer_ik). Every function is exported from the consumer artifact that
// grid_rbd.build_artifact builds from ik_solver.cu and ik_api.cu.
#pragma once

#if defined(_WIN32)
#define IK_EXPORT __declspec(dllexport)
#else
#define IK_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

// Solve `batch` pose targets in parallel (one GPU thread, or one CPU loop iteration, per
// target). targets: (batch, 6) [x, y, z, roll, pitch, yaw] of end effector 0; q_seed:
// (batch, nq) starting configurations; q_out: (batch, nq); err_out: (batch, 2) final
// position error (m) and orientation error (rad, max over rpy); iters_out: (batch,)
// iterations used. Pointers are device pointers on the GPU build, host pointers on the
// CPU build; `stream` is a cudaStream_t (ignored on the CPU). Returns 0 or a GRID_ERROR_*.
IK_EXPORT int ik_solve_device(const float* targets, const float* q_seed, float* q_out,
                              float* err_out, int* iters_out, int batch, int max_iters,
                              float damping, float tol_pos, float tol_rot, void* stream);

// The same on host arrays (the GPU build copies in and out and synchronises).
IK_EXPORT int ik_solve(const float* targets, const float* q_seed, float* q_out,
                       float* err_out, int* iters_out, int batch, int max_iters,
                       float damping, float tol_pos, float tol_rot);

// nq, nv, end-effector count of the robot the artifact was built for; 1 on a GPU build.
IK_EXPORT int ik_dims(int* nq, int* nv, int* num_ees);
IK_EXPORT const char* ik_robot_name(void);

// Exercises grid::device::create_state / check_state / free_state and writes their
// status codes to codes[0..5]: create, check, free, check after free, create in a slab
// one byte too small, create in a slab of exactly state_bytes.
IK_EXPORT int ik_state_selftest(int* codes);

#ifdef __cplusplus
}
#endif
