// Where the gather strategy of idsva_so / fdsva_so spends its time (float32), beside the
// thread strategy, for one generated artifact (built with -DNQ=<nq> -DNV=<nv> and
// -DHAS_IDSVA_SO / -DHAS_FDSVA_SO for the algorithms it has, against its wrapper.cu;
// run.sh builds one per source tree so two trees compare in one run):
//   <alg> thread   : launch_<alg>_thread, the default launch
//   <alg> gather   : launch_<alg>_gather, both kernels
//   <alg> steps    : its second kernel alone, over the heads the first left
//   <alg> head     : gather minus steps, the first kernel's part (the heads into the
//                    tiles' outputs; its grid is the launcher's: with the head in groups
//                    of bodies, emit.idsva_head_groups, a thread per item and group)
//   head.warm/cold : idsva_so's first kernel alone, launched back to back (its code and
//                    inputs stay in L2) and after the fill has streamed the output
//                    through L2 (as after a second kernel), the fill's time taken off
//   fill.float4    : the output written by float4 stores (the write bound)
// `probe B` times each (CUDA events, 20 launches after 2) and prints the largest
// relative difference of the gather result from the thread result.
#include "wrapper.cu"
#include "probe_timing.cuh"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace grid;

constexpr int W = 4 * NV * NV * NV;

template <typename Thread, typename Gather, typename Steps>
void measure(const char* alg, const Args<float>& args, float* reference, Thread thread,
             Gather gather, Steps steps) {
  const int B = args.batch;
  std::vector<float> expected(size_t(B) * W), got(size_t(B) * W);
  Args<float> ref_args = args;
  ref_args.out = reference;
  thread(ref_args);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(expected.data(), reference, sizeof(float) * expected.size(),
                   cudaMemcpyDeviceToHost));
  auto line = [&](const char* name, float us) {
    std::printf("B=%-6d %-9s %-8s %10.1f us %8.3f ns/item", B, alg, name, us, us * 1e3f / B);
  };
  auto run = [&](const char* name, auto launch, bool compare) {
    const float us = time_us(launch, 20, 2);
    line(name, us);
    if (compare) {
      CHECK(cudaMemcpy(got.data(), args.out, sizeof(float) * got.size(),
                       cudaMemcpyDeviceToHost));
      std::printf("  max rel diff from thread %.2e", max_rel_diff(got, expected));
    }
    std::printf("\n");
    return us;
  };
  run("thread", [&] { thread(args); }, false);
  const float both = run("gather", [&] { gather(args); }, true);
  const float second = run("steps", [&] { steps(args); }, false);
  line("head", both - second);
  std::printf("  (gather - steps)\n");
}

int main(int argc, char** argv) {
  const int B = argc > 1 ? std::atoi(argv[1]) : 65536;
  float* const in = device_inputs(size_t(B) * (NQ + 2 * NV));
  float* const out = device_floats(size_t(B) * W);
  float* const reference = device_floats(size_t(B) * W);
  const Args<float> args{{in, in + size_t(B) * NQ, in + size_t(B) * (NQ + NV), nullptr},
                         out, nullptr, -9.81f, B};
  const grid_launch_config dflt{0, 0, 0, 0};
  auto steps_launch = [](auto kernel, const Args<float>& a, int tile, int team, size_t each) {
    kernel<<<(a.batch + tile - 1) / tile, tile * team, sizeof(float) * each * tile>>>(
        a, team, a.batch >= tile);
  };
  // One algorithm's thread launch, gather launch, gather head kernel and steps kernel.
#define MEASURE(ALG)                                                                     \
  measure(#ALG, args, reference,                                                         \
          [&](const Args<float>& a) { launch_##ALG##_thread<float>(a, dflt, 0); },       \
          [&](const Args<float>& a) { launch_##ALG##_gather<float>(a, dflt, 0); },       \
          [&](const Args<float>& a) {                                                    \
            steps_launch(ALG##_gather_kernel<float>, a, layout_##ALG##_gather::kTile,    \
                         layout_##ALG##_gather::kTeam, layout_##ALG##_gather::kSize); })
#ifdef HAS_IDSVA_SO
  configure_idsva_so_gather<float>();
  configure_idsva_so_thread<float>();
  MEASURE(idsva_so);
  {  // The first kernel alone: warm (launched back to back, its code and inputs in L2)
     // and cold (after the write bound's fill has streamed the output through L2).
    const int tile = layout_idsva_so_gather::kTile, groups = layout_idsva_so_gather::kHeadGroups;
    const size_t whole = size_t(B) / tile * tile;
    const size_t lanes = groups > 1 ? (whole + 31) / 32 * 32 : whole;
    const int blocks = int((lanes * groups + 127) / 128);
    auto head = [&] { idsva_so_gather_head_kernel<float><<<blocks, 128>>>(args); };
    const float warm = time_us(head, 20, 2);
    const float fill = fill_us(out, size_t(B) * W);
    const float cold = time_us([&] { fill_float4<<<132 * 16, 256>>>(reinterpret_cast<float4*>(out), size_t(B) * W / 4); head(); }, 20, 2) - fill;
    std::printf("B=%-6d idsva_so  head.warm %10.1f us   head.cold %10.1f us (after a fill)\n", B, warm, cold);
  }
#endif
#ifdef HAS_FDSVA_SO
  configure_fdsva_so_gather<float>();
  configure_fdsva_so_thread<float>();
  MEASURE(fdsva_so);
#endif
#undef MEASURE
  const float us = fill_us(out, size_t(B) * W);
  std::printf("B=%-6d fill.float4 %10.1f us %8.3f ns/item\n", B, us, us * 1e3f / B);
  return 0;
}
