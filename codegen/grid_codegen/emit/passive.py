"""Joint dynamics in the level-synchronous strategies (block and warp): the damping and
friction terms of `grid_codegen.joint_dynamics`, one lane per joint-dynamics dof.

`emit_passive_torque` adds (or subtracts) `tau_passive(qd)` to a torque buffer: inverse
dynamics adds it to its output, forward dynamics subtracts it from the loaded `u`.
`emit_passive_slope` adds `d tau_passive / d qd` on the `d/dqd` diagonal of a
`(nv, 2 nv)` row-major gradient. Both end with a barrier.
"""

from __future__ import annotations

from collections.abc import Callable

from grid_codegen.emit.algorithm import EmitContext
from grid_codegen.emit.layout import Buffer
from grid_codegen.emit.writer import Writer, lit
from grid_codegen.joint_dynamics import JointDynamics


def _first_dof(jd: JointDynamics) -> int:
    first = jd.dofs[0] if jd.dofs else 0
    if list(jd.dofs) != list(range(first, first + len(jd.dofs))):
        raise NotImplementedError("joint dynamics: the level strategies need the "
                                  "joint-dynamics dofs contiguous (a free flyer at the root)")
    return first


def _emit_coefficients(w: Writer, jd: JointDynamics) -> None:
    """`damping`, `friction` (and `inv_width`) of dof `j` (a lane index)."""
    n = len(jd.dofs)
    if jd.runtime:
        w.line("const T damping = T(args.joint_dynamics[j]);")
        w.line(f"const T friction = T(args.joint_dynamics[{n} + j]);")
    else:
        w.line(f"const T kDamping[{n}] = {{{', '.join(lit(x) for x in jd.damping)}}};")
        w.line(f"const T kFriction[{n}] = {{{', '.join(lit(x) for x in jd.friction)}}};")
        w.line("const T damping = kDamping[j];")
        w.line("const T friction = kFriction[j];")
    if jd.friction_model == "tanh":
        w.line(f"const T kInvWidth[{n}] = "
               f"{{{', '.join(lit(1.0 / x) for x in jd.widths)}}};")
        w.line("const T inv_width = kInvWidth[j];")


def emit_passive_torque(ctx: EmitContext, w: Writer, qd: Buffer,
                        target: Callable[[str], str], op: str) -> None:
    """`target(k) op= tau_passive_k(qd)` for every joint-dynamics dof (`op` "+" or "-")."""
    jd = ctx.joint_dynamics
    if jd is None or not jd.dofs:
        return
    first = _first_dof(jd)
    ctx.strategy.barrier(w)
    with ctx.strategy.parallel(w, "j", len(jd.dofs)):
        _emit_coefficients(w, jd)
        w.line(f"const T v = {qd[f'{first} + j']};")
        phi = "tanh_(v * inv_width)" if jd.friction_model == "tanh" else "sign_(v)"
        w.line(f"{target(f'{first} + j')} {op}= damping * v + friction * {phi};")
    ctx.strategy.barrier(w)


def emit_passive_slope(ctx: EmitContext, w: Writer, qd: Buffer,
                       entry: Callable[[str, str], str]) -> None:
    """`entry(row, col) += d tau_passive_k / d qd_k` at `(k, nv + k)`."""
    jd = ctx.joint_dynamics
    if jd is None or not jd.dofs:
        return
    first, nv = _first_dof(jd), ctx.model.nv
    ctx.strategy.barrier(w)
    with ctx.strategy.parallel(w, "j", len(jd.dofs)):
        _emit_coefficients(w, jd)
        w.line(f"const int k = {first} + j;")
        if jd.friction_model == "tanh":
            w.line(f"const T t = tanh_({qd['k']} * inv_width);")
            w.line("const T slope = damping + friction * (T(1) - t * t) * inv_width;")
        else:
            w.line("const T slope = damping;")
        w.line(f"{entry('k', f'{nv} + k')} += slope;")
    ctx.strategy.barrier(w)
