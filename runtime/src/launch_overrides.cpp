#include "grid_rbd/launch_overrides.hpp"

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

void validate_threads_per_block(int32_t threads, const std::string& what) {
  if (threads == 0) return;
  if (threads < kWarpSize || threads > kMaxThreadsPerBlock || threads % kWarpSize != 0) {
    throw ArgumentError(what + " must be 0 (the compiled default) or a multiple of " +
                        std::to_string(kWarpSize) + " in [" + std::to_string(kWarpSize) + ", " +
                        std::to_string(kMaxThreadsPerBlock) + "], got " +
                        std::to_string(threads));
  }
}

std::vector<std::string> available_variants(const ArtifactLibrary& library,
                                            const grid_algorithm& /*algorithm*/) {
  return {library.descriptor().strategy};
}

void validate_variant(const ArtifactLibrary& library, const grid_algorithm& algorithm,
                      const std::string& variant) {
  if (variant.empty()) return;
  const std::vector<std::string> known = available_variants(library, algorithm);
  std::string list;
  for (const std::string& name : known) {
    if (name == variant) return;
    list += (list.empty() ? "" : ", ") + name;
  }
  throw ArgumentError(std::string(algorithm.name) + ": unknown variant '" + variant +
                      "'; this artifact of robot '" + library.robot_name() + "' has: " + list +
                      " (\"\" restores the compiled choice)");
}

}  // namespace grid_rbd
