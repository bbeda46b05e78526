// RAII ownership of one artifact state (create_state / destroy_state).
#pragma once

#include <memory>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// The per-context state an artifact allocates for its caller (on the device under CUDA:
/// the runtime inertia table). Destroyed with the artifact's own destroy_state.
class ArtifactState {
 public:
  /// Throws DeviceError with the artifact's message when create_state fails (out of
  /// memory, no kernel image for this device).
  explicit ArtifactState(std::shared_ptr<const ArtifactLibrary> library);
  ~ArtifactState() { reset(); }

  ArtifactState(const ArtifactState&) = delete;
  ArtifactState& operator=(const ArtifactState&) = delete;

  void* get() const { return state_; }
  void reset() noexcept;

 private:
  std::shared_ptr<const ArtifactLibrary> library_;
  void* state_ = nullptr;
};

}  // namespace grid_rbd
