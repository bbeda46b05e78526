// The few CUDA driver entry points the runtime needs beyond the artifact ABI, loaded at
// run time (no CUDA toolkit at build time): per-context streams, a device-wide fence and
// whether a stream is being captured into a graph.
#pragma once

#include <string>

namespace grid_rbd {

/// libcuda.so.1, opened once per process on first use. Every call works in the primary
/// context of the given device, the one the CUDA runtime inside an artifact uses, so a
/// stream made here is a valid cudaStream_t for the artifact's copies and launches.
class CudaDriver {
 public:
  /// The driver, or nullptr when libcuda.so.1 is missing or lacks an entry point (then
  /// `why()` says which).
  static const CudaDriver* get();
  static std::string why();

  /// A new non-blocking stream on `device` (it does not wait for the legacy default
  /// stream); nullptr on failure, with the reason in `error`.
  void* create_stream(int device, std::string* error) const;
  void destroy_stream(int device, void* stream) const;
  /// Waits until all work of `device` (every stream) has completed; false on an error.
  bool synchronize_device(int device) const;
  /// Whether kernels on `device` can read and write page-locked host memory at its host
  /// address (host memory mapping in one unified address space).
  bool kernels_reach_pinned_memory(int device) const;
  /// Whether work enqueued on `stream` is being recorded into a graph instead of run.
  bool is_capturing(void* stream) const;

  struct Entry;  // the resolved function pointers (cuda_driver.cpp)
  explicit CudaDriver(const Entry* entry) : entry_(entry) {}

 private:
  const Entry* entry_;
};

/// A context's own stream: created on a GPU artifact when the driver is available, else
/// the legacy default stream (nullptr). Destroyed after everything on it completed.
class DeviceStream {
 public:
  DeviceStream() = default;
  /// `device`: the CUDA ordinal the context was created on.
  DeviceStream(bool is_gpu, int device);
  ~DeviceStream() { reset(); }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  void* get() const { return stream_; }
  bool owned() const { return stream_ != nullptr; }
  /// Why the context fell back to the legacy default stream ("" when it owns one, or on
  /// the CPU where there are no streams).
  const std::string& fallback_reason() const { return fallback_; }
  /// Device-wide fence (every stream, framework streams included); the legacy default
  /// stream's synchronise through `fallback` when the driver is unavailable.
  template <typename Fallback>
  bool fence_device(Fallback&& fallback) const {
    const CudaDriver* driver = CudaDriver::get();
    if (is_gpu_ && driver != nullptr) return driver->synchronize_device(device_);
    return fallback();
  }
  void reset() noexcept;

 private:
  bool is_gpu_ = false;
  int device_ = 0;
  void* stream_ = nullptr;
  std::string fallback_;
};

}  // namespace grid_rbd
