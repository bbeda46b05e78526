// grid_rbd's torch extension: the eager call of a torch handle's method in one C call.
//
// Built on the user's machine by grid_rbd/torch/_native.py with the host C++ compiler
// against the headers and libraries the installed torch ships (no CUDA headers: the
// current CUDA stream comes from torch's own `_cuda_getCurrentRawStream`, the launch from
// grid_rbd._core through `grid_rbd_launcher_call`, whose address _core hands out; this
// library does not link against the runtime).
//
// A `FastMethod` is one method of one handle: `method(args, kwargs)` checks the
// positional tensors (exact torch.Tensor, the handle's dtype and device, 2-D with the
// method's widths, one batch within max_batch_size), resolves a negated view and copies a
// non-contiguous tensor, allocates the output and launches on the current stream. It
// returns None, without touching anything, for whatever it does not take (keywords other
// than a float `gravity`, single states, a batch of 0, wrong types or shapes, an input
// that requires grad under grad mode, a closed context): the handle's Python path then
// decides, and raises the precise error where there is one.

#include <Python.h>
#include <structmember.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace {

constexpr size_t kMaxInputs = 8;  // GRID_RBD_BRIDGE_MAX_INPUTS

// grid_rbd_launcher_call (grid_rbd/bridge.h): 0; 1 for a closed context (nothing
// launched); -1 with the Python error set.
using LauncherCall = int (*)(PyObject* launcher, void* output, int64_t batch, double gravity,
                             void* stream, const void* const* inputs, int32_t num_inputs);

struct FastMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* launcher;    // a _core.DeviceLauncher (owned reference)
  PyObject* raw_stream;  // torch._C._cuda_getCurrentRawStream, or nullptr on the CPU
  LauncherCall call;
  std::vector<int64_t>* widths;  // per input, in the method's order
  std::vector<int64_t>* output;  // output dimensions per item
  Py_ssize_t required;           // leading inputs that must be given
  int64_t max_batch;
  double default_gravity;
  bool uses_gravity;
  at::ScalarType dtype;
  c10::Device device;
};

PyObject* decline() { Py_RETURN_NONE; }

// The gravity keyword, when the call has one; false to decline the call.
bool read_kwargs(const FastMethod& m, PyObject* kwargs, double* gravity) {
  *gravity = m.default_gravity;
  if (kwargs == Py_None) return true;
  if (!PyDict_CheckExact(kwargs)) return false;
  const Py_ssize_t size = PyDict_GET_SIZE(kwargs);
  if (size == 0) return true;
  if (size != 1 || !m.uses_gravity) return false;
  PyObject* value = PyDict_GetItemString(kwargs, "gravity");  // borrowed
  if (value == nullptr) return false;
  if (PyFloat_CheckExact(value)) {
    *gravity = PyFloat_AS_DOUBLE(value);
    return true;
  }
  if (!PyLong_CheckExact(value)) return false;
  *gravity = PyLong_AsDouble(value);
  if (*gravity == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();  // an int too large for a double: the checked path says so
    return false;
  }
  return true;
}

// Converts the positional tensors into `tensors` (nullptr slots for omitted ones); the
// batch, or -1 to decline the call.
int64_t read_inputs(const FastMethod& m, PyObject* args, std::vector<at::Tensor>* tensors,
                    std::array<const void*, kMaxInputs>* addresses) {
  const Py_ssize_t given = PyTuple_GET_SIZE(args);
  const auto count = static_cast<Py_ssize_t>(m.widths->size());
  if (given < m.required || given > count) return -1;
  const bool grad_mode = c10::GradMode::is_enabled();
  int64_t batch = -1;
  tensors->reserve(static_cast<size_t>(given));
  for (Py_ssize_t k = 0; k < given; ++k) {
    PyObject* item = PyTuple_GET_ITEM(args, k);
    if (item == Py_None && k >= m.required) continue;
    if (!THPVariable_CheckExact(item)) return -1;
    const at::Tensor& t = THPVariable_Unpack(item);
    if (t.scalar_type() != m.dtype || t.device() != m.device || t.dim() != 2 ||
        t.size(1) != (*m.widths)[static_cast<size_t>(k)]) {
      return -1;
    }
    if (batch >= 0 && t.size(0) != batch) return -1;
    batch = t.size(0);
    if (grad_mode && t.requires_grad()) return -1;  // the autograd path is Python's
    at::Tensor plain = t.is_neg() ? t.resolve_neg() : t;
    if (!plain.is_contiguous()) plain = plain.contiguous();
    (*addresses)[static_cast<size_t>(k)] = plain.data_ptr();
    tensors->push_back(std::move(plain));  // alive until the launch is enqueued
  }
  if (batch <= 0 || batch > m.max_batch) return -1;
  return batch;
}

// The current stream of the handle's device (nullptr on the CPU); false with the Python
// error set.
bool current_stream(const FastMethod& m, void** stream) {
  *stream = nullptr;
  if (m.raw_stream == nullptr) return true;
  PyObject* index = PyLong_FromLong(m.device.index());
  if (index == nullptr) return false;
  PyObject* value = PyObject_CallOneArg(m.raw_stream, index);
  Py_DECREF(index);
  if (value == nullptr) return false;
  *stream = PyLong_AsVoidPtr(value);
  Py_DECREF(value);
  return !PyErr_Occurred();
}

PyObject* call_method(PyObject* self, PyObject* const* argv, size_t nargsf, PyObject* kwnames) {
  auto& m = *reinterpret_cast<FastMethod*>(self);
  if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames))) {
    PyErr_SetString(PyExc_TypeError, "FastMethod(args, kwargs)");
    return nullptr;
  }
  PyObject* args = argv[0];
  if (!PyTuple_CheckExact(args)) return decline();
  try {
    double gravity = 0.0;
    if (!read_kwargs(m, argv[1], &gravity)) return decline();
    std::vector<at::Tensor> tensors;
    std::array<const void*, kMaxInputs> addresses{};
    const int64_t batch = read_inputs(m, args, &tensors, &addresses);
    if (batch < 0) return decline();
    std::vector<int64_t> sizes{batch};
    sizes.insert(sizes.end(), m.output->begin(), m.output->end());
    at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(m.dtype).device(m.device));
    void* stream = nullptr;
    if (!current_stream(m, &stream)) return nullptr;
    const int status = m.call(m.launcher, out.data_ptr(), batch, gravity, stream,
                              addresses.data(), static_cast<int32_t>(m.widths->size()));
    if (status == 1) return decline();  // a closed context: the Python path raises
    if (status != 0) return nullptr;
    return THPVariable_Wrap(std::move(out));
  } catch (const std::exception& e) {  // a c10::Error from torch (allocation, ...)
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

void dealloc(PyObject* self) {
  auto* m = reinterpret_cast<FastMethod*>(self);
  Py_XDECREF(m->launcher);
  Py_XDECREF(m->raw_stream);
  delete m->widths;
  delete m->output;
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef members[] = {
    {const_cast<char*>("__vectorcalloffset__"), T_PYSSIZET,
     static_cast<Py_ssize_t>(offsetof(FastMethod, vectorcall)), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(&dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(&PyVectorcall_Call)},
    {Py_tp_members, members},
    {Py_tp_doc, const_cast<char*>("method(args, kwargs) -> tensor, or None to decline")},
    {0, nullptr}};

PyType_Spec spec = {"grid_rbd_torch_native.FastMethod", static_cast<int>(sizeof(FastMethod)),
                    0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, slots};

PyTypeObject* method_type = nullptr;

bool int_list(PyObject* sequence, std::vector<int64_t>* out) {
  PyObject* fast = PySequence_Fast(sequence, "expected a sequence of ints");
  if (fast == nullptr) return false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t k = 0; k < n; ++k) {
    const long long value = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, k));
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out->push_back(value);
  }
  Py_DECREF(fast);
  return true;
}

// fast_method(launcher, call_address, widths, required, output, dtype_bits, device_index,
//             max_batch, uses_gravity, default_gravity, raw_stream)
// dtype_bits: 32 or 64; device_index: -1 for the CPU; raw_stream: None on the CPU.
PyObject* fast_method(PyObject*, PyObject* args) {
  PyObject *launcher = nullptr, *widths = nullptr, *output = nullptr, *raw_stream = nullptr;
  unsigned long long address = 0;
  Py_ssize_t required = 0;
  int dtype_bits = 0, device_index = 0, uses_gravity = 0;
  long long max_batch = 0;
  double default_gravity = 0.0;
  if (!PyArg_ParseTuple(args, "OKOnOiiLpdO", &launcher, &address, &widths, &required, &output,
                        &dtype_bits, &device_index, &max_batch, &uses_gravity,
                        &default_gravity, &raw_stream)) {
    return nullptr;
  }
  if (address == 0 || (dtype_bits != 32 && dtype_bits != 64) ||
      (device_index >= 0) == (raw_stream == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "fast_method: inconsistent arguments");
    return nullptr;
  }
  auto widths_list = std::make_unique<std::vector<int64_t>>();
  auto output_list = std::make_unique<std::vector<int64_t>>();
  if (!int_list(widths, widths_list.get()) || !int_list(output, output_list.get())) {
    return nullptr;
  }
  if (widths_list->empty() || widths_list->size() > kMaxInputs || required < 1 ||
      required > static_cast<Py_ssize_t>(widths_list->size())) {
    PyErr_SetString(PyExc_ValueError, "fast_method: 1 to 8 inputs, at least one required");
    return nullptr;
  }
  auto* m = PyObject_New(FastMethod, method_type);
  if (m == nullptr) return nullptr;
  m->vectorcall = &call_method;
  Py_INCREF(launcher);
  m->launcher = launcher;
  m->raw_stream = nullptr;
  if (raw_stream != Py_None) {
    Py_INCREF(raw_stream);
    m->raw_stream = raw_stream;
  }
  m->call = reinterpret_cast<LauncherCall>(static_cast<uintptr_t>(address));
  m->widths = widths_list.release();
  m->output = output_list.release();
  m->required = required;
  m->max_batch = max_batch;
  m->default_gravity = default_gravity;
  m->uses_gravity = uses_gravity != 0;
  m->dtype = dtype_bits == 32 ? at::kFloat : at::kDouble;
  new (&m->device) c10::Device(device_index >= 0 ? c10::Device(c10::kCUDA, device_index)
                                                 : c10::Device(c10::kCPU));
  return reinterpret_cast<PyObject*>(m);
}

PyMethodDef module_methods[] = {
    {"fast_method", fast_method, METH_VARARGS,
     "fast_method(launcher, call_address, widths, required, output, dtype_bits, "
     "device_index, max_batch, uses_gravity, default_gravity, raw_stream) -> FastMethod"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "grid_rbd_torch_native",
                          "grid_rbd's torch eager calls (see native_call.cc).", -1,
                          module_methods};

}  // namespace

PyMODINIT_FUNC PyInit_grid_rbd_torch_native() {
  method_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  if (method_type == nullptr) return nullptr;
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  if (PyModule_AddObject(module, "FastMethod", reinterpret_cast<PyObject*>(method_type)) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  Py_INCREF(method_type);  // the module's reference was stolen; keep ours
  return module;
}
