#include "arrays.hpp"

#include <cstring>
#include <memory>

#include "grid_rbd/artifact_buffer.hpp"
#include "grid_rbd/errors.hpp"

namespace grid_rbd::python {

namespace {

py::dtype artifact_dtype(const ArtifactLibrary& library) {
  return py::dtype::from_args(py::str(library.dtype()));
}

}  // namespace

HostArray host_array(py::handle object, const std::string& what) {
  HostArray view;
  if (object.is_none()) return view;
  if (!py::isinstance<py::array>(object)) {
    throw ArgumentError(what + " must be a numpy array or None, got " +
                        std::string(py::str(py::type::of(object).attr("__name__"))));
  }
  const auto array = py::reinterpret_borrow<py::array>(object);
  view.present = true;
  view.data = array.data();
  view.shape.assign(array.shape(), array.shape() + array.ndim());
  view.dtype = py::str(array.dtype());
  view.c_contiguous = (array.flags() & py::array::c_style) != 0;
  view.writable = array.writeable();
  return view;
}

std::vector<std::byte> inertia_table_bytes(const ArtifactLibrary& library, py::handle table) {
  const py::module_ numpy = py::module_::import("numpy");
  const auto given = py::reinterpret_steal<py::array>(
      numpy.attr("asarray")(table).release());
  const int64_t nb = library.descriptor().nb;
  const std::string expected = "expected (nb, 10) = (" + std::to_string(nb) +
                               ", 10): per body m, mc_x, mc_y, mc_z, Ixx, Ixy, Iyy, Ixz, Iyz, "
                               "Izz (Pinocchio's dynamic parameters about the body origin)";
  const char kind = given.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u') {
    throw ArgumentError("inertia table has dtype " + std::string(py::str(given.dtype())) +
                        "; " + expected);
  }
  if (given.ndim() != 2 || given.shape(0) != nb || given.shape(1) != 10) {
    std::string shape = "(";
    for (py::ssize_t k = 0; k < given.ndim(); ++k) {
      shape += (k ? ", " : "") + std::to_string(given.shape(k));
    }
    throw ArgumentError("inertia table has shape " + shape + (given.ndim() == 1 ? ",)" : ")") +
                        "; " + expected);
  }
  const auto cast = py::reinterpret_steal<py::array>(
      numpy.attr("ascontiguousarray")(given, py::arg("dtype") = library.dtype()).release());
  const auto* data = static_cast<const std::byte*>(cast.data());
  return std::vector<std::byte>(data, data + cast.nbytes());
}

py::array inertia_table_array(const ArtifactLibrary& library, const std::vector<std::byte>& bytes) {
  const py::ssize_t nb = library.descriptor().nb;
  py::array table(artifact_dtype(library), std::vector<py::ssize_t>{nb, 10});
  std::memcpy(table.mutable_data(), bytes.data(), bytes.size());
  return table;
}

py::array pinned_empty(const std::shared_ptr<const ArtifactLibrary>& library, py::handle shape) {
  std::vector<py::ssize_t> extents;
  if (py::isinstance<py::int_>(shape)) {
    extents.push_back(shape.cast<py::ssize_t>());
  } else {
    for (py::handle extent : py::reinterpret_borrow<py::iterable>(shape)) {
      extents.push_back(extent.cast<py::ssize_t>());
    }
  }
  size_t bytes = library->scalar_size();
  for (py::ssize_t extent : extents) {
    if (extent < 0) throw ArgumentError("pinned_empty: negative dimension in the shape");
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(extent), &bytes)) {
      throw ArgumentError("pinned_empty: the shape's size overflows");
    }
  }
  auto block = std::make_shared<PinnedHostBuffer>(library, bytes);
  // The array's base owns the block: the memory lives exactly as long as the array (and
  // every view of it), and keeps the artifact image loaded until then.
  return py::array(artifact_dtype(*library), extents, block->data(), py::cast(block));
}

}  // namespace grid_rbd::python
