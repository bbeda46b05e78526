"""grid_rbd for JAX: the robot handle's methods as XLA FFI operations.

    import jax
    import grid_rbd.jax as grid_jax

    h = grid_jax.register_robot("iiwa14", urdf_path="robots/iiwa14/iiwa14.urdf")
    qdd = jax.jit(h.forward_dynamics)(q, qd, u)            # (B, nv), on q's device
    g = jax.grad(lambda q: h.forward_dynamics(q, qd, u).sum())(q)

The handle shares the store entry (and the compiled artifact) with the numpy handle.
A small FFI handler is compiled with the host C++ compiler the first time it is needed
on a machine and cached beside the store. See docs/jax.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from grid_rbd.jax._handle import JaxRobotHandle
from grid_rbd.jax._host import PINNED_THRESHOLD_BYTES, to_host
from grid_rbd.jax._launch import stamp_value


def register_robot(name: str, urdf_path: str | os.PathLike | None = None,
                   urdf_string: str | None = None, floating_base: bool = False,
                   max_batch_size: int = 65536, dtype: str = "float32",
                   ee_joint_names: Sequence[str] | None = None,
                   algorithm_list: Sequence[str] | None = None,
                   runtime_inertia: bool = False, device: str = "auto",
                   cache_dir: str | os.PathLike | None = None,
                   force_rebuild: bool = False) -> JaxRobotHandle:
    """`grid_rbd.register_robot(..., backend="jax")`: the same arguments, a
    `JaxRobotHandle`. A float64 robot needs JAX's 64-bit mode
    (`jax.config.update("jax_enable_x64", True)`)."""
    from grid_rbd._register import register_robot as register

    return register(name, urdf_path=urdf_path, urdf_string=urdf_string,
                    floating_base=floating_base, max_batch_size=max_batch_size, dtype=dtype,
                    ee_joint_names=ee_joint_names, algorithm_list=algorithm_list,
                    runtime_inertia=runtime_inertia, device=device, backend="jax",
                    cache_dir=cache_dir, force_rebuild=force_rebuild)


def get_robot(name: str, cache_dir: str | os.PathLike | None = None) -> JaxRobotHandle:
    """`grid_rbd.get_robot(name, backend="jax")`."""
    from grid_rbd._register import get_robot as get

    return get(name, cache_dir=cache_dir, backend="jax")


def load_robot(path: str | os.PathLike) -> JaxRobotHandle:
    """`grid_rbd.load_robot(path, backend="jax")`."""
    from grid_rbd._register import load_robot as load

    return load(path, backend="jax")


__all__ = ["PINNED_THRESHOLD_BYTES", "JaxRobotHandle", "get_robot", "load_robot",
           "register_robot", "stamp_value", "to_host"]
