// numpy <-> runtime: host array views for calls, inertia tables, page-locked arrays.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>
#include <vector>

#include "grid_rbd/artifact.hpp"
#include "grid_rbd/host_call.hpp"

namespace grid_rbd::python {

namespace py = pybind11;

/// The view plan_call checks; `None` is an omitted input. `what` names the argument in
/// errors. Raises ValueError when `object` is neither None nor a numpy array.
HostArray host_array(py::handle object, const std::string& what);

/// An (nb, 10) table of real numbers as the artifact's scalars (bytes). ValueError naming
/// the expected shape otherwise.
std::vector<std::byte> inertia_table_bytes(const ArtifactLibrary& library, py::handle table);

/// The (nb, 10) array of the artifact dtype holding `bytes`.
py::array inertia_table_array(const ArtifactLibrary& library, const std::vector<std::byte>& bytes);

/// An uninitialised array of the artifact dtype in page-locked host memory (GPU artifacts;
/// aligned host memory on CPU artifacts), freed when the array is collected.
py::array pinned_empty(const std::shared_ptr<const ArtifactLibrary>& library, py::handle shape);

}  // namespace grid_rbd::python
