"""The artifact's C ABI: one versioned descriptor per artifact.

`grid.cuh` ends with the C declarations (`emit_abi_types`) so any consumer can include
them; `wrapper.cu` (`emit_wrapper`) instantiates the kernels for the artifact's scalar and
exports `extern "C" const grid_descriptor* grid_get_descriptor(void)`.

The artifact owns no device memory: `create_state` allocates a per-context state (the
runtime inertia table) for its caller and `destroy_state` frees it; the item scratch is
shared memory (GPU) or stack (CPU). Since ABI 2 the descriptor also exports the memory
entry points (device and page-locked host allocation, copies, stream synchronisation) and
the URDF's inertia table, so a runtime that owns a context's buffers is built with the host
compiler alone, without the CUDA toolkit. On the GPU build every data pointer handed to
`launch` is a device pointer and the launch goes on the given `cudaStream_t`; on the CPU
build pointers are host pointers and the stream is ignored. Gravity crosses the ABI as a
double for every dtype (the signed z component, default -9.81). ABI 3 adds `write_stamp`,
the device-side store the JAX and torch backends stamp a forward's model version with.
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import MAX_INPUTS, AlgorithmSpec, EmitContext
from grid_codegen.emit.prelude import ERROR_CODES
from grid_codegen.emit.writer import Writer, c_string, comment_text

ABI_VERSION = 3

_ABI_TYPES = r"""
#ifndef GRID_ABI_TYPES_DEFINED
#define GRID_ABI_TYPES_DEFINED
#define GRID_ABI_VERSION %(abi)d
#define GRID_MAX_INPUTS %(max_inputs)d
#define GRID_ERROR_UNSUPPORTED 8
/* The `kind` of grid_descriptor::copy. */
#define GRID_COPY_HOST_TO_DEVICE 0
#define GRID_COPY_DEVICE_TO_HOST 1
#define GRID_COPY_DEVICE_TO_DEVICE 2
extern "C" {

/* One algorithm of the artifact; shapes are per batch item (batch is axis 0). */
typedef struct grid_algorithm {
  const char* name;
  int32_t id;
  int32_t num_inputs;
  const char* input_names[GRID_MAX_INPUTS];
  int32_t input_widths[GRID_MAX_INPUTS];   /* scalars per item */
  int32_t input_required[GRID_MAX_INPUTS]; /* 0: the pointer may be NULL */
  int32_t num_outputs;                     /* 1 */
  int32_t output_rank;                     /* 1 or 2 */
  int32_t output_shape[2];                 /* unused dimensions are 1 */
  int32_t uses_gravity;
  int32_t threads_per_block;
  int64_t shared_bytes;                    /* dynamic shared memory per block */
} grid_algorithm;

/* What query_device reports: the current CUDA device, or the host. */
typedef struct grid_device_info {
  int32_t is_gpu;
  int32_t device;
  int32_t cc_major;
  int32_t cc_minor;
  int32_t multiprocessors;                 /* SMs, or host threads */
  int32_t reserved;
  int64_t total_memory;
  int64_t free_memory;
  int64_t shared_memory_optin;
  char name[256];
} grid_device_info;

typedef struct grid_descriptor {
  int32_t abi_version;
  int32_t struct_size;
  const char* robot_name;
  int32_t nq, nv, nb, num_ees;
  const char* dtype;                       /* "float32" | "float64" */
  int32_t dtype_size;
  int32_t max_batch;
  const char* archs;                       /* "sm_90,..." or "cpu" */
  const char* strategy;                    /* "block" | "thread" */
  const char* options_json;                /* the canonical codegen options */
  int32_t is_gpu;
  int32_t runtime_inertia;
  int32_t inertia_table_size;              /* nb * 10 */
  int32_t num_algorithms;
  const grid_algorithm* algorithms;
  int (*create_state)(void** state_out);
  void (*destroy_state)(void* state);
  /* nb x 10 host scalars: m, m c (3), Ixx, Ixy, Iyy, Ixz, Iyz, Izz per body. */
  int (*set_inertia_table)(void* state, const void* host_table);
  int (*launch)(void* state, int32_t algorithm_id, const void* const* inputs,
                void* const* outputs, int32_t batch, double gravity, void* stream);
  int (*query_device)(grid_device_info* info);
  const char* (*error_string)(int32_t code);
  /* ABI 2: the URDF's inertia table and the memory entry points, so that a runtime can
     own device memory without building against the CUDA toolkit. */
  const void* default_inertia_table;       /* nb x 10 scalars of dtype, as above */
  void* (*device_alloc)(size_t bytes);     /* device memory (host memory on the CPU) */
  void (*device_free)(void* ptr);
  void* (*host_alloc_pinned)(size_t bytes); /* page-locked (64-byte aligned on the CPU) */
  void (*host_free_pinned)(void* ptr);
  /* GRID_COPY_* kind; asynchronous on `stream` under CUDA, a memcpy on the CPU. */
  int (*copy)(void* dst, const void* src, size_t bytes, int32_t kind, void* stream);
  int (*synchronize)(void* stream);
  /* ABI 3: stores `value` (8 bytes) at `dst` as work enqueued on `stream` (a one-thread
     kernel under CUDA, so a captured graph keeps the value it was captured with; a store
     on the CPU). Framework backends stamp the model version with it. */
  int (*write_stamp)(void* dst, uint64_t value, void* stream);
} grid_descriptor;

}  /* extern "C" */
#endif
"""


def emit_abi_types(w: Writer) -> None:
    w.raw(_ABI_TYPES % {"abi": ABI_VERSION, "max_inputs": MAX_INPUTS})


def _algorithm_entry(spec: AlgorithmSpec, index: int) -> str:
    pad = MAX_INPUTS - len(spec.inputs)
    names = [c_string(p.name) for p in spec.inputs] + ["nullptr"] * pad
    widths = [str(p.width) for p in spec.inputs] + ["0"] * pad
    required = [str(int(p.required)) for p in spec.inputs] + ["0"] * pad
    shape = list(spec.output_shape) + [1] * (2 - len(spec.output_shape))
    return (f"{{{c_string(spec.name)}, {index}, {len(spec.inputs)}, "
            f"{{{', '.join(names)}}}, {{{', '.join(widths)}}}, {{{', '.join(required)}}}, "
            f"1, {len(spec.output_shape)}, {{{shape[0]}, {shape[1]}}}, "
            f"{int(spec.uses_gravity)}, grid::{spec.name}_threads, "
            f"(int64_t)grid::{spec.name}_shared_bytes<Scalar>()}}")


def emit_wrapper(ctx: EmitContext, specs: list[AlgorithmSpec]) -> str:
    """The text of `wrapper.cu`."""
    model, options = ctx.model, ctx.options
    w = Writer()
    w.line("// wrapper.cu: the C ABI of the grid-rbd artifact for robot "
           f"'{comment_text(model.name)}'.")
    w.line("// Generated; do not edit.")
    w.line('#include "grid.cuh"')
    w.line("#include <memory>")
    w.line("#include <new>")
    w.line("#include <thread>")
    w.line()
    w.comment("The CUDA build names its architectures on the command line (cuda_flags).")
    w.line("#if !defined(GRID_COMPILED_ARCHS)")
    w.line("#if GRID_IS_CUDA")
    w.line('#error "a CUDA build of this artifact must define GRID_COMPILED_ARCHS"')
    w.line("#else")
    w.line('#define GRID_COMPILED_ARCHS "cpu"')
    w.line("#endif")
    w.line("#endif")
    w.line('#define GRID_EXPORT __attribute__((visibility("default")))')
    w.line()
    with w.namespace(""):
        w.line(f"using Scalar = {options.scalar};")
        w.line(f"constexpr int kInertiaSize = {10 * model.nb};")
        w.line(f"constexpr int kNumAlgorithms = {len(specs)};")
        w.line()
        w.doc("Per-context state: the runtime inertia table (device memory under nvcc).")
        with w.block("struct State", "};"):
            w.line("Scalar* inertia = nullptr;")
            w.line("~State() { grid::device_free(inertia); }")
        w.line()
        w.line("const grid_algorithm kAlgorithms[] = {")
        with w.indented():
            for k, spec in enumerate(specs):
                w.line(_algorithm_entry(spec, k) + ",")
        w.line("};")
        w.line()
        with w.block("const char* error_string(int32_t code)"):
            with w.block("switch (code)"):
                for name, _, text in ERROR_CODES:
                    w.line(f"case {name}: return {c_string(text)};")
                w.line('case GRID_ERROR_UNSUPPORTED: return "this artifact was built without '
                       'runtime_inertia";')
                w.line('default: return "unknown error code";')
        w.line()
        _emit_state_functions(w, ctx, specs)
        _emit_launch(w, specs)
        _emit_write_stamp(w)
        _emit_query_device(w)
    w.line()
    _emit_descriptor(w, ctx, specs)
    return w.text()


def _emit_state_functions(w: Writer, ctx: EmitContext, specs: list[AlgorithmSpec]) -> None:
    runtime = ctx.options.runtime_inertia
    params = [x for body in ctx.model.bodies for x in body.inertia.dynamic_parameters()]
    values = ", ".join(repr(float(x)) for x in params)
    w.doc("The URDF's inertias (the baked constants; the initial runtime table).")
    w.line(f"const Scalar kDefaultInertia[kInertiaSize] = {{{values}}};")
    w.line()
    with w.block("int create_state(void** state_out)"):
        w.line("if (state_out == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("*state_out = nullptr;")
        w.line("int rc = GRID_OK;")
        for spec in specs:
            w.line(f"if ((rc = grid::configure_{spec.name}<Scalar>()) != GRID_OK) return rc;")
        w.line("std::unique_ptr<State> state(new (std::nothrow) State());")
        w.line("if (!state) return GRID_ERROR_OUT_OF_MEMORY;")
        if runtime:
            w.line("const size_t bytes = sizeof(Scalar) * kInertiaSize;")
            w.line("state->inertia = static_cast<Scalar*>(grid::device_alloc(bytes));")
            w.line("if (state->inertia == nullptr) return GRID_ERROR_OUT_OF_MEMORY;")
            w.line("rc = grid::copy_to_device(state->inertia, kDefaultInertia, bytes);")
            w.line("if (rc != GRID_OK) return rc;")
        w.line("*state_out = state.release();")
        w.line("return GRID_OK;")
    w.line()
    with w.block("void destroy_state(void* state)"):
        w.line("std::unique_ptr<State> owned(static_cast<State*>(state));")
    w.line()
    with w.block("int set_inertia_table(void* state, const void* host_table)"):
        w.line("if (state == nullptr || host_table == nullptr) return GRID_ERROR_NULL_POINTER;")
        if not runtime:
            w.line("return GRID_ERROR_UNSUPPORTED;")
        else:
            w.line("return grid::copy_to_device(static_cast<State*>(state)->inertia, "
                   "host_table, sizeof(Scalar) * kInertiaSize);")
    w.line()


def _emit_launch(w: Writer, specs: list[AlgorithmSpec]) -> None:
    with w.block("int launch(void* state, int32_t algorithm_id, const void* const* inputs, "
                 "void* const* outputs, int32_t batch, double gravity, void* stream)"):
        w.line("if (state == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (algorithm_id < 0 || algorithm_id >= kNumAlgorithms) "
               "return GRID_ERROR_UNKNOWN_ALGORITHM;")
        w.line("if (batch < 0) return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (batch > grid::kMaxBatch) return GRID_ERROR_BATCH_TOO_LARGE;")
        w.line("if (batch == 0) return GRID_OK;")
        w.line("const grid_algorithm& algorithm = kAlgorithms[algorithm_id];")
        w.line("if (outputs == nullptr || outputs[0] == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (inputs == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("grid::Args<Scalar> args = {};")
        with w.block("for (int k = 0; k < algorithm.num_inputs; ++k)"):
            w.line("args.in[k] = static_cast<const Scalar*>(inputs[k]);")
            w.line("if (algorithm.input_required[k] && args.in[k] == nullptr) "
                   "return GRID_ERROR_NULL_POINTER;")
        w.line("args.out = static_cast<Scalar*>(outputs[0]);")
        w.line("args.inertia = static_cast<State*>(state)->inertia;")
        w.line("args.gravity = static_cast<Scalar>(gravity);")
        w.line("args.batch = batch;")
        w.line("const grid_stream_t s = reinterpret_cast<grid_stream_t>(stream);")
        with w.block("switch (algorithm_id)"):
            for k, spec in enumerate(specs):
                w.line(f"case {k}: return grid::launch_{spec.name}<Scalar>(args, s);")
            w.line("default: return GRID_ERROR_UNKNOWN_ALGORITHM;")
    w.line()


def _emit_write_stamp(w: Writer) -> None:
    w.line("#if GRID_IS_CUDA")
    with w.block("__global__ void write_stamp_kernel(uint64_t* dst, uint64_t value)"):
        w.line("*dst = value;")
    w.line("#endif")
    w.line()
    with w.block("int write_stamp(void* dst, uint64_t value, void* stream)"):
        w.line("if (dst == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("#if GRID_IS_CUDA")
        w.line("write_stamp_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>("
               "static_cast<uint64_t*>(dst), value);")
        w.line("return grid::launch_status();")
        w.line("#else")
        w.line("(void)stream;")
        w.line("memcpy(dst, &value, sizeof(value));")
        w.line("return GRID_OK;")
        w.line("#endif")
    w.line()


def _emit_query_device(w: Writer) -> None:
    with w.block("int query_device(grid_device_info* info)"):
        w.line("if (info == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("memset(info, 0, sizeof(*info));")
        w.line("#if GRID_IS_CUDA")
        w.line("int device = 0;")
        w.line("cudaDeviceProp prop;")
        w.line("size_t free_bytes = 0, total_bytes = 0;")
        w.line("if (cudaGetDevice(&device) != cudaSuccess ||")
        w.line("    cudaGetDeviceProperties(&prop, device) != cudaSuccess ||")
        with w.block("    cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)"):
            w.line("cudaGetLastError();")
            w.line("return GRID_ERROR_DEVICE;")
        w.line("info->is_gpu = 1;")
        w.line("info->device = device;")
        w.line("info->cc_major = prop.major;")
        w.line("info->cc_minor = prop.minor;")
        w.line("info->multiprocessors = prop.multiProcessorCount;")
        w.line("info->total_memory = (int64_t)total_bytes;")
        w.line("info->free_memory = (int64_t)free_bytes;")
        w.line("info->shared_memory_optin = (int64_t)prop.sharedMemPerBlockOptin;")
        w.line("strncpy(info->name, prop.name, sizeof(info->name) - 1);")
        w.line("#else")
        w.line("#if defined(_OPENMP)")
        w.line("info->multiprocessors = omp_get_max_threads();")
        w.line("#else")
        w.line("info->multiprocessors = (int32_t)std::thread::hardware_concurrency();")
        w.line("#endif")
        w.line('strncpy(info->name, "cpu", sizeof(info->name) - 1);')
        w.line("#endif")
        w.line("return GRID_OK;")


def _emit_descriptor(w: Writer, ctx: EmitContext, specs: list[AlgorithmSpec]) -> None:
    model, options = ctx.model, ctx.options
    fields = [
        "GRID_ABI_VERSION", "(int32_t)sizeof(grid_descriptor)", c_string(model.name),
        str(model.nq), str(model.nv), str(model.nb), str(len(ctx.ee_frames)),
        c_string(options.dtype), "(int32_t)sizeof(Scalar)", "grid::kMaxBatch",
        "GRID_COMPILED_ARCHS", c_string(options.strategy),
        c_string(options.canonical_json()), "GRID_IS_CUDA", str(int(options.runtime_inertia)),
        "kInertiaSize", "kNumAlgorithms", "kAlgorithms", "create_state", "destroy_state",
        "set_inertia_table", "launch", "query_device", "error_string",
        "kDefaultInertia", "grid::device_alloc", "grid::device_free", "grid::host_alloc_pinned",
        "grid::host_free_pinned", "grid::copy", "grid::synchronize", "write_stamp",
    ]
    w.doc("The artifact's one exported symbol.")
    with w.block('extern "C" GRID_EXPORT const grid_descriptor* grid_get_descriptor(void)'):
        w.line("static const grid_descriptor descriptor = {")
        with w.indented():
            for field in fields:
                w.line(field + ",")
        w.line("};")
        w.line("return &descriptor;")
