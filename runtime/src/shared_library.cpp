#include "grid_rbd/shared_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "grid_rbd/errors.hpp"

namespace grid_rbd {

SharedLibrary::SharedLibrary(std::string path) : path_(std::move(path)) {
  handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* reason = dlerror();
    throw ArtifactError("cannot load artifact " + path_ + ": " +
                        (reason != nullptr ? reason : "dlopen failed"));
  }
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* SharedLibrary::symbol(const char* name) const {
  dlerror();  // clear a stale error so a NULL result means "absent"
  return dlsym(handle_, name);
}

}  // namespace grid_rbd
