#include "grid_rbd/staging_arena.hpp"

#include <algorithm>

namespace grid_rbd {

namespace {

template <typename Buffer>
void* grow(Buffer& buffer, const std::shared_ptr<const ArtifactLibrary>& library,
           size_t bytes) {
  if (buffer.data() != nullptr && buffer.size() >= bytes) return buffer.data();
  const size_t grown = std::max(bytes, buffer.size() + buffer.size() / 2);
  buffer.reset();  // free first: the old and new blocks need not fit side by side
  buffer = Buffer(library, std::max<size_t>(grown, 1));
  return buffer.data();
}

}  // namespace

void* StagingArena::reserve_device(size_t bytes) { return grow(device_, library_, bytes); }

void* StagingArena::reserve_host(size_t bytes) { return grow(host_, library_, bytes); }

}  // namespace grid_rbd
