// The artifact-wide model epoch that model versions are drawn from.
#pragma once

#include <atomic>
#include <cstdint>

namespace grid_rbd {

/// A strictly increasing counter, one per loaded artifact. Every context creation and
/// every model mutation of any context draws the next value, so no two (context
/// incarnation, model state) pairs ever share a version.
class ModelEpoch {
 public:
  uint64_t current() const { return value_.load(std::memory_order_acquire); }
  uint64_t next() { return value_.fetch_add(1, std::memory_order_acq_rel) + 1; }

 private:
  std::atomic<uint64_t> value_{0};
};

}  // namespace grid_rbd
