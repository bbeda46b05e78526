"""grid-rbd's public Bazel API for BUILD files.

    load("@grid_rbd//:defs.bzl", "grid_robot")

    grid_robot(name = "arm", urdf = "arm.urdf")

`grid_robot` (tools/bazel/grid_robot.bzl) turns a URDF plus options into generated
sources, CPU and CUDA artifacts and their tests; `grid_consumer`
(tools/bazel/grid_consumer.bzl) compiles a consumer's own sources against a robot's
grid.cuh and its device-level API; `grid_py_test` runs pytest with
grid-rbd's venv; `cuda_compatible()` is the `target_compatible_with` of a CUDA target
(on where --@grid_rbd//cuda:enabled is). The WORKSPACE side is //:workspace.bzl.
"""

load("//cuda:defs.bzl", _cuda_compatible = "cuda_compatible")
load("//tools/bazel:grid_robot.bzl", _GridSourcesInfo = "GridSourcesInfo", _grid_robot = "grid_robot")
load("//tools/bazel:grid_consumer.bzl", _grid_consumer = "grid_consumer")
load("//tools/bazel:pytest.bzl", _grid_py_test = "grid_py_test")

grid_robot = _grid_robot
grid_consumer = _grid_consumer
grid_py_test = _grid_py_test
cuda_compatible = _cuda_compatible
GridSourcesInfo = _GridSourcesInfo
