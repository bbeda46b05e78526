#include "grid_rbd/context.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "grid_rbd/context_ids.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {

namespace {

constexpr size_t kStagingAlignment = 256;
// Calls whose inputs and output together fit in this many bytes are packed through the
// page-locked mirror (one copy each way); larger ones copy straight from and into the
// caller's arrays, where an extra host memcpy would cost more than it saves.
constexpr size_t kPackedStagingLimit = size_t{4} << 20;
// Calls of at most this many bytes run on the page-locked mirror itself where the device
// reaches it (`mapped_staging`): the kernel reads its inputs and writes its output over
// the bus at their host addresses, so the call is a memcpy in, one launch, one wait and
// a memcpy out, with no copy-engine round trip (two API calls and two DMA latencies
// fewer: what a batch-1 call costs). Larger calls would move their data at the bus's
// latency-bound rate from inside the kernel, and take the copies.
constexpr size_t kMappedStagingLimit = size_t{64} << 10;

size_t align_up(size_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
}

// Throws DeviceError when `code` is not GRID_OK; the message is built only then (the
// hot paths build no strings).
template <typename What>
void check(const ArtifactLibrary& library, int code, What&& what) {
  if (code != 0) library.check(code, what());
}

template <typename T>
void check_finite(const std::vector<std::byte>& table) {
  static const char* const kNames[10] = {"m",   "mcx", "mcy", "mcz", "Ixx",
                                         "Ixy", "Iyy", "Ixz", "Iyz", "Izz"};
  const size_t count = table.size() / sizeof(T);
  for (size_t k = 0; k < count; ++k) {
    T value;
    std::memcpy(&value, table.data() + k * sizeof(T), sizeof(T));
    if (!std::isfinite(value)) {
      throw ArgumentError("inertia table: body " + std::to_string(k / 10) + " parameter " +
                          kNames[k % 10] + " is not finite");
    }
  }
}

// Waits for `stream` when the scope ends, however it ends: the staging blocks may be
// reused only once nothing this call enqueued still reads or writes them.
class StreamDrain {
 public:
  StreamDrain(const ArtifactLibrary& library, void* stream) : library_(library), stream_(stream) {}
  ~StreamDrain() {
    if (!waited_) library_.descriptor().synchronize(stream_);
  }
  StreamDrain(const StreamDrain&) = delete;
  StreamDrain& operator=(const StreamDrain&) = delete;
  void wait(const char* algorithm) {
    waited_ = true;
    check(library_, library_.descriptor().synchronize(stream_),
          [&] { return std::string(algorithm) + ": synchronising the device"; });
  }

 private:
  const ArtifactLibrary& library_;
  void* stream_;
  bool waited_ = false;
};

}  // namespace

void RetiredStates::keep(std::unique_ptr<ArtifactState> state, Workspace workspace,
                         DeviceBuffer word) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state) states_.push_back(std::move(state));
  workspaces_.push_back(std::move(workspace));
  words_.push_back(std::move(word));
}

Context::Context(std::shared_ptr<const ArtifactLibrary> library, const ContextOptions& options,
                 uint64_t model_version, std::shared_ptr<RetiredStates> retired)
    : library_(library),
      profile_(capture_device_profile(*library)),
      state_(std::make_unique<ArtifactState>(library)),
      stream_(library->is_gpu(), profile_.device),
      version_word_(library, sizeof(uint64_t)),
      workspace_(library, fit_workspace(options.workspace_slots,
                                        std::getenv(kWorkspaceSlotsVariable),
                                        max_workspace_bytes_per_item(*library),
                                        profile_.free_memory, library->descriptor().max_batch)),
      staged_(library->is_gpu() || options.stage_host_calls),
      overrides_(static_cast<size_t>(library->descriptor().num_algorithms)),
      model_version_(model_version),
      retired_(std::move(retired)),
      arena_(library),
      stamp_host_(library, sizeof(uint64_t)) {
  const auto* defaults =
      static_cast<const std::byte*>(library_->descriptor().default_inertia_table);
  inertia_.assign(defaults, defaults + library_->inertia_table_bytes());
  const auto* joint_defaults =
      static_cast<const std::byte*>(library_->descriptor().default_joint_dynamics_table);
  if (joint_defaults != nullptr) {
    joint_dynamics_.assign(joint_defaults,
                           joint_defaults + library_->joint_dynamics_table_bytes());
  }
  const auto* transform_defaults =
      static_cast<const std::byte*>(library_->descriptor().default_transform_table);
  if (transform_defaults != nullptr) {
    transform_.assign(transform_defaults,
                      transform_defaults + library_->transform_table_bytes());
  }
  const WorkspaceFit& fit = workspace_.fit();
  profile_.workspace_slots = fit.slots;
  profile_.workspace_slots_source = fit.source;
  profile_.workspace_bytes = fit.bytes;
  profile_.arena_bytes =
      fit.bytes + static_cast<int64_t>(library_->runtime_inertia() ? inertia_.size() : 0);
  profile_.own_stream = stream_.owned();
  profile_.stream_note = stream_.fallback_reason();
  if (staged_) {
    const CudaDriver* driver = library_->is_gpu() ? CudaDriver::get() : nullptr;
    // On a CPU artifact (stage_host_calls) the mirror is the memory the kernel runs on.
    profile_.mapped_staging = !library_->is_gpu() ||
                              (driver != nullptr &&
                               driver->kernels_reach_pinned_memory(profile_.device));
  }
  write_version_word(model_version);
}

void Context::write_version_word(uint64_t version) {
  const grid_descriptor& d = library_->descriptor();
  library_->check(d.copy(version_word_.data(), &version, sizeof(version),
                         GRID_COPY_HOST_TO_DEVICE, stream_.get()),
                  "writing the context's model version");
  library_->check(d.synchronize(stream_.get()), "writing the context's model version");
}

Context::~Context() { close(); }

std::string Context::describe(const std::string& what) const {
  return what + " (id " + ContextIds::format(id_) + " of robot '" + library_->robot_name() + "')";
}

void Context::require_open() const {
  switch (status()) {
    case Status::kOpen:
      return;
    case Status::kClosing:
      throw ContextError(describe("context is closing"));
    case Status::kClosed:
      throw ContextError(describe("context is closed"));
  }
}

std::shared_lock<AdmissionGate> Context::admit_shared() const {
  require_open();  // a closing context refuses at once, without queueing
  std::shared_lock<AdmissionGate> admission(gate_);
  require_open();  // close() may have run while this call waited
  return admission;
}

std::unique_lock<AdmissionGate> Context::admit_exclusive() const {
  require_open();
  std::unique_lock<AdmissionGate> admission(gate_);
  require_open();
  return admission;
}

const grid_algorithm& Context::algorithm_at(int32_t algorithm_id) const {
  const grid_descriptor& d = library_->descriptor();
  if (algorithm_id < 0 || algorithm_id >= d.num_algorithms) {
    throw ArgumentError("algorithm id " + std::to_string(algorithm_id) + " is not one of robot '" +
                        library_->robot_name() + "' (it has " +
                        std::to_string(d.num_algorithms) + ")");
  }
  return d.algorithms[algorithm_id];
}

int Context::launch_kernel(const grid_algorithm& algorithm, const void* const* inputs,
                           void* output, int32_t batch, double gravity, void* stream) const {
  void* outputs[1] = {output};
  const grid_descriptor& d = library_->descriptor();
#if GRID_ABI_VERSION >= 4
  // The context's overrides, read under the caller's admission, and the slot cap: a
  // batch above it grid-strides over at most the blocks that hold `slots` items.
  const AlgorithmLaunch& launch = overrides_.get(algorithm.id);
  grid_launch_config config{};
  config.variant = launch.variant_index >= 0 ? launch.variant_index + 1 : 0;
  config.threads = launch.threads_per_block;
  const int32_t slots = workspace_.slots();
  if (library_->is_gpu() && slots > 0 && batch > slots) {
    const int32_t index = launch.variant_index >= 0
                              ? launch.variant_index
                              : d.chosen_variant(state_->get(), algorithm.id, batch);
    if (index >= 0 && index < algorithm.num_variants) {
      const grid_variant& v = algorithm.variants[index];
      const int32_t width = config.threads > 0 ? config.threads : v.threads_per_block;
      // Items per block at this width: one for a block per item, else in proportion to
      // the width (a warp per item, or a thread per item).
      const int64_t per_block =
          v.items_per_block <= 1 || v.threads_per_block <= 0
              ? 1
              : std::max<int64_t>(1, int64_t{v.items_per_block} * width / v.threads_per_block);
      config.max_blocks = static_cast<int32_t>(std::max<int64_t>(1, slots / per_block));
    }
  }
  return d.launch_ex(state_->get(), algorithm.id, &config, inputs, outputs, batch, gravity,
                     stream);
#else
  // An ABI 3 header: its launch takes no configuration.
  return d.launch(state_->get(), algorithm.id, inputs, outputs, batch, gravity, stream);
#endif
}

void Context::run(const CallPlan& plan, double gravity) {
  const auto admission = admit_shared();
  if (plan.batch == 0) return;
  if (staged_) {
    run_staged(plan, gravity);
    return;
  }
  check(*library_,
        launch_kernel(*plan.algorithm, plan.inputs.data(), plan.output, plan.batch, gravity,
                      stream_.get()),
        [&] { return std::string(plan.algorithm->name) + " failed"; });
}

void Context::run_staged(const CallPlan& plan, double gravity) {
  const grid_descriptor& d = library_->descriptor();
  const char* name = plan.algorithm->name;
  std::lock_guard<std::mutex> staging(staging_mutex_);

  // One layout for the device block and its mirror: the inputs back to back (each
  // aligned), then the output.
  std::array<size_t, GRID_MAX_INPUTS> offsets{};
  size_t inputs_end = 0;
  for (size_t k = 0; k < offsets.size(); ++k) {
    offsets[k] = inputs_end;
    inputs_end += align_up(plan.input_bytes[k]);
  }
  const size_t output_offset = inputs_end;
  const size_t total = output_offset + align_up(plan.output_bytes);
  void* stream = stream_.get();
  StreamDrain drain(*library_, stream);
  if (profile_.mapped_staging && total <= kMappedStagingLimit) {
    auto* host = static_cast<std::byte*>(arena_.reserve_host(total));
    std::array<const void*, GRID_MAX_INPUTS> mapped{};
    for (size_t k = 0; k < offsets.size(); ++k) {
      if (plan.inputs[k] == nullptr) continue;
      std::memcpy(host + offsets[k], plan.inputs[k], plan.input_bytes[k]);
      mapped[k] = host + offsets[k];
    }
    std::byte* output = host + output_offset;
    check(*library_, launch_kernel(*plan.algorithm, mapped.data(), output, plan.batch,
                                   gravity, stream),
          [&] { return std::string(name) + " failed"; });
    drain.wait(name);
    std::memcpy(plan.output, output, plan.output_bytes);
    return;
  }
  auto* device = static_cast<std::byte*>(arena_.reserve_device(total));
  const bool packed = total <= kPackedStagingLimit;
  auto* host = packed ? static_cast<std::byte*>(arena_.reserve_host(total)) : nullptr;

  std::array<const void*, GRID_MAX_INPUTS> device_inputs{};
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (plan.inputs[k] == nullptr) continue;
    device_inputs[k] = device + offsets[k];
    if (packed) {
      std::memcpy(host + offsets[k], plan.inputs[k], plan.input_bytes[k]);
    } else {
      check(*library_,
            d.copy(device + offsets[k], plan.inputs[k], plan.input_bytes[k],
                   GRID_COPY_HOST_TO_DEVICE, stream),
            [&] { return std::string(name) + ": staging input " +
                         plan.algorithm->input_names[k]; });
    }
  }
  if (packed && inputs_end > 0) {
    check(*library_, d.copy(device, host, inputs_end, GRID_COPY_HOST_TO_DEVICE, stream),
          [&] { return std::string(name) + ": staging the inputs"; });
  }
  std::byte* device_output = device + output_offset;
  check(*library_,
        launch_kernel(*plan.algorithm, device_inputs.data(), device_output, plan.batch,
                      gravity, stream),
        [&] { return std::string(name) + " failed"; });
  void* host_output = packed ? static_cast<void*>(host + output_offset) : plan.output;
  check(*library_,
        d.copy(host_output, device_output, plan.output_bytes, GRID_COPY_DEVICE_TO_HOST, stream),
        [&] { return std::string(name) + ": copying the output back"; });
  drain.wait(name);
  if (packed) std::memcpy(plan.output, host_output, plan.output_bytes);
}

void Context::check_stamp(const DeviceCall& call, uint64_t version) const {
  const grid_descriptor& d = library_->descriptor();
  const char* name = call.algorithm->name;
  uint64_t stamped = 0;
  {
    std::lock_guard<std::mutex> reading(stamp_mutex_);
    check(*library_,
          d.copy(stamp_host_.data(), call.stamp_expect, sizeof(stamped),
                 GRID_COPY_DEVICE_TO_HOST, call.stream),
          [&] { return std::string(name) + ": reading the forward's model-version stamp"; });
    check(*library_, d.synchronize(call.stream),
          [&] { return std::string(name) + ": waiting for the stamp"; });
    std::memcpy(&stamped, stamp_host_.data(), sizeof(stamped));
  }
  if (stamped != version) {
    throw ModelMutatedError("model mutated between forward and backward (version " +
                            std::to_string(stamped) + " -> " + std::to_string(version) +
                            "); recompute the forward");
  }
}

void Context::note_capture(void* stream) {
  if (captured_.load(std::memory_order_relaxed) || !library_->is_gpu()) return;
  const CudaDriver* driver = CudaDriver::get();
  if (driver != nullptr && driver->is_capturing(stream)) {
    captured_.store(true, std::memory_order_relaxed);
  }
}

uint64_t Context::launch_group(const DeviceCall* calls, size_t count) {
  const auto admission = admit_shared();
  const grid_descriptor& d = library_->descriptor();
  const uint64_t version = model_version();  // fixed while the admission is held
  // Every check before any launch: a refused group leaves no output half-computed.
  const void* verified = nullptr;
  for (size_t k = 0; k < count; ++k) {
    const DeviceCall& call = calls[k];
    if (call.captured_version != 0) check_captured_version(call.captured_version);
    if (call.stamp_expect != nullptr && call.stamp_expect != verified) {
      check_stamp(call, version);
      verified = call.stamp_expect;
    }
  }
  for (size_t k = 0; k < count; ++k) {
    const DeviceCall& call = calls[k];
    note_capture(call.stream);
    if (call.batch > 0) {
      check(*library_,
            launch_kernel(*call.algorithm, call.inputs.data(), call.output, call.batch,
                          call.gravity, call.stream),
            [&] { return std::string(call.algorithm->name) + " failed"; });
    }
    if (call.stamp_out != nullptr) {
      check(*library_,
            d.copy(call.stamp_out, version_word_.data(), sizeof(uint64_t),
                   GRID_COPY_DEVICE_TO_DEVICE, call.stream),
            [&] { return std::string(call.algorithm->name) + ": writing the model-version stamp"; });
    }
  }
  return version;
}

void Context::check_captured_version(uint64_t captured_version) const {
  const uint64_t current = model_version();
  if (current != captured_version) {
    throw ModelMutatedError("model mutated since this graph was captured (version " +
                            std::to_string(captured_version) + " -> " +
                            std::to_string(current) + "); capture it again");
  }
}

std::shared_lock<AdmissionGate> Context::admit_replay(uint64_t captured_version) const {
  auto admission = admit_shared();
  check_captured_version(captured_version);
  return admission;
}

void Context::fence(const char* what) const {
  const grid_descriptor& d = library_->descriptor();
  check(*library_, d.synchronize(stream_.get()),
        [&] { return std::string(what) + ": synchronising the context's stream"; });
  if (!stream_.fence_device([&] { return d.synchronize(nullptr) == 0; })) {
    throw DeviceError(std::string(what) + ": synchronising the device failed");
  }
}

uint64_t Context::set_inertia_params(const std::vector<std::byte>& table, ModelEpoch& epoch) {
  if (!library_->runtime_inertia()) {
    throw UnsupportedError("set_inertia_params needs an artifact built with "
                           "runtime_inertia=True; robot '" + library_->robot_name() +
                           "' was built without it (its inertias are compiled in)");
  }
  if (table.size() != library_->inertia_table_bytes()) {
    throw ArgumentError("inertia table has " + std::to_string(table.size()) + " bytes; expected " +
                        std::to_string(library_->inertia_table_bytes()) + " (nb x 10 " +
                        library_->dtype() + ")");
  }
  if (library_->scalar_size() == sizeof(double)) {
    check_finite<double>(table);
  } else {
    check_finite<float>(table);
  }
  const auto admission = admit_exclusive();
  // The setter fence: no kernel reading the table it replaces may still run, on this
  // context's stream or on a framework's.
  fence("set_inertia_params");
  library_->check(library_->descriptor().set_inertia_table(state_->get(), table.data()),
                  "set_inertia_params");
  inertia_ = table;
  const uint64_t version = epoch.next();
  write_version_word(version);
  model_version_.store(version, std::memory_order_release);
  return version;
}

std::vector<std::byte> Context::inertia_params() const {
  const auto admission = admit_shared();
  return inertia_;
}

namespace {

template <typename T>
void check_joint_dynamics(const std::vector<std::byte>& table) {
  const size_t count = table.size() / sizeof(T);
  for (size_t k = 0; k < count; ++k) {
    T value;
    std::memcpy(&value, table.data() + k * sizeof(T), sizeof(T));
    if (!std::isfinite(value) || value < T(0)) {
      throw ArgumentError(std::string("joint-dynamics table: ") +
                          (k < count / 2 ? "damping" : "friction") + " of dof " +
                          std::to_string(k % (count / 2)) + " is " +
                          (std::isfinite(value) ? "negative" : "not finite"));
    }
  }
}

}  // namespace

uint64_t Context::set_joint_dynamics(const std::vector<std::byte>& table, ModelEpoch& epoch) {
  if (!library_->runtime_joint_dynamics()) {
    throw UnsupportedError("set_joint_dynamics needs an artifact built with "
                           "runtime_joint_dynamics=True; robot '" + library_->robot_name() +
                           "' was built without it");
  }
  if (table.size() != library_->joint_dynamics_table_bytes()) {
    throw ArgumentError("joint-dynamics table has " + std::to_string(table.size()) +
                        " bytes; expected " +
                        std::to_string(library_->joint_dynamics_table_bytes()) +
                        " ([damping | friction] of " + library_->dtype() + ")");
  }
  if (library_->scalar_size() == sizeof(double)) {
    check_joint_dynamics<double>(table);
  } else {
    check_joint_dynamics<float>(table);
  }
  const auto admission = admit_exclusive();
  fence("set_joint_dynamics");
  library_->check(library_->descriptor().set_joint_dynamics_table(state_->get(), table.data()),
                  "set_joint_dynamics");
  joint_dynamics_ = table;
  const uint64_t version = epoch.next();
  write_version_word(version);
  model_version_.store(version, std::memory_order_release);
  return version;
}

std::vector<std::byte> Context::joint_dynamics() const {
  const auto admission = admit_shared();
  return joint_dynamics_;
}

namespace {

template <typename T>
void check_transform(const std::vector<std::byte>& table) {
  const size_t rows = table.size() / (7 * sizeof(T));
  for (size_t i = 0; i < rows; ++i) {
    T row[7];
    std::memcpy(row, table.data() + i * 7 * sizeof(T), sizeof(row));
    for (const T value : row) {
      if (!std::isfinite(value)) {
        throw ArgumentError("transform table: joint " + std::to_string(i) +
                            " has a value that is not finite");
      }
    }
    const double norm = std::sqrt(double(row[3]) * row[3] + double(row[4]) * row[4] +
                                  double(row[5]) * row[5] + double(row[6]) * row[6]);
    if (std::abs(norm - 1.0) > 1e-4) {
      throw ArgumentError("transform table: the quaternion of joint " + std::to_string(i) +
                          " has norm " + std::to_string(norm) + "; expected a unit "
                          "quaternion [x, y, z, w] (the handles normalise it)");
    }
  }
}

}  // namespace

uint64_t Context::set_transform_params(const std::vector<std::byte>& table,
                                       ModelEpoch& epoch) {
  if (!library_->runtime_transform()) {
    throw UnsupportedError("set_transform_params needs an artifact built with "
                           "runtime_transform=True; robot '" + library_->robot_name() +
                           "' was built without it (its joint origins are compiled in)");
  }
  if (table.size() != library_->transform_table_bytes()) {
    throw ArgumentError("transform table has " + std::to_string(table.size()) +
                        " bytes; expected " +
                        std::to_string(library_->transform_table_bytes()) + " (nb x 7 " +
                        library_->dtype() + ": [p | quat xyzw] per joint)");
  }
  if (library_->scalar_size() == sizeof(double)) {
    check_transform<double>(table);
  } else {
    check_transform<float>(table);
  }
  const auto admission = admit_exclusive();
  fence("set_transform_params");
  library_->check(library_->descriptor().set_transform_table(state_->get(), table.data()),
                  "set_transform_params");
  transform_ = table;
  const uint64_t version = epoch.next();
  write_version_word(version);
  model_version_.store(version, std::memory_order_release);
  return version;
}

std::vector<std::byte> Context::transform_params() const {
  const auto admission = admit_shared();
  return transform_;
}

void Context::set_threads_for(int32_t algorithm_id, int32_t threads) {
  const grid_algorithm* algorithm = algorithm_id < 0 ? nullptr : &algorithm_at(algorithm_id);
  const std::string what = algorithm == nullptr
                               ? std::string("threads per block")
                               : "threads per block of " + std::string(algorithm->name);
  validate_threads_per_block(*library_, algorithm, threads, what);
  if (algorithm == nullptr) {
    for (const grid_algorithm* a : library_->algorithms()) {
      validate_threads_per_block(*library_, a, threads, what);
    }
  }
  const auto admission = admit_exclusive();
  if (algorithm_id >= 0) {
    overrides_.set_threads(algorithm_id, threads);
    return;
  }
  for (int32_t k = 0; k < library_->descriptor().num_algorithms; ++k) {
    overrides_.set_threads(k, threads);
  }
}

void Context::set_variant_for(int32_t algorithm_id, const std::string& variant) {
  const int32_t index = variant_index(*library_, algorithm_at(algorithm_id), variant);
  const auto admission = admit_exclusive();
  overrides_.set_variant(algorithm_id, variant, index);
}

void Context::reload_dispatch(int32_t algorithm_id) {
  algorithm_at(algorithm_id);  // validates the id
  const auto admission = admit_exclusive();
  library_->apply_dispatch(state_->get(), algorithm_id);
}

std::string Context::chosen_variant(int32_t algorithm_id, int32_t batch) const {
  const grid_algorithm& algorithm = algorithm_at(algorithm_id);
  const auto admission = admit_shared();
  const AlgorithmLaunch& launch = overrides_.get(algorithm_id);
  const int32_t index =
      launch.variant_index >= 0
          ? launch.variant_index
          : library_->descriptor().chosen_variant(state_->get(), algorithm_id, batch);
  return index >= 0 && index < algorithm.num_variants ? algorithm.variants[index].name : "";
}

void Context::clear_launch_overrides() {
  const auto admission = admit_exclusive();
  overrides_.clear();
}

LaunchOverrides Context::launch_overrides() const {
  const auto admission = admit_shared();
  return overrides_;
}

void Context::close() noexcept {
  std::lock_guard<std::mutex> closing(close_mutex_);
  if (status() == Status::kClosed) return;
  status_.store(Status::kClosing, std::memory_order_release);
  std::unique_lock<AdmissionGate> drained(gate_);  // waits for every admitted call
  // Completion before release; an error here (a faulted device) cannot be reported from a
  // close and does not stop the memory from being freed.
  const grid_descriptor& d = library_->descriptor();
  d.synchronize(stream_.get());
  stream_.fence_device([&] { return d.synchronize(nullptr) == 0; });
  if (captured_.load() && retired_) {
    // A graph may still replay this context's launches: keep what it addresses, and let
    // its stamps say the context is gone.
    try {
      write_version_word(kClosedVersionWord);
    } catch (...) {  // a faulted device: the memory is kept all the same
    }
    retired_->keep(std::move(state_), std::move(workspace_), std::move(version_word_));
  }
  state_.reset();
  workspace_.release();
  version_word_.reset();
  arena_.release();
  stream_.reset();
  status_.store(Status::kClosed, std::memory_order_release);
}

}  // namespace grid_rbd
