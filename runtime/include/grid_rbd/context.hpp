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
#include "grid_rbd/device_call.hpp"
#include "grid_rbd/device_profile.hpp"
#include "grid_rbd/host_call.hpp"
#include "grid_rbd/model_epoch.hpp"
#include "grid_rbd/staging_arena.hpp"

namespace grid_rbd {

/// Per-algorithm launch settings of a context (0 = the artifact's compiled default).
/// Placeholder: the ABI's launch takes none yet. When it does, writers hold the context's
/// admission exclusive and launches read them under their shared admission, so an
/// override is never read half-written; overrides do not bump the model version.
struct LaunchOverrides {
  std::vector<int32_t> threads_per_block;
};

/// One context of a loaded artifact: its artifact state (device inertia table), the host
/// copy of its inertia table, its staging arena, its stream, its launch overrides, its
/// model version and the device profile captured at creation.
///
/// Admission: every operation first passes the context's AdmissionGate, shared for compute
/// calls (held for the whole submission, staging and copies included) and exclusive for
/// model mutations and close(). A mutation is thus ordered after every admitted call and
/// before every later one. The open check is made again once the gate is held, so an
/// admitted call always runs on a live context.
///
/// Stream: every context submits on the legacy default stream (nullptr) for now; a
/// per-context stream is a later increment (the ABI already takes one per launch).
class Context {
 public:
  enum class Status { kOpen, kClosing, kClosed };

  /// Captures the device profile (throws ContextError on an arch mismatch), creates the
  /// artifact state and loads the URDF's inertia table. `model_version` is the epoch value
  /// drawn for this creation.
  Context(std::shared_ptr<const ArtifactLibrary> library, int32_t workspace_slots,
          uint64_t model_version);
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
  /// host pointers; on a GPU artifact it stages inputs into the arena, launches, copies the
  /// output back and synchronises.
  void run(const CallPlan& plan, double gravity);

  /// Enqueues a framework call on its stream under shared admission (see DeviceCall for
  /// the stamps); does not wait, except for a `stamp_expect` read. Throws
  /// ModelMutatedError "model mutated between forward and backward (version A -> B);
  /// recompute the forward" when the stamp is stale. Returns the model version the call
  /// ran under (a later call can pass it as `captured_version`).
  uint64_t launch(const DeviceCall& call);

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

  uint64_t model_version() const { return model_version_.load(std::memory_order_acquire); }
  const DeviceProfile& device_profile() const { return profile_; }

  /// Refuses new admissions ("context is closing"), waits for the admitted calls, fences
  /// the device, destroys the artifact state and frees the arena. Idempotent; a second
  /// concurrent close() returns once the first has finished.
  void close() noexcept;

 private:
  std::shared_lock<AdmissionGate> admit_shared() const;
  std::unique_lock<AdmissionGate> admit_exclusive() const;
  void run_on_device(const CallPlan& plan, double gravity);
  /// Throws ModelMutatedError unless the model version is `captured_version`.
  void check_captured_version(uint64_t captured_version) const;
  std::string describe(const std::string& what) const;

  std::shared_ptr<const ArtifactLibrary> library_;
  uint64_t id_ = 0;
  DeviceProfile profile_;
  ArtifactState state_;
  void* stream_ = nullptr;
  std::vector<std::byte> inertia_;  // host copy of the table the device state holds
  LaunchOverrides overrides_;
  std::atomic<uint64_t> model_version_;
  std::atomic<Status> status_{Status::kOpen};

  mutable AdmissionGate gate_;
  // GPU host calls share one staging arena per context, so they run one at a time: two
  // concurrent numpy calls would otherwise stage into, and read back from, the same block.
  // CPU calls launch on the caller's own arrays and do not take it.
  std::mutex staging_mutex_;
  StagingArena arena_;
  std::mutex close_mutex_;  // serialises close() callers
};

}  // namespace grid_rbd
