#include "grid_rbd/host_call.hpp"

#include <string>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t k = 0; k < shape.size(); ++k) {
    text += (k ? ", " : "") + std::to_string(shape[k]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

std::string input_list(const grid_algorithm& a) {
  std::string names;
  for (int32_t k = 0; k < a.num_inputs; ++k) {
    names += (k ? ", " : "") + std::string(a.input_names[k]) +
             (a.input_required[k] ? "" : " (optional)");
  }
  return names;
}

}  // namespace

CallPlan plan_call(const ArtifactLibrary& library, const std::string& algorithm_name,
                   const std::vector<HostArray>& inputs, const HostArray& out) {
  const grid_algorithm& a = library.algorithm(algorithm_name);
  const std::string dtype = library.dtype();
  const std::string where = algorithm_name + ": ";
  if (inputs.size() > static_cast<size_t>(a.num_inputs)) {
    throw ArgumentError(where + "takes " + std::to_string(a.num_inputs) + " inputs (" +
                        input_list(a) + "), got " + std::to_string(inputs.size()));
  }

  CallPlan plan;
  plan.algorithm = &a;
  int64_t batch = -1;
  std::string batch_from;
  for (int32_t k = 0; k < a.num_inputs; ++k) {
    const std::string name = a.input_names[k];
    const int64_t width = a.input_widths[k];
    const std::string expected = "expected a C-contiguous (B, " + std::to_string(width) + ") " +
                                 dtype + " array";
    const bool given = static_cast<size_t>(k) < inputs.size() && inputs[k].present;
    if (!given) {
      if (a.input_required[k]) {
        throw ArgumentError(where + "input " + name + " is required (" + expected + ")");
      }
      continue;
    }
    const HostArray& x = inputs[k];
    if (x.dtype != dtype) {
      throw ArgumentError(where + name + " has dtype " + x.dtype + "; this artifact computes in " +
                          dtype + " (" + expected + ")");
    }
    if (x.shape.size() != 2) {
      throw ArgumentError(where + name + " has shape " + shape_text(x.shape) + "; " + expected);
    }
    if (x.shape[1] != width) {
      throw ArgumentError(where + name + " has width " + std::to_string(x.shape[1]) +
                          "; this robot's width for " + name + " is " + std::to_string(width) +
                          " (" + expected + ")");
    }
    if (!x.c_contiguous) {
      throw ArgumentError(where + name + " is not C-contiguous (" + expected +
                          "; np.ascontiguousarray makes one)");
    }
    if (batch < 0) {
      batch = x.shape[0];
      batch_from = name;
    } else if (x.shape[0] != batch) {
      throw ArgumentError(where + name + " has batch " + std::to_string(x.shape[0]) + " but " +
                          batch_from + " has batch " + std::to_string(batch));
    }
    plan.inputs[k] = x.data;
    plan.input_bytes[k] = static_cast<size_t>(x.shape[0] * width) * library.scalar_size();
  }
  const int32_t max_batch = library.descriptor().max_batch;
  if (batch > max_batch) {
    throw ArgumentError(where + "batch " + std::to_string(batch) + " exceeds this artifact's " +
                        "max_batch " + std::to_string(max_batch) +
                        " (split the batch, or rebuild with a larger max_batch_size)");
  }
  plan.batch = static_cast<int32_t>(batch);

  const int64_t per_item = output_elements_per_item(a);
  const int64_t expected_out = batch * per_item;
  const std::string out_expected = "expected a writable C-contiguous " + dtype + " array of " +
                                   std::to_string(expected_out) + " elements (B=" +
                                   std::to_string(batch) + " x " + std::to_string(per_item) +
                                   ")";
  if (!out.present) throw ArgumentError(where + "out is required (" + out_expected + ")");
  if (out.dtype != dtype) {
    throw ArgumentError(where + "out has dtype " + out.dtype + "; " + out_expected);
  }
  if (element_count(out.shape) != expected_out) {
    throw ArgumentError(where + "out has shape " + shape_text(out.shape) + " (" +
                        std::to_string(element_count(out.shape)) + " elements); " + out_expected);
  }
  if (!out.c_contiguous) throw ArgumentError(where + "out is not C-contiguous; " + out_expected);
  if (!out.writable) throw ArgumentError(where + "out is read-only; " + out_expected);
  plan.output = const_cast<void*>(out.data);
  plan.output_bytes = static_cast<size_t>(expected_out) * library.scalar_size();
  return plan;
}

}  // namespace grid_rbd
