// RAII ownership of one dlopen handle.
#pragma once

#include <string>

namespace grid_rbd {

/// A shared object opened with dlopen(RTLD_NOW | RTLD_LOCAL) and closed on destruction.
///
/// glibc keys loaded objects by path: opening a path that is already loaded returns the
/// same image (reference counted), even if the file was replaced since. The artifact store
/// never rewrites a published path, so this is the behaviour we want.
class SharedLibrary {
 public:
  /// Throws ArtifactError naming `path` and dlerror()'s reason.
  explicit SharedLibrary(std::string path);
  ~SharedLibrary();

  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  /// The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* handle_ = nullptr;
};

}  // namespace grid_rbd
