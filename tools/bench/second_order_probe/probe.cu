// Where idsva_so's thread kernel loses its time (iiwa14, float32): the generated kernel
// beside hand variants of its store and of its split into threads.
//   generated : the emitted kernel (the item into a stack row of 4 nv^3 scalars, staged
//               through a shared tile of 32 columns)
//   direct    : one item per thread, its passes writing the output row in global memory
//   compute   : the item into its stack row, one checksum per item (no row store)
//   grouped   : (built against a header traced in groups of outer directions) one thread
//               per (item, group): blockIdx.y is the group, so the blocks of one group run
//               together; each thread recomputes the placements and writes its group's
//               entries in global memory
//   fill      : the output written by float4 stores (the write bound), and cudaMemset
// `probe B` times every variant (CUDA events, 20 launches) and checks that direct and
// grouped write what the generated kernel writes.
#include "wrapper.cu"
#include "probe_timing.cuh"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace grid;

constexpr int NV = 7, W = 4 * NV * NV * NV;

struct SoItem {
  __device__ void operator()(const Args<float>& a, size_t i, float* out) const {
    idsva_so_thread<float, float>(a.in[0] + i * NV, a.in[1] + i * NV, a.in[2] + i * NV,
                                  nullptr, a.inertia, a.gravity, out);
  }
};

template <typename F>
__global__ void __launch_bounds__(256) direct_store(const Args<float> a, F item) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)a.batch) return;
  item(a, i, a.out + i * W);
}

template <typename F>
__global__ void __launch_bounds__(256) compute_only(const Args<float> a, F item) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)a.batch) return;
  float row[W];
  item(a, i, row);
  float s = 0.f;
  for (int k = 0; k < W; ++k) s += row[k];
  a.out[i] = s;
}

#ifdef SO_GROUPS
#include "groups.inc"  // so_group(k, X, qd, acc, gravity, out): run.sh writes it
__global__ void __launch_bounds__(256) grouped_direct(const Args<float> a) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)a.batch) return;
  float X[84], acc[NV];
  joint_transforms_call<float, float>(a.in[0] + i * NV, X);
  acceleration_call<float, float>(a.in[2] + i * NV, acc);
  so_group((int)blockIdx.y, X, a.in[1] + i * NV, acc, a.gravity, a.out + i * W);
}
#endif

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 65536;
  float* const in = device_inputs(size_t(B) * 3 * NV);
  float* const out = device_floats(size_t(B) * W);
  float* const reference = device_floats(size_t(B) * W);
  const Args<float> args{{in, in + B * NV, in + 2 * B * NV, nullptr}, out, nullptr, -9.81f, B};
  Args<float> ref_args = args;
  ref_args.out = reference;
  const grid_launch_config c128{0, 128, 0, 0};
  launch_idsva_so_thread<float>(ref_args, c128, 0);
  CHECK(cudaDeviceSynchronize());
  std::vector<float> expected(size_t(B) * W), got(size_t(B) * W);
  CHECK(cudaMemcpy(expected.data(), reference, sizeof(float) * expected.size(), cudaMemcpyDeviceToHost));
  auto blocks = [B](int t) { return (B + t - 1) / t; };
  auto run = [&](const char* name, auto launch, bool compare) {
    const float us = time_us(launch, 20, 2);
    double worst = 0.0;
    if (compare) {
      CHECK(cudaMemcpy(got.data(), out, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
      worst = max_rel_diff(got, expected);
    }
    std::printf("B=%-6d %-22s %10.1f us %8.3f ns/item%s%.2e\n", B, name, us, us * 1e3f / B,
                compare ? "  max rel diff " : "", compare ? worst : 0.0);
  };
  CHECK(cudaMemset(out, 0, sizeof(float) * B * W));
  run("generated128", [&] { launch_idsva_so_thread<float>(args, c128, 0); }, true);
  for (int t : {64, 128, 256}) {
    char name[32];
    std::snprintf(name, sizeof name, "direct%d", t);
    CHECK(cudaMemset(out, 0, sizeof(float) * B * W));
    run(name, [&] { direct_store<<<blocks(t), t>>>(args, SoItem{}); }, true);
  }
  run("compute128", [&] { compute_only<<<blocks(128), 128>>>(args, SoItem{}); }, false);
#ifdef SO_GROUPS
  for (int t : {64, 128, 256}) {
    char name[32];
    std::snprintf(name, sizeof name, "grouped%d(%d)", t, SO_GROUPS);
    CHECK(cudaMemset(out, 0, sizeof(float) * B * W));
    run(name, [&] { grouped_direct<<<dim3(blocks(t), SO_GROUPS), t>>>(args); }, true);
  }
#endif
  const size_t n4 = size_t(B) * W / 4;
  run("fill.float4", [&] { fill_float4<<<132 * 16, 256>>>(reinterpret_cast<float4*>(out), n4); }, false);
  run("fill.memset", [&] { CHECK(cudaMemsetAsync(out, 0, sizeof(float) * B * W)); }, false);
  return 0;
}
