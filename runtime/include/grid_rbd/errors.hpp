// The runtime's exception types. Python sees std::invalid_argument as ValueError and
// std::runtime_error as RuntimeError (pybind11's standard translation), so each type
// derives from the one whose Python meaning it has.
#pragma once

#include <stdexcept>
#include <string>

namespace grid_rbd {

/// An artifact could not be loaded: dlopen failed, or its descriptor is not one this
/// runtime reads (ABI version, struct size, malformed tables). The message names the path.
class ArtifactError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A context id did not resolve (unknown, foreign, closed, closing) or a context could not
/// be created (arch mismatch, device unavailable).
class ContextError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The artifact returned an error code (a launch, a copy, an allocation).
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An operation the artifact was not built for (set_inertia_params without
/// runtime_inertia).
class UnsupportedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A framework backward whose forward ran under another model version (the context was
/// mutated or re-created in between), or a captured graph replayed after a mutation.
class ModelMutatedError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller's argument is wrong: an unknown algorithm, an array of the wrong width, dtype,
/// layout or batch. The message names the argument and what was expected.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace grid_rbd
