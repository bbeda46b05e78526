// The numpy handle's hot path: one C++ call that binds the arguments, checks the arrays,
// allocates (or views) the output, and runs the call on the handle's context.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>
#include <vector>

#include "binding.hpp"
#include "grid_rbd/artifact.hpp"

namespace grid_rbd::python {

namespace py = pybind11;

/// One algorithm of one handle, called from Python (through `make_fast_callable`) as
/// `method(args, kwargs)` with what the handle method got. Returns the result, or None
/// when it declines: for anything but the plain case
/// (a wrong or missing argument, an array that is not a native-order C-contiguous
/// ndarray of the artifact dtype, a gravity that is not a float or int, a closed
/// explicit context) the Python handle runs its own checked path, which raises the
/// precise error or handles the input. No strings are built and nothing but the result
/// array is allocated on the way.
///
/// Shapes: every input (B, width), or every input (width,) for a single state, whose
/// result then has no batch axis. out=: (B, *output) or flat (B, prod(output)); for a
/// single state also (*output) or (prod(output),); the result is a view of it.
class HostMethod {
 public:
  static constexpr const char* kTypeName = "grid_rbd._core.HostMethod";
  static constexpr const char* kDoc =
      "method(args, kwargs): the numpy handle's fast path for one algorithm; the result, "
      "or None when the checked Python path must handle the call.";

  HostMethod(std::shared_ptr<ContextBinding> binding, const std::string& algorithm);

  /// args[0]: the positional arguments (a tuple), args[1]: the keywords (a dict).
  PyObject* call(PyObject* const* args, size_t nargs) const;

 private:
  bool parse_gravity(PyObject* value, double* gravity) const;
  /// (B, *output) or (*output) for a single state.
  std::vector<py::ssize_t> result_shape(int64_t batch, bool single) const;
  bool out_matches(PyObject* out, int64_t batch, bool single) const;

  std::shared_ptr<ContextBinding> binding_;
  const grid_algorithm* algorithm_ = nullptr;
  std::vector<py::object> names_;  // interned input names, for keyword matching
  py::object gravity_name_;
  py::object out_name_;
  py::dtype dtype_;
  int dtype_num_ = 0;
  size_t scalar_size_ = 0;
  std::vector<py::ssize_t> output_shape_;
  int64_t output_elements_ = 0;
  int64_t max_batch_ = 0;
};

}  // namespace grid_rbd::python
