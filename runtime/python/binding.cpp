#include "binding.hpp"

#include <pybind11/pybind11.h>

#include <utility>

namespace grid_rbd::python {

namespace py = pybind11;

namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Runs `body` without the GIL when this thread holds it: closing waits for admitted
// calls, and a replay holds its admission while it runs Python code.
template <typename Body>
void without_gil(Body&& body) {
  if (PyGILState_Check() && !interpreter_finalizing()) {
    py::gil_scoped_release release;
    body();
  } else {
    body();
  }
}

}  // namespace

ContextBinding::ContextBinding(std::shared_ptr<Artifact> artifact)
    : artifact_(std::move(artifact)) {
  artifact_->retain_default();
  holds_.store(true, std::memory_order_release);
}

ContextBinding::ContextBinding(std::shared_ptr<Artifact> artifact, const ContextOptions& options)
    : artifact_(std::move(artifact)) {
  id_ = artifact_->create_context(options);
}

ContextBinding::~ContextBinding() {
  try {
    close();
  } catch (...) {  // a destructor must not throw; close() only fails on foreign ids
  }
}

bool ContextBinding::prepare_call() {
  if (!is_default()) return !closed();
  if (holds_.load(std::memory_order_acquire)) return true;
  // The rare path (a call after close()): a close of this binding may hold the mutex
  // while it drains, so wait for it without the GIL.
  without_gil([this] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!holds_.load(std::memory_order_relaxed)) {
      artifact_->retain_default();
      holds_.store(true, std::memory_order_release);
    }
  });
  return true;
}

void ContextBinding::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_default()) {
    if (!holds_.exchange(false)) return;
    without_gil([this] { artifact_->release_default(); });
    return;
  }
  if (closed_.exchange(true)) return;
  without_gil([this] { artifact_->close_context(id_); });
}

}  // namespace grid_rbd::python
