// grid_rbd._core: the runtime-context library as a Python extension.
//
// Every method that may wait (on a context's admission, a close draining its calls, the
// device) releases the GIL while it waits, so Python threads calling into one artifact
// run concurrently and a mutation never deadlocks against a call that needs the GIL to
// finish.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "dicts.hpp"
#include "grid_rbd/artifact.hpp"
#include "grid_rbd/artifact_buffer.hpp"
#include "grid_rbd/bridge.h"
#include "grid_rbd/errors.hpp"

namespace py = pybind11;
using grid_rbd::Artifact;

namespace {

constexpr double kDefaultGravity = -9.81;

std::shared_ptr<Artifact> load_artifact(const std::string& path) {
  py::gil_scoped_release release;
  return std::make_shared<Artifact>(path);
}

void call(Artifact& artifact, uint64_t ctx_id, const std::string& algorithm,
          const py::sequence& inputs, const py::handle& out, double gravity) {
  const grid_algorithm& a = artifact.library().algorithm(algorithm);
  // Strong references for the whole call: the arrays must outlive the released GIL even if
  // another thread rebinds the caller's list meanwhile.
  std::vector<py::object> keep;
  std::vector<grid_rbd::HostArray> views;
  for (size_t k = 0; k < inputs.size(); ++k) {
    keep.push_back(inputs[k]);
    const std::string name = static_cast<int32_t>(k) < a.num_inputs
                                 ? algorithm + ": input " + a.input_names[k]
                                 : algorithm + ": input " + std::to_string(k);
    views.push_back(grid_rbd::python::host_array(keep.back(), name));
  }
  keep.push_back(py::reinterpret_borrow<py::object>(out));
  const grid_rbd::HostArray out_view = grid_rbd::python::host_array(out, algorithm + ": out");
  py::gil_scoped_release release;
  artifact.call(ctx_id, algorithm, views, out_view, gravity);
}

// A framework call: raw addresses (device pointers on a GPU artifact) from torch or JAX.
uint64_t launch(Artifact& artifact, uint64_t ctx_id, int32_t algorithm_id,
            const py::sequence& inputs, uintptr_t output, int64_t batch,
            double gravity, uintptr_t stream, uintptr_t stamp_out, uintptr_t stamp_expect,
            uint64_t captured_version) {
  std::vector<const void*> pointers;
  for (const py::handle address : inputs) {
    pointers.push_back(reinterpret_cast<const void*>(address.cast<uintptr_t>()));
  }
  grid_rbd::DeviceCall call = grid_rbd::plan_device_call(
      artifact.library(), algorithm_id, batch, pointers.data(),
      static_cast<int32_t>(pointers.size()), reinterpret_cast<void*>(output));
  call.gravity = gravity;
  call.stream = reinterpret_cast<void*>(stream);
  call.stamp_out = reinterpret_cast<void*>(stamp_out);
  call.stamp_expect = reinterpret_cast<const void*>(stamp_expect);
  call.captured_version = captured_version;
  py::gil_scoped_release release;
  return artifact.launch(ctx_id, call);
}

// A captured-graph replay: `submit` runs (with the GIL) while the replay admission of
// context `ctx_id` is held; refused unless the model version is still `captured_version`.
void replay(Artifact& artifact, uint64_t ctx_id, uint64_t captured_version,
            const py::function& submit) {
  std::shared_ptr<grid_rbd::Context> context;
  std::shared_lock<grid_rbd::AdmissionGate> admission;
  {
    py::gil_scoped_release release;  // a mutator may hold the gate while it waits for us
    context = artifact.resolve(ctx_id);
    admission = context->admit_replay(captured_version);
  }
  submit();
}

uint64_t set_inertia_params(Artifact& artifact, uint64_t ctx_id, const py::handle& table) {
  const std::vector<std::byte> bytes =
      grid_rbd::python::inertia_table_bytes(artifact.library(), table);
  py::gil_scoped_release release;
  return artifact.set_inertia_params(ctx_id, bytes);
}

py::array get_inertia_params(Artifact& artifact, uint64_t ctx_id) {
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release release;
    bytes = artifact.inertia_params(ctx_id);
  }
  return grid_rbd::python::inertia_table_array(artifact.library(), bytes);
}

std::string repr(const Artifact& artifact) {
  const auto& lib = artifact.library();
  return "<grid_rbd._core.Artifact robot='" + lib.robot_name() + "' " + lib.dtype() + " " +
         (lib.is_gpu() ? lib.descriptor().archs : "cpu") + " path='" + lib.path() + "'>";
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "grid-rbd runtime contexts: load an artifact, create contexts, call algorithms.";
  m.attr("ABI_VERSION") = grid_rbd::kAbiVersion;

  py::class_<grid_rbd::PinnedHostBuffer, std::shared_ptr<grid_rbd::PinnedHostBuffer>>(
      m, "PinnedBlock", "Page-locked host memory owned by the array built on it (its base).")
      .def_property_readonly("nbytes", &grid_rbd::PinnedHostBuffer::size);

  py::class_<Artifact, std::shared_ptr<Artifact>>(m, "Artifact",
                                                  "One load of a compiled robot artifact.")
      .def_property_readonly("path", [](const Artifact& a) { return a.library().path(); })
      .def_property_readonly("salt", &Artifact::salt)
      .def_property_readonly(
          "info", [](const Artifact& a) { return grid_rbd::python::artifact_info(a.library()); })
      .def_property_readonly("model_epoch", &Artifact::model_epoch)
      .def("default_context", &Artifact::default_context,
           py::call_guard<py::gil_scoped_release>(),
           "Id of the current default incarnation (created lazily).")
      .def("create_context", &Artifact::create_context, py::arg("workspace_slots") = 0,
           py::call_guard<py::gil_scoped_release>(), "A new explicit context; returns its id.")
      .def("close_context", &Artifact::close_context, py::arg("ctx_id"),
           py::call_guard<py::gil_scoped_release>(),
           "Drain and close (0: the default incarnation). Idempotent.")
      .def("is_open", &Artifact::is_open, py::arg("ctx_id"),
           py::call_guard<py::gil_scoped_release>())
      .def("call", &call, py::arg("ctx_id"), py::arg("algorithm"), py::arg("inputs"),
           py::arg("out"), py::arg("gravity") = kDefaultGravity,
           "Run `algorithm` on C-contiguous (B, width) arrays of the artifact dtype into "
           "`out` (B * prod(output_shape) elements, any shape).")
      .def("launch", &launch, py::arg("ctx_id"), py::arg("algorithm_id"), py::arg("inputs"),
           py::arg("output"), py::arg("batch"), py::arg("gravity") = kDefaultGravity,
           py::arg("stream") = 0, py::arg("stamp_out") = 0, py::arg("stamp_expect") = 0,
           py::arg("captured_version") = 0,
           "Enqueue algorithm `algorithm_id` on caller-owned buffers (addresses; device "
           "pointers on a GPU artifact) on `stream` without waiting. stamp_out / "
           "stamp_expect: addresses of 8-byte model-version stamps (0: none). "
           "captured_version (nonzero): refuse unless the model version still is that. "
           "Returns the model version the launch ran under.")
      .def("replay", &replay, py::arg("ctx_id"), py::arg("captured_version"),
           py::arg("submit"),
           "Call `submit()` under the replay admission of the context; RuntimeError if it "
           "was closed or its model version is no longer `captured_version`.")
      .def_property_readonly(
          "native_address",
          [](Artifact& a) { return reinterpret_cast<uintptr_t>(&a); },
          "The address of the loaded artifact, for grid_rbd_get_bridge()->launch.")
      .def("set_inertia_params", &set_inertia_params, py::arg("ctx_id"), py::arg("table"),
           "Replace the (nb, 10) inertia table; returns the new model version.")
      .def("get_inertia_params", &get_inertia_params, py::arg("ctx_id"))
      .def("model_version", &Artifact::model_version, py::arg("ctx_id"),
           py::call_guard<py::gil_scoped_release>())
      .def(
          "device_profile",
          [](Artifact& a, uint64_t ctx_id) {
            grid_rbd::DeviceProfile profile;
            {
              py::gil_scoped_release release;
              profile = a.device_profile(ctx_id);
            }
            return grid_rbd::python::device_profile_dict(profile);
          },
          py::arg("ctx_id"))
      .def(
          "pinned_empty",
          [](const Artifact& a, const py::handle& shape) {
            return grid_rbd::python::pinned_empty(a.shared_library(), shape);
          },
          py::arg("shape"))
      .def("__repr__", &repr);

  m.def(
      "bridge_address",
      []() { return reinterpret_cast<uintptr_t>(grid_rbd_get_bridge()); },
      "Address of the runtime's C bridge table (grid_rbd/bridge.h), for the JAX FFI "
      "handler.");
  m.attr("BRIDGE_VERSION") = GRID_RBD_BRIDGE_VERSION;

  m.def("load_artifact", &load_artifact, py::arg("path"),
        "Load a grid-rbd artifact .so (RuntimeError naming the path on failure).");
}
