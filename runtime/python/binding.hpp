// What a Python handle holds of its context: a share of the default context, or the
// ownership of one explicit context.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "grid_rbd/artifact.hpp"

namespace grid_rbd::python {

/// A handle's binding to a context, shared by the handle and its fast call objects.
///
/// Default: the binding is one owner of the artifact's default context (a share); close()
/// gives the share back (the last share closes the context), and the next call through
/// the binding takes a share again. Explicit: the binding owns the context it created;
/// close() closes it for good. Destroying the binding (the handle was collected) does
/// what close() does.
class ContextBinding {
 public:
  /// A share of `artifact`'s default context.
  explicit ContextBinding(std::shared_ptr<Artifact> artifact);
  /// A new explicit context of `artifact`.
  ContextBinding(std::shared_ptr<Artifact> artifact, const ContextOptions& options);
  ~ContextBinding();

  ContextBinding(const ContextBinding&) = delete;
  ContextBinding& operator=(const ContextBinding&) = delete;

  const std::shared_ptr<Artifact>& artifact() const { return artifact_; }
  /// 0 for the default context, else the explicit context's id.
  uint64_t ctx_id() const { return id_; }
  bool is_default() const { return id_ == 0; }
  /// An explicit binding after close().
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  /// A default binding that holds its share now.
  bool holds_share() const { return holds_.load(std::memory_order_acquire); }
  /// Before a call: a default binding takes its share again if it gave it back; false
  /// for a closed explicit binding (the call must be refused).
  bool prepare_call();
  /// Explicit: close the context (idempotent). Default: give the share back.
  void close();

 private:
  std::shared_ptr<Artifact> artifact_;
  uint64_t id_ = 0;
  std::atomic<bool> closed_{false};
  std::atomic<bool> holds_{false};
  std::mutex mutex_;  // serialises share and close transitions
};

}  // namespace grid_rbd::python
