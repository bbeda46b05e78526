// 64-bit context ids, salted per loaded artifact.
#pragma once

#include <cstdint>
#include <string>

namespace grid_rbd {

/// Id layout: the high 24 bits are the tag of the loaded artifact (its salt's high bits,
/// never 0 and unique among the artifacts loaded in this process), the low 40 bits a
/// per-load counter that starts at 1 and is never reused. 0 is the default-context alias
/// and no real id. An id therefore names its artifact load: one minted by another load is
/// recognised as foreign, and a closed id can never alias a newer context.
struct ContextIds {
  static constexpr int kCounterBits = 40;
  static constexpr uint64_t kCounterMask = (uint64_t{1} << kCounterBits) - 1;

  static uint32_t tag_of_salt(uint64_t salt) {
    return static_cast<uint32_t>(salt >> kCounterBits);
  }
  static uint32_t tag(uint64_t id) { return static_cast<uint32_t>(id >> kCounterBits); }
  static uint64_t counter(uint64_t id) { return id & kCounterMask; }
  static uint64_t compose(uint32_t tag, uint64_t counter) {
    return (uint64_t{tag} << kCounterBits) | counter;
  }
  /// "0x" and 16 hex digits, for messages.
  static std::string format(uint64_t id);
};

/// Draws a random 64-bit salt whose tag is nonzero and was never handed out before in
/// this process, and records the tag (process-wide, thread-safe).
uint64_t claim_artifact_salt();

/// Whether `tag` belongs to an artifact loaded in this process (now or earlier).
bool is_claimed_tag(uint32_t tag);

}  // namespace grid_rbd
