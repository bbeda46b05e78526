"""The artifact's C ABI: one versioned descriptor per artifact (`grid/abi.h`).

`grid.cuh` ends with the ABI types (`grid_codegen.emit.prelude.emit_abi`, from the header
the runtime includes too); `wrapper.cu` (`emit_wrapper`) instantiates the kernels for the
artifact's scalar and exports `extern "C" const grid_descriptor* grid_get_descriptor(void)`.

The artifact owns no device memory: `create_state` allocates a per-context state (the
runtime inertia table and the dispatch tables) for its caller and `destroy_state` frees
it; the item scratch is shared memory, registers or stack. On the GPU build every data
pointer handed to `launch` is a device pointer and the launch goes on the given
`cudaStream_t`; on the CPU build pointers are host pointers and the stream is ignored.
Gravity crosses the ABI as a double for every dtype (the signed z component).

ABI 4: an algorithm has one or more variants (strategies); `launch_ex` takes a launch
configuration (a variant, threads per block or host threads, a grid cap) and otherwise
dispatches by batch size through the state's table, which starts as the descriptor's
default (the cost model's, `grid_codegen.dispatch`) and which `set_dispatch` replaces
(the runtime installs a measured table). `launch` is `launch_ex` with the defaults.

ABI 5: the runtime tables of joint dynamics and joint origins (`runtime_joint_dynamics`,
`runtime_transform`): their sizes, the URDF's defaults and a setter each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from grid_codegen import transforms
from grid_codegen.emit.kernels import VariantInfo
from grid_codegen.emit.prelude import error_codes
from grid_codegen.emit.writer import Writer, c_string, comment_text
from grid_codegen.joint_dynamics import JointDynamics
from grid_codegen.model import RobotModel
from grid_codegen.options import CodegenOptions
from grid_codegen.registry import MAX_INPUTS, Algorithm, Dims

ABI_VERSION = 5
MAX_VARIANTS = 4
MAX_DISPATCH = 8


@dataclass(frozen=True)
class AlgorithmBuild:
    """One algorithm as built: its registry entry, its variants (in descriptor order) and
    the default dispatch tables `[(min_batch, variant), ...]` of the GPU and CPU builds."""

    algorithm: Algorithm
    variants: tuple[VariantInfo, ...]
    gpu_dispatch: tuple[tuple[int, int], ...]
    cpu_dispatch: tuple[tuple[int, int], ...]


def storage_shape(shape: tuple[int, ...]) -> list[int]:
    """The descriptor's rank-2 view of a per-item shape: `(n,)` is `[n, 1]`, a rank-3
    `(a, b, c)` is `[a * b, c]` (the handles reshape to the registry's shape)."""
    if len(shape) == 1:
        return [shape[0], 1]
    return [math.prod(shape[:-1]), shape[-1]]


def _algorithm_entry(build: AlgorithmBuild, index: int, dims: Dims, dispatch: Sequence
                     ) -> str:
    a = build.algorithm
    pad = MAX_INPUTS - len(a.inputs)
    names = [c_string(p.name) for p in a.inputs] + ["nullptr"] * pad
    widths = [str(p.width(dims)) for p in a.inputs] + ["0"] * pad
    required = [str(int(p.required)) for p in a.inputs] + ["0"] * pad
    shape = storage_shape(a.output_shape(dims))
    variants = []
    for v in build.variants:
        variants.append(f"{{{c_string(v.strategy)}, {v.threads}, {v.max_threads}, "
                        f"{v.items_per_block}, 0, (int64_t)grid::{a.name}_{v.strategy}"
                        f"_shared_bytes<Scalar>(), {v.ops}}}")
    variants += ["{nullptr, 0, 0, 0, 0, 0, 0}"] * (MAX_VARIANTS - len(build.variants))
    thresholds = [str(b) for b, _ in dispatch] + ["0"] * (MAX_DISPATCH - len(dispatch))
    chosen = [str(k) for _, k in dispatch] + ["0"] * (MAX_DISPATCH - len(dispatch))
    return (f"{{{c_string(a.name)}, {index}, {len(a.inputs)}, "
            f"{{{', '.join(names)}}}, {{{', '.join(widths)}}}, {{{', '.join(required)}}}, "
            f"1, {min(len(a.output), 2)}, {{{shape[0]}, {shape[1]}}}, {int(a.uses_gravity)}, "
            f"{len(build.variants)}, {{{', '.join(variants)}}}, "
            f"{len(dispatch)}, {{{', '.join(thresholds)}}}, {{{', '.join(chosen)}}}}}")


UNIT_WEIGHT = "// Compile weight: "
"""The prefix of a unit's third line, its weight (`emit_unit`)."""


def unit_file(algorithm: str) -> str:
    """The translation unit holding the kernels of `algorithm` (`generate(units=True)`)."""
    return f"unit_{algorithm}.cu"


def emit_unit(model: RobotModel, options: CodegenOptions, build: AlgorithmBuild,
              sections: Sequence[str] = (), weight: int = 0) -> str:
    """The text of one algorithm's translation unit: its variants instantiated for the
    artifact's scalar, behind plain functions the wrapper calls. `sections`: the parts of
    the header it reads (`emit.unit_sections`; none: all of it); `weight`: the lines of
    it that the unit compiles (the split build starts the heaviest first)."""
    w = Writer()
    w.line(f"// {unit_file(build.algorithm.name)}: the kernels of "
           f"`{build.algorithm.name}` for robot '{comment_text(model.name)}'.")
    w.line("// Generated; do not edit. Compiled on its own, in parallel with the others.")
    w.line(f"{UNIT_WEIGHT}{weight}")
    if sections:
        w.line("#define GRID_UNIT 1  // read only these sections of grid.cuh:")
        for section in sections:
            w.line(f"#define GRID_NEED_{section} 1")
    w.line('#include "grid.cuh"')
    w.line()
    _emit_unit_functions(w, options, [build])
    return w.text()


def _emit_unit_functions(w: Writer, options: CodegenOptions,
                         builds: Sequence[AlgorithmBuild], define: bool = True) -> None:
    """`grid_units::launch_<alg>_<variant>` and `configure_...`: plain functions around
    the kernel templates, defined (instantiating them) or only declared."""
    with w.namespace("grid_units"):
        w.line(f"using Scalar = {options.scalar};")
        for b in builds:
            for v in b.variants:
                name = f"{b.algorithm.name}_{v.strategy}"
                launch = (f"int launch_{name}(const grid::Args<Scalar>& args, "
                          "const grid_launch_config& cfg, grid_stream_t stream)")
                if define:
                    w.line(launch + " {")
                    w.line(f"  return grid::launch_{name}<Scalar>(args, cfg, stream);")
                    w.line("}")
                    w.line(f"int configure_{name}() {{ return grid::configure_{name}<Scalar>(); }}")
                else:
                    w.line(launch + ";")
                    w.line(f"int configure_{name}();")


def emit_wrapper(model: RobotModel, options: CodegenOptions, dims: Dims,
                 builds: Sequence[AlgorithmBuild], units: bool = False,
                 joint_dynamics: JointDynamics | None = None) -> str:
    """The text of `wrapper.cu`; with `units` the kernels are instantiated in the
    `unit_<algorithm>.cu` files (`emit_unit`) and only declared here. `joint_dynamics`:
    the artifact's damping and friction terms (its table and setter), or None."""
    for b in builds:
        if not 1 <= len(b.variants) <= MAX_VARIANTS:
            raise ValueError(f"{b.algorithm.name}: 1..{MAX_VARIANTS} variants")
        for table in (b.gpu_dispatch, b.cpu_dispatch):
            if not 1 <= len(table) <= MAX_DISPATCH or table[0][0] != 1:
                raise ValueError(f"{b.algorithm.name}: bad dispatch table {table}")
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
    if units:
        w.comment("The kernels live in the unit_<algorithm>.cu translation units.")
        _emit_unit_functions(w, options, builds, define=False)
    else:
        _emit_unit_functions(w, options, builds)
    w.line()
    with w.namespace(""):
        w.line(f"using Scalar = {options.scalar};")
        w.line(f"constexpr int kInertiaSize = {10 * model.nb};")
        w.line(f"constexpr int kJointDynamicsSize = "
               f"{joint_dynamics.table_size if joint_dynamics else 0};")
        w.line(f"constexpr int kTransformSize = "
               f"{transforms.table_size(model) if options.runtime_transform else 0};")
        w.line(f"constexpr int kNumAlgorithms = {len(builds)};")
        w.line()
        w.line("#if GRID_IS_CUDA")
        _emit_table(w, builds, dims, "gpu_dispatch")
        w.line("#else")
        _emit_table(w, builds, dims, "cpu_dispatch")
        w.line("#endif")
        w.line()
        w.doc("Per-context state: the runtime inertia table (device memory under nvcc) and\n"
              "one dispatch table per algorithm (batch thresholds -> variant).")
        with w.block("struct State", "};"):
            w.line("Scalar* inertia = nullptr;")
            w.line("Scalar* joint_dynamics = nullptr;  // runtime_joint_dynamics only")
            w.line("Scalar* transform = nullptr;  // runtime_transform only")
            w.line("int32_t dispatch_count[kNumAlgorithms];")
            w.line(f"int32_t dispatch_min_batch[kNumAlgorithms][{MAX_DISPATCH}];")
            w.line(f"int32_t dispatch_variant[kNumAlgorithms][{MAX_DISPATCH}];")
            w.line("~State() {")
            w.line("  grid::device_free(inertia);")
            w.line("  grid::device_free(joint_dynamics);")
            w.line("  grid::device_free(transform);")
            w.line("}")
        w.line()
        with w.block("const char* error_string(int32_t code)"):
            with w.block("switch (code)"):
                for name, _, text in error_codes():
                    w.line(f"case {name}: return {c_string(text)};")
                w.line('default: return "unknown error code";')
        w.line()
        _emit_joint_dynamics_functions(w, joint_dynamics)
        _emit_transform_functions(w, model, options)
        _emit_state_functions(w, model, options, builds)
        _emit_dispatch(w)
        _emit_launch(w, builds, bool(joint_dynamics and joint_dynamics.runtime),
                     options.runtime_transform)
        _emit_write_stamp(w)
        _emit_query_device(w)
    w.line()
    _emit_descriptor(w, model, options, len(builds), joint_dynamics)
    return w.text()


def _emit_table(w: Writer, builds: Sequence[AlgorithmBuild], dims: Dims, table: str) -> None:
    w.line("const grid_algorithm kAlgorithms[] = {")
    with w.indented():
        for k, b in enumerate(builds):
            w.line(_algorithm_entry(b, k, dims, getattr(b, table)) + ",")
    w.line("};")


def _emit_state_functions(w: Writer, model: RobotModel, options: CodegenOptions,
                          builds: Sequence[AlgorithmBuild]) -> None:
    runtime = options.runtime_inertia
    params = [x for body in model.bodies for x in body.inertia.dynamic_parameters()]
    values = ", ".join(repr(float(x)) for x in params)
    w.doc("The URDF's inertias (the baked constants; the initial runtime table).")
    w.line(f"const Scalar kDefaultInertia[kInertiaSize] = {{{values}}};")
    w.line()
    with w.block("void reset_dispatch(State* state, int id)"):
        w.line("const grid_algorithm& a = kAlgorithms[id];")
        w.line("state->dispatch_count[id] = a.num_dispatch;")
        with w.block("for (int k = 0; k < a.num_dispatch; ++k)"):
            w.line("state->dispatch_min_batch[id][k] = a.dispatch_min_batch[k];")
            w.line("state->dispatch_variant[id][k] = a.dispatch_variant[k];")
    w.line()
    with w.block("int create_state(void** state_out)"):
        w.line("if (state_out == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("*state_out = nullptr;")
        w.line("int rc = GRID_OK;")
        for b in builds:
            for v in b.variants:
                w.line(f"if ((rc = grid_units::configure_{b.algorithm.name}_{v.strategy}()) "
                       "!= GRID_OK) return rc;")
        w.line("std::unique_ptr<State> state(new (std::nothrow) State());")
        w.line("if (!state) return GRID_ERROR_OUT_OF_MEMORY;")
        w.line("for (int id = 0; id < kNumAlgorithms; ++id) reset_dispatch(state.get(), id);")
        if runtime:
            w.line("const size_t bytes = sizeof(Scalar) * kInertiaSize;")
            w.line("state->inertia = static_cast<Scalar*>(grid::device_alloc(bytes));")
            w.line("if (state->inertia == nullptr) return GRID_ERROR_OUT_OF_MEMORY;")
            w.line("rc = grid::copy_to_device(state->inertia, kDefaultInertia, bytes);")
            w.line("if (rc != GRID_OK) return rc;")
        if options.runtime_joint_dynamics:
            w.line("const size_t jd_bytes = sizeof(Scalar) * kJointDynamicsSize;")
            w.line("state->joint_dynamics = static_cast<Scalar*>(grid::device_alloc(jd_bytes));")
            w.line("if (state->joint_dynamics == nullptr) return GRID_ERROR_OUT_OF_MEMORY;")
            w.line("rc = grid::copy_to_device(state->joint_dynamics, kDefaultJointDynamics, "
                   "jd_bytes);")
            w.line("if (rc != GRID_OK) return rc;")
        if options.runtime_transform:
            w.line("const size_t tf_bytes = sizeof(Scalar) * kTransformSize;")
            w.line("state->transform = static_cast<Scalar*>(grid::device_alloc(tf_bytes));")
            w.line("if (state->transform == nullptr) return GRID_ERROR_OUT_OF_MEMORY;")
            w.line("rc = grid::copy_to_device(state->transform, kDefaultTransform, tf_bytes);")
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


def _emit_dispatch(w: Writer) -> None:
    with w.block("int set_dispatch(void* state, int32_t algorithm_id, int32_t count, "
                 "const int32_t* min_batch, const int32_t* variant)"):
        w.line("if (state == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (algorithm_id < 0 || algorithm_id >= kNumAlgorithms) "
               "return GRID_ERROR_UNKNOWN_ALGORITHM;")
        w.line("State* st = static_cast<State*>(state);")
        with w.block("if (count == 0)"):
            w.line("reset_dispatch(st, algorithm_id);")
            w.line("return GRID_OK;")
        w.line(f"if (count < 0 || count > {MAX_DISPATCH}) return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (min_batch == nullptr || variant == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("const int n = kAlgorithms[algorithm_id].num_variants;")
        w.line("if (min_batch[0] != 1) return GRID_ERROR_INVALID_ARGUMENT;")
        with w.block("for (int k = 0; k < count; ++k)"):
            w.line("if (variant[k] < 0 || variant[k] >= n) return GRID_ERROR_INVALID_ARGUMENT;")
            w.line("if (k > 0 && min_batch[k] <= min_batch[k - 1]) "
                   "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("st->dispatch_count[algorithm_id] = count;")
        with w.block("for (int k = 0; k < count; ++k)"):
            w.line("st->dispatch_min_batch[algorithm_id][k] = min_batch[k];")
            w.line("st->dispatch_variant[algorithm_id][k] = variant[k];")
        w.line("return GRID_OK;")
    w.line()
    with w.block("int32_t chosen_variant(void* state, int32_t algorithm_id, int32_t batch)"):
        w.line("if (state == nullptr || algorithm_id < 0 || algorithm_id >= kNumAlgorithms) "
               "return -1;")
        w.line("const State* st = static_cast<const State*>(state);")
        w.line("int32_t chosen = st->dispatch_variant[algorithm_id][0];")
        with w.block("for (int k = 1; k < st->dispatch_count[algorithm_id]; ++k)"):
            w.line("if (batch >= st->dispatch_min_batch[algorithm_id][k]) "
                   "chosen = st->dispatch_variant[algorithm_id][k];")
        w.line("return chosen;")
    w.line()


def _emit_joint_dynamics_functions(w: Writer, jd: JointDynamics | None) -> None:
    """The URDF's joint-dynamics table and its setter (grid_codegen.joint_dynamics)."""
    if jd is not None and jd.table_size:
        values = ", ".join(repr(float(x)) for x in jd.default_table())
        w.doc("The URDF's joint dynamics [damping | friction] (the initial runtime table).")
        w.line(f"const Scalar kDefaultJointDynamics[kJointDynamicsSize] = {{{values}}};")
        w.line()
    with w.block("int set_joint_dynamics_table(void* state, const void* host_table)"):
        w.line("if (state == nullptr || host_table == nullptr) return GRID_ERROR_NULL_POINTER;")
        if jd is None or not jd.runtime:
            w.line("return GRID_ERROR_UNSUPPORTED;")
        else:
            w.line("return grid::copy_to_device(static_cast<State*>(state)->joint_dynamics, "
                   "host_table, sizeof(Scalar) * kJointDynamicsSize);")
    w.line()


def _emit_transform_functions(w: Writer, model: RobotModel, options: CodegenOptions) -> None:
    """The URDF's joint origins and their setter (grid_codegen.transforms)."""
    if options.runtime_transform:
        values = ", ".join(repr(float(x)) for x in transforms.default_table(model))
        w.doc("The URDF's joint origins, [p (3) | quat xyzw (4)] per joint (the initial\n"
              "runtime table).")
        w.line(f"const Scalar kDefaultTransform[kTransformSize] = {{{values}}};")
        w.line()
    with w.block("int set_transform_table(void* state, const void* host_table)"):
        w.line("if (state == nullptr || host_table == nullptr) return GRID_ERROR_NULL_POINTER;")
        if not options.runtime_transform:
            w.line("return GRID_ERROR_UNSUPPORTED;")
        else:
            w.line("return grid::copy_to_device(static_cast<State*>(state)->transform, "
                   "host_table, sizeof(Scalar) * kTransformSize);")
    w.line()


def _emit_launch(w: Writer, builds: Sequence[AlgorithmBuild], joint_table: bool = False,
                 transform_table: bool = False) -> None:
    with w.block("int launch_ex(void* state, int32_t algorithm_id, "
                 "const grid_launch_config* config, const void* const* inputs, "
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
        w.line("grid_launch_config cfg = {};")
        w.line("if (config != nullptr) cfg = *config;")
        w.line("if (cfg.variant < 0 || cfg.variant > algorithm.num_variants || cfg.threads < 0 ||")
        w.line("    cfg.max_blocks < 0) return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("const int variant = cfg.variant > 0 ? cfg.variant - 1 : "
               "chosen_variant(state, algorithm_id, batch);")
        w.line("grid::Args<Scalar> args = {};")
        with w.block("for (int k = 0; k < algorithm.num_inputs; ++k)"):
            w.line("args.in[k] = static_cast<const Scalar*>(inputs[k]);")
            w.line("if (algorithm.input_required[k] && args.in[k] == nullptr) "
                   "return GRID_ERROR_NULL_POINTER;")
        w.line("args.out = static_cast<Scalar*>(outputs[0]);")
        w.line("args.inertia = static_cast<State*>(state)->inertia;")
        if joint_table:
            w.line("args.joint_dynamics = static_cast<State*>(state)->joint_dynamics;")
        if transform_table:
            w.line("args.transform = static_cast<State*>(state)->transform;")
        w.line("args.gravity = static_cast<Scalar>(gravity);")
        w.line("args.batch = batch;")
        w.line("const grid_stream_t s = reinterpret_cast<grid_stream_t>(stream);")
        with w.block("switch (algorithm_id * 16 + variant)"):
            for k, b in enumerate(builds):
                for j, v in enumerate(b.variants):
                    w.line(f"case {16 * k + j}: return grid_units::launch_{b.algorithm.name}_"
                           f"{v.strategy}(args, cfg, s);")
            w.line("default: return GRID_ERROR_INVALID_ARGUMENT;")
    w.line()
    with w.block("int launch(void* state, int32_t algorithm_id, const void* const* inputs, "
                 "void* const* outputs, int32_t batch, double gravity, void* stream)"):
        w.line("return launch_ex(state, algorithm_id, nullptr, inputs, outputs, batch, "
               "gravity, stream);")
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


def _emit_descriptor(w: Writer, model: RobotModel, options: CodegenOptions,
                     num_algorithms: int, jd: JointDynamics | None = None) -> None:
    simd = "grid::simd_width<Scalar>()"
    fields = [
        "GRID_ABI_VERSION", "(int32_t)sizeof(grid_descriptor)", c_string(model.name),
        str(model.reduced_nq), str(model.reduced_nv), str(model.nb), "grid::kNumEes",
        c_string(options.dtype), "(int32_t)sizeof(Scalar)", "grid::kMaxBatch",
        "GRID_COMPILED_ARCHS", c_string(options.strategy),
        c_string(options.canonical_json()), "GRID_IS_CUDA", str(int(options.runtime_inertia)),
        "kInertiaSize", "kNumAlgorithms", "kAlgorithms", "create_state", "destroy_state",
        "set_inertia_table", "launch", "query_device", "error_string",
        "kDefaultInertia", "grid::device_alloc", "grid::device_free", "grid::host_alloc_pinned",
        "grid::host_free_pinned", "grid::copy", "grid::synchronize", "write_stamp",
        "launch_ex", "set_dispatch", "chosen_variant", "GRID_SIMD_WIDTH", "0",
        str(int(bool(jd and jd.runtime))), str(jd.table_size if jd else 0),
        "kDefaultJointDynamics" if jd and jd.table_size else "nullptr",
        "set_joint_dynamics_table", str(int(options.runtime_transform)), "kTransformSize",
        "kDefaultTransform" if options.runtime_transform else "nullptr",
        "set_transform_table",
    ]
    w.doc("The artifact's one exported symbol.")
    w.line("#if GRID_IS_CUDA")
    w.line("#define GRID_SIMD_WIDTH 1")
    w.line("#else")
    w.line(f"#define GRID_SIMD_WIDTH {simd}")
    w.line("#endif")
    with w.block('extern "C" GRID_EXPORT const grid_descriptor* grid_get_descriptor(void)'):
        w.line("static const grid_descriptor descriptor = {")
        with w.indented():
            for field in fields:
                w.line(field + ",")
        w.line("};")
        w.line("return &descriptor;")
    _ = num_algorithms
