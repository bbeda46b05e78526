#include "dicts.hpp"

#include <pybind11/stl.h>

namespace grid_rbd::python {

namespace {

py::dict algorithm_entry(const grid_algorithm& a) {
  py::list inputs;
  for (int32_t k = 0; k < a.num_inputs; ++k) {
    inputs.append(py::make_tuple(a.input_names[k], a.input_widths[k], a.input_required[k] != 0));
  }
  py::tuple shape(a.output_rank);
  for (int32_t k = 0; k < a.output_rank; ++k) shape[k] = py::int_(a.output_shape[k]);
  py::dict entry;
  entry["id"] = a.id;
  entry["inputs"] = inputs;
  entry["output_shape"] = shape;
  entry["uses_gravity"] = a.uses_gravity != 0;
#if GRID_ABI_VERSION >= 4
  py::list variants;
  for (int32_t k = 0; k < a.num_variants; ++k) {
    const grid_variant& v = a.variants[k];
    py::dict item;
    item["name"] = v.name;
    item["threads_per_block"] = v.threads_per_block;
    item["max_threads_per_block"] = v.max_threads_per_block;
    item["items_per_block"] = v.items_per_block;
    item["shared_bytes"] = v.shared_bytes;
    item["ops_per_item"] = v.ops_per_item;
    variants.append(item);
  }
  py::list dispatch;
  for (int32_t k = 0; k < a.num_dispatch; ++k) {
    const int32_t index = a.dispatch_variant[k];
    dispatch.append(py::make_tuple(a.dispatch_min_batch[k],
                                   index >= 0 && index < a.num_variants
                                       ? py::str(a.variants[index].name)
                                       : py::str("?")));
  }
  entry["variants"] = variants;
  entry["dispatch"] = dispatch;
  const int32_t chosen = a.num_dispatch > 0 ? a.dispatch_variant[0] : 0;
  const grid_variant& first = a.variants[chosen >= 0 && chosen < a.num_variants ? chosen : 0];
  entry["threads_per_block"] = first.threads_per_block;
  entry["shared_bytes"] = first.shared_bytes;
#else
  entry["threads_per_block"] = a.threads_per_block;
  entry["shared_bytes"] = a.shared_bytes;
#endif
  return entry;
}

}  // namespace

py::dict artifact_info(const ArtifactLibrary& library) {
  const grid_descriptor& d = library.descriptor();
  py::dict algorithms;
  for (const grid_algorithm* a : library.algorithms()) algorithms[a->name] = algorithm_entry(*a);
  py::dict info;
  info["robot_name"] = d.robot_name;
  info["nq"] = d.nq;
  info["nv"] = d.nv;
  info["nb"] = d.nb;
  info["num_ees"] = d.num_ees;
  info["dtype"] = d.dtype;
  info["max_batch"] = d.max_batch;
  info["archs"] = d.archs;
  info["is_gpu"] = d.is_gpu != 0;
  info["runtime_inertia"] = d.runtime_inertia != 0;
  info["runtime_joint_dynamics"] = d.runtime_joint_dynamics != 0;
  info["joint_dynamics_table_size"] = d.joint_dynamics_table_size;
  info["runtime_transform"] = d.runtime_transform != 0;
  info["transform_table_size"] = d.transform_table_size;
  info["strategy"] = d.strategy;
  info["options"] = py::module_::import("json").attr("loads")(d.options_json);
  info["algorithms"] = algorithms;
  info["abi_version"] = d.abi_version;
  return info;
}

py::dict device_profile_dict(const DeviceProfile& p) {
  py::dict out;
  out["is_gpu"] = p.is_gpu;
  out["device"] = p.device;
  out["name"] = p.name;
  out["compute_capability"] = py::make_tuple(p.cc_major, p.cc_minor);
  out["device_arch"] = p.device_arch;
  out["compiled_archs"] = p.compiled_archs;
  out["multiprocessors"] = p.multiprocessors;
  out["total_memory"] = p.total_memory;
  out["free_memory"] = p.free_memory;
  out["shared_memory_optin"] = p.shared_memory_optin;
  out["max_batch"] = p.max_batch;
  out["workspace_slots"] = p.workspace_slots;
  out["workspace_slots_source"] = p.workspace_slots_source;
  out["workspace_bytes"] = p.workspace_bytes;
  out["arena_bytes"] = p.arena_bytes;
  out["caller_owned_slab"] = p.caller_owned_slab;
  out["own_stream"] = p.own_stream;
  out["stream_note"] = p.stream_note;
  out["mapped_staging"] = p.mapped_staging;
  return out;
}

}  // namespace grid_rbd::python
