// RAII blocks of memory obtained through an artifact's allocators (ABI 2).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "grid_rbd/artifact_library.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {

/// Device memory: cudaMalloc on GPU artifacts, host memory on CPU artifacts.
struct DeviceMemory {
  static constexpr const char* kWhat = "device";
  static void* allocate(const grid_descriptor& d, size_t bytes) { return d.device_alloc(bytes); }
  static void release(const grid_descriptor& d, void* ptr) { d.device_free(ptr); }
};

/// Host memory the device reads at the bus rate: page-locked on GPU artifacts, 64-byte
/// aligned on CPU artifacts.
struct PinnedHostMemory {
  static constexpr const char* kWhat = "page-locked host";
  static void* allocate(const grid_descriptor& d, size_t bytes) {
    return d.host_alloc_pinned(bytes);
  }
  static void release(const grid_descriptor& d, void* ptr) { d.host_free_pinned(ptr); }
};

/// One allocation; keeps the artifact image loaded until it is freed. Move-only.
template <typename Memory>
class ArtifactBuffer {
 public:
  ArtifactBuffer() = default;
  /// Throws DeviceError when the allocator returns NULL.
  ArtifactBuffer(std::shared_ptr<const ArtifactLibrary> library, size_t bytes)
      : library_(std::move(library)), bytes_(bytes) {
    data_ = Memory::allocate(library_->descriptor(), bytes);
    if (data_ == nullptr) {
      throw DeviceError(std::string("out of ") + Memory::kWhat + " memory: could not allocate " +
                        std::to_string(bytes) + " bytes for robot '" + library_->robot_name() +
                        "'");
    }
  }
  ~ArtifactBuffer() { reset(); }

  ArtifactBuffer(ArtifactBuffer&& other) noexcept { *this = std::move(other); }
  ArtifactBuffer& operator=(ArtifactBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      library_ = std::move(other.library_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ArtifactBuffer(const ArtifactBuffer&) = delete;
  ArtifactBuffer& operator=(const ArtifactBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

  void reset() noexcept {
    if (data_ != nullptr) Memory::release(library_->descriptor(), data_);
    data_ = nullptr;
    bytes_ = 0;
    library_.reset();
  }

 private:
  std::shared_ptr<const ArtifactLibrary> library_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = ArtifactBuffer<DeviceMemory>;
using PinnedHostBuffer = ArtifactBuffer<PinnedHostMemory>;

}  // namespace grid_rbd
