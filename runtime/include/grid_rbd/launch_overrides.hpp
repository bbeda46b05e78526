// The per-algorithm launch settings of one context (threads per block, strategy variant).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// One algorithm's launch settings; 0 / "" mean the artifact's compiled choice.
struct AlgorithmLaunch {
  int32_t threads_per_block = 0;
  std::string variant;
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
  void set_variant(int32_t algorithm_id, std::string variant) {
    entries_.at(algorithm_id).variant = std::move(variant);
  }
  void clear() {
    for (AlgorithmLaunch& entry : entries_) entry = AlgorithmLaunch{};
  }

 private:
  std::vector<AlgorithmLaunch> entries_;
};

/// Largest threads-per-block override (the CUDA limit of a block).
constexpr int32_t kMaxThreadsPerBlock = 1024;
/// Overrides are whole warps.
constexpr int32_t kWarpSize = 32;

/// Throws ArgumentError unless `threads` is 0 (the compiled default) or a multiple of 32
/// in [32, 1024]; `what` names the setting in the message.
void validate_threads_per_block(int32_t threads, const std::string& what);

/// The strategy variants `algorithm` can be launched with. The artifact ABI has one
/// compiled variant per algorithm (the artifact's strategy) until the variant table of a
/// later ABI supplies more.
std::vector<std::string> available_variants(const ArtifactLibrary& library,
                                            const grid_algorithm& algorithm);

/// Throws ArgumentError unless `variant` is "" (the compiled default) or one of
/// available_variants(library, algorithm).
void validate_variant(const ArtifactLibrary& library, const grid_algorithm& algorithm,
                      const std::string& variant);

}  // namespace grid_rbd
