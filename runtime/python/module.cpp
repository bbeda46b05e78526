// grid_rbd._core: the runtime-context library as a Python extension.
//
// Every method that may wait (on a context's admission, a close draining its calls, the
// device) releases the GIL while it waits, so Python threads calling into one artifact
// run concurrently and a mutation never deadlocks against a call that needs the GIL to
// finish.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "binding.hpp"
#include "device_launcher.hpp"
#include "dicts.hpp"
#include "fastcall.hpp"
#include "host_method.hpp"
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

std::vector<const void*> addresses(const py::sequence& inputs) {
  std::vector<const void*> pointers;
  pointers.reserve(inputs.size());
  for (const py::handle address : inputs) {
    pointers.push_back(reinterpret_cast<const void*>(address.cast<uintptr_t>()));
  }
  return pointers;
}

grid_rbd::DeviceCall device_call(const Artifact& artifact, int32_t algorithm_id,
                                 const py::sequence& inputs, uintptr_t output, int64_t batch,
                                 double gravity, uintptr_t stream) {
  const std::vector<const void*> pointers = addresses(inputs);
  grid_rbd::DeviceCall call = grid_rbd::plan_device_call(
      artifact.library(), algorithm_id, batch, pointers.data(),
      static_cast<int32_t>(pointers.size()), reinterpret_cast<void*>(output));
  call.gravity = gravity;
  call.stream = reinterpret_cast<void*>(stream);
  return call;
}

// A framework call: raw addresses (device pointers on a GPU artifact) from torch or JAX.
uint64_t launch(Artifact& artifact, uint64_t ctx_id, int32_t algorithm_id,
                const py::sequence& inputs, uintptr_t output, int64_t batch, double gravity,
                uintptr_t stream, uintptr_t stamp_out, uintptr_t stamp_expect,
                uint64_t captured_version) {
  grid_rbd::DeviceCall call =
      device_call(artifact, algorithm_id, inputs, output, batch, gravity, stream);
  call.stamp_out = reinterpret_cast<void*>(stamp_out);
  call.stamp_expect = reinterpret_cast<const void*>(stamp_expect);
  call.captured_version = captured_version;
  py::gil_scoped_release release;
  return artifact.launch(ctx_id, call);
}

// Framework calls under one admission (a backward's launches): `calls` holds
// (algorithm_id, input addresses, output address, batch, gravity) tuples; every call
// goes on `stream`; the stamp, when given, is read once for the group.
uint64_t launch_group(Artifact& artifact, uint64_t ctx_id, const py::sequence& calls,
                      uintptr_t stream, uintptr_t stamp_expect, uint64_t captured_version) {
  std::vector<grid_rbd::DeviceCall> group;
  group.reserve(calls.size());
  for (const py::handle entry : calls) {
    const auto item = py::reinterpret_borrow<py::tuple>(entry);
    if (item.size() != 5) {
      throw grid_rbd::ArgumentError("launch_group: each call is (algorithm_id, inputs, "
                                    "output, batch, gravity)");
    }
    group.push_back(device_call(artifact, item[0].cast<int32_t>(), item[1],
                                item[2].cast<uintptr_t>(), item[3].cast<int64_t>(),
                                item[4].cast<double>(), stream));
    group.back().stamp_expect = reinterpret_cast<const void*>(stamp_expect);
    group.back().captured_version = captured_version;
  }
  py::gil_scoped_release release;
  return artifact.launch_group(ctx_id, group.data(), group.size());
}

// `repeats` launches on caller-owned buffers timed in C++ (the host clock): the kernel
// plus the runtime's own per-launch cost, without Python's. For benchmarks.
double launch_repeatedly(Artifact& artifact, uint64_t ctx_id, int32_t algorithm_id,
                         const py::sequence& inputs, uintptr_t output, int64_t batch,
                         double gravity, uintptr_t stream, int64_t repeats) {
  const grid_rbd::DeviceCall call =
      device_call(artifact, algorithm_id, inputs, output, batch, gravity, stream);
  py::gil_scoped_release release;
  const std::shared_ptr<grid_rbd::Context> context = artifact.resolve(ctx_id);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < repeats; ++k) context->launch(call);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(repeats > 0 ? repeats : 1);
}

py::dict launch_overrides(Artifact& artifact, uint64_t ctx_id) {
  grid_rbd::LaunchOverrides table;
  {
    py::gil_scoped_release release;
    table = artifact.launch_overrides(ctx_id);
  }
  py::dict out;
  for (const grid_algorithm* a : artifact.library().algorithms()) {
    const grid_rbd::AlgorithmLaunch& entry = table.get(a->id);
    py::dict item;
    item["threads_per_block"] = entry.threads_per_block;
    item["variant"] = entry.variant;
    out[a->name] = item;
  }
  return out;
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

uint64_t set_joint_dynamics(Artifact& artifact, uint64_t ctx_id, const py::bytes& table) {
  const std::string text = table;
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  const std::vector<std::byte> bytes(data, data + text.size());
  py::gil_scoped_release release;
  return artifact.set_joint_dynamics(ctx_id, bytes);
}

py::bytes get_joint_dynamics(Artifact& artifact, uint64_t ctx_id) {
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release release;
    bytes = artifact.joint_dynamics(ctx_id);
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

uint64_t set_transform_params(Artifact& artifact, uint64_t ctx_id, const py::bytes& table) {
  const std::string text = table;
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  const std::vector<std::byte> bytes(data, data + text.size());
  py::gil_scoped_release release;
  return artifact.set_transform_params(ctx_id, bytes);
}

py::bytes get_transform_params(Artifact& artifact, uint64_t ctx_id) {
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release release;
    bytes = artifact.transform_params(ctx_id);
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
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
      .def(
          "create_context",
          [](Artifact& a, int32_t workspace_slots, bool stage_host_calls) {
            grid_rbd::ContextOptions options;
            options.workspace_slots = workspace_slots;
            options.stage_host_calls = stage_host_calls;
            return a.create_context(options);
          },
          py::arg("workspace_slots") = 0, py::arg("stage_host_calls") = false,
          py::call_guard<py::gil_scoped_release>(),
          "A new explicit context; returns its id. workspace_slots caps the items in "
          "flight per launch (0: auto-fit). stage_host_calls: run host calls through the "
          "GPU staging path even on a CPU artifact (tests).")
      .def("retain_default", &Artifact::retain_default,
           py::call_guard<py::gil_scoped_release>(), "One more owner of the default context.")
      .def("release_default", &Artifact::release_default,
           py::call_guard<py::gil_scoped_release>(),
           "One owner fewer; the last one closes the default incarnation.")
      .def_property_readonly("default_owners", &Artifact::default_owners)
      .def("close_arena", &Artifact::close_arena, py::call_guard<py::gil_scoped_release>(),
           "Close the default incarnation now, whatever its owners (the next call "
           "re-creates it).")
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
      .def("launch_group", &launch_group, py::arg("ctx_id"), py::arg("calls"),
           py::arg("stream") = 0, py::arg("stamp_expect") = 0, py::arg("captured_version") = 0,
           "Enqueue (algorithm_id, inputs, output, batch, gravity) calls under one admission "
           "on `stream`; the stamp, when given, is read once. Returns the model version.")
      .def("launch_repeatedly", &launch_repeatedly, py::arg("ctx_id"), py::arg("algorithm_id"),
           py::arg("inputs"), py::arg("output"), py::arg("batch"),
           py::arg("gravity") = kDefaultGravity, py::arg("stream") = 0,
           py::arg("repeats") = 1000,
           "Seconds per launch over `repeats` launches timed in C++ (benchmarks).")
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
      .def("set_joint_dynamics", &set_joint_dynamics, py::arg("ctx_id"), py::arg("table"),
           "Replace the [damping | friction] table (bytes of the artifact dtype); returns "
           "the new model version.")
      .def("get_joint_dynamics", &get_joint_dynamics, py::arg("ctx_id"))
      .def("set_transform_params", &set_transform_params, py::arg("ctx_id"), py::arg("table"),
           "Replace the joint-origin table ([p | quat xyzw] per joint, bytes of the artifact "
           "dtype); returns the new model version.")
      .def("get_transform_params", &get_transform_params, py::arg("ctx_id"))
      .def("set_threads_for", &Artifact::set_threads_for, py::arg("ctx_id"),
           py::arg("algorithm"), py::arg("threads"), py::call_guard<py::gil_scoped_release>(),
           "Threads per block of `algorithm` (\"\": every algorithm) on this context; 0 "
           "restores the compiled choice.")
      .def("set_variant_for", &Artifact::set_variant_for, py::arg("ctx_id"),
           py::arg("algorithm"), py::arg("variant"), py::call_guard<py::gil_scoped_release>())
      .def("set_dispatch", &Artifact::set_dispatch, py::arg("algorithm"), py::arg("table"),
           py::call_guard<py::gil_scoped_release>(),
           "The dispatch table of `algorithm` for every context, open or later: [(min_batch, "
           "variant), ...] ascending from 1; [] restores the artifact's default.")
      .def("chosen_variant", &Artifact::chosen_variant, py::arg("ctx_id"),
           py::arg("algorithm"), py::arg("batch"), py::call_guard<py::gil_scoped_release>(),
           "The variant a call of `batch` items on this context runs.")
      .def("clear_launch_overrides", &Artifact::clear_launch_overrides, py::arg("ctx_id"),
           py::call_guard<py::gil_scoped_release>())
      .def("launch_overrides", &launch_overrides, py::arg("ctx_id"))
      .def(
          "variants",
          [](const Artifact& a, const std::string& algorithm) {
            return grid_rbd::available_variants(a.library(), a.library().algorithm(algorithm));
          },
          py::arg("algorithm"))
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

  py::class_<grid_rbd::python::ContextBinding,
             std::shared_ptr<grid_rbd::python::ContextBinding>>(
      m, "ContextBinding",
      "A handle's hold on its context: a share of the default context, or an explicit "
      "context it owns (closed with it).")
      .def(py::init<std::shared_ptr<Artifact>>(), py::arg("artifact"),
           "A share of the artifact's default context.")
      .def_static(
          "explicit",
          [](std::shared_ptr<Artifact> artifact, int32_t workspace_slots, bool stage_host_calls) {
            grid_rbd::ContextOptions options;
            options.workspace_slots = workspace_slots;
            options.stage_host_calls = stage_host_calls;
            py::gil_scoped_release release;
            return std::make_shared<grid_rbd::python::ContextBinding>(std::move(artifact),
                                                                      options);
          },
          py::arg("artifact"), py::arg("workspace_slots") = 0,
          py::arg("stage_host_calls") = false, "A new explicit context, owned by the binding.")
      .def_property_readonly("ctx_id", &grid_rbd::python::ContextBinding::ctx_id)
      .def_property_readonly("is_default", &grid_rbd::python::ContextBinding::is_default)
      .def_property_readonly("closed", &grid_rbd::python::ContextBinding::closed)
      .def_property_readonly("holds_share", &grid_rbd::python::ContextBinding::holds_share)
      .def("prepare_call", &grid_rbd::python::ContextBinding::prepare_call,
           "Take the default share again after close(); False for a closed explicit "
           "context.")
      .def("close", &grid_rbd::python::ContextBinding::close,
           "Explicit: close the context. Default: give the share back.");

  m.def(
      "HostMethod",
      [](std::shared_ptr<grid_rbd::python::ContextBinding> binding, const std::string& name) {
        return grid_rbd::python::make_fast_callable(
            std::make_unique<grid_rbd::python::HostMethod>(std::move(binding), name));
      },
      py::arg("binding"), py::arg("algorithm"),
      "The numpy handle's fast path for one algorithm: method(args, kwargs) returns the "
      "result, or None when the checked Python path must handle the call.");
  m.def(
      "DeviceLauncher",
      [](std::shared_ptr<grid_rbd::python::ContextBinding> binding, int32_t algorithm_id) {
        return grid_rbd::python::make_fast_callable(
            std::make_unique<grid_rbd::python::DeviceLauncher>(std::move(binding),
                                                               algorithm_id));
      },
      py::arg("binding"), py::arg("algorithm_id"),
      "launcher(output, batch, gravity, stream, stamp_out, stamp_expect, captured_version, "
      "*inputs) -> model version: one framework launch on the binding's context.");
  m.def(
      "DeviceGroupLauncher",
      [](std::shared_ptr<grid_rbd::python::ContextBinding> binding,
         std::vector<int32_t> algorithm_ids) {
        return grid_rbd::python::make_fast_callable(
            std::make_unique<grid_rbd::python::DeviceGroupLauncher>(std::move(binding),
                                                                    std::move(algorithm_ids)));
      },
      py::arg("binding"), py::arg("algorithm_ids"),
      "group(stream, stamp_expect, *[output, batch, gravity, num_inputs, *inputs] per "
      "algorithm) -> model version: launches under one admission and one stamp read.");

  m.def(
      "fit_workspace",
      [](int32_t requested, py::object env_value, int64_t bytes_per_slot, int64_t free_memory,
         int32_t max_batch) {
        std::string text;
        const char* env = nullptr;
        if (!env_value.is_none()) {
          text = env_value.cast<std::string>();
          env = text.c_str();
        }
        const grid_rbd::WorkspaceFit fit =
            grid_rbd::fit_workspace(requested, env, bytes_per_slot, free_memory, max_batch);
        py::dict out;
        out["slots"] = fit.slots;
        out["source"] = fit.source;
        out["bytes_per_slot"] = fit.bytes_per_slot;
        out["bytes"] = fit.bytes;
        return out;
      },
      py::arg("requested"), py::arg("env_value"), py::arg("bytes_per_slot"),
      py::arg("free_memory"), py::arg("max_batch"),
      "The workspace fit a context would make (the policy of workspace.hpp), for tests.");

  m.def(
      "bridge_address",
      []() { return reinterpret_cast<uintptr_t>(grid_rbd_get_bridge()); },
      "Address of the runtime's C bridge table (grid_rbd/bridge.h), for the JAX FFI "
      "handler.");
  m.attr("BRIDGE_VERSION") = GRID_RBD_BRIDGE_VERSION;
  m.def(
      "launcher_call_address",
      []() { return reinterpret_cast<uintptr_t>(&grid_rbd::python::grid_rbd_launcher_call); },
      "Address of grid_rbd_launcher_call (grid_rbd/bridge.h), for the torch extension.");
  m.attr("LAUNCHER_CALL_VERSION") = GRID_RBD_LAUNCHER_CALL_VERSION;

  m.def("load_artifact", &load_artifact, py::arg("path"),
        "Load a grid-rbd artifact .so (RuntimeError naming the path on failure).");
}
