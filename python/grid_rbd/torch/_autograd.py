"""Analytic reverse mode for the differentiable methods (the method table's
`differentiable` / `gradient` entries): forward_dynamics and aba (q, qd, u),
inverse_dynamics (q, qd) and end_effector_pose (q).

The forward runs `grid_rbd::run_stamped`, saving the model-version stamp its launch
wrote. Where the artifact has the method's reverse-mode kernel (`Method.vjp`:
forward_dynamics_vjp, inverse_dynamics_vjp) and no f_ext was given, the backward is that
one launch, its q cotangent already in q's layout (under torch.compile, as
`run_checked`). Otherwise the backward's launches (the gradient kernel, and for forward
dynamics M^-1 ct) run as one group under one admission of the context, which reads the
stamp once and refuses when the context was mutated since (`run_checked_group` /
`run_checked` under torch.compile). Cotangents on that path, with J the gradient
kernel's (B, rows, 2*nv) or (B, rows, nv) tangent Jacobian:

    ct_q (tangent) = ct J_q,  ct_qd = ct J_qd,  ct_u = M^-1 ct  (forward dynamics)

M^-1 ct is one more launch of the same forward-dynamics method at (q, qd = 0, u = ct)
with no f_ext and zero gravity, where it returns exactly M^-1 ct (M is symmetric). qdd
and f_ext are residuals: their cotangents are None (zero). On a floating base the q
cotangent is pulled back to the ambient layout (`ambient_pullback`: [p, quat, joints], and
likewise the blocks of ball and planar joints).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from grid_rbd._framework import ambient_pullback
from grid_rbd._methods import BY_NAME
from grid_rbd.torch import _ops

_FORWARD_DYNAMICS = ("forward_dynamics", "aba")
_STATIC = 6  # the non-tensor arguments of AnalyticFunction.apply, before the inputs


def _cat(blocks: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat(blocks, dim=1)


class AnalyticFunction(torch.autograd.Function):
    """apply(runner, method_name, nv, chart, gravity, vjp, *inputs) -> out (chart: the
    robot's `_framework.tangent_chart`; vjp: the artifact's reverse-mode algorithm for
    the method, or None)."""

    @staticmethod
    def forward(ctx: Any, runner: int, method_name: str, nv: int, chart: Any,
                gravity: float, vjp: str | None, *inputs: torch.Tensor | None
                ) -> torch.Tensor:
        if torch.compiler.is_compiling():
            out, stamp = _ops.run_stamped(runner, method_name, list(inputs), gravity)
        else:
            ctx.handle = _ops._runner(runner)  # the graph keeps the handle (its context) alive
            out, stamp = ctx.handle._launch_stamped(method_name, inputs, gravity)
        ctx.runner, ctx.method_name, ctx.nv = runner, method_name, nv
        ctx.chart, ctx.gravity, ctx.vjp = chart, gravity, vjp
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
        needs = ctx.needs_input_grad[_STATIC:]
        method = BY_NAME[name]
        if not any(needs[k] for k, port in enumerate(method.inputs)
                   if port.name in method.differentiable):
            return (None,) * (_STATIC + len(inputs))  # only residuals: zero cotangents
        if ctx.vjp is not None and inputs[3] is None:  # one reverse-mode launch
            ordered = _vjp_inputs(ctx.vjp, inputs, ct)
            cotangents = (_ops.run_checked(ctx.runner, ctx.vjp, ordered, ctx.gravity, stamp)
                          if torch.compiler.is_compiling()
                          else ctx.handle._launch_vjp(name, ordered, ctx.gravity, stamp))
            count = len(method.differentiable)  # the leading inputs, in table order
            nq = cotangents.shape[1] - (count - 1) * nv
            grads: list[torch.Tensor | None] = [None] * len(inputs)
            at = 0
            for k, width in enumerate((nq, nv, nv)[:count]):
                if needs[k]:
                    grads[k] = cotangents[:, at:at + width]
                at += width
            return (*([None] * _STATIC), *grads)
        solve = name in _FORWARD_DYNAMICS and needs[2]
        gradient = method.gradient
        if torch.compiler.is_compiling():
            if solve:
                jacobian, minv_ct = _ops.run_checked_group(
                    ctx.runner, gradient, inputs, ctx.gravity, name, _solve_inputs(inputs, ct),
                    stamp)
            else:
                jacobian, minv_ct = _ops.run_checked(ctx.runner, gradient, inputs,
                                                     ctx.gravity, stamp), None
        else:
            operands = _solve_inputs(inputs, ct) if solve else None
            jacobian, minv_ct = ctx.handle._launch_backward(name, inputs, ctx.gravity, operands,
                                                            stamp)
        # One batched product gives both blocks: ct (B, 1, rows) @ J (B, rows, cols).
        # (Outputs of several axes, the collision profile's (B, S, 3), are flattened.)
        # Sizes spelled out: an empty batch has no -1 to infer.
        batch, rows = ct.shape[0], math.prod(ct.shape[1:])
        contracted = torch.bmm(ct.reshape(batch, 1, rows),
                               jacobian.reshape(batch, rows, jacobian.shape[-1])).squeeze(1)
        grads: list[torch.Tensor | None] = [None] * len(inputs)
        if needs[0]:
            ct_q = contracted[:, :nv]
            grads[0] = ct_q if ctx.chart == "vector" else \
                ambient_pullback(inputs[0], ct_q, _cat, torch.sqrt, ctx.chart)
        if len(inputs) > 1 and needs[1]:
            grads[1] = contracted[:, nv:]
        if solve:
            grads[2] = minv_ct
        return (*([None] * _STATIC), *grads)


def _solve_inputs(inputs: list[torch.Tensor | None], ct: torch.Tensor
                  ) -> list[torch.Tensor | None]:
    """(q, qd = 0, u = ct, no f_ext): forward dynamics at these, with zero gravity, is
    M^-1 ct. The cotangent may arrive expanded or as a negated view: the launch reads a
    plain contiguous copy."""
    q, qd = inputs[0], inputs[1]
    return [q, torch.zeros_like(qd), ct.resolve_neg().contiguous(), None]


def _vjp_inputs(vjp: str, inputs: list[torch.Tensor | None], ct: torch.Tensor
                ) -> list[torch.Tensor | None]:
    """The reverse-mode kernel's inputs in table order: (q, qd, u, ct) for forward
    dynamics, (q, qd, ct, qdd) for inverse dynamics. The cotangent may arrive expanded or
    as a negated view: the launch reads a plain contiguous copy."""
    q, qd, third = inputs[0], inputs[1], inputs[2]
    ct = ct.resolve_neg().contiguous()
    return [q, qd, third, ct] if vjp == "forward_dynamics_vjp" else [q, qd, ct, third]


def apply(runner: int, method_name: str, nv: int, chart: Any, gravity: float,
          vjp: str | None, inputs: list[torch.Tensor | None]) -> torch.Tensor:
    return AnalyticFunction.apply(runner, method_name, nv, chart, gravity, vjp, *inputs)
