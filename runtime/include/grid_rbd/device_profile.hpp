// The device profile a context captures when it is created.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// What the context was created against: a deployment can assert it.
struct DeviceProfile {
  bool is_gpu = false;
  int32_t device = 0;                       // CUDA ordinal (0 on the CPU)
  std::string name;                         // "NVIDIA H200", or "cpu"
  int32_t cc_major = 0, cc_minor = 0;       // 0.0 on the CPU
  std::string device_arch;                  // "sm_90", or "cpu"
  std::vector<std::string> compiled_archs;  // what the artifact holds kernels for
  int32_t multiprocessors = 0;              // SMs, or host threads
  int64_t total_memory = 0;                 // bytes at creation (host RAM on the CPU)
  int64_t free_memory = 0;
  int64_t shared_memory_optin = 0;          // per-block opt-in cap (0 on the CPU)
  int32_t max_batch = 0;                    // compiled in
  int32_t workspace_slots = 0;              // fitted: items in flight per launch
  std::string workspace_slots_source;       // "explicit" | "environment" | "auto"
  int64_t workspace_bytes = 0;              // the context's global-memory workspace
  int64_t arena_bytes = 0;                  // device memory owned at creation (workspace,
                                            // tables); host-call staging grows on demand
  bool caller_owned_slab = false;           // arenas come from the artifact's allocator
  bool own_stream = false;                  // the context submits on a stream of its own
  std::string stream_note;                  // why not, on a GPU artifact
  bool mapped_staging = false;              // small host calls run on the page-locked
                                            // mirror itself (no copies; see Context)
};

/// Whether a kernel image for `arch` ("sm_XY") runs on a device of compute capability
/// major.minor. SASS is binary compatible within a major version from its minor upwards
/// (sm_80 runs on 8.6, not on 9.0); the artifact embeds no PTX to JIT for newer majors.
bool arch_runs_on(const std::string& arch, int32_t major, int32_t minor);

/// Queries the current device through the artifact. Throws ContextError when a GPU
/// artifact finds no usable device or none of its architectures runs on it. The
/// workspace, stream and arena figures are the context's to fill in.
DeviceProfile capture_device_profile(const ArtifactLibrary& library);

}  // namespace grid_rbd
