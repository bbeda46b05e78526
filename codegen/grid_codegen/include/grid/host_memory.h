/* grid/host_memory.h: the host-side memory and error helpers the wrapper uses (device
 * memory under nvcc, host memory on the CPU build). */
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

/// Allows `kernel` `bytes` of dynamic shared memory (an opt-in above the 48 KiB default).
template <typename Kernel>
inline int opt_in_shared(Kernel kernel, size_t bytes) {
#if GRID_IS_CUDA
  if (bytes <= 48 * 1024) return GRID_OK;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)bytes) != cudaSuccess) {
    cudaGetLastError();
    return GRID_ERROR_INVALID_ARGUMENT;
  }
  return GRID_OK;
#else
  (void)kernel;
  (void)bytes;
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
  return opt_in_shared(kernel, shared_bytes) == GRID_OK ? GRID_OK : GRID_ERROR_DEVICE;
#else
  (void)kernel;
  (void)shared_bytes;
  return GRID_OK;
#endif
}

}  // namespace grid
