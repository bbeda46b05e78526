#include "grid_rbd/staging_arena.hpp"

#include <algorithm>

namespace grid_rbd {

void* StagingArena::reserve(size_t bytes) {
  if (buffer_.data() != nullptr && buffer_.size() >= bytes) return buffer_.data();
  const size_t grown = std::max(bytes, buffer_.size() + buffer_.size() / 2);
  buffer_.reset();  // free first: the old and new blocks need not fit side by side
  buffer_ = DeviceBuffer(library_, std::max<size_t>(grown, 1));
  return buffer_.data();
}

}  // namespace grid_rbd
