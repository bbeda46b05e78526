"""The code emitters: one module per algorithm family, a structured writer, scratch
layouts, the portability prelude, the scheduling strategies and the C ABI wrapper."""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.aba import aba
from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext
from grid_codegen.emit.crba import crba
from grid_codegen.emit.forward_dynamics import forward_dynamics
from grid_codegen.emit.kinematics import end_effector_pose, end_effector_pose_gradient
from grid_codegen.emit.minv import minv
from grid_codegen.emit.plant_level import plant_step_gradient
from grid_codegen.emit.rnea import inverse_dynamics
from grid_codegen.emit.rnea_gradient import forward_dynamics_gradient, inverse_dynamics_gradient

# name -> builder of its AlgorithmSpec; keys match grid_codegen.options.ALGORITHMS.
BUILDERS: dict[str, Callable[[EmitContext], AlgorithmSpec]] = {
    "inverse_dynamics": inverse_dynamics,
    "crba": crba,
    "minv": minv,
    "forward_dynamics": forward_dynamics,
    "aba": aba,
    "end_effector_pose": end_effector_pose,
    "end_effector_pose_gradient": end_effector_pose_gradient,
    "inverse_dynamics_gradient": inverse_dynamics_gradient,
    "forward_dynamics_gradient": forward_dynamics_gradient,
    # the plant profile's fused step gradients (their thread form: emit.thread, emit.plant)
    "plant_step_gradient_euler": plant_step_gradient("euler"),
    "plant_step_gradient_semi_implicit_euler": plant_step_gradient("semi_implicit_euler"),
}

__all__ = ["BUILDERS", "AlgorithmSpec", "EmitContext"]
