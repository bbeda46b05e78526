// The per-algorithm launch settings of one context (threads per block, strategy variant).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// One algorithm's launch settings; 0 / "" mean the artifact's compiled choice. On a GPU
/// artifact `threads_per_block` is the CUDA block width, on a CPU artifact the number of
/// host threads (the ABI's launch configuration reads it so).
struct AlgorithmLaunch {
  int32_t threads_per_block = 0;
  std::string variant;
  int32_t variant_index = -1;  // into the algorithm's variant table; -1: dispatch by batch
};

/// A context's override table, one entry per algorithm of the artifact.
///
/// The table has no lock of its own: the context writes it under its exclusive admission
/// and launches read it under their shared admission, so a launch never sees an entry
/// half-written. Overrides change how a kernel is launched, never what it computes, so
/// they do not bump the model version.
class LaunchOverrides {
 public:
  LaunchOverrides() = default;
  explicit LaunchOverrides(size_t num_algorithms) : entries_(num_algorithms) {}

  const AlgorithmLaunch& get(int32_t algorithm_id) const { return entries_.at(algorithm_id); }
  const std::vector<AlgorithmLaunch>& entries() const { return entries_; }
  void set_threads(int32_t algorithm_id, int32_t threads) {
    entries_.at(algorithm_id).threads_per_block = threads;
  }
  void set_variant(int32_t algorithm_id, std::string variant, int32_t index) {
    entries_.at(algorithm_id).variant = std::move(variant);
    entries_.at(algorithm_id).variant_index = index;
  }
  void clear() {
    for (AlgorithmLaunch& entry : entries_) entry = AlgorithmLaunch{};
  }

 private:
  std::vector<AlgorithmLaunch> entries_;
};

/// Largest threads-per-block override (the CUDA limit of a block), and of host threads.
constexpr int32_t kMaxThreadsPerBlock = 1024;
/// GPU overrides are whole warps.
constexpr int32_t kWarpSize = 32;

/// Throws ArgumentError unless `threads` is 0 (the compiled default) or, on a GPU
/// artifact, a multiple of 32 in [32, 1024] (and within every variant's launch bound of
/// `algorithm` when one is given), on a CPU artifact a host thread count in [1, 1024];
/// `what` names the setting in the message.
void validate_threads_per_block(const ArtifactLibrary& library, const grid_algorithm* algorithm,
                                int32_t threads, const std::string& what);

/// The strategy variants `algorithm` can be launched with: the artifact's variant table
/// (ABI 4), or its one compiled strategy (ABI 3).
std::vector<std::string> available_variants(const ArtifactLibrary& library,
                                            const grid_algorithm& algorithm);

/// The index of `variant` in available_variants, -1 for "" (dispatch by batch). Throws
/// ArgumentError for an unknown name, listing the known ones.
int32_t variant_index(const ArtifactLibrary& library, const grid_algorithm& algorithm,
                      const std::string& variant);

}  // namespace grid_rbd
