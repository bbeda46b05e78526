"""`grid_rbd_workspace()`: everything grid-rbd needs in a WORKSPACE, in one call.

In a workspace that uses grid-rbd (Bazel 4.2 and later with WORKSPACE files):

    local_repository(name = "grid_rbd", path = "third_party/grid-rbd")   # or an archive
    load("@grid_rbd//:workspace.bzl", "grid_rbd_workspace")
    grid_rbd_workspace()

and in a BUILD file, `load("@grid_rbd//:defs.bzl", "grid_robot")`. It declares, each only
if the WORKSPACE has not already declared that name:

  rules_cc, bazel_skylib, platforms   the rule sets, from Debian's bazel-rules-cc
                                      (patched for Bazel 4.2: offline_repos.bzl),
                                      bazel-skylib and bazel-platforms
  rules_java, remote_coverage_tools   offline stand-ins (third_party/README.md)
  @grid_python          the Python of the generator and the tests: a venv built from the
                        lock files (hash-checked), once per machine, or an existing one
                        (tools/bazel/python_venv.bzl)
  @grid_host_cc         the host C++ compiler's identity (tools/bazel/host_toolchain.bzl)
  @example_robot_data   the example-robot-data URDFs (tools/bazel/example_robot_data.bzl)
  @grid_cuda            the CUDA toolkit, fetched only when a CUDA target is built
                        (cuda/repository.bzl)
  @grid_cuda_probe      whether this machine has a GPU: the default of --//cuda:enabled
                        (cuda/probe.bzl)

and registers `//cuda:toolchain`, whose type only grid-rbd's CUDA rules ask for. No Python
toolchain is registered: the workspace's own Python targets keep their own interpreter.
"""

load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load("//cuda:probe.bzl", "grid_cuda_probe")
load("//cuda:repository.bzl", "grid_cuda_toolkit")
load("//tools/bazel:example_robot_data.bzl", "example_robot_data")
load("//tools/bazel:host_toolchain.bzl", "grid_host_toolchain")
load("//tools/bazel:python_venv.bzl", "grid_python_venv")
load("//tools/bazel:offline_repos.bzl", "grid_patched_local_repository", "grid_stand_in")

# Debian's rules_cc 0.0.4 loads use_cpp_toolchain, which Bazel 4.2.3's @bazel_tools lacks
# (it came with Bazel 5): two of its files name the C++ toolchain type directly instead
# (tools/bazel/offline_repos.bzl).
_RULES_CC_PATCHES = {
    f: [
        ', "use_cpp_toolchain")',
        ")",
        "toolchains = use_cpp_toolchain(),",
        'toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],',
    ]
    for f in [
        "cc/private/rules_impl/compiler_flag.bzl",
        "cc/private/rules_impl/cc_flags_supplier.bzl",
    ]
}

# The lock files of the Bazel venv by default: what the robot tests need (numpy, pytest,
# example-robot-data's URDFs), not the framework backends.
DEFAULT_REQUIREMENTS = [
    Label("//:requirements-core.lock"),
    Label("//:requirements-test.lock"),
]

def grid_rbd_workspace(
        venv = None,
        requirements = None,
        bazel_rules_root = "/usr/share/bazel",
        register_cuda_toolchain = True):
    """Declares grid-rbd's repositories (see the module doc).

    Args:
      venv: an existing venv for @grid_python (absolute, or "%workspace%/.venv") instead
        of one built from `requirements`; --repo_env=GRID_RBD_VENV=... overrides both.
      requirements: lock files (labels) of the venv (default: DEFAULT_REQUIREMENTS).
      bazel_rules_root: where the Debian packages put rules_cc (rules/cc), bazel_skylib
        (tools/skylib) and platforms (tools/platforms).
      register_cuda_toolchain: register //cuda:toolchain (the CUDA targets need it).
    """
    maybe(
        grid_patched_local_repository,
        name = "rules_cc",
        path = bazel_rules_root + "/rules/cc",
        patches = _RULES_CC_PATCHES,
    )
    maybe(
        native.local_repository,
        name = "bazel_skylib",
        path = bazel_rules_root + "/tools/skylib",
    )
    maybe(
        native.local_repository,
        name = "platforms",
        path = bazel_rules_root + "/tools/platforms",
    )
    maybe(grid_stand_in, name = "rules_java", folder = "rules_java")
    maybe(grid_stand_in, name = "remote_coverage_tools", folder = "remote_coverage_tools")

    maybe(
        grid_python_venv,
        name = "grid_python",
        venv = venv or "",
        requirements = requirements or DEFAULT_REQUIREMENTS,
    )
    maybe(grid_host_toolchain, name = "grid_host_cc")
    maybe(example_robot_data, name = "example_robot_data")
    maybe(grid_cuda_toolkit, name = "grid_cuda")
    maybe(grid_cuda_probe, name = "grid_cuda_probe")
    if register_cuda_toolchain:
        native.register_toolchains(str(Label("//cuda:toolchain")))
