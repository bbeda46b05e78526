#include "grid_rbd/bridge.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <string>

#include "grid_rbd/artifact.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {
namespace {

constexpr int32_t kMaxGroup = 8;

int32_t fail(int32_t status, const std::string& message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return status;
}

// Runs `body` and maps the runtime's exceptions to the bridge's status codes.
template <typename Body>
int32_t guarded(char* error, size_t error_size, Body&& body) {
  try {
    body();
    return GRID_RBD_BRIDGE_OK;
  } catch (const ArgumentError& e) {
    return fail(GRID_RBD_BRIDGE_INVALID_ARGUMENT, e.what(), error, error_size);
  } catch (const ContextError& e) {
    return fail(GRID_RBD_BRIDGE_FAILED_PRECONDITION, e.what(), error, error_size);
  } catch (const ModelMutatedError& e) {
    return fail(GRID_RBD_BRIDGE_FAILED_PRECONDITION, e.what(), error, error_size);
  } catch (const std::exception& e) {
    return fail(GRID_RBD_BRIDGE_INTERNAL, e.what(), error, error_size);
  } catch (...) {
    return fail(GRID_RBD_BRIDGE_INTERNAL, "unknown error", error, error_size);
  }
}

int32_t bridge_launch(void* artifact, uint64_t ctx_id, int32_t algorithm_id,
                      const void* const* inputs, int32_t num_inputs, void* output, int64_t batch,
                      double gravity, void* stream, void* stamp_out, const void* stamp_expect,
                      char* error, size_t error_size) {
  if (artifact == nullptr) {
    return fail(GRID_RBD_BRIDGE_INVALID_ARGUMENT, "no artifact", error, error_size);
  }
  return guarded(error, error_size, [&] {
    auto& loaded = *static_cast<Artifact*>(artifact);
    DeviceCall call =
        plan_device_call(loaded.library(), algorithm_id, batch, inputs, num_inputs, output);
    call.gravity = gravity;
    call.stream = stream;
    call.stamp_out = stamp_out;
    call.stamp_expect = stamp_expect;
    loaded.launch(ctx_id, call);
  });
}

int32_t bridge_launch_group(void* artifact, uint64_t ctx_id, const grid_rbd_bridge_call* calls,
                            int32_t count, void* stream, void* stamp_out,
                            const void* stamp_expect, char* error, size_t error_size) {
  if (artifact == nullptr || calls == nullptr || count < 1 || count > kMaxGroup) {
    return fail(GRID_RBD_BRIDGE_INVALID_ARGUMENT,
                "launch_group needs an artifact and 1 to " + std::to_string(kMaxGroup) +
                    " calls",
                error, error_size);
  }
  return guarded(error, error_size, [&] {
    auto& loaded = *static_cast<Artifact*>(artifact);
    std::array<DeviceCall, kMaxGroup> group{};
    for (int32_t k = 0; k < count; ++k) {
      const grid_rbd_bridge_call& c = calls[k];
      if (c.num_inputs < 0 || c.num_inputs > GRID_RBD_BRIDGE_MAX_INPUTS) {
        throw ArgumentError("launch_group: call " + std::to_string(k) + " has " +
                            std::to_string(c.num_inputs) + " inputs");
      }
      group[k] = plan_device_call(loaded.library(), c.algorithm_id, c.batch, c.inputs,
                                  c.num_inputs, c.output);
      group[k].gravity = c.gravity;
      group[k].stream = stream;
      group[k].stamp_expect = stamp_expect;
    }
    group[count - 1].stamp_out = stamp_out;
    loaded.launch_group(ctx_id, group.data(), static_cast<size_t>(count));
  });
}

const grid_rbd_bridge kBridge = {GRID_RBD_BRIDGE_VERSION,
                                 static_cast<int32_t>(sizeof(grid_rbd_bridge)), bridge_launch,
                                 bridge_launch_group};

}  // namespace
}  // namespace grid_rbd

extern "C" const grid_rbd_bridge* grid_rbd_get_bridge(void) { return &grid_rbd::kBridge; }
