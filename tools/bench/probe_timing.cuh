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
