#include "grid_rbd/launch_overrides.hpp"

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

void validate_threads_per_block(const ArtifactLibrary& library, const grid_algorithm* algorithm,
                                int32_t threads, const std::string& what) {
  if (threads == 0) return;
  if (!library.is_gpu()) {
    if (threads < 1 || threads > kMaxThreadsPerBlock) {
      throw ArgumentError(what + " is a host thread count on this CPU artifact: 0 (the "
                          "default) or in [1, " + std::to_string(kMaxThreadsPerBlock) +
                          "], got " + std::to_string(threads));
    }
    return;
  }
  int32_t bound = kMaxThreadsPerBlock;
#if GRID_ABI_VERSION >= 4
  if (algorithm != nullptr) {
    for (int32_t k = 0; k < algorithm->num_variants; ++k) {
      const int32_t limit = algorithm->variants[k].max_threads_per_block;
      if (limit > 0 && limit < bound) bound = limit;
    }
  }
#else
  (void)algorithm;
#endif
  if (threads < kWarpSize || threads > bound || threads % kWarpSize != 0) {
    throw ArgumentError(what + " must be 0 (the compiled default) or a multiple of " +
                        std::to_string(kWarpSize) + " in [" + std::to_string(kWarpSize) + ", " +
                        std::to_string(bound) + "], got " + std::to_string(threads));
  }
}

std::vector<std::string> available_variants(const ArtifactLibrary& library,
                                            const grid_algorithm& algorithm) {
#if GRID_ABI_VERSION >= 4
  (void)library;
  std::vector<std::string> names;
  for (int32_t k = 0; k < algorithm.num_variants; ++k) {
    names.push_back(algorithm.variants[k].name);
  }
  return names;
#else
  (void)algorithm;
  return {library.descriptor().strategy};
#endif
}

int32_t variant_index(const ArtifactLibrary& library, const grid_algorithm& algorithm,
                      const std::string& variant) {
  if (variant.empty()) return -1;
  const std::vector<std::string> known = available_variants(library, algorithm);
  std::string list;
  for (size_t k = 0; k < known.size(); ++k) {
    if (known[k] == variant) return static_cast<int32_t>(k);
    list += (list.empty() ? "" : ", ") + known[k];
  }
  throw ArgumentError(std::string(algorithm.name) + ": unknown variant '" + variant +
                      "'; this artifact of robot '" + library.robot_name() + "' has: " + list +
                      " (\"\" restores the compiled choice)");
}

}  // namespace grid_rbd
