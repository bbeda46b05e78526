"""Is a CUDA GPU usable here, and which architecture is it?

A CUDA build needs both nvcc (to compile) and a device (to run): `cuda_status()` asks the
driver directly (`libcuda.so.1`: cuInit, cuDeviceGetCount, the compute capability of
device 0) so that no CUDA toolkit library or framework is needed, and says why not when
the answer is no.
"""

from __future__ import annotations

import ctypes
import functools
import shutil
from dataclasses import dataclass

from grid_rbd._env_knobs import knob

# CUdevice_attribute values (cuda.h).
_CC_MAJOR = 75
_CC_MINOR = 76


@dataclass(frozen=True)
class CudaStatus:
    """usable: nvcc and a device are both present. reason: why not (empty when usable).
    nvcc: the compiler found (or None). arch: 'sm_XY' of device 0 (or None)."""

    usable: bool
    reason: str
    nvcc: str | None
    arch: str | None
    device_count: int


def find_nvcc() -> tuple[str | None, str]:
    """(nvcc, why not): `$GRID_RBD_NVCC`, else the compile driver's search ($NVCC,
    PATH, $CUDA_HOME/bin)."""
    override = knob("GRID_RBD_NVCC")
    if override:
        found = shutil.which(override)
        return found, "" if found else f"GRID_RBD_NVCC={override!r} is not an executable"
    from grid_codegen.compile import find_nvcc as codegen_find_nvcc

    try:
        return shutil.which(codegen_find_nvcc()), ""
    except FileNotFoundError:
        return None, ("nvcc was not found (set GRID_RBD_NVCC, NVCC or CUDA_HOME, or put "
                      "nvcc on PATH)")


def _driver_devices() -> tuple[int, str | None, str]:
    """(device count, arch of device 0, why none) through the CUDA driver API."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, None, "the CUDA driver (libcuda.so.1) is not installed"
    rc = lib.cuInit(0)
    if rc != 0:
        return 0, None, f"cuInit failed with CUDA error {rc} (no usable device or driver)"
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return 0, None, "the CUDA driver reports no devices"
    device = ctypes.c_int(0)
    if lib.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return count.value, None, "cuDeviceGet(0) failed"
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    if (lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device) != 0
            or lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device) != 0):
        return count.value, None, "could not read the compute capability of device 0"
    return count.value, f"sm_{major.value}{minor.value}", ""


@functools.lru_cache(maxsize=1)
def _cached_status(nvcc_knob: str | None) -> CudaStatus:
    nvcc, no_nvcc = find_nvcc()
    count, arch, why = _driver_devices()
    reasons = []
    if nvcc is None:
        reasons.append(no_nvcc)
    if count == 0 or arch is None:
        reasons.append(why)
    return CudaStatus(not reasons, "; ".join(reasons), nvcc, arch, count)


def cuda_status() -> CudaStatus:
    """Whether CUDA builds can be made and run here (cached per process and nvcc knob)."""
    return _cached_status(knob("GRID_RBD_NVCC"))
