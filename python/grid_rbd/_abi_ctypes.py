"""A ctypes mirror of the artifact C ABI (`grid_codegen/include/grid/abi.h`, version 4).

For code that drives an artifact's descriptor without the runtime library: the
registration's autotune (`grid_rbd._autotune`) and the test harness. The mirror is checked
against the artifact's own `struct_size` wherever it is used, so a layout slip is caught
at load, never read as garbage.
"""

from __future__ import annotations

import ctypes

MAX_INPUTS = 4
MAX_VARIANTS = 4
MAX_DISPATCH = 8
ABI_VERSION = 5


class GridVariant(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("threads_per_block", ctypes.c_int32),
        ("max_threads_per_block", ctypes.c_int32), ("items_per_block", ctypes.c_int32),
        ("reserved", ctypes.c_int32), ("shared_bytes", ctypes.c_int64),
        ("ops_per_item", ctypes.c_int64),
    ]


class GridAlgorithm(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("id", ctypes.c_int32), ("num_inputs", ctypes.c_int32),
        ("input_names", ctypes.c_char_p * MAX_INPUTS),
        ("input_widths", ctypes.c_int32 * MAX_INPUTS),
        ("input_required", ctypes.c_int32 * MAX_INPUTS),
        ("num_outputs", ctypes.c_int32), ("output_rank", ctypes.c_int32),
        ("output_shape", ctypes.c_int32 * 2), ("uses_gravity", ctypes.c_int32),
        ("num_variants", ctypes.c_int32), ("variants", GridVariant * MAX_VARIANTS),
        ("num_dispatch", ctypes.c_int32),
        ("dispatch_min_batch", ctypes.c_int32 * MAX_DISPATCH),
        ("dispatch_variant", ctypes.c_int32 * MAX_DISPATCH),
    ]


class GridLaunchConfig(ctypes.Structure):
    _fields_ = [("variant", ctypes.c_int32), ("threads", ctypes.c_int32),
                ("max_blocks", ctypes.c_int32), ("reserved", ctypes.c_int32)]


class GridDeviceInfo(ctypes.Structure):
    _fields_ = [
        ("is_gpu", ctypes.c_int32), ("device", ctypes.c_int32), ("cc_major", ctypes.c_int32),
        ("cc_minor", ctypes.c_int32), ("multiprocessors", ctypes.c_int32),
        ("reserved", ctypes.c_int32), ("total_memory", ctypes.c_int64),
        ("free_memory", ctypes.c_int64), ("shared_memory_optin", ctypes.c_int64),
        ("name", ctypes.c_char * 256),
    ]


_CREATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p))
_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_SET_TABLE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32,
                           ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                           ctypes.c_int32, ctypes.c_double, ctypes.c_void_p)
_QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(GridDeviceInfo))
_ERROR_STRING = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_int32)
_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_COPY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                         ctypes.c_int32, ctypes.c_void_p)
_SYNCHRONIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32,
                              ctypes.POINTER(GridLaunchConfig), ctypes.POINTER(ctypes.c_void_p),
                              ctypes.POINTER(ctypes.c_void_p), ctypes.c_int32, ctypes.c_double,
                              ctypes.c_void_p)
_SET_DISPATCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                                 ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_int32))


class GridDescriptor(ctypes.Structure):
    _fields_ = [
        ("abi_version", ctypes.c_int32), ("struct_size", ctypes.c_int32),
        ("robot_name", ctypes.c_char_p), ("nq", ctypes.c_int32), ("nv", ctypes.c_int32),
        ("nb", ctypes.c_int32), ("num_ees", ctypes.c_int32), ("dtype", ctypes.c_char_p),
        ("dtype_size", ctypes.c_int32), ("max_batch", ctypes.c_int32),
        ("archs", ctypes.c_char_p), ("strategy", ctypes.c_char_p),
        ("options_json", ctypes.c_char_p), ("is_gpu", ctypes.c_int32),
        ("runtime_inertia", ctypes.c_int32), ("inertia_table_size", ctypes.c_int32),
        ("num_algorithms", ctypes.c_int32), ("algorithms", ctypes.POINTER(GridAlgorithm)),
        ("create_state", _CREATE), ("destroy_state", _DESTROY),
        ("set_inertia_table", _SET_TABLE), ("launch", _LAUNCH), ("query_device", _QUERY),
        ("error_string", _ERROR_STRING),
        # ABI 2
        ("default_inertia_table", ctypes.c_void_p), ("device_alloc", _ALLOC),
        ("device_free", _FREE), ("host_alloc_pinned", _ALLOC), ("host_free_pinned", _FREE),
        ("copy", _COPY), ("synchronize", _SYNCHRONIZE),
        # ABI 3
        ("write_stamp", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                                         ctypes.c_void_p)),
        # ABI 4
        ("launch_ex", _LAUNCH_EX), ("set_dispatch", _SET_DISPATCH),
        ("chosen_variant", ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32,
                                            ctypes.c_int32)),
        ("cpu_simd_width", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("runtime_joint_dynamics", ctypes.c_int32),
        ("joint_dynamics_table_size", ctypes.c_int32),
        ("default_joint_dynamics_table", ctypes.c_void_p),
        ("set_joint_dynamics_table", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                                      ctypes.c_void_p)),
        ("runtime_transform", ctypes.c_int32), ("transform_table_size", ctypes.c_int32),
        ("default_transform_table", ctypes.c_void_p),
        ("set_transform_table", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                                 ctypes.c_void_p)),
    ]
