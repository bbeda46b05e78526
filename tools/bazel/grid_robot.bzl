"""grid_robot: one robot (a URDF plus options) as Bazel targets.

    load("@grid_rbd//:defs.bzl", "grid_robot")    # from another workspace
    load("//:defs.bzl", "grid_robot")             # inside grid-rbd

    grid_robot(
        name = "go2",
        urdf = "@example_robot_data//:go2_description/urdf/go2.urdf",
        floating_base = True,
    )

creates, for `name = "go2"`:

  go2_generated   the code generator run as an action: URDF + options in,
                  `go2_generated/{grid.cuh,wrapper.cu,options.json}` out (each
                  addressable, e.g. `:go2_generated/grid.cuh`; also a CcInfo, so a C++ or
                  CUDA target can `deps` on it and `#include "grid.cuh"`), and the folder
                  `go2_generated/units/` (a tree artifact): the split build the artifacts
                  are compiled from, `grid.cuh`, a `wrapper.cu` that only declares the
                  kernels and one `unit_<algorithm>.cu` per algorithm (file names from
                  the generator's registry, never from the URDF). The top-level
                  `wrapper.cu` instantiates every kernel itself (one translation unit)
  go2_cpu         `go2_cpu.so`, the artifact built by the host C++ compiler
  go2_cuda        `go2_cuda.so`, the artifact built by nvcc from //cuda's toolchain for
                  the architectures of `--//cuda:archs` (default pinned in
                  cuda/defs.bzl, DEFAULT_ARCHS); tag `cuda`. Compatible only where
                  `--//cuda:enabled` is on (default: on where the machine has an NVIDIA
                  GPU, cuda/probe.bzl), so a CPU machine's `bazel test //...` neither
                  fetches the toolkit nor runs nvcc
  go2_cpu_test    the CPU artifact against the float64 reference, every algorithm
  go2_gpu_test    the CUDA artifact against the reference on the GPU; tags `gpu` and
                  `requires-gpu-nvidia`; compatible like go2_cuda, and skips, saying
                  why, where CUDA is enabled but no GPU is usable
  go2_tests       a test_suite of both (tag `manual`: `:all` holds both tests already)

Hermetic by construction: every action reads only its declared inputs, all named by
content in its cache key.
  generate  URDF, the options (on the command line), the generator's sources and the
            headers it inlines (//codegen:grid_codegen), its entry point,
            //:requirements-core.lock (which pins what the generator imports) and the
            venv launcher (Python's version)
  compile   the split build (`units/`), the compile driver (same sources), the host
            compiler's identity (@grid_host_cc//:toolchain.json: path, version, OpenMP)
            and, for CUDA only, every file of the toolkit and the architectures
            (--//cuda:archs)
No CPU action reads the architectures or anything about the machine's GPUs, so a CPU
artifact's keys are the same on every machine with the same compiler.
The command lines hold no absolute path, so clones anywhere share a remote cache. Both
artifacts are compiled by `python -m grid_codegen compile --source-dir`, i.e. with the
command lines of `grid_codegen.compile` that the pip path (`compile_artifact`) uses: in
one action, every unit of `units/` is compiled to an object, `build_jobs()` compilers at
once (one per core of the machine running the action; how long it takes, not what it
makes, so not part of the key), and the objects are linked into the `.so`.
"""

load("//cuda:defs.bzl", "CUDA_TOOLCHAIN_TYPE", "CudaArchsInfo", "cuda_compatible")
load(":pytest.bzl", "grid_py_test")

# The algorithm names and strategies are the generator's (grid_codegen's registry): the
# macro passes what it is given and the generate action refuses, naming the valid values,
# anything the generator does not know. Leaving `algorithms` or `strategy` out passes no
# flag, so the generator's own default applies (and follows it when that changes).

# The runtime for the robot tests' `grid_rbd.load_robot` check: the Bazel build of the
# extension `grid_rbd._core` (//runtime:_core.so, named grid_rbd/_core<EXT_SUFFIX> by
# //python:grid_rbd_core; //python:grid_rbd depends on it too). The test gets the runfiles
# path of GRID_RUNTIME_CORE in GRID_RBD_CORE and fails unless that is the module it
# imported (not an in-tree build of `pip install -e .` or tools/build_core.sh).
GRID_RUNTIME_DEPS = [str(Label("//python:grid_rbd_core"))]

GRID_RUNTIME_CORE = str(Label("//python:grid_rbd_core_so"))

GridSourcesInfo = provider(
    doc = "The generated sources of one robot.",
    fields = {
        "header": "File: grid.cuh",
        "wrapper": "File: wrapper.cu (includes grid.cuh; instantiates every kernel)",
        "units": "Directory: the split build (grid.cuh, wrapper.cu, unit_<algorithm>.cu)",
        "options": "File: options.json, the canonical CodegenOptions",
    },
)

# A fixed environment: PATH for the compilers' helpers (as, ld), and Python that neither
# writes bytecode nor reads the user's site-packages.
_ACTION_ENV = {
    "LC_ALL": "C",
    "PATH": "/usr/bin:/bin",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "PYTHONNOUSERSITE": "1",
}

_TOOL_ATTRS = {
    "_python": attr.label(
        default = Label("@grid_python//:python3"),
        allow_single_file = True,
        executable = True,
        cfg = "exec",
    ),
    "_entry": attr.label(
        default = Label("//tools/bazel:codegen_action.py"),
        allow_single_file = True,
    ),
    "_codegen": attr.label(
        default = Label("//codegen:grid_codegen"),
        providers = [PyInfo],
        cfg = "exec",
    ),
    "_lock": attr.label(
        default = Label("//:requirements-core.lock"),
        allow_single_file = True,
    ),
}

def _codegen_inputs(ctx):
    """(inputs, the folder to import grid_codegen from) of an action running the CLI."""
    sources = ctx.attr._codegen[PyInfo].transitive_sources.to_list()
    root = None
    for f in sources:
        if f.path.endswith("/grid_codegen/__init__.py"):
            root = f.path[:-len("/grid_codegen/__init__.py")]
    if root == None:
        fail("//codegen:grid_codegen has no grid_codegen/__init__.py")
    # The static C++ the generator inlines (//codegen:grid_codegen's data, grid/*.h): part
    # of what generation reads, so a header edit re-keys every generate action.
    data = [f for f in ctx.attr._codegen[DefaultInfo].default_runfiles.files.to_list()
            if not f.path.endswith(".py")]
    return sources + data + [ctx.file._entry, ctx.file._lock], root

def _run_codegen(ctx, arguments, inputs, outputs, mnemonic, message):
    codegen, root = _codegen_inputs(ctx)
    ctx.actions.run(
        executable = ctx.executable._python,
        arguments = [ctx.file._entry.path, root] + arguments,
        inputs = depset(codegen, transitive = [inputs]),
        outputs = outputs,
        env = _ACTION_ENV,
        mnemonic = mnemonic,
        progress_message = message,
    )

# -- <name>_generated -------------------------------------------------------------------
def _grid_generated_sources_impl(ctx):
    header, wrapper, options = ctx.outputs.header, ctx.outputs.wrapper, ctx.outputs.options
    if header.dirname != wrapper.dirname or header.dirname != options.dirname:
        fail("header, wrapper and options must be declared in one folder")
    units = ctx.actions.declare_directory(ctx.label.name + "/units")
    args = [
        ctx.file.urdf.path,
        "--out-dir",
        header.dirname,
        "--split-dir",
        units.path,
        "--dtype",
        ctx.attr.dtype,
        "--max-batch-size",
        str(ctx.attr.max_batch_size),
    ]
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
    _run_codegen(
        ctx,
        ["generate"] + args,
        depset([ctx.file.urdf]),
        [header, wrapper, options, units],
        "GridGenerate",
        "Generating grid-rbd sources of %s" % ctx.label,
    )
    compilation = cc_common.create_compilation_context(
        headers = depset([header]),
        includes = depset([header.dirname]),
    )
    return [
        DefaultInfo(files = depset([header, wrapper, options, units])),
        GridSourcesInfo(header = header, wrapper = wrapper, options = options, units = units),
        CcInfo(compilation_context = compilation),
    ]

grid_generated_sources = rule(
    implementation = _grid_generated_sources_impl,
    attrs = dict(_TOOL_ATTRS, **{
        "urdf": attr.label(allow_single_file = [".urdf", ".xml"], mandatory = True),
        "floating_base": attr.bool(default = False),
        "dtype": attr.string(default = "float32", values = ["float32", "float64"]),
        "algorithms": attr.string_list(doc = "algorithm or profile names; default: the generator's (the core profile)"),
        "ee_joint_names": attr.string_list(),
        "runtime_inertia": attr.bool(default = False),
        "max_batch_size": attr.int(default = 65536),
        "strategy": attr.string(doc = "default: the generator's"),
        "header": attr.output(mandatory = True),
        "wrapper": attr.output(mandatory = True),
        "options": attr.output(mandatory = True),
    }),
    doc = "Runs the grid-rbd code generator on a URDF (see grid_robot).",
)

# -- <name>_cpu / <name>_cuda -----------------------------------------------------------
_COMPILE_ATTRS = dict(_TOOL_ATTRS, **{
    "srcs": attr.label(mandatory = True, providers = [GridSourcesInfo]),
    "_host": attr.label(
        default = Label("@grid_host_cc//:toolchain.json"),
        allow_single_file = True,
    ),
})

def _compile(ctx, backend, extra_args, extra_inputs):
    sources = ctx.attr.srcs[GridSourcesInfo]
    so = ctx.actions.declare_file(ctx.label.name + ".so")
    _run_codegen(
        ctx,
        [
            "compile",
            "--backend",
            backend,
            "--source-dir",
            sources.units.path,
            "--output",
            so.path,
            "--host-toolchain",
            ctx.file._host.path,
        ] + extra_args,
        depset([sources.units, ctx.file._host], transitive = extra_inputs),
        [so],
        "GridCompileCpu" if backend == "cpu" else "GridCompileCuda",
        "Compiling %s (%s)" % (ctx.label, backend),
    )
    return [DefaultInfo(files = depset([so]), runfiles = ctx.runfiles(files = [so]))]

def _grid_cpu_library_impl(ctx):
    return _compile(ctx, "cpu", [], [])

grid_cpu_library = rule(
    implementation = _grid_cpu_library_impl,
    attrs = _COMPILE_ATTRS,
    doc = "The CPU artifact (.so) of grid_generated_sources, built by the host compiler.",
)

def _grid_cuda_library_impl(ctx):
    cuda = ctx.toolchains[CUDA_TOOLCHAIN_TYPE].cuda
    archs = ctx.attr._archs[CudaArchsInfo].archs
    return _compile(
        ctx,
        "cuda",
        [
            "--compiler",
            cuda.nvcc.path,
            "--gpu-arch",
            ",".join(archs),
            "--library-dir",
            cuda.lib_dir,
        ],
        [cuda.toolkit],
    )

grid_cuda_library = rule(
    implementation = _grid_cuda_library_impl,
    attrs = dict(_COMPILE_ATTRS, _archs = attr.label(default = Label("//cuda:archs"))),
    toolchains = [CUDA_TOOLCHAIN_TYPE],
    doc = "The CUDA artifact (.so) of grid_generated_sources, built by nvcc (//cuda).",
)

# -- the macro --------------------------------------------------------------------------
# Labels of this repository, resolved here: a BUILD file in another workspace that calls
# the macro must get @grid_rbd//..., not a package of its own.
_TEST = str(Label("//tools/bazel:robot_artifact_test.py"))
_TEST_SUPPORT = str(Label("//tests:test_support"))
_GRID_RBD = str(Label("//python:grid_rbd"))

def grid_robot(
        name,
        urdf,
        floating_base = False,
        dtype = "float32",
        algorithms = None,
        ee_joint_names = None,
        runtime_inertia = False,
        max_batch_size = 65536,
        strategy = None,
        tags = [],
        visibility = None):
    """A robot's generated sources, CPU and CUDA artifacts and their tests.

    Args:
      name: the robot; prefixes every target (see the module doc).
      urdf: label of the URDF file.
      floating_base: add a free-flyer root joint (q = [p, quat xyzw, joints]).
      dtype: "float32" (default) or "float64".
      algorithms: the algorithms or profiles to build ("core" by default, "centroidal", "all").
      ee_joint_names: joints whose frames are the end effectors (default: leaf bodies).
      runtime_inertia: read the inertias from a per-context table at run time.
      max_batch_size: the largest batch a launch accepts.
      strategy: how a batch item maps to GPU threads, e.g. "block" or "thread"
        (default: the generator's; see grid_codegen.options).
      tags: added to every target.
      visibility: of the generated sources and the two artifacts.
    """
    if dtype not in ("float32", "float64"):
        fail("grid_robot(%s): dtype must be float32 or float64, got %r" % (name, dtype))

    generated = name + "_generated"
    grid_generated_sources(
        name = generated,
        urdf = urdf,
        floating_base = floating_base,
        dtype = dtype,
        algorithms = algorithms or [],
        ee_joint_names = ee_joint_names or [],
        runtime_inertia = runtime_inertia,
        max_batch_size = max_batch_size,
        strategy = strategy or "",
        header = generated + "/grid.cuh",
        wrapper = generated + "/wrapper.cu",
        options = generated + "/options.json",
        tags = tags,
        visibility = visibility,
    )
    grid_cpu_library(
        name = name + "_cpu",
        srcs = ":" + generated,
        tags = tags,
        visibility = visibility,
    )
    grid_cuda_library(
        name = name + "_cuda",
        srcs = ":" + generated,
        tags = tags + ["cuda"],
        target_compatible_with = cuda_compatible(),
        visibility = visibility,
    )

    for backend, test_tags in (("cpu", []), ("cuda", ["gpu", "requires-gpu-nvidia", "cuda"])):
        artifact = ":%s_%s" % (name, backend)
        grid_py_test(
            name = "%s_%s_test" % (name, "cpu" if backend == "cpu" else "gpu"),
            srcs = [_TEST],
            args = ["-rs"],
            data = [artifact, urdf, ":%s/options.json" % generated, _TEST_SUPPORT,
                    GRID_RUNTIME_CORE],
            deps = [_GRID_RBD] + GRID_RUNTIME_DEPS,
            env = {
                "GRID_RBD_ARTIFACT": "$(rootpath %s)" % artifact,
                "GRID_RBD_BACKEND": backend,
                "GRID_RBD_CORE": "$(rootpath %s)" % GRID_RUNTIME_CORE,
                "GRID_RBD_FLOATING_BASE": "1" if floating_base else "0",
                "GRID_RBD_OPTIONS": "$(rootpath :%s/options.json)" % generated,
                "GRID_RBD_URDF": "$(rootpath %s)" % urdf,
            },
            size = "small",
            tags = tags + test_tags,
            target_compatible_with = cuda_compatible() if backend == "cuda" else None,
        )
    # "manual": wildcards (`:all`, `//robots/...`) already hold both tests, and would
    # expand the suite past --build_tag_filters (so `--config=cpu` would still run nvcc
    # for the GPU test's data). Other tags would filter the suite's tests, not label it.
    native.test_suite(
        name = name + "_tests",
        tests = [":%s_cpu_test" % name, ":%s_gpu_test" % name],
        tags = ["manual"],
    )

# For tools/bazel/grid_consumer.bzl (a load cannot name underscore-prefixed symbols).
GRID_TOOL_ATTRS = _TOOL_ATTRS
grid_run_codegen = _run_codegen
