// A context's staging for host (numpy) calls: a device block and its page-locked mirror.
#pragma once

#include <cstddef>
#include <memory>

#include "grid_rbd/artifact_buffer.hpp"

namespace grid_rbd {

/// Host calls on a GPU artifact stage their inputs and output here. Small calls pack
/// every input into the page-locked mirror, so one host-to-device copy moves them all
/// and one device-to-host copy brings the output back, both at the DMA rate without the
/// driver's pageable bounce buffer.
///
/// Both blocks grow on demand, geometrically (x1.5, at least the request), so a caller
/// stepping its batch up reallocates O(log) times. Growing drops the old contents; the
/// caller holds the context's staging lock and has synchronised its stream, so no copy
/// or kernel still uses the old block.
class StagingArena {
 public:
  explicit StagingArena(std::shared_ptr<const ArtifactLibrary> library)
      : library_(std::move(library)) {}

  /// A device block of at least `bytes`; its contents are unspecified.
  void* reserve_device(size_t bytes);
  /// A page-locked host block of at least `bytes`; its contents are unspecified.
  void* reserve_host(size_t bytes);
  size_t device_capacity() const { return device_.size(); }
  size_t host_capacity() const { return host_.size(); }
  void release() noexcept {
    device_.reset();
    host_.reset();
  }

 private:
  std::shared_ptr<const ArtifactLibrary> library_;
  DeviceBuffer device_;
  PinnedHostBuffer host_;
};

}  // namespace grid_rbd
