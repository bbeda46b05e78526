"""grid-rbd: a rigid-body dynamics compiler (per-robot kernels for GPU and CPU).

    import grid_rbd
    h = grid_rbd.register_robot("iiwa14", urdf_path="robots/iiwa14/iiwa14.urdf")
    qdd = h.forward_dynamics(q, qd, u)          # (B, nv)

`register_robot` compiles a robot once into the content-addressed store and returns a
`RobotHandle`; `get_robot` finds a registered robot by name, `load_robot` opens an
artifact file directly; `backend="torch"` / `"jax"` return the tensor handles of
`grid_rbd.torch` / `grid_rbd.jax` (analytic autograd, model-version stamps). The float64
reference oracle is `grid_rbd.reference`; `grid_rbd.interop` converts configurations and
finds frames the way Pinocchio does. The `grid-rbd` command (`python -m grid_rbd`,
grid_rbd.cli) registers, inspects, verifies and benchmarks robots from a shell.
`build_artifact` / `load_artifact` / `list_artifacts` (grid_rbd.consumer) compile a
caller's own CUDA / C++ sources against a robot's generated `grid.cuh` (docs/consumer.md).
"""

from grid_rbd._handle import RobotHandle
from grid_rbd._mujoco_convention import MujocoHandle, as_mujoco, mujoco_to_pinocchio
from grid_rbd._register import get_robot, load_robot, register_robot
from grid_rbd._version import __version__
from grid_rbd.consumer import (
    ArtifactIncompatibleError,
    ArtifactNotFoundError,
    ConsumerArtifactError,
    build_artifact,
    list_artifacts,
    load_artifact,
)

__all__ = ["MujocoHandle", "RobotHandle", "__version__", "as_mujoco", "get_robot",
           "load_robot", "mujoco_to_pinocchio", "register_robot"]
__all__ += ["ArtifactIncompatibleError", "ArtifactNotFoundError", "ConsumerArtifactError",
            "build_artifact", "list_artifacts", "load_artifact"]
