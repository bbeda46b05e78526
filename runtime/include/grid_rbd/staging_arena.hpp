// A context's device staging arena for host (numpy) calls.
#pragma once

#include <cstddef>
#include <memory>

#include "grid_rbd/artifact_buffer.hpp"

namespace grid_rbd {

/// One device block that host calls stage their inputs and output in, grown on demand.
///
/// Growth is geometric (x1.5, at least the request) so that a caller stepping its batch
/// up reallocates O(log) times. Growing drops the old contents; the caller holds the
/// context's staging lock and has synchronised its stream, so no device work still reads
/// the old block.
class StagingArena {
 public:
  explicit StagingArena(std::shared_ptr<const ArtifactLibrary> library)
      : library_(std::move(library)) {}

  /// A block of at least `bytes`; its contents are unspecified.
  void* reserve(size_t bytes);
  size_t capacity() const { return buffer_.size(); }
  void release() noexcept { buffer_.reset(); }

 private:
  std::shared_ptr<const ArtifactLibrary> library_;
  DeviceBuffer buffer_;
};

}  // namespace grid_rbd
