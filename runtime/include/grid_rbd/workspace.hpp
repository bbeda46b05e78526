// A context's global-memory workspace: how many batch items may be in flight per launch
// (the slots) and the device block that holds their scratch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "grid_rbd/artifact_buffer.hpp"
#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// The environment variable that caps the slots of contexts created without an explicit
/// workspace_slots.
constexpr const char* kWorkspaceSlotsVariable = "GRID_WORKSPACE_TIMESTEP_SLOTS";

/// What was fitted for one context.
struct WorkspaceFit {
  int32_t slots = 0;           // items in flight per launch (>= 1); a larger batch strides
  std::string source;          // "explicit" | "environment" | "auto"
  int64_t bytes_per_slot = 0;  // the largest per-item workspace of the artifact's kernels
  int64_t bytes = 0;           // slots * bytes_per_slot, allocated with the context
};

/// The slot count and its source: an explicit `requested` > 0 beats `env_value` (the
/// text of $GRID_WORKSPACE_TIMESTEP_SLOTS, or nullptr; ignored unless a whole number in
/// [1, 2^30)), which beats the auto-fit. Auto-fit: every item of a max_batch launch in
/// flight when the kernels need no workspace, else as many slots as a quarter of the
/// device memory free at creation holds (at least 1). Slots never exceed max_batch.
/// Throws ArgumentError for a negative `requested`.
WorkspaceFit fit_workspace(int32_t requested, const char* env_value, int64_t bytes_per_slot,
                           int64_t free_memory, int32_t max_batch);

/// Bytes of global workspace one item of `algorithm` needs. The ABI 3 kernels keep their
/// scratch in shared memory (GPU) or on the stack (CPU): 0.
int64_t workspace_bytes_per_item(const grid_algorithm& algorithm);

/// The largest workspace_bytes_per_item over the artifact's algorithms.
int64_t max_workspace_bytes_per_item(const ArtifactLibrary& library);

/// The fitted workspace of a context: its slot cap and device block (none when the
/// kernels need no workspace). Allocated once, at context creation, so that an
/// allocation failure refuses the context instead of a later call.
class Workspace {
 public:
  Workspace(std::shared_ptr<const ArtifactLibrary> library, WorkspaceFit fit);

  const WorkspaceFit& fit() const { return fit_; }
  int32_t slots() const { return fit_.slots; }
  void* data() const { return buffer_.data(); }
  /// Items one launch of `batch` items keeps in flight: min(batch, slots).
  int32_t items_in_flight(int32_t batch) const { return batch < fit_.slots ? batch : fit_.slots; }
  void release() noexcept { buffer_.reset(); }

 private:
  WorkspaceFit fit_;
  DeviceBuffer buffer_;
};

}  // namespace grid_rbd
