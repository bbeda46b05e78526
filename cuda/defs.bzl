"""The CUDA toolchain of grid-rbd for Bazel 4.2: its provider, rule and the arch setting.

- `cuda_toolchain` (instantiated in the generated `@grid_cuda` repository, see
  repository.bzl) returns `platform_common.ToolchainInfo(cuda = CudaToolchainInfo)`:
  nvcc and every file of the toolkit, which CUDA actions take as inputs.
- `cuda_archs_setting` is the build setting behind `--//cuda:archs=sm_80,sm_90`: the
  architectures CUDA artifacts are compiled for. Its default is DEFAULT_ARCHS, pinned
  here in the checked-in configuration, never read from the build machine, so every
  machine computes the same keys; only CUDA compile actions read it.
- `cuda_enabled_setting` is `--//cuda:enabled=true|false`: whether CUDA targets are
  compatible at all. Its default is whether the build machine has an NVIDIA GPU
  (probe.bzl); it decides which targets build, never what an action's key holds.
  `cuda_compatible()` is the `target_compatible_with` of every CUDA target.

Rules that compile CUDA declare `toolchains = [CUDA_TOOLCHAIN_TYPE]` and read
`ctx.toolchains[CUDA_TOOLCHAIN_TYPE].cuda`.
"""

CUDA_TOOLCHAIN_TYPE = str(Label("//cuda:toolchain_type"))

CudaToolchainInfo = provider(
    doc = "A CUDA toolkit for Bazel actions.",
    fields = {
        "nvcc": "File: the nvcc driver.",
        "toolkit": "depset of File: everything nvcc reads (bin, nvvm, include, lib).",
        "version": "File: what was installed (lock digest or local nvcc --version).",
        "lib_dir": "string: the folder of cudart (passed to nvcc as -L; nvcc.profile " +
                   "looks in lib64/, which is no input of the action).",
    },
)

CudaArchsInfo = provider(
    doc = "The CUDA architectures to compile for.",
    fields = {"archs": "list of 'sm_XY', sorted by number, no duplicates."},
)

def _cuda_toolchain_impl(ctx):
    nvcc = ctx.file.nvcc
    cudart = [f for f in ctx.files.toolkit if f.basename == "libcudart_static.a"]
    if not cudart:
        fail("%s: the toolkit has no libcudart_static.a" % ctx.label)
    toolkit = depset(ctx.files.toolkit + [nvcc, ctx.file.version])
    return [platform_common.ToolchainInfo(cuda = CudaToolchainInfo(
        nvcc = nvcc,
        toolkit = toolkit,
        version = ctx.file.version,
        lib_dir = cudart[0].dirname,
    ))]

cuda_toolchain = rule(
    implementation = _cuda_toolchain_impl,
    attrs = {
        "nvcc": attr.label(allow_single_file = True, mandatory = True),
        "toolkit": attr.label(allow_files = True, mandatory = True),
        "version": attr.label(allow_single_file = True, mandatory = True),
    },
    doc = "A CUDA toolkit as a toolchain of type //cuda:toolchain_type.",
)

def parse_archs(text, what = "--//cuda:archs"):
    """'sm_90, sm_80,sm_90' -> ['sm_80', 'sm_90']; fails on anything but sm_XY."""
    archs = {}
    for part in text.split(","):
        arch = part.strip()
        if not arch:
            continue
        if not arch.startswith("sm_") or not arch[3:].isdigit():
            fail("%s: CUDA architectures look like sm_90 (comma-separated), got %r" %
                 (what, arch))
        archs[int(arch[3:])] = arch
    if not archs:
        fail("%s: name at least one CUDA architecture, e.g. sm_90" % what)
    return [archs[n] for n in sorted(archs.keys())]

# The default of --//cuda:archs (a consumer: --@grid_rbd//cuda:archs=sm_80,sm_90). One
# fixed list for every machine: two machines share remote-cache entries only when their
# command lines agree, so the default must not depend on which GPUs a builder has.
DEFAULT_ARCHS = "sm_90"

def _cuda_archs_setting_impl(ctx):
    return [CudaArchsInfo(archs = parse_archs(ctx.build_setting_value))]

cuda_archs_setting = rule(
    implementation = _cuda_archs_setting_impl,
    build_setting = config.string(flag = True),
    doc = "Comma-separated CUDA architectures, e.g. --//cuda:archs=sm_80,sm_90.",
)

CudaEnabledInfo = provider(
    doc = "Whether CUDA targets are built (--//cuda:enabled).",
    fields = {"enabled": "bool"},
)

def _cuda_enabled_setting_impl(ctx):
    return [CudaEnabledInfo(enabled = ctx.build_setting_value)]

cuda_enabled_setting = rule(
    implementation = _cuda_enabled_setting_impl,
    build_setting = config.bool(flag = True),
    doc = "--//cuda:enabled=true|false: build CUDA targets (default: the machine has a GPU).",
)

def cuda_compatible():
    """`target_compatible_with` of a CUDA target: incompatible (skipped by wildcards such
    as //..., refused when named) unless --//cuda:enabled is on."""
    return select({
        str(Label("//cuda:is_enabled")): [],
        "//conditions:default": [str(Label("@platforms//:incompatible"))],
    })
