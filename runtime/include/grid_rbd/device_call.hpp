// A framework call (JAX FFI, torch op): caller-owned buffers, the caller's stream.
#pragma once

#include <array>
#include <cstdint>

#include "grid_rbd/artifact_library.hpp"

namespace grid_rbd {

/// One launch on memory the caller owns: device pointers on a GPU artifact, host pointers
/// on a CPU one. Nothing is staged or copied and nothing waits; the work goes on `stream`.
///
/// Model-version stamps (8 bytes, a uint64 in the caller's memory space):
/// `stamp_expect`, when set, is read first, inside the call's admission, and the call is
/// refused (ModelMutatedError) unless it equals the context's model version; this costs a
/// device-to-host read and a wait on `stream`. `stamp_out`, when set, receives the model
/// version the launch ran under, written on `stream` after the launch.
/// `captured_version` (nonzero: a replay of a recorded call) refuses the call unless the
/// context's model version is still that value.
struct DeviceCall {
  const grid_algorithm* algorithm = nullptr;
  int32_t batch = 0;
  std::array<const void*, GRID_MAX_INPUTS> inputs{};  // nullptr: an omitted optional input
  void* output = nullptr;
  double gravity = -9.81;
  void* stream = nullptr;
  void* stamp_out = nullptr;
  const void* stamp_expect = nullptr;
  uint64_t captured_version = 0;
};

/// Checks what can be checked of raw pointers: a known algorithm id, 0 <= batch <=
/// max_batch, at most the algorithm's inputs, every required input and the output set
/// (pointers may be null for an empty batch). Throws ArgumentError naming the problem.
DeviceCall plan_device_call(const ArtifactLibrary& library, int32_t algorithm_id, int64_t batch,
                            const void* const* inputs, int32_t num_inputs, void* output);

}  // namespace grid_rbd
