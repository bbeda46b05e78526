// The FD gradient's small-batch variants side by side (float32): thread (one item per
// thread) and tangents (one forward-mode pass per column, at two more block widths), with
// an empty kernel as the launch floor. `probe B...` times each launcher (CUDA events
// around queued launches) and checks tangents against the thread kernel.
#include "grid.cuh"
#include "probe_timing.cuh"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace grid;

__global__ void empty_kernel() {}

int main(int argc, char** argv) {
  const int nv = GRID_PROBE_NV, width = 2 * nv * nv;
  if (configure_forward_dynamics_gradient_thread<float>() != GRID_OK ||
      configure_forward_dynamics_gradient_tangents<float>() != GRID_OK) {
    std::printf("configure failed\n");
    return 1;
  }
  for (int a = 1; a < argc; ++a) {
    const int B = std::atoi(argv[a]);
    std::vector<float> host(size_t(B) * 3 * nv);
    for (size_t k = 0; k < host.size(); ++k) host[k] = 0.5f * std::sin(0.37f * k + 0.1f);
    float *in, *out, *reference;
    CHECK(cudaMalloc(&in, sizeof(float) * host.size()));
    CHECK(cudaMalloc(&out, sizeof(float) * B * width));
    CHECK(cudaMalloc(&reference, sizeof(float) * B * width));
    CHECK(cudaMemcpy(in, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice));
    const Args<float> args{{in, in + B * nv, in + 2 * B * nv, nullptr}, out, nullptr, 9.81f, B};
    Args<float> ref_args = args;
    ref_args.out = reference;
    const grid_launch_config cfg{0, 0, 0, 0};
    if (launch_forward_dynamics_gradient_thread<float>(ref_args, cfg, 0) != GRID_OK) {
      std::printf("launch failed\n");
      return 1;
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<float> expected(size_t(B) * width), got(size_t(B) * width);
    CHECK(cudaMemcpy(expected.data(), reference, sizeof(float) * expected.size(), cudaMemcpyDeviceToHost));
    const int reps = B <= 1024 ? 500 : 50;
    auto run = [&](const char* name, auto launch, bool compare) {
      CHECK(cudaMemset(out, 0, sizeof(float) * B * width));
      const float us = time_us(launch, reps, 5);
      double worst = 0.0;
      if (compare) {
        CHECK(cudaMemcpy(got.data(), out, sizeof(float) * got.size(), cudaMemcpyDeviceToHost));
        worst = max_rel_diff(got, expected);
      }
      std::printf("B=%-6d %-12s %9.2f us %10.3f ns/item", B, name, us, us * 1e3f / B);
      if (compare) std::printf("  max rel diff vs thread %.2e", worst);
      std::printf("\n");
    };
    run("empty", [&] { empty_kernel<<<1, 32>>>(); }, false);
    run("thread", [&] { launch_forward_dynamics_gradient_thread<float>(args, cfg, 0); }, true);
    run("tangents", [&] { launch_forward_dynamics_gradient_tangents<float>(args, cfg, 0); }, true);
    for (int t : {32, 64}) {
      const grid_launch_config narrow{0, t, 0, 0};
      char name[32];
      std::snprintf(name, sizeof name, "tangents/%d", t);
      run(name, [&] { launch_forward_dynamics_gradient_tangents<float>(args, narrow, 0); }, true);
    }
    CHECK(cudaFree(in)); CHECK(cudaFree(out)); CHECK(cudaFree(reference));
  }
  return 0;
}
