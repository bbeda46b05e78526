#include "grid_rbd/bridge.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "grid_rbd/artifact.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {
namespace {

int32_t fail(int32_t status, const std::string& message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return status;
}

int32_t bridge_launch(void* artifact, uint64_t ctx_id, int32_t algorithm_id,
                      const void* const* inputs, int32_t num_inputs, void* output, int64_t batch,
                      double gravity, void* stream, void* stamp_out, const void* stamp_expect,
                      char* error, size_t error_size) {
  if (artifact == nullptr) {
    return fail(GRID_RBD_BRIDGE_INVALID_ARGUMENT, "no artifact", error, error_size);
  }
  try {
    auto& loaded = *static_cast<Artifact*>(artifact);
    DeviceCall call =
        plan_device_call(loaded.library(), algorithm_id, batch, inputs, num_inputs, output);
    call.gravity = gravity;
    call.stream = stream;
    call.stamp_out = stamp_out;
    call.stamp_expect = stamp_expect;
    loaded.launch(ctx_id, call);
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

const grid_rbd_bridge kBridge = {GRID_RBD_BRIDGE_VERSION,
                                 static_cast<int32_t>(sizeof(grid_rbd_bridge)), bridge_launch};

}  // namespace
}  // namespace grid_rbd

extern "C" const grid_rbd_bridge* grid_rbd_get_bridge(void) { return &grid_rbd::kBridge; }
