"""The reverse-mode passes of the thread strategy (`forward_dynamics_vjp`,
`inverse_dynamics_vjp`): one traced pass from the raw inputs to the cotangents.

The pass traces the whole primal from `q` itself (joint transforms included, a mimic
robot's expansion `G q + b` too), then `symbolic.reverse.vjp` seeded with `ct`. The q
cotangent is therefore the exact derivative of what the kernel computes with respect to
the numbers it is given: a quaternion's four entries (the kernels rotate by q/|q|), a
planar joint's (cos, sin) pair, a vector configuration as it is; no chart pullback is left
to the handles. f_ext is not an input (the ABI takes four): a backward with f_ext uses the
Jacobian kernels instead.
"""

from __future__ import annotations

from grid_codegen import transforms as T
from grid_codegen.emit.thread_coupled import _reduced_fd
from grid_codegen.registry import Algorithm
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic.emit import Array, ItemBuilder
from grid_codegen.symbolic.reverse import vjp

VJP_OF = {"forward_dynamics_vjp": "forward_dynamics",
          "inverse_dynamics_vjp": "inverse_dynamics"}
"""Each reverse-mode algorithm and the method whose backward it is."""


def emit_vjp(plan, kb: ItemBuilder, algorithm: Algorithm, ports: dict[str, Array],
             out: Array) -> None:
    """The one pass of `algorithm` (a key of VJP_OF) into `kb` (`plan`: the thread
    strategy's `_Plan`)."""
    model = plan.model
    coupling = model.coupling
    if coupling is not None and plan.runtime_transform:
        raise ValueError("runtime_transform with mimic=True coupling is not supported yet")
    expand_v = coupling.expand_v if coupling is not None else (lambda v: v)
    tables = plan.transform_array()

    def placements(q, rest):
        full = coupling.expand_q(q) if coupling is not None else q
        origins = T.origins(model, rest[0]) if tables else None
        return A.joint_transforms(model, full, origins)

    if algorithm.name == "forward_dynamics_vjp":
        from grid_codegen.emit.thread import _passive_input

        def primal(q, qd, u, rest, I, g, P):
            X = placements(q, rest)
            if coupling is not None:
                return _reduced_fd(model, X, I, qd, u, None, g)[0]
            return A.aba(model, X, I, qd, _passive_input(P, u, qd), None, g)

        doc = ("ct^T d qdd / d(q, qd, u): forward dynamics traced from q, then reverse "
               "mode seeded with ct.")
        wrt_names = ("q", "qd", "u")
        second = "u"
    elif algorithm.name == "inverse_dynamics_vjp":
        from grid_codegen.emit.thread import _passive_torque

        def primal(q, qd, qdd, rest, I, g, P):
            X = placements(q, rest)
            tau = A.rnea(model, X, I, expand_v(qd), expand_v(qdd), None, g)
            if coupling is not None:
                return coupling.project(tau)
            return _passive_torque(P, tau, qd)

        doc = "ct^T d tau / d(q, qd): RNEA traced from q, then reverse mode seeded with ct."
        wrt_names = ("q", "qd")
        second = "qdd"
    else:
        raise KeyError(f"no reverse-mode pass for {algorithm.name!r}")

    def traced(q, qd, third, ct, *rest):
        *rest, I, g, P = rest
        values = primal(q, qd, third, rest, I, g, None if coupling is not None else P)
        wrt = {"q": q, "qd": qd, "u": third}
        return vjp(values, ct, [x for name in wrt_names for x in wrt[name]])

    # Traced in the order (q, qd, u or qdd, ct) whatever the ports' order.
    plan.dynamics_call(kb, algorithm.name, doc, traced,
                       [ports["q"], ports["qd"], ports[second], ports["ct"], *tables], out,
                       passive=True)
