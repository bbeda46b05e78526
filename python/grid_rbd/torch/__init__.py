"""grid_rbd.torch: the PyTorch backend.

    import grid_rbd.torch as grid_torch
    h = grid_torch.register_robot("iiwa14", urdf_path="robots/iiwa14/iiwa14.urdf")
    qdd = h.forward_dynamics(q, qd, u)   # torch.Tensor, autograd-aware
    qdd.sum().backward()

Methods are `torch.library` custom ops (`grid_rbd::run`, `run_stamped`, `run_checked`)
on the current CUDA stream, or on CPU tensors with a CPU artifact; the four
differentiable methods carry an analytic backward. `handle.capture` records a call for
cheap replay; `pinned_host_like` / `copy_to_host` move large outputs to the host.
docs/torch.md is the guide.
"""

from __future__ import annotations

from grid_rbd._register import bound_to_backend
from grid_rbd.torch._graph import GraphCallable
from grid_rbd.torch._handle import TorchRobotHandle
from grid_rbd.torch._host import copy_to_host, pinned_host_like

# The entry points of grid_rbd with backend="torch".
register_robot, get_robot, load_robot = bound_to_backend("torch")


__all__ = ["GraphCallable", "TorchRobotHandle", "copy_to_host", "get_robot", "load_robot",
           "pinned_host_like", "register_robot"]
