// A runtime context: everything a call needs at run time, owned per context.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "grid_rbd/admission_gate.hpp"
#include "grid_rbd/artifact_library.hpp"
#include "grid_rbd/artifact_state.hpp"
#include "grid_rbd/cuda_driver.hpp"
#include "grid_rbd/device_call.hpp"
#include "grid_rbd/device_profile.hpp"
#include "grid_rbd/host_call.hpp"
#include "grid_rbd/launch_overrides.hpp"
#include "grid_rbd/model_epoch.hpp"
#include "grid_rbd/staging_arena.hpp"
#include "grid_rbd/workspace.hpp"

namespace grid_rbd {

/// How a context is made.
struct ContextOptions {
  /// Caps the items in flight per launch (0 = auto-fit; see fit_workspace).
  int32_t workspace_slots = 0;
  /// Run host calls through the staging path (pack, one copy in, launch, one copy out)
  /// on a CPU artifact too, where the copies are memcpys: the GPU path's logic, testable
  /// without a GPU.
  bool stage_host_calls = false;
};

/// Device state of closed contexts whose launches were recorded into a CUDA graph the
/// runtime does not replay itself (a caller's own torch.cuda.graph, an XLA command
/// buffer). Such a graph cannot be refused, so the memory it addresses is kept until the
/// artifact is unloaded instead of being freed under it.
class RetiredStates {
 public:
  void keep(std::unique_ptr<ArtifactState> state, Workspace workspace, DeviceBuffer word);

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<ArtifactState>> states_;
  std::vector<Workspace> workspaces_;
  std::vector<DeviceBuffer> words_;
};

/// What a closed context's version word holds: no model version ever has this value.
constexpr uint64_t kClosedVersionWord = ~uint64_t{0};

/// One context of a loaded artifact: its artifact state (device inertia table), the host
/// copy of its inertia table, its staging arena, its stream, its workspace, its launch
/// overrides, its model version and the device profile captured at creation.
///
/// Admission: every operation first passes the context's AdmissionGate, shared for compute
/// calls (held for the whole submission, staging and copies included) and exclusive for
/// model mutations, launch overrides and close(). A mutation is thus ordered after every
/// admitted call and before every later one. The open check is made again once the gate
/// is held, so an admitted call always runs on a live context.
///
/// Stream: on a GPU artifact the context creates a non-blocking stream of its own (host
/// calls and the setter fences use it), so two contexts' host calls overlap on the GPU;
/// framework calls run on the caller's stream. Without the CUDA driver it falls back to
/// the legacy default stream (the device profile says so).
class Context {
 public:
  enum class Status { kOpen, kClosing, kClosed };

  /// Captures the device profile (throws ContextError on an arch mismatch), creates the
  /// artifact state, the stream and the workspace, and loads the URDF's inertia table.
  /// `model_version` is the epoch value drawn for this creation; `retired` receives the
  /// device state at close when a graph captured this context's launches.
  Context(std::shared_ptr<const ArtifactLibrary> library, const ContextOptions& options,
          uint64_t model_version, std::shared_ptr<RetiredStates> retired);
  /// Closes (drains and frees) if still open.
  ~Context();

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Set once by the registry when it publishes the context.
  void set_id(uint64_t id) { id_ = id; }
  uint64_t id() const { return id_; }
  Status status() const { return status_.load(std::memory_order_acquire); }
  bool is_open() const { return status() == Status::kOpen; }
  /// Throws ContextError "context is closing" / "context is closed" unless open.
  void require_open() const;

  /// Runs a validated host call (shared admission). On a CPU artifact it launches on the
  /// host pointers; on a GPU artifact it stages the inputs (one copy in), launches, copies
  /// the output back (one copy out) and waits for its own stream only.
  void run(const CallPlan& plan, double gravity);

  /// Enqueues a framework call on its stream under shared admission (see DeviceCall for
  /// the stamps: `stamp_out` is a copy of the context's device-resident version word,
  /// enqueued after the launch); does not wait, except for a `stamp_expect` read. Throws
  /// ModelMutatedError "model mutated between forward and backward (version A -> B);
  /// recompute the forward" when the stamp is stale. Returns the model version the call
  /// ran under (a later call can pass it as `captured_version`).
  uint64_t launch(const DeviceCall& call) { return launch_group(&call, 1); }

  /// Several framework calls under one admission, in order: they all see one model
  /// version, and each distinct `stamp_expect` is read once (a backward's launches share
  /// one device-to-host read). Returns that version.
  uint64_t launch_group(const DeviceCall* calls, size_t count);

  /// The admission of a captured-graph replay: shared, like a compute call, and refused
  /// (ModelMutatedError) unless the model version is still `captured_version`. Hold the
  /// returned lock for the whole replay submission.
  std::shared_lock<AdmissionGate> admit_replay(uint64_t captured_version) const;

  /// Replaces the inertia table (nb x 10 scalars of the artifact dtype) under exclusive
  /// admission and returns the context's new model version, drawn from `epoch`. Throws
  /// UnsupportedError on an artifact built without runtime_inertia.
  uint64_t set_inertia_params(const std::vector<std::byte>& table, ModelEpoch& epoch);
  /// A copy of the current table (shared admission, so never half-written).
  std::vector<std::byte> inertia_params() const;
  /// Replaces the joint-dynamics table ([damping (n) | friction (n)] of the artifact
  /// dtype, finite and non-negative) as set_inertia_params does the inertia table.
  /// UnsupportedError on an artifact built without runtime_joint_dynamics.
  uint64_t set_joint_dynamics(const std::vector<std::byte>& table, ModelEpoch& epoch);
  std::vector<std::byte> joint_dynamics() const;
  /// Replaces the joint-origin table (7 scalars of the artifact dtype per joint:
  /// [p (3) | unit quaternion xyzw (4)], finite, each quaternion's norm within 1e-4 of 1)
  /// as set_inertia_params does the inertia table. UnsupportedError on an artifact built
  /// without runtime_transform.
  uint64_t set_transform_params(const std::vector<std::byte>& table, ModelEpoch& epoch);
  std::vector<std::byte> transform_params() const;

  /// Launch overrides (exclusive admission; the model version does not move).
  /// `algorithm_id` < 0 sets every algorithm. Threads: 0 or a multiple of 32 in
  /// [32, 1024]; variant: "" or one of available_variants.
  void set_threads_for(int32_t algorithm_id, int32_t threads);
  void set_variant_for(int32_t algorithm_id, const std::string& variant);
  /// Re-installs the artifact's stored dispatch table of `algorithm_id` into this
  /// context's state (exclusive admission, like a launch override; no version bump).
  void reload_dispatch(int32_t algorithm_id);
  /// The variant a launch of `batch` items runs (its override, else the dispatch table).
  std::string chosen_variant(int32_t algorithm_id, int32_t batch) const;
  void clear_launch_overrides();
  /// A copy of the table (shared admission).
  LaunchOverrides launch_overrides() const;

  uint64_t model_version() const { return model_version_.load(std::memory_order_acquire); }
  const DeviceProfile& device_profile() const { return profile_; }
  /// The stream host calls use (nullptr: the legacy default stream, or the CPU).
  void* stream() const { return stream_.get(); }

  /// Refuses new admissions ("context is closing"), waits for the admitted calls, fences
  /// the device, then frees the artifact state, workspace, arena and stream. Idempotent;
  /// a second concurrent close() returns once the first has finished.
  void close() noexcept;

 private:
  std::shared_lock<AdmissionGate> admit_shared() const;
  std::unique_lock<AdmissionGate> admit_exclusive() const;
  /// One kernel launch of `algorithm` with this context's state, overrides and
  /// workspace; returns the artifact's status. Call with the admission held.
  int launch_kernel(const grid_algorithm& algorithm, const void* const* inputs, void* output,
                    int32_t batch, double gravity, void* stream) const;
  void run_staged(const CallPlan& plan, double gravity);
  /// Device-wide fence: the context's stream, then every stream of the device.
  void fence(const char* what) const;
  void note_capture(void* stream);
  /// Writes `version` into the device-resident version word and waits for it.
  void write_version_word(uint64_t version);
  /// Throws ModelMutatedError unless the model version is `captured_version`.
  void check_captured_version(uint64_t captured_version) const;
  void check_stamp(const DeviceCall& call, uint64_t version) const;
  const grid_algorithm& algorithm_at(int32_t algorithm_id) const;
  std::string describe(const std::string& what) const;

  std::shared_ptr<const ArtifactLibrary> library_;
  uint64_t id_ = 0;
  DeviceProfile profile_;
  std::unique_ptr<ArtifactState> state_;
  DeviceStream stream_;
  // The model version in device memory, updated with the table under the setter fence.
  // A forward's stamp is a device-to-device copy of it, enqueued with the launch: it
  // holds the version the kernel actually ran under, also when a graph replays the copy.
  DeviceBuffer version_word_;
  Workspace workspace_;
  const bool staged_;  // host calls go through the staging arena
  std::vector<std::byte> inertia_;  // host copy of the table the device state holds
  std::vector<std::byte> joint_dynamics_;  // likewise (empty without joint dynamics)
  std::vector<std::byte> transform_;  // likewise (empty without runtime_transform)
  LaunchOverrides overrides_;
  std::atomic<uint64_t> model_version_;
  std::atomic<Status> status_{Status::kOpen};
  std::atomic<bool> captured_{false};  // a launch went into a graph being captured
  std::shared_ptr<RetiredStates> retired_;

  mutable AdmissionGate gate_;
  // Staged host calls share one staging arena per context, so they run one at a time:
  // two concurrent calls would otherwise stage into, and read back from, the same block.
  // Unstaged CPU calls launch on the caller's own arrays and do not take it.
  std::mutex staging_mutex_;
  StagingArena arena_;
  // A backward's stamp is read into page-locked memory: a read into pageable memory
  // makes the driver stage it and wait for the stream by its own (slow, sleeping) means
  // when the forward is still in flight. One read at a time per context.
  mutable std::mutex stamp_mutex_;
  PinnedHostBuffer stamp_host_;
  std::mutex close_mutex_;  // serialises close() callers
};

}  // namespace grid_rbd
