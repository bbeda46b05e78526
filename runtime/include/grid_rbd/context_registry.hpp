// The contexts of one loaded artifact, by id.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grid_rbd/context.hpp"

namespace grid_rbd {

/// Mints ids (see ContextIds) and resolves them to strong references.
///
/// Resolution rules for an id other than the default alias 0:
/// - minted here and not closed: the context (it may be closing: its admission refuses);
/// - minted here and closed: ContextError "context is closed" (a closed id never resolves
///   again, and the counter never hands it out twice);
/// - minted by another artifact loaded in this process: "a context of another robot
///   artifact";
/// - anything else: "unknown context id".
class ContextRegistry {
 public:
  ContextRegistry(uint64_t salt, std::string robot_name);

  /// Gives `context` the next id and makes it resolvable; returns the id.
  uint64_t publish(std::shared_ptr<Context> context);
  /// A strong reference to the context `id` names; throws ContextError per the rules.
  std::shared_ptr<Context> resolve(uint64_t id) const;
  /// Like resolve, but nullptr (instead of an error) for a context of this artifact that
  /// is already closed: what an idempotent close needs.
  std::shared_ptr<Context> resolve_for_close(uint64_t id) const;
  /// Whether `id` names an open context of this artifact (never throws).
  bool is_open(uint64_t id) const;
  /// Drops the closed context `id`; later lookups of it say "context is closed".
  void forget(uint64_t id);
  /// Every open context, as strong references (for a change that reaches them all).
  std::vector<std::shared_ptr<Context>> snapshot() const;
  /// Removes and returns every context (the artifact is going away).
  std::vector<std::shared_ptr<Context>> take_all();

 private:
  enum class Origin { kHere, kForeign, kUnknown };
  Origin origin(uint64_t id) const;
  [[noreturn]] void refuse(uint64_t id, Origin origin) const;

  const uint32_t tag_;
  const std::string robot_name_;
  mutable std::mutex mutex_;
  uint64_t next_counter_ = 1;  // guarded by mutex_
  std::unordered_map<uint64_t, std::shared_ptr<Context>> live_;  // guarded by mutex_
};

}  // namespace grid_rbd
