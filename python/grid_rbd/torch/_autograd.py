"""Analytic reverse mode for the differentiable methods (the method table's
`differentiable` / `gradient` entries): forward_dynamics and aba (q, qd, u),
inverse_dynamics (q, qd) and end_effector_pose (q).

The forward runs `grid_rbd::run_stamped`, saving the model-version stamp its launch
wrote; the backward runs `grid_rbd::run_checked`, which refuses when the context was
mutated since. Cotangents, with J the gradient kernel's (B, rows, 2*nv) or (B, rows, nv)
tangent Jacobian:

    ct_q (tangent) = ct J_q,  ct_qd = ct J_qd,  ct_u = M^-1 ct  (forward dynamics)

M^-1 ct is one more launch of the same forward-dynamics method at (q, qd = 0, u = ct)
with no f_ext and zero gravity, where it returns exactly M^-1 ct (M is symmetric); in
eager mode it is pinned to the model version the gradient launch verified. qdd
and f_ext are residuals: their cotangents are None (zero). On a floating base the q
cotangent is pulled back to the ambient [p, quat, joints] layout (`ambient_pullback`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from grid_rbd._framework import ambient_pullback
from grid_rbd._methods import BY_NAME
from grid_rbd.torch import _ops

_FORWARD_DYNAMICS = ("forward_dynamics", "aba")


def _cat(blocks: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(blocks, dim=1)


class AnalyticFunction(torch.autograd.Function):
    """apply(runner, method_name, nv, floating_base, gravity, *inputs) -> out."""

    @staticmethod
    def forward(ctx: Any, runner: int, method_name: str, nv: int, floating_base: bool,
                gravity: float, *inputs: torch.Tensor | None) -> torch.Tensor:
        out, stamp = _ops.call_run_stamped(runner, method_name, list(inputs), gravity)
        ctx.runner, ctx.method_name, ctx.nv = runner, method_name, nv
        if not torch.compiler.is_compiling():
            ctx.handle = _ops._runner(runner)  # the graph keeps the handle (its context) alive
        ctx.floating_base, ctx.gravity = floating_base, gravity
        ctx.present = tuple(t is not None for t in inputs)
        ctx.save_for_backward(*(t for t in inputs if t is not None), stamp)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, ct: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        saved = list(ctx.saved_tensors)
        stamp = saved.pop()
        values = iter(saved)
        inputs = [next(values) if present else None for present in ctx.present]
        name, nv = ctx.method_name, ctx.nv
        needs = ctx.needs_input_grad[5:]
        solve = name in _FORWARD_DYNAMICS and needs[2]
        if torch.compiler.is_compiling():
            jacobian = _ops.run_checked(ctx.runner, BY_NAME[name].gradient, inputs,
                                        ctx.gravity, stamp)
            minv_ct = _ops.run_checked(ctx.runner, name, _solve_inputs(inputs, ct), 0.0,
                                       stamp) if solve else None
        else:
            jacobian, minv_ct = _eager_launches(ctx, inputs, stamp, ct, solve)
        # One batched product gives both blocks: ct (B, 1, rows) @ J (B, rows, cols).
        contracted = torch.bmm(ct.unsqueeze(1), jacobian).squeeze(1)
        grads: list[torch.Tensor | None] = [None] * len(inputs)
        if needs[0]:
            ct_q = contracted[:, :nv]
            grads[0] = ambient_pullback(inputs[0], ct_q, _cat, torch.sqrt) \
                if ctx.floating_base else ct_q
        if len(inputs) > 1 and needs[1]:
            grads[1] = contracted[:, nv:]
        if solve:
            grads[2] = minv_ct
        return (None, None, None, None, None, *grads)


def _solve_inputs(inputs: list[torch.Tensor | None], ct: torch.Tensor
                  ) -> list[torch.Tensor | None]:
    """(q, qd = 0, u = ct, no f_ext): forward dynamics at these, with zero gravity, is
    M^-1 ct."""
    q, qd = inputs[0], inputs[1]
    return [q, torch.zeros_like(qd), ct.contiguous(), None]


def _eager_launches(ctx: Any, inputs: list[torch.Tensor | None], stamp: torch.Tensor,
                    ct: torch.Tensor, solve: bool
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The backward's launches outside torch.compile: the gradient kernel checks the
    stamp (one device-to-host read), and the M^-1 ct launch is pinned to the version
    that check saw (`captured_version`), so both see one model without a second read."""
    handle = _ops._runner(ctx.runner)
    gradient = BY_NAME[ctx.method_name].gradient
    jacobian = _ops._empty_output(handle, gradient, inputs)
    version = _ops.launch(handle, gradient, inputs, jacobian, ctx.gravity, stamp_expect=stamp)
    if not solve:
        return jacobian, None
    operands = _solve_inputs(inputs, ct)
    minv_ct = torch.empty_like(operands[2])
    _ops.launch(handle, ctx.method_name, operands, minv_ct, 0.0, captured_version=version)
    return jacobian, minv_ct


def apply(runner: int, method_name: str, nv: int, floating_base: bool, gravity: float,
          inputs: list[torch.Tensor | None]) -> torch.Tensor:
    return AnalyticFunction.apply(runner, method_name, nv, floating_base, gravity, *inputs)
