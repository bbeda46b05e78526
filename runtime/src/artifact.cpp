#include "grid_rbd/artifact.hpp"

#include <utility>

#include "grid_rbd/context_ids.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {

Artifact::Artifact(const std::string& path)
    : library_(std::make_shared<const ArtifactLibrary>(path)),
      salt_(claim_artifact_salt()),
      registry_(salt_, library_->robot_name()) {}

Artifact::~Artifact() {
  {
    std::lock_guard<std::mutex> lock(default_mutex_);
    default_.reset();
  }
  for (const std::shared_ptr<Context>& context : registry_.take_all()) context->close();
}

std::shared_ptr<Context> Artifact::make_context(const ContextOptions& options) {
  // The version is drawn before the context exists: a creation that fails still consumes
  // an epoch value, which only makes versions non-contiguous (allowed).
  auto context = std::make_shared<Context>(library_, options, epoch_.next(), retired_);
  registry_.publish(context);
  return context;
}

std::shared_ptr<Context> Artifact::default_incarnation() {
  std::lock_guard<std::mutex> lock(default_mutex_);
  if (!default_ || !default_->is_open()) default_ = make_context(ContextOptions{});
  return default_;
}

uint64_t Artifact::default_context() { return default_incarnation()->id(); }

uint64_t Artifact::create_context(const ContextOptions& options) {
  if (options.workspace_slots < 0) {
    throw ArgumentError("workspace_slots must be >= 0 (0 = auto-fit), got " +
                        std::to_string(options.workspace_slots));
  }
  return make_context(options)->id();
}

std::shared_ptr<Context> Artifact::resolve(uint64_t id) {
  return id == 0 ? default_incarnation() : registry_.resolve(id);
}

template <typename Body>
auto Artifact::with_context(uint64_t id, Body&& body) {
  std::shared_ptr<Context> context = resolve(id);
  if (id != 0) return body(*context);
  try {
    return body(*context);
  } catch (const ContextError&) {
    if (context->is_open()) throw;  // refused for another reason
    return body(*resolve(0));       // its last owner closed it meanwhile: the next one
  }
}

void Artifact::retain_default() {
  std::lock_guard<std::mutex> lock(default_mutex_);
  ++default_owners_;
}

void Artifact::release_default() {
  std::shared_ptr<Context> closing;
  {
    std::lock_guard<std::mutex> lock(default_mutex_);
    if (default_owners_ > 0 && --default_owners_ == 0) closing = default_;
  }
  if (!closing) return;
  closing->close();
  registry_.forget(closing->id());
  std::lock_guard<std::mutex> lock(default_mutex_);
  if (default_ == closing) default_.reset();
}

int64_t Artifact::default_owners() const {
  std::lock_guard<std::mutex> lock(default_mutex_);
  return default_owners_;
}

void Artifact::close_context(uint64_t id) {
  std::shared_ptr<Context> context;
  if (id == 0) {
    std::lock_guard<std::mutex> lock(default_mutex_);
    context = default_;
  } else {
    context = registry_.resolve_for_close(id);
  }
  if (!context) return;
  context->close();
  registry_.forget(context->id());
  std::lock_guard<std::mutex> lock(default_mutex_);
  if (default_ == context) default_.reset();
}

bool Artifact::is_open(uint64_t id) const {
  if (id == 0) {
    std::lock_guard<std::mutex> lock(default_mutex_);
    return default_ && default_->is_open();
  }
  return registry_.is_open(id);
}

void Artifact::call(uint64_t id, const std::string& algorithm,
                    const std::vector<HostArray>& inputs, const HostArray& out,
                    double gravity) {
  call(id, plan_call(*library_, algorithm, inputs, out), gravity);
}

void Artifact::call(uint64_t id, const CallPlan& plan, double gravity) {
  with_context(id, [&](Context& context) { context.run(plan, gravity); });
}

uint64_t Artifact::launch_group(uint64_t id, const DeviceCall* calls, size_t count) {
  return with_context(id, [&](Context& context) { return context.launch_group(calls, count); });
}

uint64_t Artifact::set_inertia_params(uint64_t id, const std::vector<std::byte>& table) {
  return with_context(id,
                      [&](Context& context) { return context.set_inertia_params(table, epoch_); });
}

std::vector<std::byte> Artifact::inertia_params(uint64_t id) {
  return with_context(id, [](Context& context) { return context.inertia_params(); });
}

uint64_t Artifact::set_joint_dynamics(uint64_t id, const std::vector<std::byte>& table) {
  return with_context(id,
                      [&](Context& context) { return context.set_joint_dynamics(table, epoch_); });
}

std::vector<std::byte> Artifact::joint_dynamics(uint64_t id) {
  return with_context(id, [](Context& context) { return context.joint_dynamics(); });
}

uint64_t Artifact::set_transform_params(uint64_t id, const std::vector<std::byte>& table) {
  return with_context(
      id, [&](Context& context) { return context.set_transform_params(table, epoch_); });
}

std::vector<std::byte> Artifact::transform_params(uint64_t id) {
  return with_context(id, [](Context& context) { return context.transform_params(); });
}

void Artifact::set_threads_for(uint64_t id, const std::string& algorithm, int32_t threads) {
  const int32_t algorithm_id = algorithm.empty() ? -1 : library_->algorithm(algorithm).id;
  with_context(id, [&](Context& context) { context.set_threads_for(algorithm_id, threads); });
}

void Artifact::set_variant_for(uint64_t id, const std::string& algorithm,
                               const std::string& variant) {
  const int32_t algorithm_id = library_->algorithm(algorithm).id;
  with_context(id, [&](Context& context) { context.set_variant_for(algorithm_id, variant); });
}

void Artifact::set_dispatch(const std::string& algorithm,
                            const std::vector<std::pair<int32_t, std::string>>& table) {
  const grid_algorithm& a = library_->algorithm(algorithm);
  std::vector<std::pair<int32_t, int32_t>> entries;
  for (const auto& [min_batch, variant] : table) {
    const int32_t index = variant_index(*library_, a, variant);
    if (index < 0) throw ArgumentError("a dispatch table names a variant, not \"\"");
    entries.emplace_back(min_batch, index);
  }
  library_->set_dispatch_table(a.id, std::move(entries));
  for (const auto& context : registry_.snapshot()) {
    if (context->is_open()) context->reload_dispatch(a.id);
  }
}

std::string Artifact::chosen_variant(uint64_t id, const std::string& algorithm, int32_t batch) {
  const int32_t algorithm_id = library_->algorithm(algorithm).id;
  return with_context(id, [&](Context& context) {
    return context.chosen_variant(algorithm_id, batch);
  });
}

void Artifact::clear_launch_overrides(uint64_t id) {
  with_context(id, [](Context& context) { context.clear_launch_overrides(); });
}

LaunchOverrides Artifact::launch_overrides(uint64_t id) {
  return with_context(id, [](Context& context) { return context.launch_overrides(); });
}

uint64_t Artifact::model_version(uint64_t id) {
  return with_context(id, [](Context& context) {
    context.require_open();
    return context.model_version();
  });
}

DeviceProfile Artifact::device_profile(uint64_t id) {
  return with_context(id, [](Context& context) {
    context.require_open();
    return context.device_profile();
  });
}

}  // namespace grid_rbd
