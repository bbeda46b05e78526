#include "grid_rbd/artifact_library.hpp"

#include <cstring>
#include <sstream>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

int64_t output_elements_per_item(const grid_algorithm& algorithm) {
  return static_cast<int64_t>(algorithm.output_shape[0]) * algorithm.output_shape[1];
}

namespace {

using DescriptorFn = const grid_descriptor* (*)();

const grid_descriptor* fetch_descriptor(const SharedLibrary& library) {
  void* symbol = library.symbol("grid_get_descriptor");
  if (symbol == nullptr) {
    throw ArtifactError("cannot load artifact " + library.path() +
                        ": it exports no grid_get_descriptor (not a grid-rbd artifact)");
  }
  const grid_descriptor* descriptor = reinterpret_cast<DescriptorFn>(symbol)();
  if (descriptor == nullptr) {
    throw ArtifactError("cannot load artifact " + library.path() +
                        ": grid_get_descriptor() returned NULL");
  }
  return descriptor;
}

}  // namespace

ArtifactLibrary::ArtifactLibrary(const std::string& path)
    : library_(path), descriptor_(fetch_descriptor(library_)) {
  validate();
  for (int32_t k = 0; k < descriptor_->num_algorithms; ++k) {
    const grid_algorithm& algorithm = descriptor_->algorithms[k];
    by_name_.emplace(algorithm.name, &algorithm);
  }
}

void ArtifactLibrary::validate() const {
  const grid_descriptor& d = *descriptor_;
  auto fail = [&](const std::string& why) {
    throw ArtifactError("cannot load artifact " + path() + ": " + why);
  };
  if (d.abi_version != kAbiVersion) {
    fail("its ABI version is " + std::to_string(d.abi_version) + "; this runtime reads ABI " +
         std::to_string(kAbiVersion) + " (rebuild the artifact with this grid-rbd)");
  }
  if (d.struct_size != static_cast<int32_t>(sizeof(grid_descriptor))) {
    fail("its descriptor is " + std::to_string(d.struct_size) + " bytes; ABI " +
         std::to_string(kAbiVersion) + " defines " + std::to_string(sizeof(grid_descriptor)));
  }
  const bool float32 = d.dtype != nullptr && std::strcmp(d.dtype, "float32") == 0;
  const bool float64 = d.dtype != nullptr && std::strcmp(d.dtype, "float64") == 0;
  if (!(float32 && d.dtype_size == 4) && !(float64 && d.dtype_size == 8)) {
    fail("unsupported dtype in its descriptor");
  }
  if (d.nb < 0 || d.inertia_table_size != 10 * d.nb) {
    fail("inertia_table_size " + std::to_string(d.inertia_table_size) + " is not 10 * nb");
  }
  if (d.max_batch < 1 || d.num_algorithms < 0 ||
      (d.num_algorithms > 0 && d.algorithms == nullptr)) {
    fail("malformed dimensions or algorithm table");
  }
  for (int32_t k = 0; k < d.num_algorithms; ++k) {
    const grid_algorithm& a = d.algorithms[k];
    if (a.name == nullptr || a.id != k || a.num_inputs < 1 || a.num_inputs > GRID_MAX_INPUTS ||
        a.num_outputs != 1 || a.output_rank < 1 || a.output_rank > 2) {
      fail("malformed algorithm entry " + std::to_string(k));
    }
  }
  if (d.robot_name == nullptr || d.archs == nullptr || d.strategy == nullptr ||
      d.options_json == nullptr || d.create_state == nullptr || d.destroy_state == nullptr ||
      d.set_inertia_table == nullptr || d.launch == nullptr || d.query_device == nullptr ||
      d.error_string == nullptr || d.default_inertia_table == nullptr ||
      d.device_alloc == nullptr || d.device_free == nullptr || d.host_alloc_pinned == nullptr ||
      d.host_free_pinned == nullptr || d.copy == nullptr || d.synchronize == nullptr ||
      d.write_stamp == nullptr || d.set_joint_dynamics_table == nullptr ||
      d.joint_dynamics_table_size < 0 ||
      (d.joint_dynamics_table_size > 0 && d.default_joint_dynamics_table == nullptr) ||
      d.set_transform_table == nullptr ||
      (d.runtime_transform != 0 &&
       (d.transform_table_size != 7 * d.nb || d.default_transform_table == nullptr))) {
    fail("a descriptor field is NULL");
  }
#if GRID_ABI_VERSION >= 4
  if (d.launch_ex == nullptr || d.set_dispatch == nullptr || d.chosen_variant == nullptr) {
    fail("a descriptor field is NULL");
  }
  for (int32_t k = 0; k < d.num_algorithms; ++k) {
    const grid_algorithm& a = d.algorithms[k];
    if (a.num_variants < 1 || a.num_variants > GRID_MAX_VARIANTS) {
      fail("algorithm " + std::to_string(k) + " has no variant table");
    }
    for (int32_t v = 0; v < a.num_variants; ++v) {
      if (a.variants[v].name == nullptr) fail("a variant of algorithm " + std::to_string(k) +
                                              " has no name");
    }
  }
#endif
}

size_t ArtifactLibrary::inertia_table_bytes() const {
  return static_cast<size_t>(descriptor_->inertia_table_size) * scalar_size();
}

std::vector<std::string> ArtifactLibrary::compiled_archs() const {
  std::vector<std::string> archs;
  std::stringstream list(descriptor_->archs);
  for (std::string arch; std::getline(list, arch, ',');) {
    if (!arch.empty()) archs.push_back(arch);
  }
  return archs;
}

const grid_algorithm& ArtifactLibrary::algorithm(const std::string& name) const {
  auto found = by_name_.find(name);
  if (found != by_name_.end()) return *found->second;
  std::string known;
  for (const grid_algorithm* a : algorithms()) known += (known.empty() ? "" : ", ") +
                                                       std::string(a->name);
  throw ArgumentError("unknown algorithm '" + name + "'; the artifact of robot '" +
                      robot_name() + "' has: " + known);
}

std::vector<const grid_algorithm*> ArtifactLibrary::algorithms() const {
  std::vector<const grid_algorithm*> out;
  for (int32_t k = 0; k < descriptor_->num_algorithms; ++k) {
    out.push_back(&descriptor_->algorithms[k]);
  }
  return out;
}

std::string ArtifactLibrary::error_message(int code) const {
  const char* text = descriptor_->error_string(code);
  return text != nullptr ? text : "unknown error";
}

void ArtifactLibrary::check(int code, const std::string& what) const {
  if (code == 0) return;  // GRID_OK
  throw DeviceError(what + ": " + error_message(code) + " (grid error " + std::to_string(code) +
                    ")");
}

void ArtifactLibrary::set_dispatch_table(
    int32_t algorithm_id, std::vector<std::pair<int32_t, int32_t>> entries) const {
  const grid_descriptor& d = *descriptor_;
  if (algorithm_id < 0 || algorithm_id >= d.num_algorithms) {
    throw ArgumentError("no algorithm id " + std::to_string(algorithm_id));
  }
  const grid_algorithm& a = d.algorithms[algorithm_id];
  if (entries.size() > GRID_MAX_DISPATCH) {
    throw ArgumentError(std::string("a dispatch table of ") + a.name + " has at most " +
                        std::to_string(GRID_MAX_DISPATCH) + " entries");
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    const auto [min_batch, variant] = entries[k];
    if ((k == 0 && min_batch != 1) || (k > 0 && min_batch <= entries[k - 1].first) ||
        variant < 0 || variant >= a.num_variants) {
      throw ArgumentError(std::string("the dispatch table of ") + a.name +
                          " must start at batch 1, ascend, and name its variants");
    }
  }
  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  if (entries.empty()) {
    dispatch_.erase(algorithm_id);
  } else {
    dispatch_[algorithm_id] = std::move(entries);
  }
}

void ArtifactLibrary::apply_dispatch(void* state, int32_t algorithm_id) const {
  const grid_descriptor& d = *descriptor_;
  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  for (int32_t id = 0; id < d.num_algorithms; ++id) {
    if (algorithm_id >= 0 && id != algorithm_id) continue;
    const auto found = dispatch_.find(id);
    std::vector<int32_t> mins, variants;
    if (found != dispatch_.end()) {
      for (const auto& [min_batch, variant] : found->second) {
        mins.push_back(min_batch);
        variants.push_back(variant);
      }
    }
    check(d.set_dispatch(state, id, static_cast<int32_t>(mins.size()), mins.data(),
                         variants.data()),
          std::string("set_dispatch of ") + d.algorithms[id].name);
  }
}

}  // namespace grid_rbd

