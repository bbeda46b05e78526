// Python callables that reach C++ through CPython's vectorcall protocol directly: the
// per-call entry points (the numpy handle's methods, the framework launches) skip the
// argument-binding layer of pybind11, which costs more than the runtime's own call.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>
#include <structmember.h>

#include <cstddef>
#include <exception>
#include <memory>

namespace grid_rbd::python {

namespace py = pybind11;

/// Sets the Python error for a C++ exception the way the extension's other entry points
/// report it (std::invalid_argument: ValueError, other exceptions: RuntimeError, a
/// pending Python error: itself) and returns nullptr.
PyObject* set_python_error(std::exception_ptr error);

/// `T` provides `static constexpr const char* kTypeName` ("grid_rbd._core.Name"),
/// `kDoc`, and `PyObject* call(PyObject* const* args, size_t nargs)` (a new reference,
/// or nullptr with a Python error set; it may throw, the exception becomes the error).
/// Keyword arguments are refused.
template <typename T>
struct FastCallableObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  T* impl;
};

template <typename T>
PyObject* fast_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                          PyObject* kwnames) {
  if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0) {
    PyErr_SetString(PyExc_TypeError, "takes positional arguments only");
    return nullptr;
  }
  auto* object = reinterpret_cast<FastCallableObject<T>*>(self);
  try {
    return object->impl->call(args, static_cast<size_t>(PyVectorcall_NARGS(nargsf)));
  } catch (...) {
    return set_python_error(std::current_exception());
  }
}

template <typename T>
void fast_dealloc(PyObject* self) {
  auto* object = reinterpret_cast<FastCallableObject<T>*>(self);
  delete object->impl;  // may close a context: ContextBinding releases the GIL for it
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of a heap type hold a reference to it
}

template <typename T>
PyTypeObject* fast_type() {
  static PyTypeObject* type = [] {
    static PyMemberDef members[] = {
        {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET,
         static_cast<Py_ssize_t>(offsetof(FastCallableObject<T>, vectorcall)), READONLY,
         nullptr},
        {nullptr, 0, 0, 0, nullptr}};
    static PyType_Slot slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(&fast_dealloc<T>)},
        {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
        {Py_tp_members, members},
        {Py_tp_doc, const_cast<char*>(T::kDoc)},
        {0, nullptr}};
    static PyType_Spec spec = {T::kTypeName, static_cast<int>(sizeof(FastCallableObject<T>)),
                               0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, slots};
    return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  }();
  return type;
}

/// A new Python callable owning `impl`.
template <typename T>
py::object make_fast_callable(std::unique_ptr<T> impl) {
  PyTypeObject* type = fast_type<T>();
  if (type == nullptr) throw py::error_already_set();
  auto* object = PyObject_New(FastCallableObject<T>, type);
  if (object == nullptr) throw py::error_already_set();
  object->vectorcall = &fast_vectorcall<T>;
  object->impl = impl.release();
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(object));
}

}  // namespace grid_rbd::python
