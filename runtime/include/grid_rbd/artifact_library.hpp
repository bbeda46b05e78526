// A loaded artifact image: the shared object and its validated, immutable descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <unordered_map>
#include <vector>

#include "grid_rbd/abi.h"
#include "grid_rbd/shared_library.hpp"

namespace grid_rbd {

/// The ABI version this runtime reads.
constexpr int32_t kAbiVersion = GRID_ABI_VERSION;

/// Scalars one batch item of `algorithm`'s output holds (unused dimensions are 1).
int64_t output_elements_per_item(const grid_algorithm& algorithm);

/// An artifact `.so` opened once and shared (by `shared_ptr`) by every object that calls
/// into it, so the image outlives all contexts and buffers made from it.
///
/// Opening validates the descriptor: the ABI version and struct size first (both sit at
/// the front in every version), then dtype, table sizes and the entry points.
class ArtifactLibrary {
 public:
  /// Throws ArtifactError naming `path` when it cannot be loaded or read.
  explicit ArtifactLibrary(const std::string& path);

  ArtifactLibrary(const ArtifactLibrary&) = delete;
  ArtifactLibrary& operator=(const ArtifactLibrary&) = delete;

  const grid_descriptor& descriptor() const { return *descriptor_; }
  const std::string& path() const { return library_.path(); }
  std::string robot_name() const { return descriptor_->robot_name; }
  bool is_gpu() const { return descriptor_->is_gpu != 0; }
  bool runtime_inertia() const { return descriptor_->runtime_inertia != 0; }
  /// "float32" or "float64".
  std::string dtype() const { return descriptor_->dtype; }
  size_t scalar_size() const { return static_cast<size_t>(descriptor_->dtype_size); }
  size_t inertia_table_bytes() const;
  /// Joint dynamics (grid_codegen.joint_dynamics): [damping (n) | friction (n)].
  bool runtime_joint_dynamics() const { return descriptor_->runtime_joint_dynamics != 0; }
  size_t joint_dynamics_table_bytes() const {
    return static_cast<size_t>(descriptor_->joint_dynamics_table_size) * scalar_size();
  }
  /// Joint origins (grid_codegen.transforms): [p (3) | quat xyzw (4)] per joint.
  bool runtime_transform() const { return descriptor_->runtime_transform != 0; }
  size_t transform_table_bytes() const {
    return static_cast<size_t>(descriptor_->transform_table_size) * scalar_size();
  }
  /// The architectures the artifact was compiled for: {"sm_90", ...} or {"cpu"}.
  std::vector<std::string> compiled_archs() const;

  /// The algorithm called `name`; ArgumentError listing the artifact's algorithms if none.
  const grid_algorithm& algorithm(const std::string& name) const;
  std::vector<const grid_algorithm*> algorithms() const;

  /// The measured dispatch table of one algorithm (registration's autotune, meta.json):
  /// `entries` (min_batch, variant index), ascending from batch 1. Validated against the
  /// descriptor; every state created afterwards starts from it (`apply_dispatch`); empty
  /// restores the descriptor's default.
  void set_dispatch_table(int32_t algorithm_id,
                          std::vector<std::pair<int32_t, int32_t>> entries) const;
  /// Installs the stored tables into a freshly created state (all of them, or only
  /// `algorithm_id`'s when it is >= 0).
  void apply_dispatch(void* state, int32_t algorithm_id = -1) const;

  /// The artifact's text for an error code.
  std::string error_message(int code) const;
  /// Throws DeviceError "<what>: <error_string> (grid error N)" when `code` is not GRID_OK.
  void check(int code, const std::string& what) const;

 private:
  void validate() const;

  SharedLibrary library_;
  const grid_descriptor* descriptor_ = nullptr;
  std::unordered_map<std::string, const grid_algorithm*> by_name_;
  mutable std::mutex dispatch_mutex_;
  mutable std::unordered_map<int32_t, std::vector<std::pair<int32_t, int32_t>>>
      dispatch_;  // guarded by dispatch_mutex_
};

}  // namespace grid_rbd
