// Where the thread strategy's time goes, for iiwa14's FD gradient (98 scalars per item)
// and euler step gradient (294: its 147 velocity-row scalars staged) at large batches
// (float32): the generated kernels beside copies of their staging (each warp's 32 rows in
// dynamic shared memory, as emit.kernels writes it) that change one thing:
//   generated       : the emitted kernel
//   fd.shared147    : the FD kernel given the step's dynamic shared memory (147 per row):
//                     what the larger carve-out alone costs (less L1 for the stack)
//   compute         : the item into its shared row, a checksum per warp (no output)
//   scalar          : the generated kernels' store order (one staged scalar per lane, a
//                     step's position-row entry with it), plain stores
//   velocity        : the step's velocity rows only (its position rows dropped)
//   linear          : the warp's 32 items are one contiguous run of the output: written in
//                     16-byte vectors in address order, each scalar made where it lands
//   .cs             : the same with streaming (evict-first) stores, as the generated
//                     kernels now store (grid::store_once)
// Built with the artifact's own wrapper.cu (run.sh generates it). `probe B [VARIANT]` times
// every variant (CUDA events, 30 launches) or one (for ncu); each output is checked against
// the generated kernel's.
#include "wrapper.cu"
#include "probe_timing.cuh"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace grid;

struct FdItem {
  static constexpr int kRow = 98, kOut = 98;
  __device__ void operator()(const Args<float>& a, size_t i, float* row) const {
    forward_dynamics_gradient_thread<float, float>(a.in[0] + i * 7, a.in[1] + i * 7,
        a.in[2] + i * 7, nullptr, a.inertia, a.gravity, row);
  }
  // Output scalar `c` of item `it` from its staged row.
  __device__ float value(const Args<float>&, size_t, int c, const float* row) const {
    return row[c];
  }
};

struct StepItem {
  static constexpr int kRow = 147, kOut = 294;
  __device__ void operator()(const Args<float>& a, size_t i, float* row) const {
    plant_step_gradient_euler_rows_thread<float, float>(a.in[0] + i * 14, a.in[1] + i * 7,
        a.in[2] + i, a.inertia, a.gravity, row);
  }
  // Position rows [I | dt I | 0] (7 x 21), then the staged velocity rows.
  __device__ float value(const Args<float>& a, size_t it, int c, const float* row) const {
    if (c >= 147) return row[c - 147];
    const int r = c / 21, k = c - 21 * r;
    return k == r ? 1.f : k == 7 + r ? a.in[2][it] : 0.f;
  }
};

enum class Store { kNone, kScalar, kVelocity, kLinear };

// One output store: plain, or streaming (evict-first in L1 and L2) with CS.
template <bool CS, typename V>
__device__ __forceinline__ void put(V* p, V v) {
  if constexpr (CS) __stcs(p, v);
  else *p = v;
}

// The warp's store of its `n` staged rows (`rows`: 32 rows of Item::kRow scalars).
template <Store S, bool CS, typename Item>
__device__ __forceinline__ void store_rows(const Args<float>& a, size_t base, int lane, int n,
                                           const float* rows, Item item) {
  constexpr int R = Item::kRow, W = Item::kOut;
  if constexpr (S == Store::kNone) {
    float s = 0.f;
    for (int j = lane; j < n * R; j += 32) s += rows[j];
    if (s == 12345.f) a.out[base] = s;  // keeps the loads, stores (almost) nothing
  } else if constexpr (S == Store::kScalar) {
    // Lane j of a round: staged scalar j, and (a step) the position-row entry made from it.
    for (int j = lane; j < n * R; j += 32) {
      const int t = j / R, c = j - t * R;
      float* out = a.out + (base + t) * W;
      put<CS>(out + (W - R) + c, rows[j]);
      if constexpr (W != R) put<CS>(out + c, item.value(a, base + t, c, rows + t * R));
    }
  } else if constexpr (S == Store::kVelocity) {
    for (int j = lane; j < n * R; j += 32) {
      const int t = j / R, c = j - t * R;
      put<CS>(a.out + (base + t) * W + (W - R) + c, rows[j]);
    }
  } else {
    float* out = a.out + base * W;  // 16-byte aligned: base is a multiple of 32
    if (n == 32) {
      for (int L = 4 * lane; L < 32 * W; L += 128) {
        float v[4];
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int t = (L + e) / W, c = L + e - t * W;
          v[e] = item.value(a, base + t, c, rows + t * R);
        }
        put<CS>(reinterpret_cast<float4*>(out + L), make_float4(v[0], v[1], v[2], v[3]));
      }
    } else {
      for (int L = lane; L < n * W; L += 32) {
        const int t = L / W, c = L - t * W;
        put<CS>(out + L, item.value(a, base + t, c, rows + t * R));
      }
    }
  }
}

// The generated kernels' loop: each warp's 32 items into their shared rows, then stored.
template <Store S, bool CS, typename Item>
__global__ void __launch_bounds__(256) staged(const Args<float> a, Item item) {
  constexpr int R = Item::kRow;
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
  float* rows = reinterpret_cast<float*>(smem) + (size_t)warp * 32 * R;
  const size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t base = (size_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
       base < (size_t)a.batch; base += stride) {
    const size_t i = base + (size_t)lane;
    if (i < (size_t)a.batch) item(a, i, rows + lane * R);
    __syncwarp();
    const int n = (size_t)a.batch - base < 32 ? (int)((size_t)a.batch - base) : 32;
    store_rows<S, CS>(a, base, lane, n, rows, item);
    __syncwarp();
  }
}

template <Store S, bool CS = false, typename Item>
void launch_staged(const Args<float>& a, Item item) {
  constexpr size_t shared = 128 * Item::kRow * sizeof(float);
  static bool configured = false;
  if (!configured) {
    CHECK(cudaFuncSetAttribute(staged<S, CS, Item>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)shared));
    configured = true;
  }
  staged<S, CS><<<(a.batch + 127) / 128, 128, shared>>>(a, item);
}

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 65536;
  const char* only = argc > 2 ? argv[2] : nullptr;  // one variant by name (for ncu)
  float* in = device_inputs(size_t(B) * 21);
  float* dt = device_floats(B);
  std::vector<float> dts(B, 0.01f);
  CHECK(cudaMemcpy(dt, dts.data(), sizeof(float) * B, cudaMemcpyHostToDevice));
  float* inertia = device_floats(kInertiaSize);
  CHECK(cudaMemcpy(inertia, kDefaultInertia, sizeof(float) * kInertiaSize, cudaMemcpyHostToDevice));
  float* out = device_floats(size_t(B) * 294);
  float* expected_out = device_floats(size_t(B) * 294);
  // FD gradient: q, qd, u of a batch one after the other; the step: x = [q, qd], u, dt.
  const Args<float> fd{{in, in + 7 * B, in + 14 * B, nullptr}, out, inertia, -9.81f, B};
  const Args<float> step{{in, in + 14 * B, dt, nullptr}, out, inertia, -9.81f, B};
  if (configure_forward_dynamics_gradient_thread<float>() != GRID_OK ||
      configure_plant_step_gradient_euler_thread<float>() != GRID_OK) {
    std::printf("configure failed\n");
    return 1;
  }
  const grid_launch_config c128{0, 128, 0, 0};
  std::vector<float> got(size_t(B) * 294), expected(size_t(B) * 294);
  auto reference = [&](const Args<float>& args, bool is_step, size_t width) {
    if (only != nullptr) return;  // one variant under ncu: its kernel alone
    Args<float> r = args;
    r.out = expected_out;
    if (is_step) launch_plant_step_gradient_euler_thread<float>(r, c128, 0);
    else launch_forward_dynamics_gradient_thread<float>(r, c128, 0);
    CHECK(cudaDeviceSynchronize());
    expected.resize(size_t(B) * width);
    CHECK(cudaMemcpy(expected.data(), expected_out, sizeof(float) * expected.size(),
                     cudaMemcpyDeviceToHost));
  };
  auto run = [&](const char* name, size_t width, bool compare, auto launch) {
    if (only != nullptr && std::strcmp(only, name) != 0) return;
    CHECK(cudaMemset(out, 0, sizeof(float) * B * width));
    const float us = time_us(launch, only != nullptr ? 1 : 30);
    std::printf("B=%-6d %-22s %9.1f us  %7.3f ns/item", B, name, us, us * 1e3f / B);
    if (compare && only == nullptr) {
      got.resize(size_t(B) * width);
      CHECK(cudaMemcpy(got.data(), out, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
      std::printf("  max rel diff %.1e", max_rel_diff(got, expected));
    }
    std::printf("\n");
  };
  const size_t fd_shared147 = size_t(128) * 147 * sizeof(float);
  reference(fd, false, 98);
  run("fd.generated", 98, true,
      [&] { launch_forward_dynamics_gradient_thread<float>(fd, c128, 0); });
  run("fd.shared147", 98, true, [&] {
    forward_dynamics_gradient_thread_kernel<float><<<(B + 127) / 128, 128, fd_shared147>>>(fd);
  });
  run("fd.compute", 98, false, [&] { launch_staged<Store::kNone>(fd, FdItem{}); });
  run("fd.scalar", 98, true, [&] { launch_staged<Store::kScalar>(fd, FdItem{}); });
  run("fd.scalar.cs", 98, true, [&] { launch_staged<Store::kScalar, true>(fd, FdItem{}); });
  run("fd.linear", 98, true, [&] { launch_staged<Store::kLinear>(fd, FdItem{}); });
  run("fd.linear.cs", 98, true, [&] { launch_staged<Store::kLinear, true>(fd, FdItem{}); });
  reference(step, true, 294);
  run("step.generated", 294, true,
      [&] { launch_plant_step_gradient_euler_thread<float>(step, c128, 0); });
  run("step.compute", 294, false, [&] { launch_staged<Store::kNone>(step, StepItem{}); });
  run("step.scalar", 294, true, [&] { launch_staged<Store::kScalar>(step, StepItem{}); });
  run("step.scalar.cs", 294, true, [&] { launch_staged<Store::kScalar, true>(step, StepItem{}); });
  run("step.velocity", 294, false, [&] { launch_staged<Store::kVelocity>(step, StepItem{}); });
  run("step.velocity.cs", 294, false,
      [&] { launch_staged<Store::kVelocity, true>(step, StepItem{}); });
  run("step.linear", 294, true, [&] { launch_staged<Store::kLinear>(step, StepItem{}); });
  run("step.linear.cs", 294, true, [&] { launch_staged<Store::kLinear, true>(step, StepItem{}); });
  return 0;
}
