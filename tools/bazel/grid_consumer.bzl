"""grid_consumer: a consumer's own CUDA / C++ sources compiled against the grid.cuh of one
robot (with its device-level API, namespace grid::device), as Bazel targets: the build
`grid_rbd.build_artifact` does on the pip path, hermetically.

    load("@grid_rbd//:defs.bzl", "grid_consumer")

    grid_consumer(
        name = "ik_iiwa14",
        urdf = "//robots/iiwa14:iiwa14.urdf",
        srcs = ["ik_solver.cu", "ik_api.cu"],
        hdrs = ["ik_solver.h"],
        algorithms = ["end_effector_pose", "end_effector_pose_gradient"],
    )

creates, for `name = "ik_iiwa14"`:

  ik_iiwa14_generated  the generator run with --device-api: `ik_iiwa14_generated/grid.cuh`
                       (also a CcInfo: another target can `#include "grid.cuh"`)
  ik_iiwa14_cpu        `ik_iiwa14_cpu.so`: every unit built by the host compiler as C++,
                       then linked (grid_codegen.consumer_build's command lines, the ones
                       build_artifact uses)
  ik_iiwa14_cuda       `ik_iiwa14_cuda.so`: the same by nvcc from //cuda's toolchain for
                       --//cuda:archs; tag `cuda`, compatible only where --//cuda:enabled

Every action reads only declared inputs: the URDF, the options (command line), the
generator's sources, the consumer's srcs and hdrs, the host compiler's identity and, for
CUDA, the toolkit and the architectures. The compile is one action per artifact (its units
compiled in parallel inside it); Bazel's action cache and a remote cache take the place of
the pip path's object cache.
"""

load("//cuda:defs.bzl", "CUDA_TOOLCHAIN_TYPE", "CudaArchsInfo", "cuda_compatible")
load(":grid_robot.bzl", "GRID_TOOL_ATTRS", "grid_run_codegen")

_SOURCE_TYPES = [".cu", ".cpp", ".cc", ".cxx"]

def _header_impl(ctx):
    header, wrapper, options = ctx.outputs.header, ctx.outputs.wrapper, ctx.outputs.options
    args = [ctx.file.urdf.path, "--out-dir", header.dirname, "--dtype", ctx.attr.dtype,
            "--max-batch-size", str(ctx.attr.max_batch_size), "--device-api"]
    if ctx.attr.algorithms:
        args += ["--algorithms", ",".join(ctx.attr.algorithms)]
    if ctx.attr.strategy:
        args += ["--strategy", ctx.attr.strategy]
    if ctx.attr.floating_base:
        args.append("--floating-base")
    if ctx.attr.runtime_inertia:
        args.append("--runtime-inertia")
    if ctx.attr.ee_joint_names:
        args += ["--ee-joint-names", ",".join(ctx.attr.ee_joint_names)]
    if ctx.attr.contact_frames:
        args += ["--contact-frames", ",".join(ctx.attr.contact_frames)]
    grid_run_codegen(ctx, ["generate"] + args, depset([ctx.file.urdf]),
                     [header, wrapper, options], "GridConsumerGenerate",
                     "Generating the consumer header of %s" % ctx.label)
    compilation = cc_common.create_compilation_context(
        headers = depset([header]),
        includes = depset([header.dirname]),
    )
    return [DefaultInfo(files = depset([header])), CcInfo(compilation_context = compilation)]

grid_consumer_header = rule(
    implementation = _header_impl,
    attrs = dict(GRID_TOOL_ATTRS, **{
        "urdf": attr.label(allow_single_file = [".urdf", ".xml"], mandatory = True),
        "floating_base": attr.bool(default = False),
        "dtype": attr.string(default = "float32", values = ["float32", "float64"]),
        "algorithms": attr.string_list(),
        "ee_joint_names": attr.string_list(),
        "contact_frames": attr.string_list(),
        "runtime_inertia": attr.bool(default = False),
        "max_batch_size": attr.int(default = 65536),
        "strategy": attr.string(),
        "header": attr.output(mandatory = True),
        "wrapper": attr.output(mandatory = True),
        "options": attr.output(mandatory = True),
    }),
    doc = "grid.cuh with the device-level API for a consumer (see grid_consumer).",
)

def _compile(ctx, backend, extra_args, extra_inputs):
    so = ctx.actions.declare_file(ctx.label.name + ".so")
    includes = [ctx.file.header.dirname]
    for f in ctx.files.hdrs:
        if f.dirname not in includes:
            includes.append(f.dirname)
    args = ["consumer-compile", "--backend", backend, "--output", so.path,
            "--host-toolchain", ctx.file._host.path]
    args += ["--include=" + d for d in includes]
    args += ["--src=" + f.path for f in ctx.files.srcs]
    args += ["--define=" + d for d in ctx.attr.defines]
    args += ["--copt=" + c for c in ctx.attr.copts]
    args += ["--linkopt=" + c for c in ctx.attr.linkopts]
    inputs = depset([ctx.file.header, ctx.file._host] + ctx.files.srcs + ctx.files.hdrs,
                    transitive = extra_inputs)
    grid_run_codegen(ctx, args + extra_args, inputs, [so],
                     "GridConsumerCpu" if backend == "cpu" else "GridConsumerCuda",
                     "Compiling consumer %s (%s)" % (ctx.label, backend))
    return [DefaultInfo(files = depset([so]), runfiles = ctx.runfiles(files = [so]))]

_COMPILE_ATTRS = dict(GRID_TOOL_ATTRS, **{
    "header": attr.label(allow_single_file = [".cuh"], mandatory = True),
    "srcs": attr.label_list(allow_files = _SOURCE_TYPES, mandatory = True),
    "hdrs": attr.label_list(allow_files = True),
    "defines": attr.string_list(),
    "copts": attr.string_list(),
    "linkopts": attr.string_list(),
    "_host": attr.label(default = Label("@grid_host_cc//:toolchain.json"),
                        allow_single_file = True),
})

def _cpu_impl(ctx):
    return _compile(ctx, "cpu", [], [])

grid_consumer_cpu = rule(
    implementation = _cpu_impl,
    attrs = _COMPILE_ATTRS,
    doc = "A consumer's units against grid.cuh, by the host compiler (see grid_consumer).",
)

def _cuda_impl(ctx):
    cuda = ctx.toolchains[CUDA_TOOLCHAIN_TYPE].cuda
    archs = ctx.attr._archs[CudaArchsInfo].archs
    return _compile(ctx, "cuda", ["--compiler", cuda.nvcc.path, "--gpu-arch",
                                  ",".join(archs), "--library-dir", cuda.lib_dir],
                    [cuda.toolkit])

grid_consumer_cuda = rule(
    implementation = _cuda_impl,
    attrs = dict(_COMPILE_ATTRS, _archs = attr.label(default = Label("//cuda:archs"))),
    toolchains = [CUDA_TOOLCHAIN_TYPE],
    doc = "A consumer's units against grid.cuh, by nvcc (see grid_consumer).",
)

def grid_consumer(
        name,
        urdf,
        srcs,
        hdrs = [],
        defines = [],
        copts = [],
        linkopts = [],
        floating_base = False,
        dtype = "float32",
        algorithms = None,
        ee_joint_names = None,
        contact_frames = None,
        runtime_inertia = False,
        max_batch_size = 65536,
        strategy = None,
        tags = [],
        visibility = None):
    """A consumer artifact of one robot, for the CPU and for CUDA (module doc).

    Args:
      name: prefixes every target.
      urdf: label of the URDF file.
      srcs: the consumer's translation units (.cu, .cpp, .cc, .cxx).
      hdrs: the consumer's headers (their folders are on the include path).
      defines: NAME or NAME=VALUE for every unit.
      copts: extra flags for every unit; linkopts: for the link.
      floating_base, dtype, algorithms, ee_joint_names, runtime_inertia, max_batch_size,
        strategy: as on grid_robot.
      contact_frames: frames whose constants (and, with the kinematics profile, positions
        and Jacobians) grid::device bakes.
      tags: added to every target. visibility: of the header and the two artifacts.
    """
    generated = name + "_generated"
    grid_consumer_header(
        name = generated,
        urdf = urdf,
        floating_base = floating_base,
        dtype = dtype,
        algorithms = algorithms or [],
        ee_joint_names = ee_joint_names or [],
        contact_frames = contact_frames or [],
        runtime_inertia = runtime_inertia,
        max_batch_size = max_batch_size,
        strategy = strategy or "",
        header = generated + "/grid.cuh",
        wrapper = generated + "/wrapper.cu",
        options = generated + "/options.json",
        tags = tags,
        visibility = visibility,
    )
    common = dict(header = ":%s/grid.cuh" % generated, srcs = srcs, hdrs = hdrs,
                  defines = defines, copts = copts, linkopts = linkopts,
                  visibility = visibility)
    grid_consumer_cpu(name = name + "_cpu", tags = tags, **common)
    grid_consumer_cuda(name = name + "_cuda", tags = tags + ["cuda"],
                       target_compatible_with = cuda_compatible(), **common)
