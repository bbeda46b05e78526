/* grid/prelude.h: the portability layer at the top of every generated grid.cuh.
 *
 * One text, two targets. Under nvcc (__CUDACC__) the strategies map a batch item to a
 * thread (thread strategy), a warp (warp strategy) or a thread block (block strategy);
 * loops over an item's independent work stride over lanes or threads, barriers are
 * __syncwarp() / __syncthreads(), the item's scratch is shared memory. Under the host
 * compiler an item's loops are plain loops, barriers vanish, the scratch is a stack
 * array, the batch loop is an OpenMP loop, and the thread strategy runs on SIMD vectors
 * of items (grid/simd.h). Everything CUDA-specific in the generated source lives here.
 */
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
#define GRID_NOINLINE __host__ __device__ __noinline__
/* A function the host compiler must meet on its own (its time is superlinear in a
   function's size) that the GPU build keeps inline (no call, no stack traffic). */
#define GRID_HOST_NOINLINE __host__ __device__ __forceinline__
#define GRID_DEVICE __device__
#define GRID_KERNEL __global__
#define GRID_RESTRICT __restrict__
#define GRID_LAUNCH_BOUNDS(n) __launch_bounds__(n)
/* A per-robot table that device code indexes at run time (in global memory). */
#define GRID_TABLE static __device__ const
/* Block strategy: one batch item per block; a pass's units stride over its threads. */
#define GRID_THREAD_LOOP(i, n) for (int i = (int)threadIdx.x; i < (n); i += (int)blockDim.x)
#define GRID_SINGLE_THREAD if (threadIdx.x == 0)
#define GRID_SYNC() __syncthreads()
#define GRID_BLOCK_ITEM_LOOP(item, batch) \
  for (int item = (int)blockIdx.x; item < (batch); item += (int)gridDim.x)
#define GRID_BLOCK_SCRATCH(T, s, n) \
  extern __shared__ __align__(16) unsigned char grid_smem[]; \
  T* s = reinterpret_cast<T*>(grid_smem)
/* Warp strategy: one batch item per warp; units stride over its 32 lanes, barriers are
   warp barriers (they also order the lanes' shared-memory accesses). */
#define GRID_LANE_LOOP(i, n) for (int i = (int)(threadIdx.x & 31); i < (n); i += 32)
#define GRID_LANE0 if ((threadIdx.x & 31) == 0)
#define GRID_WARP_SYNC() __syncwarp()
/* A compiler fence: memory accesses are not moved across it. Unrolled solves put one
   between steps, so that the scheduler does not hoist every later step's shared loads
   into registers at once (g1's M^-1 solve: 692 B of spills at 255 registers without). */
#define GRID_ORDER() asm volatile("" ::: "memory")
#define GRID_WARP_SCRATCH(T, s, n) \
  extern __shared__ __align__(16) unsigned char grid_smem[]; \
  T* s = reinterpret_cast<T*>(grid_smem) + (size_t)(threadIdx.x >> 5) * (n)
/* Thread strategy: one batch item per thread. */
#define GRID_THREAD_ITEM_LOOP(item, batch) \
  for (int item = (int)(blockIdx.x * blockDim.x + threadIdx.x); item < (batch); \
       item += (int)(blockDim.x * gridDim.x))
#define GRID_LAUNCH(kernel, grid, block, smem, stream, ...) \
  kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
typedef cudaStream_t grid_stream_t;
#else
#define GRID_IS_CUDA 0
#define GRID_HOST_DEVICE
#define GRID_INLINE inline
#define GRID_NOINLINE __attribute__((noinline))
#define GRID_HOST_NOINLINE __attribute__((noinline))
#define GRID_DEVICE
#define GRID_KERNEL
#define GRID_RESTRICT __restrict__
#define GRID_LAUNCH_BOUNDS(n)
#define GRID_TABLE static const
/* The host build: an item's loops are plain loops and its barriers vanish. */
#define GRID_THREAD_LOOP(i, n) for (int i = 0; i < (n); ++i)
#define GRID_SINGLE_THREAD if (true)
#define GRID_SYNC() ((void)0)
#define GRID_LANE_LOOP(i, n) GRID_THREAD_LOOP(i, n)
#define GRID_LANE0 GRID_SINGLE_THREAD
#define GRID_WARP_SYNC() ((void)0)
#define GRID_ORDER() ((void)0)
#if defined(_OPENMP)
#include <omp.h>
/* Kernels name their batch size `batch`; tiny batches stay on the calling thread. */
#define GRID_OMP_FOR _Pragma("omp parallel for schedule(static) if(batch >= 16)")
#else
#define GRID_OMP_FOR
#endif
#define GRID_BLOCK_ITEM_LOOP(item, batch) GRID_OMP_FOR for (int item = 0; item < (batch); ++item)
#define GRID_BLOCK_SCRATCH(T, s, n) alignas(16) T s[n]
#define GRID_WARP_SCRATCH(T, s, n) GRID_BLOCK_SCRATCH(T, s, n)
#define GRID_THREAD_ITEM_LOOP(item, batch) GRID_BLOCK_ITEM_LOOP(item, batch)
#define GRID_LAUNCH(kernel, grid, block, smem, stream, ...) kernel(__VA_ARGS__)
typedef void* grid_stream_t;
#endif

#ifdef __cplusplus
namespace grid {
/* A store of output that the kernel never reads again. On the GPU it streams (evict-first
   in L1 and L2), so the threads' stack frames keep the caches: iiwa14's FD gradient thread
   kernel at B = 65,536 on an H100 went 128 -> 87 us with it (tools/bench/thread_store_probe).
   A plain store on the host. */
template <typename T>
GRID_INLINE void store_once(T* GRID_RESTRICT p, T v) {
#if defined(__CUDA_ARCH__)
  __stcs(p, v);
#else
  *p = v;
#endif
}

/* Four consecutive output entries of a straight-line pass (`vector_stores`), stored at
   once where the address is 16-byte aligned: one 16-byte store instead of four scalar
   ones. Each warp of idsva_so's first gather kernel writes 32 items' rows, so every
   scalar store was 32 memory transactions, and g1's kernel waited on its load/store
   queue. Four plain stores on the host and at an unaligned address. */
template <typename T>
GRID_INLINE void store4(T* GRID_RESTRICT p, T a, T b, T c, T d) {
  p[0] = a;
  p[1] = b;
  p[2] = c;
  p[3] = d;
}
#if defined(__CUDA_ARCH__)
GRID_INLINE void store4(float* GRID_RESTRICT p, float a, float b, float c, float d) {
  if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
    return;
  }
  p[0] = a;
  p[1] = b;
  p[2] = c;
  p[3] = d;
}
GRID_INLINE void store4(double* GRID_RESTRICT p, double a, double b, double c, double d) {
  if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
    reinterpret_cast<double2*>(p)[0] = make_double2(a, b);
    reinterpret_cast<double2*>(p)[1] = make_double2(c, d);
    return;
  }
  p[0] = a;
  p[1] = b;
  p[2] = c;
  p[3] = d;
}
#endif

/* Lanes of a per-item value: one item per value on the GPU (T is float or double);
   grid/simd.h specialises these for the CPU's vectors of items. Written passes that need
   each item's own control flow (a run-time frame index) loop over the lanes. */
template <typename T>
GRID_INLINE constexpr int lanes_per_value() { return 1; }
GRID_INLINE float get_lane(float x, int) { return x; }
GRID_INLINE double get_lane(double x, int) { return x; }
/* x = v in the lanes of `group` (bit j: lane j); the one lane of a GPU value. */
GRID_INLINE void store_lanes(float& x, float v, unsigned) { x = v; }
GRID_INLINE void store_lanes(double& x, double v, unsigned) { x = v; }
}  // namespace grid
#endif
