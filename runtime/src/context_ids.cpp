#include "grid_rbd/context_ids.hpp"

#include <cstdio>
#include <mutex>
#include <random>
#include <unordered_set>

namespace grid_rbd {

namespace {

// Tags are kept for the life of the process (a few bytes per load), so an id of an
// artifact that was unloaded since is still recognised as foreign, not unknown.
struct ClaimedTags {
  std::mutex mutex;
  std::unordered_set<uint32_t> tags;
};

ClaimedTags& claimed() {
  static ClaimedTags registry;
  return registry;
}

}  // namespace

std::string ContextIds::format(uint64_t id) {
  char text[19];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(id));
  return text;
}

uint64_t claim_artifact_salt() {
  std::random_device entropy;
  ClaimedTags& registry = claimed();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (;;) {
    const uint64_t salt = (uint64_t{entropy()} << 32) ^ uint64_t{entropy()};
    const uint32_t tag = ContextIds::tag_of_salt(salt);
    if (tag != 0 && registry.tags.insert(tag).second) return salt;
  }
}

bool is_claimed_tag(uint32_t tag) {
  ClaimedTags& registry = claimed();
  std::lock_guard<std::mutex> lock(registry.mutex);
  return registry.tags.count(tag) != 0;
}

}  // namespace grid_rbd
