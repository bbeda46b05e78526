#include "grid_rbd/artifact_state.hpp"

#include <utility>

namespace grid_rbd {

ArtifactState::ArtifactState(std::shared_ptr<const ArtifactLibrary> library)
    : library_(std::move(library)) {
  void* state = nullptr;
  const int rc = library_->descriptor().create_state(&state);
  library_->check(rc, "cannot create a runtime state for robot '" + library_->robot_name() + "'");
  state_ = state;
  try {
    library_->apply_dispatch(state_);  // the measured dispatch tables, if any
  } catch (...) {
    reset();
    throw;
  }
}

void ArtifactState::reset() noexcept {
  if (state_ != nullptr) library_->descriptor().destroy_state(state_);
  state_ = nullptr;
}

}  // namespace grid_rbd
