#include "grid_rbd/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

namespace grid_rbd {

namespace {

// The driver API's types, as cuda.h declares them (all ABI-stable since CUDA 4).
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
constexpr CUresult kSuccess = 0;
constexpr unsigned int kStreamNonBlocking = 0x1;
constexpr int kCaptureStatusNone = 0;
constexpr int kAttributeCanMapHostMemory = 19;  // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
constexpr int kAttributeUnifiedAddressing = 41;  // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING

}  // namespace

struct CudaDriver::Entry {
  CUresult (*init)(unsigned int);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*primary_retain)(CUcontext*, CUdevice);
  CUresult (*primary_release)(CUdevice);
  CUresult (*push)(CUcontext);
  CUresult (*pop)(CUcontext*);
  CUresult (*stream_create)(CUstream*, unsigned int);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*ctx_synchronize)();
  CUresult (*stream_is_capturing)(CUstream, int*);
  CUresult (*device_attribute)(int*, int, CUdevice);
};

namespace {

struct Loaded {
  CudaDriver::Entry entry{};
  std::string why;
  bool ok = false;
};

template <typename Fn>
bool resolve(void* library, const char* name, Fn* out, std::string* why) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  if (*out == nullptr) *why = std::string("libcuda.so.1 has no ") + name;
  return *out != nullptr;
}

Loaded& loaded() {
  static Loaded state;
  static std::once_flag once;
  std::call_once(once, [] {
    // Never closed: streams and contexts made through it live until process exit.
    void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      state.why = "the CUDA driver (libcuda.so.1) could not be loaded";
      return;
    }
    CudaDriver::Entry& e = state.entry;
    std::string* why = &state.why;
    state.ok = resolve(library, "cuInit", &e.init, why) &&
               resolve(library, "cuDeviceGet", &e.device_get, why) &&
               resolve(library, "cuDevicePrimaryCtxRetain", &e.primary_retain, why) &&
               resolve(library, "cuDevicePrimaryCtxRelease_v2", &e.primary_release, why) &&
               resolve(library, "cuCtxPushCurrent_v2", &e.push, why) &&
               resolve(library, "cuCtxPopCurrent_v2", &e.pop, why) &&
               resolve(library, "cuStreamCreate", &e.stream_create, why) &&
               resolve(library, "cuStreamDestroy_v2", &e.stream_destroy, why) &&
               resolve(library, "cuCtxSynchronize", &e.ctx_synchronize, why) &&
               resolve(library, "cuStreamIsCapturing", &e.stream_is_capturing, why) &&
               resolve(library, "cuDeviceGetAttribute", &e.device_attribute, why);
    if (state.ok && e.init(0) != kSuccess) {
      state.ok = false;
      state.why = "cuInit failed";
    }
  });
  return state;
}

// Makes the primary context of `device` current for the scope (and retains it), so the
// calls inside work from any thread.
class PrimaryScope {
 public:
  PrimaryScope(const CudaDriver::Entry& e, int device) : e_(e) {
    if (e_.device_get(&device_, device) != kSuccess) return;
    if (e_.primary_retain(&context_, device_) != kSuccess) return;
    retained_ = true;
    pushed_ = e_.push(context_) == kSuccess;
  }
  ~PrimaryScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      e_.pop(&popped);
    }
    if (retained_) e_.primary_release(device_);
  }
  PrimaryScope(const PrimaryScope&) = delete;
  PrimaryScope& operator=(const PrimaryScope&) = delete;
  bool ok() const { return pushed_; }

 private:
  const CudaDriver::Entry& e_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  bool retained_ = false;
  bool pushed_ = false;
};

}  // namespace

const CudaDriver* CudaDriver::get() {
  static const CudaDriver driver(&loaded().entry);
  return loaded().ok ? &driver : nullptr;
}

std::string CudaDriver::why() { return loaded().why; }

void* CudaDriver::create_stream(int device, std::string* error) const {
  PrimaryScope scope(*entry_, device);
  if (!scope.ok()) {
    *error = "the primary context of device " + std::to_string(device) + " is unavailable";
    return nullptr;
  }
  CUstream stream = nullptr;
  const CUresult rc = entry_->stream_create(&stream, kStreamNonBlocking);
  if (rc != kSuccess) {
    *error = "cuStreamCreate failed (CUDA error " + std::to_string(rc) + ")";
    return nullptr;
  }
  return stream;
}

void CudaDriver::destroy_stream(int device, void* stream) const {
  PrimaryScope scope(*entry_, device);
  if (scope.ok()) entry_->stream_destroy(stream);
}

bool CudaDriver::synchronize_device(int device) const {
  PrimaryScope scope(*entry_, device);
  return scope.ok() && entry_->ctx_synchronize() == kSuccess;
}

bool CudaDriver::kernels_reach_pinned_memory(int device) const {
  CUdevice handle = 0;
  int maps = 0, unified = 0;
  return entry_->device_get(&handle, device) == kSuccess &&
         entry_->device_attribute(&maps, kAttributeCanMapHostMemory, handle) == kSuccess &&
         entry_->device_attribute(&unified, kAttributeUnifiedAddressing, handle) == kSuccess &&
         maps == 1 && unified == 1;
}

bool CudaDriver::is_capturing(void* stream) const {
  int status = kCaptureStatusNone;
  return entry_->stream_is_capturing(stream, &status) == kSuccess &&
         status != kCaptureStatusNone;
}

DeviceStream::DeviceStream(bool is_gpu, int device) : is_gpu_(is_gpu), device_(device) {
  if (!is_gpu_) return;
  const CudaDriver* driver = CudaDriver::get();
  if (driver == nullptr) {
    fallback_ = CudaDriver::why();
    return;
  }
  stream_ = driver->create_stream(device_, &fallback_);
}

void DeviceStream::reset() noexcept {
  if (stream_ != nullptr) {
    if (const CudaDriver* driver = CudaDriver::get()) driver->destroy_stream(device_, stream_);
  }
  stream_ = nullptr;
}

}  // namespace grid_rbd
