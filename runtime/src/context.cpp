#include "grid_rbd/context.hpp"

#include <cmath>
#include <cstring>
#include <utility>

#include "grid_rbd/context_ids.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {

namespace {

constexpr size_t kStagingAlignment = 256;

size_t align_up(size_t bytes) {
  return (bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
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

}  // namespace

Context::Context(std::shared_ptr<const ArtifactLibrary> library, int32_t workspace_slots,
                 uint64_t model_version)
    : library_(library),
      profile_(capture_device_profile(*library, workspace_slots)),
      state_(library),
      model_version_(model_version),
      arena_(library) {
  const auto* defaults =
      static_cast<const std::byte*>(library_->descriptor().default_inertia_table);
  inertia_.assign(defaults, defaults + library_->inertia_table_bytes());
  overrides_.threads_per_block.assign(
      static_cast<size_t>(library_->descriptor().num_algorithms), 0);
  profile_.arena_bytes = static_cast<int64_t>(arena_.capacity());
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

void Context::run(const CallPlan& plan, double gravity) {
  const auto admission = admit_shared();
  if (plan.batch == 0) return;
  if (library_->is_gpu()) {
    run_on_device(plan, gravity);
    return;
  }
  void* outputs[1] = {plan.output};
  const int rc = library_->descriptor().launch(state_.get(), plan.algorithm->id,
                                               plan.inputs.data(), outputs, plan.batch, gravity,
                                               stream_);
  library_->check(rc, std::string(plan.algorithm->name) + " failed");
}

void Context::run_on_device(const CallPlan& plan, double gravity) {
  const grid_descriptor& d = library_->descriptor();
  const std::string name = plan.algorithm->name;
  std::lock_guard<std::mutex> staging(staging_mutex_);

  std::array<size_t, GRID_MAX_INPUTS> offsets{};
  size_t total = 0;
  for (size_t k = 0; k < offsets.size(); ++k) {
    offsets[k] = total;
    total += align_up(plan.input_bytes[k]);
  }
  const size_t output_offset = total;
  total += align_up(plan.output_bytes);
  auto* base = static_cast<std::byte*>(arena_.reserve(total));

  std::array<const void*, GRID_MAX_INPUTS> device_inputs{};
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (plan.inputs[k] == nullptr) continue;
    device_inputs[k] = base + offsets[k];
    library_->check(d.copy(base + offsets[k], plan.inputs[k], plan.input_bytes[k],
                           GRID_COPY_HOST_TO_DEVICE, stream_),
                    name + ": staging input " + plan.algorithm->input_names[k]);
  }
  void* outputs[1] = {base + output_offset};
  library_->check(d.launch(state_.get(), plan.algorithm->id, device_inputs.data(), outputs,
                           plan.batch, gravity, stream_),
                  name + " failed");
  library_->check(d.copy(plan.output, outputs[0], plan.output_bytes, GRID_COPY_DEVICE_TO_HOST,
                         stream_),
                  name + ": copying the output back");
  library_->check(d.synchronize(stream_), name + ": synchronising the device");
}

uint64_t Context::launch(const DeviceCall& call) {
  const auto admission = admit_shared();
  const grid_descriptor& d = library_->descriptor();
  const std::string name = call.algorithm->name;
  if (call.captured_version != 0) check_captured_version(call.captured_version);
  if (call.stamp_expect != nullptr) {
    uint64_t stamped = 0;
    library_->check(d.copy(&stamped, call.stamp_expect, sizeof(stamped),
                           GRID_COPY_DEVICE_TO_HOST, call.stream),
                    name + ": reading the forward's model-version stamp");
    library_->check(d.synchronize(call.stream), name + ": waiting for the stamp");
    const uint64_t current = model_version();
    if (stamped != current) {
      throw ModelMutatedError("model mutated between forward and backward (version " +
                              std::to_string(stamped) + " -> " + std::to_string(current) +
                              "); recompute the forward");
    }
  }
  if (call.batch > 0) {
    void* outputs[1] = {call.output};
    library_->check(d.launch(state_.get(), call.algorithm->id, call.inputs.data(), outputs,
                             call.batch, call.gravity, call.stream),
                    name + " failed");
  }
  const uint64_t version = model_version();
  if (call.stamp_out != nullptr) {
    library_->check(d.write_stamp(call.stamp_out, version, call.stream),
                    name + ": writing the model-version stamp");
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
  const grid_descriptor& d = library_->descriptor();
  // The setter fence: no kernel of this context may still read the table it replaces.
  library_->check(d.synchronize(stream_), "set_inertia_params: synchronising the device");
  library_->check(d.set_inertia_table(state_.get(), table.data()), "set_inertia_params");
  inertia_ = table;
  const uint64_t version = epoch.next();
  model_version_.store(version, std::memory_order_release);
  return version;
}

std::vector<std::byte> Context::inertia_params() const {
  const auto admission = admit_shared();
  return inertia_;
}

void Context::close() noexcept {
  std::lock_guard<std::mutex> closing(close_mutex_);
  if (status() == Status::kClosed) return;
  status_.store(Status::kClosing, std::memory_order_release);
  std::unique_lock<AdmissionGate> drained(gate_);  // waits for every admitted call
  // Completion before release; an error here (a faulted device) cannot be reported from a
  // close and does not stop the memory from being freed.
  library_->descriptor().synchronize(stream_);
  state_.reset();
  arena_.release();
  status_.store(Status::kClosed, std::memory_order_release);
}

}  // namespace grid_rbd
