// The framework backends' per-call launch (torch eager): raw addresses in, one launch on
// the handle's context, through vectorcall.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "binding.hpp"
#include "grid_rbd/device_call.hpp"

namespace grid_rbd::python {

/// One algorithm of one handle's context, called from Python (through
/// `make_fast_callable`) as
///     launcher(output, batch, gravity, stream, stamp_out, stamp_expect,
///              captured_version, *inputs) -> model version
/// with addresses as ints (0: none; device pointers on a GPU artifact) and the inputs in
/// the algorithm's order. The same checks and admission as `Artifact.launch`.
class DeviceLauncher {
 public:
  static constexpr const char* kTypeName = "grid_rbd._core.DeviceLauncher";
  static constexpr const char* kDoc =
      "launcher(output, batch, gravity, stream, stamp_out, stamp_expect, captured_version, "
      "*inputs) -> model version: one framework launch on the handle's context.";
  static constexpr size_t kFixedArguments = 7;

  DeviceLauncher(std::shared_ptr<ContextBinding> binding, int32_t algorithm_id);

  PyObject* call(PyObject* const* args, size_t nargs) const;

  /// One launch with the GIL held (`stamp_out` / `stamp_expect`: the optional 8-byte
  /// model-version stamps): 0; 1 when the context is closed (nothing launched, no error
  /// set); -1 with the Python error set.
  int launch(void* output, int64_t batch, double gravity, void* stream, void* stamp_out,
             const void* stamp_expect, const void* const* inputs, int32_t num_inputs) const;

 private:
  // The launch of this algorithm on the binding's artifact (after prepare_call).
  DeviceCall plan(void* output, int64_t batch, double gravity, void* stream, void* stamp_out,
                  const void* stamp_expect, const void* const* inputs,
                  int32_t num_inputs) const;

  std::shared_ptr<ContextBinding> binding_;
  int32_t algorithm_id_;
};

/// The C entry the torch extension calls a `DeviceLauncher` object through (see
/// grid_rbd_launcher_call in bridge.h); its address is `_core.launcher_call_address()`.
extern "C" int grid_rbd_launcher_call(PyObject* launcher, void* output, int64_t batch,
                                      double gravity, void* stream, void* stamp_out,
                                      const void* stamp_expect, const void* const* inputs,
                                      int32_t num_inputs);

/// Several algorithms of one handle's context launched as one group (one admission, one
/// stamp read: a backward's launches), called from Python as
///     group(stream, stamp_expect, output_0, batch_0, gravity_0, num_inputs_0,
///           *inputs_0, output_1, ...) -> model version
/// with one (output, batch, gravity, num_inputs, *inputs) run per algorithm given at
/// construction, in that order.
class DeviceGroupLauncher {
 public:
  static constexpr const char* kTypeName = "grid_rbd._core.DeviceGroupLauncher";
  static constexpr const char* kDoc =
      "group(stream, stamp_expect, *[output, batch, gravity, num_inputs, *inputs] per "
      "algorithm) -> model version: the launches under one admission, one stamp read.";
  static constexpr size_t kMaxAlgorithms = 4;

  DeviceGroupLauncher(std::shared_ptr<ContextBinding> binding,
                      std::vector<int32_t> algorithm_ids);

  PyObject* call(PyObject* const* args, size_t nargs) const;

 private:
  std::shared_ptr<ContextBinding> binding_;
  std::vector<int32_t> algorithm_ids_;
};

}  // namespace grid_rbd::python
