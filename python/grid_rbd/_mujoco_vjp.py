"""Reverse mode in the MuJoCo convention on a free-flyer root: `forward_dynamics_vjp` and
`inverse_dynamics_vjp` of `grid_rbd.MujocoHandle`, the transpose of the chart change
(`grid_rbd._mujoco_convention`) around the Pinocchio-convention VJP kernels (one launch
each, plus the value and, for inverse dynamics, `M`; no kernel of their own).

MuJoCo's outputs are compositions over ours, with `G = blockdiag(R, I)` (`R` the rotation
of quat/|quat|), `u = G^T qvel` our velocity and `q'` the kernels' configuration
`[p, x, y, z, w, joints]` (a permutation of `q`'s numbers):

    FD_mj(q, qvel, qfrc) = G (FD(q', u, G^T qfrc) + b(u)),      b(u) = [omega x u_lin; 0],
    ID_mj(q, qvel, qacc) = G ID(q', u, G^T qacc - b(u)).

`q` enters through `q'` (the kernels' own q cotangent, its entries permuted back) and
through `R`. Along mj_integratePos's rotation `R exp([dtheta])`, `R x` moves by
`-R [x] dtheta` and `R^T y` by `[R^T y] dtheta`, so with `c = G^T ct` (the cotangent in
our chart) the rotation's cotangent `t` (B, 3) gathers

    t = x_lin x c_lin  (the outer G, x the kernels' output plus the bias)
      + g_lin x z_lin  (each input turned by G^T: z = u, G^T qfrc or G^T qacc with
                        cotangent g)

and the bias passes `c_lin x omega` to `u_lin` and `u_lin x c_lin` to `omega` (negated
for inverse dynamics, where `b` is subtracted from the kernels' `qdd`, whose cotangent
is `M c`: the kernels' VJP holds qdd fixed, but ours depends on `q` and `qvel`).

The returned `q` cotangent has the meaning of the Pinocchio-convention VJP's
(`reference.configuration.configuration_cotangent`): the gradient of `ct . output` with
respect to the raw numbers of `q` as given, the quaternion read as quat/|quat|. So
`ct_q[:, 0:3]` is the world-position gradient (MuJoCo's `dp` is the world position, so
no `R` as in Pinocchio's local chart), `ct_q[:, 3:7]` (w, x, y, z) is
`(I - qn qn^T) 2 E(qn)^T t / |quat|` with `dtheta = 2 vec(conj(qn) dqn)` (no radial
part, so invariant to the quaternion's scale), the joints pass through. Contracted with
the raw velocity of a mj_integratePos direction `d` (`dq/ds` of
`mj_integratePos(q, s d)`, `[d_p, 1/2 quat (x) (0, d_theta), d_joints]`) it gives the
directional derivative `ct . (d output / dd)`: the MuJoCo-convention gradient's
transpose applied to `ct`. `ct_qvel`, `ct_qfrc` are on MuJoCo's velocity chart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grid_rbd import _mujoco_convention as MC  # (it imports this module: used at call time)

if TYPE_CHECKING:
    from grid_rbd._mujoco_convention import Chart


def _world_q_cotangent(h: Any, c: Chart, kernel_q: Any, t: Any) -> Any:
    """`(B, nq)`: the kernels' q cotangent (`q'`'s layout) plus the rotation's `t`, in
    MuJoCo's `q` layout (module doc)."""
    from grid_rbd._framework import ambient_pullback

    ops = h._ops
    turn = ambient_pullback(c.q[:, 0:7], ops.cat([ops.zeros_like(t), t], 1),
                            lambda parts: ops.cat(parts, 1), ops.xp.sqrt,
                            chart=(("spherical", 3, 3),))
    root = kernel_q[:, 0:7] + turn
    return ops.cat([root[:, 0:3], root[:, 6:7], root[:, 3:6], kernel_q[:, 7:]], 1)


def _lin(x: Any) -> Any:
    return x[:, 0:3]


def _velocity_cotangent(h: Any, c: Chart, qd: Any, kernel_qd: Any, bias_ct: Any
                        ) -> tuple[Any, Any]:
    """`(ct_qvel, t_u)`: the cotangent of our velocity `u` from the kernels' and from the
    bias `b(u)` with cotangent `bias_ct` (B, 3), turned to MuJoCo's chart, and the
    rotation's share `ct_u_lin x u_lin`."""
    ops = h._ops
    omega = qd[:, 3:6]
    ct_u = kernel_qd + ops.cat([MC._cross(ops, bias_ct, omega),
                                MC._cross(ops, _lin(qd), bias_ct),
                                ops.zeros_like(qd[:, 6:])], 1)
    return c.to_world(ct_u), MC._cross(ops, _lin(ct_u), _lin(qd))


def forward_dynamics_vjp(h: Any, c: Chart, v: dict, kw: dict) -> Any:
    """`[ct_q (nq) | ct_qvel | ct_qfrc]` (B, nq + 2 nv) of MuJoCo's qacc (module doc)."""
    ops, nq, nv = h._ops, h.nq, h.nv
    qd, u = c.to_local(v["qd"]), c.to_local(v["u"])
    ct = c.to_local(v["ct"])
    kernel = h._call("forward_dynamics_vjp", kw, c.q, qd, u, ct)
    qdd = h._call("forward_dynamics", kw, c.q, qd, u)
    k_q, k_qd, k_u = kernel[:, :nq], kernel[:, nq:nq + nv], kernel[:, nq + nv:]
    out_lin = _lin(qdd) + MC._cross(ops, qd[:, 3:6], _lin(qd))
    ct_qvel, t_u = _velocity_cotangent(h, c, qd, k_qd, _lin(ct))
    t = MC._cross(ops, out_lin, _lin(ct)) + t_u + MC._cross(ops, _lin(k_u), _lin(u))
    return ops.cat([_world_q_cotangent(h, c, k_q, t), ct_qvel, c.to_world(k_u)], 1)


def inverse_dynamics_vjp(h: Any, c: Chart, v: dict, kw: dict) -> Any:
    """`[ct_q (nq) | ct_qvel]` (B, nq + nv) of MuJoCo's qfrc_inverse at fixed qacc (None
    is zero; module doc)."""
    ops, nq = h._ops, h.nq
    qd = c.to_local(v["qd"])
    acc = ops.zeros_like(v["qd"]) if v.get("qdd") is None else v["qdd"]
    qdd = c.to_local(acc) - c.bias(qd)
    ct = c.to_local(v["ct"])
    kernel = h._call("inverse_dynamics_vjp", kw, c.q, qd, ct, qdd)
    tau = h._call("inverse_dynamics", kw, c.q, qd, qdd)
    ct_qdd = ops.einsum("bij,bj->bi", h._call("crba", {}, c.q), ct)
    ct_qvel, t_u = _velocity_cotangent(h, c, qd, kernel[:, nq:], -_lin(ct_qdd))
    t = (MC._cross(ops, _lin(tau), _lin(ct)) + t_u
         + MC._cross(ops, _lin(ct_qdd), c.rot_t(_lin(acc))))
    return ops.cat([_world_q_cotangent(h, c, kernel[:, :nq], t), ct_qvel], 1)
