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
// non-contiguous tensor, allocates the output (or takes an `out=` tensor it can write as
// it is) and launches on the current stream. It returns None, without touching anything,
// for whatever it does not take (keywords other than a float `gravity` and `out`, an `out`
// of another dtype, device, size or layout, single states, a batch of 0, wrong types or
// shapes, a closed context, and the autograd calls it does not cover): the handle's
// Python path then decides, and raises the precise error where there is one.
//
// Under grad mode, a call whose differentiable inputs require grad is recorded with a
// `GridRbdBackward` node when the method has a reverse-mode kernel and no f_ext is given
// (the Python path's `AnalyticFunction` covers the rest): the forward writes its
// model-version stamp, and the backward is one launch of the reverse-mode kernel that
// reads the stamp (refused after a model mutation), as the Python path does. Like a
// once_differentiable function, its gradients cannot be differentiated again.

#include <Python.h>
#include <structmember.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <array>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr size_t kMaxInputs = 8;  // GRID_RBD_BRIDGE_MAX_INPUTS

// grid_rbd_launcher_call (grid_rbd/bridge.h, GRID_RBD_LAUNCHER_CALL_VERSION 2): 0; 1 for
// a closed context (nothing launched); -1 with the Python error set.
constexpr int kLauncherCallVersion = 2;
using LauncherCall = int (*)(PyObject* launcher, void* output, int64_t batch, double gravity,
                             void* stream, void* stamp_out, const void* stamp_expect,
                             const void* const* inputs, int32_t num_inputs);

// The reverse-mode kernel's input order (`forward_dynamics_vjp`, `inverse_dynamics_vjp`).
enum class Reverse { kNone = 0, kForwardDynamics = 1, kInverseDynamics = 2 };

constexpr int kFextInput = 3;  // f_ext's position in forward and inverse dynamics

struct FastMethod {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* launcher;    // a _core.DeviceLauncher (owned reference)
  PyObject* raw_stream;  // torch._C._cuda_getCurrentRawStream, or nullptr on the CPU
  PyObject* vjp;         // the reverse-mode kernel's DeviceLauncher, or nullptr
  LauncherCall call;
  std::vector<int64_t>* widths;  // per input, in the method's order
  std::vector<int64_t>* output;  // output dimensions per item
  Py_ssize_t required;           // leading inputs that must be given
  int64_t max_batch;
  double default_gravity;
  bool uses_gravity;
  at::ScalarType dtype;
  c10::Device device;
  Reverse reverse;
  int differentiable;  // the leading inputs that have cotangents (q, qd[, u])
  int64_t nq;
  int64_t nv;
};

using Inputs = std::array<at::Tensor, kMaxInputs>;

// How this torch holds autograd nodes: std::shared_ptr (up to 2.12) or c10::intrusive_ptr.
using NodePtr = decltype(torch::autograd::Edge::function);

template <typename T, typename... Args>
NodePtr make_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<T>(std::forward<Args>(args)...);
  } else {
    return c10::make_intrusive<T>(std::forward<Args>(args)...);
  }
}

PyObject* decline() { Py_RETURN_NONE; }

// The keywords of the call: a float `gravity` (on a method that takes it) and `out`
// (nullptr when absent or None); false to decline the call.
bool read_kwargs(const FastMethod& m, PyObject* kwargs, double* gravity, PyObject** out) {
  *gravity = m.default_gravity;
  *out = nullptr;
  if (kwargs == Py_None) return true;
  if (!PyDict_CheckExact(kwargs)) return false;
  Py_ssize_t size = PyDict_GET_SIZE(kwargs);
  PyObject* given = size ? PyDict_GetItemString(kwargs, "out") : nullptr;  // borrowed
  if (given != nullptr) {
    --size;
    if (given != Py_None) *out = given;
  }
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

// `object` as the launch's output, as the Python path's `_plain_out` takes it: an exact
// tensor of the handle's dtype and device, contiguous plain memory without the negation
// bit, not requiring grad, `batch` rows of the output's size; false to decline (the
// Python path then explains what is wrong).
bool plain_out(const FastMethod& m, PyObject* object, int64_t batch, at::Tensor* out) {
  if (!THPVariable_CheckExact(object)) return false;
  const at::Tensor& t = THPVariable_Unpack(object);
  if (!t.has_storage() || t.layout() != at::kStrided || t.is_quantized()) return false;
  if (t.scalar_type() != m.dtype || t.device() != m.device || t.requires_grad() ||
      t.is_neg() || t.dim() < 1 || t.size(0) != batch || !t.is_contiguous()) {
    return false;
  }
  int64_t size = batch;
  for (int64_t extent : *m.output) size *= extent;
  if (t.numel() != size) return false;
  *out = t;
  return true;
}

// Converts the positional tensors into `tensors` (undefined for omitted ones) and their
// addresses; the batch, or -1 to decline the call. `grad`: whether an input requires
// grad under grad mode.
int64_t read_inputs(const FastMethod& m, PyObject* args, Inputs* tensors,
                    std::array<const void*, kMaxInputs>* addresses, bool* grad) {
  const Py_ssize_t given = PyTuple_GET_SIZE(args);
  const auto count = static_cast<Py_ssize_t>(m.widths->size());
  if (given < m.required || given > count) return -1;
  const bool grad_mode = c10::GradMode::is_enabled();
  *grad = false;
  int64_t batch = -1;
  for (Py_ssize_t k = 0; k < given; ++k) {
    PyObject* item = PyTuple_GET_ITEM(args, k);
    if (item == Py_None && k >= m.required) continue;
    if (!THPVariable_CheckExact(item)) return -1;
    const at::Tensor& t = THPVariable_Unpack(item);
    // Plain dense memory only (not a functorch wrapper, sparse or quantized tensor).
    if (!t.has_storage() || t.layout() != at::kStrided || t.is_quantized()) return -1;
    if (t.scalar_type() != m.dtype || t.device() != m.device || t.dim() != 2 ||
        t.size(1) != (*m.widths)[static_cast<size_t>(k)]) {
      return -1;
    }
    if (batch >= 0 && t.size(0) != batch) return -1;
    batch = t.size(0);
    *grad = *grad || (grad_mode && t.requires_grad());
    // Under grad mode these conversions are recorded, so gradients reach `t` through them.
    at::Tensor plain = t.is_neg() ? t.resolve_neg() : t;
    if (!plain.is_contiguous()) plain = plain.contiguous();
    (*addresses)[static_cast<size_t>(k)] = plain.data_ptr();
    (*tensors)[static_cast<size_t>(k)] = std::move(plain);  // alive until the launch
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

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// The message of the pending Python error (cleared), for a C++ exception.
std::string take_python_error() {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  std::string message = "grid_rbd backward failed";
  if (value != nullptr) {
    PyObject* text = PyObject_Str(value);
    if (text != nullptr) {
      const char* utf8 = PyUnicode_AsUTF8(text);
      if (utf8 != nullptr) message = utf8;
      Py_DECREF(text);
    }
    PyErr_Clear();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return message;
}

// The backward of one recorded call: one launch of the method's reverse-mode kernel at the
// saved inputs with the incoming cotangent, checked against the forward's stamp.
struct GridRbdBackward final : torch::autograd::Node {
  GridRbdBackward(PyObject* method, double gravity, at::Tensor stamp)
      : method_(method), gravity_(gravity), stamp_(std::move(stamp)) {
    Py_INCREF(method_);  // its launchers hold the context: the graph keeps it alive
  }

  ~GridRbdBackward() override {
    if (!Py_IsInitialized() || finalizing()) return;  // the interpreter is going: leave it
    const PyGILState_STATE gil = PyGILState_Ensure();
    Py_DECREF(method_);
    PyGILState_Release(gil);
  }

  std::string name() const override { return "GridRbdBackward"; }

  void release_variables() override {
    for (auto& saved : saved_) saved.reset_data();
    stamp_.reset();
  }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override;

  // q, qd and the third input (u, or qdd for inverse dynamics), as the forward read them.
  std::array<torch::autograd::SavedVariable, 3> saved_;

 private:
  PyObject* method_;  // the FastMethod (owned reference)
  double gravity_;
  at::Tensor stamp_;
};

torch::autograd::variable_list GridRbdBackward::apply(torch::autograd::variable_list&& grads) {
  const auto& m = *reinterpret_cast<FastMethod*>(method_);
  torch::autograd::variable_list result(static_cast<size_t>(m.differentiable));
  const at::Tensor& incoming = grads[0];
  bool wanted = false;
  for (int k = 0; k < m.differentiable; ++k) wanted = wanted || should_compute_output(k);
  if (!incoming.defined() || !wanted) return result;  // a zero cotangent
  if (!stamp_.defined()) {
    throw std::runtime_error("grid_rbd: the saved inputs of this backward were freed (a "
                             "second backward needs retain_graph=True)");
  }
  at::Tensor out;
  {
    at::AutoGradMode no_grad(false);  // the launch records nothing (once differentiable)
    const at::Tensor q = saved_[0].unpack(), qd = saved_[1].unpack();
    const at::Tensor third = saved_[2].unpack();
    const at::Tensor ct = incoming.resolve_neg().contiguous();  // may arrive expanded
    const int64_t batch = q.size(0);
    out = at::empty({batch, m.nq + (m.differentiable - 1) * m.nv}, q.options());
    const void* maybe_third = third.defined() ? third.data_ptr() : nullptr;
    const std::array<const void*, 4> inputs =
        m.reverse == Reverse::kForwardDynamics
            ? std::array<const void*, 4>{q.data_ptr(), qd.data_ptr(), maybe_third,
                                         ct.data_ptr()}
            : std::array<const void*, 4>{q.data_ptr(), qd.data_ptr(), ct.data_ptr(),
                                         maybe_third};
    std::string error;
    const PyGILState_STATE gil = PyGILState_Ensure();
    void* stream = nullptr;
    if (!current_stream(m, &stream)) {
      error = take_python_error();
    } else {
      const int status = m.call(m.vjp, out.data_ptr(), batch, gravity_, stream, nullptr,
                                stamp_.data_ptr(), inputs.data(), 4);
      if (status == 1) error = "this handle's context was closed";
      if (status == -1) error = take_python_error();
    }
    PyGILState_Release(gil);
    if (!error.empty()) throw std::runtime_error(error);
  }
  int64_t at = 0;
  for (int k = 0; k < m.differentiable; ++k) {
    const int64_t width = k == 0 ? m.nq : m.nv;
    if (should_compute_output(k)) result[static_cast<size_t>(k)] = out.narrow(1, at, width);
    at += width;
  }
  if (c10::GradMode::is_enabled() && incoming.requires_grad()) {
    // A double backward through these gradients must fail, not see zero: give them a
    // history that raises, as torch's once_differentiable does.
    const NodePtr error = make_node<torch::autograd::Error>(
        "trying to differentiate twice a function that was marked with "
        "@once_differentiable (grid_rbd's analytic backward)",
        torch::autograd::edge_list{});
    for (auto& gradient : result) {
      if (!gradient.defined()) continue;
      {
        at::AutoGradMode no_grad(false);
        gradient = gradient.clone();
      }
      torch::autograd::set_history(gradient, error);
    }
  }
  return result;
}

// Whether a call that requires grad can be recorded here (else the Python path takes it):
// a reverse-mode kernel, no f_ext, and a differentiable input that requires grad.
bool recordable(const FastMethod& m, const Inputs& tensors) {
  if (m.reverse == Reverse::kNone || tensors[kFextInput].defined()) return false;
  for (int k = 0; k < m.differentiable; ++k) {
    const at::Tensor& t = tensors[static_cast<size_t>(k)];
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

// Gives `out` the history of a GridRbdBackward over the call's differentiable inputs.
void record(PyObject* self, const Inputs& tensors, double gravity, at::Tensor stamp,
            at::Tensor* out) {
  const auto& m = *reinterpret_cast<FastMethod*>(self);
  NodePtr node = make_node<GridRbdBackward>(self, gravity, std::move(stamp));
  auto* backward = static_cast<GridRbdBackward*>(node.get());
  std::vector<at::Tensor> differentiable(tensors.begin(), tensors.begin() + m.differentiable);
  backward->set_next_edges(torch::autograd::collect_next_edges(differentiable));
  for (size_t k = 0; k < backward->saved_.size(); ++k) {
    if (tensors[k].defined()) {
      backward->saved_[k] = torch::autograd::SavedVariable(tensors[k], false);
    }
  }
  torch::autograd::create_gradient_edge(*out, std::move(node));
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
    PyObject* given_out = nullptr;
    if (!read_kwargs(m, argv[1], &gravity, &given_out)) return decline();
    Inputs tensors;
    std::array<const void*, kMaxInputs> addresses{};
    bool grad = false;
    const int64_t batch = read_inputs(m, args, &tensors, &addresses, &grad);
    if (batch < 0 || (grad && (given_out != nullptr || !recordable(m, tensors)))) {
      return decline();
    }
    std::vector<int64_t> sizes{batch};
    sizes.insert(sizes.end(), m.output->begin(), m.output->end());
    const auto options = at::TensorOptions().dtype(m.dtype).device(m.device);
    at::Tensor out;
    if (given_out == nullptr) {
      out = at::empty(sizes, options);
    } else if (!plain_out(m, given_out, batch, &out)) {
      return decline();
    }
    at::Tensor stamp;  // the model version of the forward, for the backward to check
    if (grad) stamp = at::empty({1}, options.dtype(at::kLong));
    void* stream = nullptr;
    if (!current_stream(m, &stream)) return nullptr;
    const int status = m.call(m.launcher, out.data_ptr(), batch, gravity, stream,
                              grad ? stamp.data_ptr() : nullptr, nullptr, addresses.data(),
                              static_cast<int32_t>(m.widths->size()));
    if (status == 1) return decline();  // a closed context: the Python path raises
    if (status != 0) return nullptr;
    if (grad) record(self, tensors, gravity, std::move(stamp), &out);
    if (given_out != nullptr) {
      out.unsafeGetTensorImpl()->bump_version();  // written in place, as an out= op is
      return THPVariable_Wrap(out.view(sizes));
    }
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
  Py_XDECREF(m->vjp);
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
//             max_batch, uses_gravity, default_gravity, raw_stream, vjp, reverse,
//             differentiable, nq, nv)
// dtype_bits: 32 or 64; device_index: -1 for the CPU; raw_stream: None on the CPU; vjp:
// the reverse-mode kernel's DeviceLauncher or None; reverse: its input order (Reverse);
// differentiable: the leading inputs with cotangents.
PyObject* fast_method(PyObject*, PyObject* args) {
  PyObject *launcher = nullptr, *widths = nullptr, *output = nullptr, *raw_stream = nullptr;
  PyObject* vjp = nullptr;
  unsigned long long address = 0;
  Py_ssize_t required = 0;
  int dtype_bits = 0, device_index = 0, uses_gravity = 0, reverse = 0, differentiable = 0;
  long long max_batch = 0, nq = 0, nv = 0;
  double default_gravity = 0.0;
  if (!PyArg_ParseTuple(args, "OKOnOiiLpdOOiiLL", &launcher, &address, &widths, &required,
                        &output, &dtype_bits, &device_index, &max_batch, &uses_gravity,
                        &default_gravity, &raw_stream, &vjp, &reverse, &differentiable, &nq,
                        &nv)) {
    return nullptr;
  }
  const bool has_vjp = vjp != Py_None;
  if (has_vjp != (reverse == 1 || reverse == 2) || (has_vjp && (differentiable < 2 ||
                                                                differentiable > 3)) ||
      nq < 1 || nv < 1) {
    PyErr_SetString(PyExc_ValueError, "fast_method: inconsistent reverse-mode arguments");
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
  m->vjp = nullptr;
  if (has_vjp) {
    Py_INCREF(vjp);
    m->vjp = vjp;
  }
  m->reverse = static_cast<Reverse>(reverse);
  m->differentiable = differentiable;
  m->nq = nq;
  m->nv = nv;
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
     "device_index, max_batch, uses_gravity, default_gravity, raw_stream, vjp, reverse, "
     "differentiable, nq, nv) -> FastMethod"},
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
  if (PyModule_AddIntConstant(module, "LAUNCHER_CALL_VERSION", kLauncherCallVersion) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
