"""Analytic reverse mode for the differentiable methods (the method table's
`differentiable` / `gradient` entries): forward_dynamics and aba (q, qd, u),
inverse_dynamics (q, qd) and end_effector_pose (q).

The forward runs `grid_rbd::run_stamped`, saving the model-version stamp its launch
wrote; the backward runs `grid_rbd::run_checked`, which refuses when the context was
mutated since. Cotangents, with J the gradient kernel's (B, rows, 2*nv) or (B, rows, nv)
tangent Jacobian:

    ct_q (tangent) = ct J_q,  ct_qd = ct J_qd,  ct_u = M^-1 ct  (forward dynamics)

M^-1 ct is one more launch of the same forward-dynamics method at (q, qd = 0, u = ct)
with no f_ext and zero gravity, where it returns exactly M^-1 ct (M is symmetric). qdd
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
        method = BY_NAME[ctx.method_name]
        ct = ct.contiguous()
        q = inputs[0]
        jacobian = _ops.call_run_checked(ctx.runner, method.gradient, inputs,
                                                  ctx.gravity, stamp)
        nv = ctx.nv
        grads: list[torch.Tensor | None] = [None] * len(inputs)
        needs = ctx.needs_input_grad[5:]
        if needs[0]:
            ct_q = torch.einsum("bi,bij->bj", ct, jacobian[:, :, :nv])
            grads[0] = ambient_pullback(q, ct_q, _cat, torch.sqrt) if ctx.floating_base \
                else ct_q
        if len(inputs) > 1 and needs[1]:
            grads[1] = torch.einsum("bi,bij->bj", ct, jacobian[:, :, nv:])
        if ctx.method_name in _FORWARD_DYNAMICS and needs[2]:
            qd, u = inputs[1], inputs[2]
            grads[2] = _ops.call_run_checked(
                ctx.runner, ctx.method_name, [q, torch.zeros_like(qd), ct.to(u.dtype), None],
                0.0, stamp)
        return (None, None, None, None, None, *grads)


def apply(runner: int, method_name: str, nv: int, floating_base: bool, gravity: float,
          inputs: list[torch.Tensor | None]) -> torch.Tensor:
    return AnalyticFunction.apply(runner, method_name, nv, floating_base, gravity, *inputs)
