#include "grid_rbd/artifact.hpp"

#include <utility>

#include "grid_rbd/context_ids.hpp"

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

std::shared_ptr<Context> Artifact::make_context(int32_t workspace_slots) {
  // The version is drawn before the context exists: a creation that fails still consumes
  // an epoch value, which only makes versions non-contiguous (allowed).
  auto context = std::make_shared<Context>(library_, workspace_slots, epoch_.next());
  registry_.publish(context);
  return context;
}

std::shared_ptr<Context> Artifact::default_incarnation() {
  std::lock_guard<std::mutex> lock(default_mutex_);
  if (!default_ || !default_->is_open()) default_ = make_context(0);
  return default_;
}

uint64_t Artifact::default_context() { return default_incarnation()->id(); }

uint64_t Artifact::create_context(int32_t workspace_slots) {
  return make_context(workspace_slots)->id();
}

std::shared_ptr<Context> Artifact::resolve(uint64_t id) {
  return id == 0 ? default_incarnation() : registry_.resolve(id);
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
  const CallPlan plan = plan_call(*library_, algorithm, inputs, out);
  resolve(id)->run(plan, gravity);
}

uint64_t Artifact::launch(uint64_t id, const DeviceCall& call) {
  return resolve(id)->launch(call);
}

uint64_t Artifact::set_inertia_params(uint64_t id, const std::vector<std::byte>& table) {
  return resolve(id)->set_inertia_params(table, epoch_);
}

std::vector<std::byte> Artifact::inertia_params(uint64_t id) {
  return resolve(id)->inertia_params();
}

uint64_t Artifact::model_version(uint64_t id) {
  const std::shared_ptr<Context> context = resolve(id);
  context->require_open();
  return context->model_version();
}

DeviceProfile Artifact::device_profile(uint64_t id) {
  const std::shared_ptr<Context> context = resolve(id);
  context->require_open();
  return context->device_profile();
}

}  // namespace grid_rbd
