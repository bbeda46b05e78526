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

from grid_rbd._register import bound_to_backend
from grid_rbd.jax._handle import JaxRobotHandle
from grid_rbd.jax._host import PINNED_THRESHOLD_BYTES, to_host
from grid_rbd.jax._launch import stamp_value

# The entry points of grid_rbd with backend="jax" (a float64 robot needs JAX's 64-bit
# mode: jax.config.update("jax_enable_x64", True)).
register_robot, get_robot, load_robot = bound_to_backend("jax")


__all__ = ["PINNED_THRESHOLD_BYTES", "JaxRobotHandle", "get_robot", "load_robot",
           "register_robot", "stamp_value", "to_host"]
