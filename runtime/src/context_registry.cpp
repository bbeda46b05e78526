#include "grid_rbd/context_registry.hpp"

#include <utility>

#include "grid_rbd/context_ids.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd {

ContextRegistry::ContextRegistry(uint64_t salt, std::string robot_name)
    : tag_(ContextIds::tag_of_salt(salt)), robot_name_(std::move(robot_name)) {}

uint64_t ContextRegistry::publish(std::shared_ptr<Context> context) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_counter_ > ContextIds::kCounterMask) {
    throw ContextError("robot '" + robot_name_ + "': context ids of this artifact load are " +
                       "exhausted (load the artifact again)");
  }
  const uint64_t id = ContextIds::compose(tag_, next_counter_++);
  context->set_id(id);
  live_.emplace(id, std::move(context));
  return id;
}

ContextRegistry::Origin ContextRegistry::origin(uint64_t id) const {
  // Called with mutex_ held.
  const uint32_t tag = ContextIds::tag(id);
  const uint64_t counter = ContextIds::counter(id);
  if (tag == tag_) return counter >= 1 && counter < next_counter_ ? Origin::kHere
                                                                   : Origin::kUnknown;
  return is_claimed_tag(tag) ? Origin::kForeign : Origin::kUnknown;
}

void ContextRegistry::refuse(uint64_t id, Origin origin) const {
  const std::string what = " (id " + ContextIds::format(id) + ", robot '" + robot_name_ + "')";
  switch (origin) {
    case Origin::kHere:
      throw ContextError("context is closed" + what);
    case Origin::kForeign:
      throw ContextError("a context of another robot artifact" + what +
                         ": ids are only valid on the artifact load that created them");
    case Origin::kUnknown:
      break;
  }
  throw ContextError("unknown context id" + what);
}

std::shared_ptr<Context> ContextRegistry::resolve(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Origin from = origin(id);
  if (from == Origin::kHere) {
    auto found = live_.find(id);
    if (found != live_.end()) return found->second;
  }
  refuse(id, from);
}

std::shared_ptr<Context> ContextRegistry::resolve_for_close(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Origin from = origin(id);
  if (from != Origin::kHere) refuse(id, from);
  auto found = live_.find(id);
  return found != live_.end() ? found->second : nullptr;
}

bool ContextRegistry::is_open(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = live_.find(id);
  return found != live_.end() && found->second->is_open();
}

void ContextRegistry::forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.erase(id);
}

std::vector<std::shared_ptr<Context>> ContextRegistry::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Context>> all;
  for (const auto& entry : live_) all.push_back(entry.second);
  return all;
}

std::vector<std::shared_ptr<Context>> ContextRegistry::take_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<Context>> all;
  for (auto& entry : live_) all.push_back(std::move(entry.second));
  live_.clear();
  return all;
}

}  // namespace grid_rbd
