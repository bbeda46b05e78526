#include "grid_rbd/device_call.hpp"

#include <string>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

DeviceCall plan_device_call(const ArtifactLibrary& library, int32_t algorithm_id, int64_t batch,
                            const void* const* inputs, int32_t num_inputs, void* output) {
  const grid_descriptor& d = library.descriptor();
  if (algorithm_id < 0 || algorithm_id >= d.num_algorithms) {
    throw ArgumentError("algorithm id " + std::to_string(algorithm_id) + " is not one of robot '" +
                        library.robot_name() + "' (it has " +
                        std::to_string(d.num_algorithms) + ")");
  }
  const grid_algorithm& a = d.algorithms[algorithm_id];
  auto where = [&a] { return std::string(a.name) + ": "; };  // built only for an error
  if (batch < 0 || batch > d.max_batch) {
    throw ArgumentError(where() + "batch " + std::to_string(batch) + " is outside [0, " +
                        std::to_string(d.max_batch) + "], this artifact's max_batch_size");
  }
  if (num_inputs < 0 || num_inputs > a.num_inputs || (num_inputs > 0 && inputs == nullptr)) {
    throw ArgumentError(where() + "takes at most " + std::to_string(a.num_inputs) +
                        " inputs, got " + std::to_string(num_inputs));
  }
  DeviceCall call;
  call.algorithm = &a;
  call.batch = static_cast<int32_t>(batch);
  for (int32_t k = 0; k < a.num_inputs; ++k) {
    call.inputs[k] = k < num_inputs ? inputs[k] : nullptr;
    // An empty batch reads nothing: frameworks may hand empty buffers as null.
    if (a.input_required[k] && call.inputs[k] == nullptr && batch > 0) {
      throw ArgumentError(where() + "input " + a.input_names[k] + " is required");
    }
  }
  if (output == nullptr && batch > 0) throw ArgumentError(where() + "the output pointer is null");
  call.output = output;
  return call;
}

}  // namespace grid_rbd
