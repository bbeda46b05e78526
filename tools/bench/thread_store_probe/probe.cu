// Where the thread strategy's time goes, for iiwa14's FD gradient and euler step gradient
// at B = 65,536 (float32): the generated kernels beside hand variants that drop or change
// their store. Built with the artifact's own wrapper.cu (run.sh generates it):
//   compute : the item into its stack row, then one checksum per item (no row store)
//   direct  : the item writes its output row itself (no staging)
//   generated: the emitted kernel (row on the stack, staged through a shared tile)
//   staged<W, C, WARPS, MINB, LOOP, ALL>: the emitted staging with a tile of C columns for
//     WARPS warps (the generated one has C = 32 for 8 warps), __launch_bounds__(32 WARPS,
//     MINB), in the grid-stride loop or not (.loop), every thread running an item (.sync)
//   .nostore: the staging kept, the global store dropped (a store the data never takes)
//   .sync: the item's passes with a block barrier between them (every thread of the block
//     runs an item, the last ones a copy of the batch's last), so the block's warps run the
//     same pass at once and share its instructions in the instruction caches
//   .loop: inside the generated kernels' grid-stride loop
//   linear: the warp's 32 rows as one run of 32 W scalars (a shared tile of the whole rows)
//   step hoisted / split: the euler step's dt read once per lane and shuffled, the
//     position rows written with each staged scalar (hoisted) or after the whole row
//     (split); step.rows: the velocity rows alone (at their place in the output; the
//     figures of 2026-12-02 wrote them at the FD gradient's stride of 98, overlapping)
// `probe B [VARIANT]` times every variant (CUDA events, 30 launches) or one (for ncu).
#include "wrapper.cu"
#include "probe_timing.cuh"
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <cstring>

using namespace grid;

struct FdItem {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    forward_dynamics_gradient_thread<float, float>(a.in[0] + i * 7, a.in[1] + i * 7,
        a.in[2] + i * 7, nullptr, a.inertia, a.gravity, out);
  }
};
struct StepRowsItem {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    plant_step_gradient_euler_rows_thread<float, float>(a.in[0] + i * 14, a.in[1] + i * 7,
        a.in[2] + i, a.inertia, a.gravity, out);
  }
};
struct StepItem {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    plant_step_gradient_euler_thread<float, float>(a.in[0] + i * 14, a.in[1] + i * 7,
        a.in[2] + i, a.inertia, a.gravity, out);
  }
};


// The items of FdItem / StepRowsItem, their passes separated by block barriers.
struct FdItemSync {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    float X[84], qdd_minv[56];
    joint_transforms_call<float, float>(a.in[0] + i * 7, X);
    __syncthreads();
    aba_minv_call<float, float>(X, a.in[1] + i * 7, a.in[2] + i * 7, nullptr, a.gravity, qdd_minv);
    __syncthreads();
    fd_derivatives_g0_call<float, float>(X, a.in[1] + i * 7, qdd_minv, nullptr, a.gravity, out);
    __syncthreads();
    fd_derivatives_g1_call<float, float>(X, a.in[1] + i * 7, qdd_minv, out);
  }
};
struct StepRowsItemSync {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    float X[84], qdd_minv[56];
    const float* x = a.in[0] + i * 14;
    joint_transforms_call<float, float>(x, X);
    __syncthreads();
    aba_minv_2_call<float, float>(X, x + 7, a.in[1] + i * 7, a.gravity, qdd_minv);
    __syncthreads();
    step_velocity_rows_g0_call<float, float>(X, x + 7, qdd_minv, a.in[2] + i, a.gravity, out);
    __syncthreads();
    step_velocity_rows_g1_call<float, float>(X, x + 7, qdd_minv, a.in[2] + i, out);
  }
};

// The item into its stack row, then one checksum per item (`compute`). ALL: every thread
// runs an item (the last ones a copy of the batch's last), as the block barriers of the
// .sync items need.
template <int W, int THREADS, int MINB, bool ALL, typename F>
__global__ void __launch_bounds__(THREADS, MINB) compute_only(const Args<float> a, F item) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (!ALL && i >= (size_t)a.batch) return;
  float row[W];
  item(a, i < (size_t)a.batch ? i : (size_t)a.batch - 1, row);
  float s = 0.f;
  #pragma unroll
  for (int k = 0; k < W; ++k) s += row[k];
  if (i < (size_t)a.batch) a.out[i] = s;
}

template <int W, typename F>
__global__ void __launch_bounds__(256) direct_store(const Args<float> a, F item) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)a.batch) return;
  item(a, i, a.out + i * W);
}

// The emitted staging (emit.kernels.emit_staged_loop): the warp's 32 rows through its
// tile of C columns, `store(a, item, column, value)` of each staged scalar.
template <int W, int C, typename St>
__device__ __forceinline__ void store_staged(const Args<float>& a, size_t base, int lane,
                                             float (*tile)[C + 1], const float* row, St store) {
  for (int c0 = 0; c0 < W; c0 += C) {
    #pragma unroll
    for (int k = 0; k < C; ++k) if (c0 + k < W) tile[lane][k] = row[c0 + k];
    __syncwarp();
    #pragma unroll
    for (int t = lane / C; t < 32; t += 32 / C) {
      const size_t it = base + (size_t)t;
      const int col = c0 + lane % C;
      if (it < (size_t)a.batch && col < W) store(a, it, col, tile[t][lane % C]);
    }
    __syncwarp();
  }
}

// A staged kernel: one pass over the batch (LOOP false) or the generated kernels'
// grid-stride loop; ALL as for compute_only.
template <int W, int C, int WARPS, int MINB, bool LOOP, bool ALL, typename F, typename St>
__global__ void __launch_bounds__(WARPS * 32, MINB) staged(const Args<float> a, F item, St store) {
  __shared__ float stage[WARPS][32][C + 1];
  const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
  const size_t stride = LOOP ? (size_t)blockDim.x * gridDim.x : (size_t)a.batch;
  for (size_t base = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
       ALL || base < (size_t)a.batch; base += stride) {
    const size_t i = base + (size_t)lane;
    float row[W];
    if (ALL) item(a, i < (size_t)a.batch ? i : (size_t)a.batch - 1, row);
    else if (i < (size_t)a.batch) item(a, i, row);
    if (base >= (size_t)a.batch) return;
    store_staged<W, C>(a, base, lane, stage[warp], row, store);
    if (ALL) return;
  }
}

// The warp's 32 rows of W scalars are one contiguous run of 32 W scalars in the output:
// the whole row set goes through a shared tile, then out in linear order (every store
// instruction 32 consecutive scalars, or pairs with V2), a sector's bytes all from one
// instruction.
template <int W, int WARPS, bool V2, typename F>
__global__ void __launch_bounds__(WARPS * 32, 1) staged_linear(const Args<float> a, F item) {
  __shared__ float stage[WARPS][32 * (W + 1)];
  const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
  const size_t base = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
  if (base >= (size_t)a.batch) return;
  const size_t i = base + (size_t)lane;
  float row[W];
  if (i < (size_t)a.batch) item(a, i, row);
  float* tile = stage[warp];
  #pragma unroll
  for (int k = 0; k < W; ++k) tile[lane * (W + 1) + k] = row[k];
  __syncwarp();
  const int items = a.batch - (int)base < 32 ? a.batch - (int)base : 32;
  float* out = a.out + base * W;
  if (V2 && items == 32) {
    for (int L = 2 * lane; L < 32 * W; L += 64) {
      const int t0 = L / W, c0 = L - W * t0, t1 = (L + 1) / W, c1 = L + 1 - W * t1;
      reinterpret_cast<float2*>(out)[L / 2] =
          make_float2(tile[t0 * (W + 1) + c0], tile[t1 * (W + 1) + c1]);
    }
  } else {
    for (int L = lane; L < items * W; L += 32) {
      const int t = L / W, c = L - W * t;
      out[L] = tile[t * (W + 1) + c];
    }
  }
}

// Scalar k of an euler step's position rows [I | dt I | 0] (iiwa14: 7 x 21).
__device__ inline float euler_position(float h, int k) {
  const int r = k / 21, c = k - 21 * r;
  return c == r ? 1.f : c == 7 + r ? h : 0.f;
}

// The euler step's staged store with the item's dt read once per lane and passed by
// shuffle (StepStore reads it per scalar): `hoisted`, the position rows written with each
// staged scalar; `split`, the velocity rows staged alone and the position rows written by
// a loop of their own; LOOP: inside the generated kernels' grid-stride loop.
template <bool SPLIT, bool LOOP>
__global__ void __launch_bounds__(128, 1) step_staged_h(const Args<float> a) {
  constexpr int W = 147, C = 32;
  __shared__ float stage[4][32][C + 1];
  const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
  const size_t stride = LOOP ? (size_t)blockDim.x * gridDim.x : (size_t)a.batch;
  for (size_t base = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
       base < (size_t)a.batch; base += stride) {
    const size_t i = base + (size_t)lane;
    float row[W];
    float h_lane = 0.f;
    if (i < (size_t)a.batch) {
      StepRowsItem{}(a, i, row);
      h_lane = a.in[2][i];
    }
    for (int c0 = 0; c0 < W; c0 += C) {
      #pragma unroll
      for (int k = 0; k < C; ++k) if (c0 + k < W) stage[warp][lane][k] = row[c0 + k];
      __syncwarp();
      const int col = c0 + lane;
      #pragma unroll 4
      for (int t = 0; t < 32; ++t) {
        const size_t it = base + (size_t)t;
        const float h = __shfl_sync(0xffffffffu, h_lane, t);
        if (it < (size_t)a.batch && col < W) {
          float* out = a.out + it * 294;
          out[147 + col] = stage[warp][t][lane];
          if (!SPLIT) out[col] = euler_position(h, col);
        }
      }
      __syncwarp();
    }
    if (SPLIT) {
      for (int c0 = 0; c0 < W; c0 += C) {
        const int col = c0 + lane;
        #pragma unroll 4
        for (int t = 0; t < 32; ++t) {
          const size_t it = base + (size_t)t;
          const float h = __shfl_sync(0xffffffffu, h_lane, t);
          if (it < (size_t)a.batch && col < W) a.out[it * 294 + col] = euler_position(h, col);
        }
      }
    }
  }
}

struct FdStore {
  __device__ void operator()(const Args<float>& a, size_t it, int col, float v) const {
    a.out[it * 98 + col] = v;
  }
};
struct StepRowsStore {  // the velocity rows alone, where the step's output holds them
  __device__ void operator()(const Args<float>& a, size_t it, int col, float v) const {
    a.out[it * 294 + 147 + col] = v;
  }
};
struct NullStore {  // keeps the staged loads live, stores (almost) nothing
  __device__ void operator()(const Args<float>& a, size_t it, int col, float v) const {
    if (v == 12345.f) a.out[it] = v;
  }
};
struct StepStore {
  __device__ void operator()(const Args<float>& a, size_t it, int col, float v) const {
    plant_step_gradient_euler_store<float>(a, it, col, v);
  }
};

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 65536;
  const char* only = argc > 2 ? argv[2] : nullptr;  // one variant by name (for ncu)
  const grid_descriptor* d = grid_get_descriptor();
  std::vector<float> host(size_t(B) * 21);
  for (size_t k = 0; k < host.size(); ++k) host[k] = 0.5f * std::sin(0.37f * k);
  float *q, *u, *dt, *out, *inertia;
  CHECK(cudaMalloc(&q, sizeof(float) * B * 14));
  CHECK(cudaMalloc(&u, sizeof(float) * B * 7));
  CHECK(cudaMalloc(&dt, sizeof(float) * B));
  CHECK(cudaMalloc(&out, sizeof(float) * B * 294));
  CHECK(cudaMalloc(&inertia, sizeof(float) * 70));
  CHECK(cudaMemcpy(q, host.data(), sizeof(float) * B * 14, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(u, host.data() + B * 14, sizeof(float) * B * 7, cudaMemcpyHostToDevice));
  std::vector<float> dts(B, 0.01f);
  CHECK(cudaMemcpy(dt, dts.data(), sizeof(float) * B, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(inertia, d->default_inertia_table, sizeof(float) * 70, cudaMemcpyHostToDevice));
  // FD gradient inputs q, qd, u (qd: the second half of x's rows, fine for timing).
  const Args<float> fd{{q, q + 7, u, nullptr}, out, inertia, -9.81f, B};
  const Args<float> step{{q, u, dt, nullptr}, out, inertia, -9.81f, B};
  auto g = [B](int t) { return (B + t - 1) / t; };
  auto run = [&](const char* name, auto launch) {
    if (only != nullptr && std::strcmp(only, name) != 0) return;
    const float us = time_us(launch, only != nullptr ? 1 : 30);
    std::printf("B=%-6d %-28s %9.1f us  %7.3f ns/item\n", B, name, us, us * 1e3f / B);
  };
  const grid_launch_config c128{0, 128, 0, 0}, c256{0, 256, 0, 0};
  run("fd.generated128", [&] { launch_forward_dynamics_gradient_thread<float>(fd, c128, 0); });
  run("fd.generated256", [&] { launch_forward_dynamics_gradient_thread<float>(fd, c256, 0); });
  run("fd.c32w4.loop", [&] { staged<98, 32, 4, 1, true, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("fd.compute", [&] { compute_only<98, 256, 1, false><<<g(128), 128>>>(fd, FdItem{}); });
  run("fd.compute.minb3", [&] { compute_only<98, 128, 3, false><<<g(128), 128>>>(fd, FdItem{}); });
  run("fd.compute.minb4", [&] { compute_only<98, 128, 4, false><<<g(128), 128>>>(fd, FdItem{}); });
  run("fd.direct", [&] { direct_store<98><<<g(128), 128>>>(fd, FdItem{}); });
  run("fd.c32w4", [&] { staged<98, 32, 4, 1, false, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("fd.c32w4.nostore", [&] { staged<98, 32, 4, 1, false, false><<<g(128), 128>>>(fd, FdItem{}, NullStore{}); });
  run("fd.compute.sync128", [&] { compute_only<98, 128, 1, true><<<g(128), 128>>>(fd, FdItemSync{}); });
  run("fd.compute.sync256", [&] { compute_only<98, 256, 1, true><<<g(256), 256>>>(fd, FdItemSync{}); });
  run("fd.c32w4.sync", [&] { staged<98, 32, 4, 1, false, true><<<g(128), 128>>>(fd, FdItemSync{}, FdStore{}); });
  run("fd.c32w8.sync", [&] { staged<98, 32, 8, 1, false, true><<<g(256), 256>>>(fd, FdItemSync{}, FdStore{}); });
  run("fd.linear.w2", [&] { staged_linear<98, 2, false><<<g(64), 64>>>(fd, FdItem{}); });
  run("fd.linear.v2.w2", [&] { staged_linear<98, 2, true><<<g(64), 64>>>(fd, FdItem{}); });
  run("fd.linear.w1", [&] { staged_linear<98, 1, false><<<g(32), 32>>>(fd, FdItem{}); });
  run("fd.c16w4", [&] { staged<98, 16, 4, 1, false, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("fd.c8w4", [&] { staged<98, 8, 4, 1, false, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("fd.c8w8", [&] { staged<98, 8, 8, 1, false, false><<<g(256), 256>>>(fd, FdItem{}, FdStore{}); });
  run("fd.c8w4.minb3", [&] { staged<98, 8, 4, 3, false, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("fd.c8w4.minb4", [&] { staged<98, 8, 4, 4, false, false><<<g(128), 128>>>(fd, FdItem{}, FdStore{}); });
  run("step.generated128", [&] { launch_plant_step_gradient_euler_thread<float>(step, c128, 0); });
  run("step.split.loop", [&] { step_staged_h<true, true><<<g(128), 128>>>(step); });
  run("step.compute", [&] { compute_only<147, 256, 1, false><<<g(128), 128>>>(step, StepRowsItem{}); });
  run("step.compute.minb3", [&] { compute_only<147, 128, 3, false><<<g(128), 128>>>(step, StepRowsItem{}); });
  run("step.direct", [&] { direct_store<294><<<g(128), 128>>>(step, StepItem{}); });
  run("step.c32w4", [&] { staged<147, 32, 4, 1, false, false><<<g(128), 128>>>(step, StepRowsItem{}, StepStore{}); });
  run("step.c32w4.nostore", [&] { staged<147, 32, 4, 1, false, false><<<g(128), 128>>>(step, StepRowsItem{}, NullStore{}); });
  run("step.compute.sync128", [&] { compute_only<147, 128, 1, true><<<g(128), 128>>>(step, StepRowsItemSync{}); });
  run("step.c32w4.sync", [&] { staged<147, 32, 4, 1, false, true><<<g(128), 128>>>(step, StepRowsItemSync{}, StepStore{}); });
  run("step.c32w8.sync", [&] { staged<147, 32, 8, 1, false, true><<<g(256), 256>>>(step, StepRowsItemSync{}, StepStore{}); });
  run("step.rows.linear.w1", [&] { staged_linear<147, 1, false><<<g(32), 32>>>(step, StepRowsItem{}); });
  run("step.rows.c32w4", [&] { staged<147, 32, 4, 1, false, false><<<g(128), 128>>>(step, StepRowsItem{}, StepRowsStore{}); });
  run("step.hoisted", [&] { step_staged_h<false, false><<<g(128), 128>>>(step); });
  run("step.split", [&] { step_staged_h<true, false><<<g(128), 128>>>(step); });
  run("step.c16w4", [&] { staged<147, 16, 4, 1, false, false><<<g(128), 128>>>(step, StepRowsItem{}, StepStore{}); });
  run("step.c8w4", [&] { staged<147, 8, 4, 1, false, false><<<g(128), 128>>>(step, StepRowsItem{}, StepStore{}); });
  run("step.c8w8", [&] { staged<147, 8, 8, 1, false, false><<<g(256), 256>>>(step, StepRowsItem{}, StepStore{}); });
  run("step.c8w4.minb3", [&] { staged<147, 8, 4, 3, false, false><<<g(128), 128>>>(step, StepRowsItem{}, StepStore{}); });
  return 0;
}
