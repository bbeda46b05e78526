// A loaded artifact: its image, salt, model epoch and contexts. The runtime's entry point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "grid_rbd/artifact_library.hpp"
#include "grid_rbd/context.hpp"
#include "grid_rbd/context_registry.hpp"
#include "grid_rbd/device_call.hpp"
#include "grid_rbd/device_profile.hpp"
#include "grid_rbd/host_call.hpp"
#include "grid_rbd/model_epoch.hpp"

namespace grid_rbd {

/// One load of an artifact `.so`. Loading the same path twice gives two Artifacts with
/// different salts: their contexts and ids are separate.
///
/// Context ids: 0 is the alias of the default context, which is created lazily on first
/// use, shared by every caller that uses the alias, and re-created (a new incarnation: a
/// new id and a new model version) on first use after it was closed. Explicit contexts
/// come from create_context. Every operation below resolves its id at call time.
///
/// The default context's owners are counted (retain_default / release_default, one per
/// handle bound to it): the release of the last owner closes the current incarnation, as
/// does close_arena() whatever the count.
class Artifact {
 public:
  /// Throws ArtifactError naming `path` when it cannot be loaded or its ABI is not ours.
  explicit Artifact(const std::string& path);
  /// Closes every context (draining its calls) before the image may be unloaded.
  ~Artifact();

  Artifact(const Artifact&) = delete;
  Artifact& operator=(const Artifact&) = delete;

  const ArtifactLibrary& library() const { return *library_; }
  const std::shared_ptr<const ArtifactLibrary>& shared_library() const { return library_; }
  uint64_t salt() const { return salt_; }
  uint64_t model_epoch() const { return epoch_.current(); }

  /// The id of the current default incarnation, creating it if there is none open.
  uint64_t default_context();
  /// A new explicit context (see ContextOptions).
  uint64_t create_context(const ContextOptions& options);
  uint64_t create_context(int32_t workspace_slots) {
    ContextOptions options;
    options.workspace_slots = workspace_slots;
    return create_context(options);
  }
  /// One more owner of the default context (it is still created lazily).
  void retain_default();
  /// One owner fewer; when none is left, the current default incarnation is closed
  /// (drained, then freed) and the next use creates a new one.
  void release_default();
  /// The owners counted now.
  int64_t default_owners() const;
  /// Closes the current default incarnation now, whatever its owners (they keep working:
  /// their next call creates a new incarnation).
  void close_arena() { close_context(0); }
  /// Closes the context (0: the current default incarnation, if any). Closing a closed
  /// context of this artifact is a no-op; unknown and foreign ids are refused.
  void close_context(uint64_t id);
  /// Whether `id` names an open context (0: whether a default incarnation is open now;
  /// this does not create one). Never throws.
  bool is_open(uint64_t id) const;

  /// A host call (see plan_call for what is checked) on context `id`.
  void call(uint64_t id, const std::string& algorithm, const std::vector<HostArray>& inputs,
            const HostArray& out, double gravity);
  /// A host call already planned (the extension's fast path).
  void call(uint64_t id, const CallPlan& plan, double gravity);
  /// A framework call on caller-owned memory (see DeviceCall) on context `id`; returns
  /// the model version it ran under.
  uint64_t launch(uint64_t id, const DeviceCall& call) { return launch_group(id, &call, 1); }
  /// Framework calls under one admission (see Context::launch_group).
  uint64_t launch_group(uint64_t id, const DeviceCall* calls, size_t count);
  /// Replaces context `id`'s inertia table (nb x 10 scalars of the artifact dtype, as
  /// bytes); returns its new model version.
  uint64_t set_inertia_params(uint64_t id, const std::vector<std::byte>& table);
  std::vector<std::byte> inertia_params(uint64_t id);
  /// Replaces context `id`'s joint-dynamics table; returns its new model version.
  uint64_t set_joint_dynamics(uint64_t id, const std::vector<std::byte>& table);
  std::vector<std::byte> joint_dynamics(uint64_t id);
  /// Replaces context `id`'s joint-origin table; returns its new model version.
  uint64_t set_transform_params(uint64_t id, const std::vector<std::byte>& table);
  std::vector<std::byte> transform_params(uint64_t id);
  /// Launch overrides of context `id` (see Context): `algorithm` "" sets every algorithm.
  void set_threads_for(uint64_t id, const std::string& algorithm, int32_t threads);
  void set_variant_for(uint64_t id, const std::string& algorithm, const std::string& variant);
  /// The dispatch table of `algorithm` for every context of this artifact, open or later:
  /// (min_batch, variant name) entries ascending from batch 1 (the registration's measured
  /// table from meta.json); empty restores the descriptor's default.
  void set_dispatch(const std::string& algorithm,
                    const std::vector<std::pair<int32_t, std::string>>& table);
  std::string chosen_variant(uint64_t id, const std::string& algorithm, int32_t batch);
  void clear_launch_overrides(uint64_t id);
  LaunchOverrides launch_overrides(uint64_t id);
  uint64_t model_version(uint64_t id);
  DeviceProfile device_profile(uint64_t id);

  /// A strong reference to context `id` (0: the default, created if needed); throws
  /// ContextError for unknown, foreign or closed ids.
  std::shared_ptr<Context> resolve(uint64_t id);

 private:
  std::shared_ptr<Context> make_context(const ContextOptions& options);
  std::shared_ptr<Context> default_incarnation();
  /// Runs `body(context)` on context `id`. For the default alias a call that meets an
  /// incarnation its last owner is closing at that moment is retried once on the next
  /// incarnation, so a new owner never sees "context is closing" for the alias.
  template <typename Body>
  auto with_context(uint64_t id, Body&& body);

  std::shared_ptr<const ArtifactLibrary> library_;
  const uint64_t salt_;
  ModelEpoch epoch_;
  ContextRegistry registry_;
  std::shared_ptr<RetiredStates> retired_ = std::make_shared<RetiredStates>();
  mutable std::mutex default_mutex_;   // serialises creating the default incarnation
  std::shared_ptr<Context> default_;   // guarded by default_mutex_
  int64_t default_owners_ = 0;         // guarded by default_mutex_
};

}  // namespace grid_rbd
