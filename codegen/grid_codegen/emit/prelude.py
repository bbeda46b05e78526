"""The portability layer at the top of `grid.cuh`: one text, two targets.

Under nvcc (`__CUDACC__`) a batch item is a thread block: thread loops stride over
`threadIdx.x`, barriers are `__syncthreads()`, the item's scratch is dynamic shared
memory and launches go on the caller's stream. Under the host compiler a block is one
thread: thread loops are plain loops, barriers vanish, the scratch is a stack array per
item and the batch loop is a plain (OpenMP when `_OPENMP`) loop. Everything CUDA-specific
in the generated source lives in this prelude.
"""

from __future__ import annotations

from grid_codegen.emit import spatial
from grid_codegen.emit.writer import Writer, comment_text

ERROR_CODES: tuple[tuple[str, int, str], ...] = (
    ("GRID_OK", 0, "success"),
    ("GRID_ERROR_INVALID_ARGUMENT", 1, "invalid argument"),
    ("GRID_ERROR_BATCH_TOO_LARGE", 2, "batch exceeds the artifact's max_batch"),
    ("GRID_ERROR_UNKNOWN_ALGORITHM", 3, "unknown algorithm id"),
    ("GRID_ERROR_NULL_POINTER", 4, "a required input or output pointer is NULL"),
    ("GRID_ERROR_DEVICE", 5, "device (CUDA) error"),
    ("GRID_ERROR_OUT_OF_MEMORY", 6, "out of memory"),
    ("GRID_ERROR_ARCH_MISMATCH", 7, "the artifact has no kernel image for this device"),
)

_MACROS = r"""
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define GRID_IS_CUDA 1
#define GRID_HOST_DEVICE __host__ __device__
#define GRID_INLINE __host__ __device__ __forceinline__
#define GRID_DEVICE __device__
#define GRID_KERNEL __global__
#define GRID_RESTRICT __restrict__
/* One batch item per block: loops over a pass's independent work stride over threads. */
#define GRID_THREAD_LOOP(i, n) for (int i = (int)threadIdx.x; i < (n); i += (int)blockDim.x)
#define GRID_SINGLE_THREAD if (threadIdx.x == 0)
#define GRID_SYNC() __syncthreads()
#define GRID_BLOCK_ITEM_LOOP(item, batch) \
  for (int item = (int)blockIdx.x; item < (batch); item += (int)gridDim.x)
#define GRID_BLOCK_SCRATCH(T, s, n) \
  extern __shared__ __align__(16) unsigned char grid_smem[]; \
  T* s = reinterpret_cast<T*>(grid_smem)
/* One batch item per thread: scratch in registers / local memory. */
#define GRID_THREAD_ITEM_LOOP(item, batch) \
  for (int item = (int)(blockIdx.x * blockDim.x + threadIdx.x); item < (batch); \
       item += (int)(blockDim.x * gridDim.x))
#define GRID_LOCAL_SCRATCH(T, s, n) T s[n]
#define GRID_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
typedef cudaStream_t grid_stream_t;
#else
#define GRID_IS_CUDA 0
#define GRID_HOST_DEVICE
#define GRID_INLINE inline
#define GRID_DEVICE
#define GRID_KERNEL
#define GRID_RESTRICT __restrict__
/* The host build: a block is one thread, so its loops are plain loops. */
#define GRID_THREAD_LOOP(i, n) for (int i = 0; i < (n); ++i)
#define GRID_SINGLE_THREAD if (true)
#define GRID_SYNC() ((void)0)
#if defined(_OPENMP)
#include <omp.h>
/* Kernels name their batch size `batch`; tiny batches stay on the calling thread. */
#define GRID_OMP_FOR _Pragma("omp parallel for schedule(static) if(batch >= 16)")
#else
#define GRID_OMP_FOR
#endif
#define GRID_BLOCK_ITEM_LOOP(item, batch) GRID_OMP_FOR for (int item = 0; item < (batch); ++item)
#define GRID_BLOCK_SCRATCH(T, s, n) alignas(16) T s[n]
#define GRID_THREAD_ITEM_LOOP(item, batch) GRID_BLOCK_ITEM_LOOP(item, batch)
#define GRID_LOCAL_SCRATCH(T, s, n) alignas(16) T s[n]
#define GRID_LAUNCH(kernel, grid, block, smem, stream, ...) kernel(__VA_ARGS__)
typedef void* grid_stream_t;
#endif
"""

_HOST_MEMORY = r"""
namespace grid {

/// Host-side memory and error helpers the wrapper uses (device memory under nvcc).
inline void* device_alloc(size_t bytes) {
#if GRID_IS_CUDA
  void* ptr = nullptr;
  return cudaMalloc(&ptr, bytes) == cudaSuccess ? ptr : nullptr;
#else
  return malloc(bytes);
#endif
}

inline void device_free(void* ptr) {
#if GRID_IS_CUDA
  if (ptr != nullptr) cudaFree(ptr);
#else
  free(ptr);
#endif
}

/// Page-locked host memory under nvcc (DMA at the bus rate); 64-byte aligned otherwise.
inline void* host_alloc_pinned(size_t bytes) {
#if GRID_IS_CUDA
  void* ptr = nullptr;
  return cudaHostAlloc(&ptr, bytes > 0 ? bytes : 1, cudaHostAllocDefault) == cudaSuccess
             ? ptr : nullptr;
#else
  const size_t alignment = 64;
  return aligned_alloc(alignment, (bytes + alignment) / alignment * alignment);
#endif
}

inline void host_free_pinned(void* ptr) {
#if GRID_IS_CUDA
  if (ptr != nullptr) cudaFreeHost(ptr);
#else
  free(ptr);
#endif
}

/// A copy of `kind` GRID_COPY_* (0 host to device, 1 device to host, 2 device to device;
/// the names are defined with the ABI types at the end of this file): enqueued on
/// `stream` under nvcc, a memcpy otherwise.
inline int copy(void* dst, const void* src, size_t bytes, int32_t kind, void* stream) {
  if (bytes == 0) return GRID_OK;
  if (dst == nullptr || src == nullptr) return GRID_ERROR_NULL_POINTER;
#if GRID_IS_CUDA
  cudaMemcpyKind direction;
  switch (kind) {
    case 0: direction = cudaMemcpyHostToDevice; break;
    case 1: direction = cudaMemcpyDeviceToHost; break;
    case 2: direction = cudaMemcpyDeviceToDevice; break;
    default: return GRID_ERROR_INVALID_ARGUMENT;
  }
  if (cudaMemcpyAsync(dst, src, bytes, direction, static_cast<cudaStream_t>(stream)) !=
      cudaSuccess) {
    cudaGetLastError();
    return GRID_ERROR_DEVICE;
  }
  return GRID_OK;
#else
  (void)stream;
  if (kind < 0 || kind > 2) return GRID_ERROR_INVALID_ARGUMENT;
  memcpy(dst, src, bytes);
  return GRID_OK;
#endif
}

/// Waits for everything enqueued on `stream` (NULL: the legacy default stream).
inline int synchronize(void* stream) {
#if GRID_IS_CUDA
  if (cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    cudaGetLastError();
    return GRID_ERROR_DEVICE;
  }
  return GRID_OK;
#else
  (void)stream;
  return GRID_OK;
#endif
}

/// Synchronous host -> device copy; returns GRID_OK or GRID_ERROR_DEVICE.
inline int copy_to_device(void* dst, const void* src, size_t bytes) {
#if GRID_IS_CUDA
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess
             ? GRID_OK : GRID_ERROR_DEVICE;
#else
  memcpy(dst, src, bytes);
  return GRID_OK;
#endif
}

/// The status of the last launch on this thread (clears CUDA's non-sticky error).
inline int launch_status() {
#if GRID_IS_CUDA
  return cudaGetLastError() == cudaSuccess ? GRID_OK : GRID_ERROR_DEVICE;
#else
  return GRID_OK;
#endif
}

/// Per-device setup of one kernel: fails with GRID_ERROR_ARCH_MISMATCH when the artifact
/// holds no image for the current device; opts in to more than 48 KiB of shared memory.
template <typename Kernel>
inline int configure_kernel(Kernel kernel, size_t shared_bytes) {
#if GRID_IS_CUDA
  cudaFuncAttributes attributes;
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    cudaGetLastError();
    return GRID_ERROR_ARCH_MISMATCH;
  }
  if (shared_bytes > 48 * 1024 &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)shared_bytes) != cudaSuccess) {
    cudaGetLastError();
    return GRID_ERROR_DEVICE;
  }
  return GRID_OK;
#else
  (void)kernel;
  (void)shared_bytes;
  return GRID_OK;
#endif
}

}  // namespace grid
"""


def emit_prelude(w: Writer, robot_name: str) -> None:
    """The include guard, macros, error codes, scalar math and spatial algebra."""
    w.line("// grid.cuh: batched rigid-body dynamics kernels generated by grid-rbd for")
    w.line(f"// robot '{comment_text(robot_name)}'. Generated; do not edit. Compiles with nvcc "
           "(GPU) and")
    w.line("// with a host C++17 compiler (CPU backend) from this same text.")
    w.line("#pragma once")
    w.raw(_MACROS)
    w.line()
    for name, value, _ in ERROR_CODES:
        w.line(f"#define {name} {value}")
    w.raw(_HOST_MEMORY)
    w.line()
    w.raw(spatial.SPATIAL_HELPERS)
