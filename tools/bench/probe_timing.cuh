// Shared by the standalone CUDA probes under tools/bench (thread_store_probe,
// second_order_probe): CHECK a runtime call, and time a launch with CUDA events.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); std::exit(1); } } while (0)

// Microseconds per call of `launch()`: `warmup` untimed calls, then `reps` between two
// events on the default stream.
template <typename L>
float time_us(L launch, int reps, int warmup = 3) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
  for (int r = 0; r < warmup; ++r) launch();
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(e0));
  for (int r = 0; r < reps; ++r) launch();
  CHECK(cudaEventRecord(e1));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CHECK(cudaGetLastError());
  CHECK(cudaEventDestroy(e0)); CHECK(cudaEventDestroy(e1));
  return ms * 1000.f / reps;
}

// The largest |got - expected| / (1 + |expected|) over two equal-length results.
inline double max_rel_diff(const std::vector<float>& got, const std::vector<float>& expected) {
  double worst = 0.0;
  for (size_t k = 0; k < got.size(); ++k) {
    const double d = std::fabs((double)got[k] - expected[k]) / (1.0 + std::fabs(expected[k]));
    worst = d > worst ? d : worst;
  }
  return worst;
}

// `count` deterministic scalars in (-0.5, 0.5) on the device: a probe's inputs (q, qd and
// qdd or u of a batch, one after the other).
inline float* device_inputs(size_t count) {
  std::vector<float> host(count);
  for (size_t k = 0; k < count; ++k) host[k] = 0.5f * std::sin(0.37f * k);
  float* in = nullptr;
  CHECK(cudaMalloc(&in, sizeof(float) * count));
  CHECK(cudaMemcpy(in, host.data(), sizeof(float) * count, cudaMemcpyHostToDevice));
  return in;
}

// A device buffer of `count` floats (uninitialised).
inline float* device_floats(size_t count) {
  float* p = nullptr;
  CHECK(cudaMalloc(&p, sizeof(float) * count));
  return p;
}

// The write bound's kernel: `n4` float4 stores, grid-strided.
__global__ void fill_float4(float4* out, size_t n4) {
  const size_t stride = (size_t)blockDim.x * gridDim.x;
  for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n4; k += stride)
    out[k] = make_float4(1.f, 2.f, 3.f, (float)k);
}

// Microseconds to fill `count` floats at `out` (a multiple of 4) with float4 stores.
inline float fill_us(float* out, size_t count) {
  return time_us([&] { fill_float4<<<132 * 16, 256>>>(reinterpret_cast<float4*>(out),
                                                        count / 4); }, 20, 2);
}
