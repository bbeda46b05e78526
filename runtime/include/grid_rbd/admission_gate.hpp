// The admission lock of a context: shared for compute calls, exclusive for mutations.
#pragma once

#include <mutex>
#include <shared_mutex>

namespace grid_rbd {

/// A reader/writer lock that prefers writers (SharedMutex requirements, so std::shared_lock
/// and std::unique_lock work on it).
///
/// std::shared_mutex on glibc prefers readers: a thread hammering compute calls can keep a
/// mutation or a close() waiting indefinitely. Here a writer takes the turnstile before
/// waiting for the readers to drain, and every new reader passes the turnstile, so once a
/// writer arrives no new call is admitted ahead of it: the calls already admitted finish,
/// the writer runs, then admissions resume.
class AdmissionGate {
 public:
  void lock() {
    std::lock_guard<std::mutex> turn(turnstile_);
    access_.lock();
  }
  void unlock() { access_.unlock(); }

  void lock_shared() {
    std::lock_guard<std::mutex> turn(turnstile_);
    access_.lock_shared();
  }
  void unlock_shared() { access_.unlock_shared(); }

 private:
  std::mutex turnstile_;
  std::shared_mutex access_;
};

}  // namespace grid_rbd
