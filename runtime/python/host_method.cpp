#include "host_method.hpp"

#include <array>

namespace grid_rbd::python {

namespace {

constexpr double kDefaultGravity = -9.81;

py::object interned(const char* text) {
  return py::reinterpret_steal<py::object>(PyUnicode_InternFromString(text));
}

bool same_name(PyObject* key, const py::object& name) {
  if (key == name.ptr()) return true;  // keywords in source code are interned
  return PyUnicode_Check(key) && PyUnicode_Compare(key, name.ptr()) == 0;
}

// Native byte order: numpy writes '=' for it ('<' or '>' only for an explicit order).
bool native_order(char byteorder) {
  const uint16_t probe = 1;
  const bool little = *reinterpret_cast<const char*>(&probe) == 1;
  return byteorder == '=' || byteorder == '|' || byteorder == (little ? '<' : '>');
}

}  // namespace

HostMethod::HostMethod(std::shared_ptr<ContextBinding> binding, const std::string& algorithm)
    : binding_(std::move(binding)) {
  const ArtifactLibrary& library = binding_->artifact()->library();
  algorithm_ = &library.algorithm(algorithm);
  for (int32_t k = 0; k < algorithm_->num_inputs; ++k) {
    names_.push_back(interned(algorithm_->input_names[k]));
  }
  gravity_name_ = interned("gravity");
  out_name_ = interned("out");
  dtype_ = py::dtype(library.dtype());
  dtype_num_ = dtype_.num();
  scalar_size_ = library.scalar_size();
  for (int32_t k = 0; k < algorithm_->output_rank; ++k) {
    output_shape_.push_back(algorithm_->output_shape[k]);
  }
  output_elements_ = output_elements_per_item(*algorithm_);
  max_batch_ = library.descriptor().max_batch;
}

bool HostMethod::parse_gravity(PyObject* value, double* gravity) const {
  if (PyFloat_Check(value)) {
    *gravity = PyFloat_AS_DOUBLE(value);
    return true;
  }
  if (PyLong_CheckExact(value)) {
    *gravity = PyLong_AsDouble(value);
    if (*gravity == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  return false;
}

std::vector<py::ssize_t> HostMethod::result_shape(int64_t batch, bool single) const {
  std::vector<py::ssize_t> shape;
  if (!single) shape.push_back(static_cast<py::ssize_t>(batch));
  shape.insert(shape.end(), output_shape_.begin(), output_shape_.end());
  return shape;
}

bool HostMethod::out_matches(PyObject* out, int64_t batch, bool single) const {
  const auto& api = py::detail::npy_api::get();
  if (!api.PyArray_Check_(out)) return false;
  const py::detail::PyArray_Proxy* a = py::detail::array_proxy(out);
  const auto* descr = py::detail::array_descriptor_proxy(a->descr);
  constexpr int kFlags = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                         py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  if (descr->type_num != dtype_num_ || !native_order(descr->byteorder) ||
      (a->flags & kFlags) != kFlags) {
    return false;
  }
  const py::ssize_t* dims = a->dimensions;
  const int rank = static_cast<int>(output_shape_.size());
  auto per_item_matches = [&](const py::ssize_t* item, int nd) {
    if (nd == 1) return item[0] == output_elements_;  // flat per item
    if (nd != rank) return false;
    for (int k = 0; k < rank; ++k) {
      if (item[k] != output_shape_[k]) return false;
    }
    return true;
  };
  if (a->nd >= 2 && dims[0] == batch && per_item_matches(dims + 1, a->nd - 1)) return true;
  return single && a->nd >= 1 && per_item_matches(dims, a->nd);
}

PyObject* HostMethod::call(PyObject* const* argv, size_t nargs) const {
  if (nargs != 2 || !PyTuple_Check(argv[0]) || !PyDict_Check(argv[1])) {
    PyErr_SetString(PyExc_TypeError, "HostMethod takes (args: tuple, kwargs: dict)");
    return nullptr;
  }
  PyObject* args = argv[0];
  PyObject* kwargs = argv[1];
  const grid_algorithm& a = *algorithm_;
  const auto num_inputs = static_cast<size_t>(a.num_inputs);
  std::array<PyObject*, GRID_MAX_INPUTS> values{};  // borrowed from args / kwargs
  const auto positional = static_cast<size_t>(PyTuple_GET_SIZE(args));
  if (positional > num_inputs) Py_RETURN_NONE;
  for (size_t k = 0; k < positional; ++k) {
    values[k] = PyTuple_GET_ITEM(args, static_cast<Py_ssize_t>(k));
  }

  double gravity = kDefaultGravity;
  PyObject* out = nullptr;
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t position = 0;
  while (PyDict_Next(kwargs, &position, &key, &value)) {
    if (same_name(key, out_name_)) {
      out = value == Py_None ? nullptr : value;
      continue;
    }
    if (a.uses_gravity && same_name(key, gravity_name_)) {
      if (!parse_gravity(value, &gravity)) Py_RETURN_NONE;
      continue;
    }
    size_t index = num_inputs;
    for (size_t k = 0; k < num_inputs; ++k) {
      if (same_name(key, names_[k])) index = k;
    }
    if (index == num_inputs || values[index] != nullptr) Py_RETURN_NONE;
    values[index] = value;
  }

  const auto& api = py::detail::npy_api::get();
  CallPlan plan;
  plan.algorithm = &a;
  int64_t batch = -1;
  int single = -1;  // unknown, 0 batched, 1 single state
  for (size_t k = 0; k < num_inputs; ++k) {
    PyObject* x = values[k];
    if (x == nullptr || x == Py_None) {
      if (a.input_required[k]) Py_RETURN_NONE;
      continue;
    }
    if (!api.PyArray_Check_(x)) Py_RETURN_NONE;
    const py::detail::PyArray_Proxy* arr = py::detail::array_proxy(x);
    const auto* descr = py::detail::array_descriptor_proxy(arr->descr);
    if (descr->type_num != dtype_num_ || !native_order(descr->byteorder) ||
        (arr->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) == 0) {
      Py_RETURN_NONE;
    }
    const int this_single = arr->nd == 1 ? 1 : arr->nd == 2 ? 0 : -1;
    if (this_single < 0 || (single >= 0 && this_single != single)) Py_RETURN_NONE;
    single = this_single;
    const int64_t rows = single ? 1 : arr->dimensions[0];
    const int64_t width = arr->dimensions[arr->nd - 1];
    if (width != a.input_widths[k] || (batch >= 0 && rows != batch)) Py_RETURN_NONE;
    batch = rows;
    plan.inputs[k] = arr->data;
    plan.input_bytes[k] = static_cast<size_t>(rows * width) * scalar_size_;
  }
  if (batch < 0 || batch > max_batch_) Py_RETURN_NONE;
  if (!binding_->prepare_call()) Py_RETURN_NONE;  // closed: the checked path says so
  plan.batch = static_cast<int32_t>(batch);
  plan.output_bytes = static_cast<size_t>(batch * output_elements_) * scalar_size_;

  py::array result;
  if (out == nullptr) {
    result = py::array(dtype_, result_shape(batch, single == 1));
    plan.output = result.mutable_data();
  } else {
    if (!out_matches(out, batch, single == 1)) Py_RETURN_NONE;
    plan.output = py::detail::array_proxy(out)->data;
    result = py::reinterpret_borrow<py::array>(out).reshape(result_shape(batch, single == 1));
  }
  // The arguments stay referenced by the caller's frame (args is a tuple, kwargs this
  // call's own dict) while the GIL is released.
  {
    py::gil_scoped_release release;
    binding_->artifact()->call(binding_->ctx_id(), plan, gravity);
  }
  return result.release().ptr();
}

}  // namespace grid_rbd::python
