#include "device_launcher.hpp"

#include <array>
#include <exception>
#include <string>

#include "fastcall.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd::python {

namespace {

// An address argument: a non-negative int (0 for none).
bool address(PyObject* value, uintptr_t* out) {
  const unsigned long long bits = PyLong_AsUnsignedLongLong(value);
  if (bits == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = static_cast<uintptr_t>(bits);
  return true;
}

void check_algorithm(const ContextBinding& binding, int32_t algorithm_id) {
  const grid_descriptor& d = binding.artifact()->library().descriptor();
  if (algorithm_id < 0 || algorithm_id >= d.num_algorithms) {
    throw ArgumentError("algorithm id " + std::to_string(algorithm_id) + " is not one of this "
                        "artifact's");
  }
}

// Runs the group on the binding's context without the GIL; the version, or nullptr with
// the Python error set.
PyObject* run_group(const ContextBinding& binding, const DeviceCall* calls, size_t count) {
  uint64_t version = 0;
  std::exception_ptr failure;
  Py_BEGIN_ALLOW_THREADS
  try {
    version = binding.artifact()->launch_group(binding.ctx_id(), calls, count);
  } catch (...) {
    failure = std::current_exception();
  }
  Py_END_ALLOW_THREADS
  if (failure) return set_python_error(failure);
  return PyLong_FromUnsignedLongLong(version);
}

bool prepare(ContextBinding& binding) {
  if (binding.prepare_call()) return true;
  PyErr_SetString(PyExc_RuntimeError, "this handle's context was closed");
  return false;
}

}  // namespace

DeviceLauncher::DeviceLauncher(std::shared_ptr<ContextBinding> binding, int32_t algorithm_id)
    : binding_(std::move(binding)), algorithm_id_(algorithm_id) {
  check_algorithm(*binding_, algorithm_id_);
}

PyObject* DeviceLauncher::call(PyObject* const* args, size_t nargs) const {
  if (nargs < kFixedArguments || nargs > kFixedArguments + GRID_MAX_INPUTS) {
    PyErr_SetString(PyExc_TypeError,
                    "launcher(output, batch, gravity, stream, stamp_out, stamp_expect, "
                    "captured_version, *inputs)");
    return nullptr;
  }
  uintptr_t output = 0, stream = 0, stamp_out = 0, stamp_expect = 0, captured = 0;
  if (!address(args[0], &output) || !address(args[3], &stream) ||
      !address(args[4], &stamp_out) || !address(args[5], &stamp_expect) ||
      !address(args[6], &captured)) {
    return nullptr;
  }
  const long long batch = PyLong_AsLongLong(args[1]);
  if (batch == -1 && PyErr_Occurred()) return nullptr;
  const double gravity = PyFloat_AsDouble(args[2]);
  if (gravity == -1.0 && PyErr_Occurred()) return nullptr;
  std::array<const void*, GRID_MAX_INPUTS> inputs{};
  const auto num_inputs = static_cast<int32_t>(nargs - kFixedArguments);
  for (int32_t k = 0; k < num_inputs; ++k) {
    uintptr_t pointer = 0;
    if (!address(args[kFixedArguments + static_cast<size_t>(k)], &pointer)) return nullptr;
    inputs[static_cast<size_t>(k)] = reinterpret_cast<const void*>(pointer);
  }
  if (!prepare(*binding_)) return nullptr;
  DeviceCall call = plan(reinterpret_cast<void*>(output), batch, gravity,
                         reinterpret_cast<void*>(stream), reinterpret_cast<void*>(stamp_out),
                         reinterpret_cast<const void*>(stamp_expect), inputs.data(), num_inputs);
  call.captured_version = static_cast<uint64_t>(captured);
  return run_group(*binding_, &call, 1);
}

DeviceCall DeviceLauncher::plan(void* output, int64_t batch, double gravity, void* stream,
                                void* stamp_out, const void* stamp_expect,
                                const void* const* inputs, int32_t num_inputs) const {
  DeviceCall call = plan_device_call(binding_->artifact()->library(), algorithm_id_, batch,
                                     inputs, num_inputs, output);
  call.gravity = gravity;
  call.stream = stream;
  call.stamp_out = stamp_out;
  call.stamp_expect = stamp_expect;
  return call;
}

int DeviceLauncher::launch(void* output, int64_t batch, double gravity, void* stream,
                           void* stamp_out, const void* stamp_expect,
                           const void* const* inputs, int32_t num_inputs) const {
  if (num_inputs < 0 || num_inputs > GRID_MAX_INPUTS) {
    PyErr_SetString(PyExc_ValueError, "too many launch inputs");
    return -1;
  }
  if (!binding_->prepare_call()) return 1;  // closed: the caller's checked path says so
  try {
    const DeviceCall call = plan(output, batch, gravity, stream, stamp_out, stamp_expect, inputs,
                                 num_inputs);
    PyObject* version = run_group(*binding_, &call, 1);
    if (version == nullptr) return -1;
    Py_DECREF(version);
    return 0;
  } catch (...) {
    set_python_error(std::current_exception());
    return -1;
  }
}

extern "C" int grid_rbd_launcher_call(PyObject* launcher, void* output, int64_t batch,
                                      double gravity, void* stream, void* stamp_out,
                                      const void* stamp_expect, const void* const* inputs,
                                      int32_t num_inputs) {
  PyTypeObject* type = fast_type<DeviceLauncher>();
  if (launcher == nullptr || type == nullptr || Py_TYPE(launcher) != type) {
    PyErr_SetString(PyExc_TypeError, "grid_rbd_launcher_call needs a _core.DeviceLauncher");
    return -1;
  }
  const auto* object = reinterpret_cast<FastCallableObject<DeviceLauncher>*>(launcher);
  return object->impl->launch(output, batch, gravity, stream, stamp_out, stamp_expect, inputs,
                              num_inputs);
}

DeviceGroupLauncher::DeviceGroupLauncher(std::shared_ptr<ContextBinding> binding,
                                         std::vector<int32_t> algorithm_ids)
    : binding_(std::move(binding)), algorithm_ids_(std::move(algorithm_ids)) {
  if (algorithm_ids_.empty() || algorithm_ids_.size() > kMaxAlgorithms) {
    throw ArgumentError("a launch group has 1 to " + std::to_string(kMaxAlgorithms) +
                        " algorithms");
  }
  for (int32_t id : algorithm_ids_) check_algorithm(*binding_, id);
}

PyObject* DeviceGroupLauncher::call(PyObject* const* args, size_t nargs) const {
  auto usage = [] {
    PyErr_SetString(PyExc_TypeError,
                    "group(stream, stamp_expect, *[output, batch, gravity, num_inputs, "
                    "*inputs] per algorithm)");
    return nullptr;
  };
  uintptr_t stream = 0, stamp_expect = 0;
  if (nargs < 2) return usage();
  if (!address(args[0], &stream) || !address(args[1], &stamp_expect)) return nullptr;
  std::array<DeviceCall, kMaxAlgorithms> calls{};
  const Artifact& artifact = *binding_->artifact();
  size_t at = 2;
  for (size_t g = 0; g < algorithm_ids_.size(); ++g) {
    if (nargs < at + 4) return usage();
    uintptr_t output = 0;
    if (!address(args[at], &output)) return nullptr;
    const long long batch = PyLong_AsLongLong(args[at + 1]);
    if (batch == -1 && PyErr_Occurred()) return nullptr;
    const double gravity = PyFloat_AsDouble(args[at + 2]);
    if (gravity == -1.0 && PyErr_Occurred()) return nullptr;
    const long count = PyLong_AsLong(args[at + 3]);
    if (count == -1 && PyErr_Occurred()) return nullptr;
    at += 4;
    if (count < 0 || count > GRID_MAX_INPUTS || nargs < at + static_cast<size_t>(count)) {
      return usage();
    }
    std::array<const void*, GRID_MAX_INPUTS> inputs{};
    for (long k = 0; k < count; ++k) {
      uintptr_t pointer = 0;
      if (!address(args[at++], &pointer)) return nullptr;
      inputs[static_cast<size_t>(k)] = reinterpret_cast<const void*>(pointer);
    }
    calls[g] = plan_device_call(artifact.library(), algorithm_ids_[g], batch, inputs.data(),
                                static_cast<int32_t>(count), reinterpret_cast<void*>(output));
    calls[g].gravity = gravity;
    calls[g].stream = reinterpret_cast<void*>(stream);
    calls[g].stamp_expect = reinterpret_cast<const void*>(stamp_expect);
  }
  if (at != nargs) return usage();
  if (!prepare(*binding_)) return nullptr;
  return run_group(*binding_, calls.data(), algorithm_ids_.size());
}

}  // namespace grid_rbd::python
