// The runtime's records as Python dicts.
#pragma once

#include <pybind11/pybind11.h>

#include "grid_rbd/artifact_library.hpp"
#include "grid_rbd/device_profile.hpp"

namespace grid_rbd::python {

namespace py = pybind11;

/// Artifact.info: dimensions, dtype, build options and the algorithm table.
py::dict artifact_info(const ArtifactLibrary& library);

/// Artifact.device_profile(ctx): the record captured when the context was created.
py::dict device_profile_dict(const DeviceProfile& profile);

}  // namespace grid_rbd::python
