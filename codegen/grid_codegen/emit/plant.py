"""Thread-strategy passes of the plant profile: the fused step gradients.

One euler or semi-implicit euler step on a vector configuration (`nq == nv`, an additive
chart) has the Jacobian, with `D = [dqdd/dq | dqdd/dqd] = -M^-1 [dtau/dq | dtau/dqd]` at
`qdd = FD(q, qd, u)`:

    euler:               dq'/dz  = [I, dt I, 0]          dqd'/dz = [dt D + [0, I], dt M^-1]
    semi-implicit euler: dq'/dz  = [I, 0, 0] + dt dqd'/dz

so the step gradient is the forward-dynamics gradient's passes (`aba_minv`, then RNEA's
derivatives column group by column group, multiplied by `-M^-1` in registers) with the
identities and `dt` folded into what each group writes: no `(B, nv, 2nv)` intermediate,
no second launch. `emit.thread` wires the passes (joint dynamics included, as in the FD
gradient); this module holds the Jacobian's assembly.
"""

from __future__ import annotations


def step_jacobian(nv: int, D: list[list] | None, columns: list[int], Minv: list[list],
                  dt: object, integrator: str) -> list:
    """The `2nv x 3nv` step Jacobian (row-major) from `D = dqdd/d(q, qd)` traced on
    `columns` (of `0..2nv-1`; None when no such column is wanted) and `M^-1`."""
    velocity = []
    for r in range(nv):
        row = []
        for c in range(3 * nv):
            if c >= 2 * nv:
                row.append(dt * Minv[r][c - 2 * nv])
            else:
                value = dt * D[r][c] if D is not None and c in columns else 0.0
                row.append(value + 1.0 if c == nv + r else value)
        velocity.append(row)
    position = []
    for r in range(nv):
        if integrator == "euler":
            position.append([1.0 if c == r else dt if c == nv + r else 0.0
                             for c in range(3 * nv)])
        else:
            position.append([(1.0 if c == r else 0.0) + dt * velocity[r][c]
                             for c in range(3 * nv)])
    return [v for row in position + velocity for v in row]
