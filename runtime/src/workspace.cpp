#include "grid_rbd/workspace.hpp"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

namespace {

constexpr long kMaxEnvironmentSlots = 1L << 30;

// A whole number in [1, 2^30), else 0 (the variable is untrusted input: anything else,
// signs, spaces and suffixes included, is ignored).
int32_t parse_slots(const char* text) {
  if (text == nullptr || *text < '0' || *text > '9') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value >= kMaxEnvironmentSlots) return 0;
  return static_cast<int32_t>(value);
}

}  // namespace

WorkspaceFit fit_workspace(int32_t requested, const char* env_value, int64_t bytes_per_slot,
                           int64_t free_memory, int32_t max_batch) {
  if (requested < 0) {
    throw ArgumentError("workspace_slots must be >= 0 (0 = auto-fit), got " +
                        std::to_string(requested));
  }
  const int32_t cap = std::max<int32_t>(max_batch, 1);
  WorkspaceFit fit;
  fit.bytes_per_slot = std::max<int64_t>(bytes_per_slot, 0);
  if (requested > 0) {
    fit.slots = requested;
    fit.source = "explicit";
  } else if (const int32_t from_env = parse_slots(env_value); from_env > 0) {
    fit.slots = from_env;
    fit.source = "environment";
  } else {
    fit.source = "auto";
    if (fit.bytes_per_slot == 0) {
      fit.slots = cap;
    } else {
      const int64_t budget = std::max<int64_t>(free_memory, 0) / 4;
      fit.slots = static_cast<int32_t>(
          std::clamp<int64_t>(budget / fit.bytes_per_slot, 1, cap));
    }
  }
  fit.slots = std::min(fit.slots, cap);
  fit.bytes = fit.bytes_per_slot * fit.slots;
  return fit;
}

int64_t workspace_bytes_per_item(const grid_algorithm& /*algorithm*/) { return 0; }

int64_t max_workspace_bytes_per_item(const ArtifactLibrary& library) {
  int64_t largest = 0;
  for (const grid_algorithm* algorithm : library.algorithms()) {
    largest = std::max(largest, workspace_bytes_per_item(*algorithm));
  }
  return largest;
}

Workspace::Workspace(std::shared_ptr<const ArtifactLibrary> library, WorkspaceFit fit)
    : fit_(std::move(fit)) {
  if (fit_.bytes > 0) buffer_ = DeviceBuffer(std::move(library), static_cast<size_t>(fit_.bytes));
}

}  // namespace grid_rbd
