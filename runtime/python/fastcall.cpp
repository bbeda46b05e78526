#include "fastcall.hpp"

#include <stdexcept>

namespace grid_rbd::python {

PyObject* set_python_error(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ error in grid_rbd._core");
  }
  return nullptr;
}

}  // namespace grid_rbd::python
