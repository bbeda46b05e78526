"""Sensitivities to the inertial parameters, composed from kernels of the artifact.

`pi` is the robot's `(10 nb,)` parameter vector, body by body in Pinocchio's order (the
order of `set_inertia_params`'s `(nb, 10)` table). The dynamics are linear in it,
`tau = Y(q, qd, qdd) pi`, so

    d tau / d pi = Y,        d qdd / d pi = -M^-1 Y   at qdd = FD(q, qd, u)

(`M qdd + c(pi) = u` differentiated). `forward_dynamics_parameter_gradient` is the second
(forward dynamics, the regressor at its acceleration and M^-1: three launches and one
batched product), on every handle. On JAX and torch, `inverse_dynamics_wrt_params` and
`forward_dynamics_wrt_params` return the ordinary torque or acceleration of the
context's current table, whatever `params` holds, with the parameter cotangent of the
regressor attached (`ct . Y` and `ct . (-M^-1 Y)`) beside the usual `q`, `qd` (and `u`)
cotangents: a linearisation point for identification, not a function of `params` (to
change the model, `set_inertia_params` on a `runtime_inertia` build).
"""

from __future__ import annotations

from typing import Any

NEEDS = {
    "forward_dynamics_parameter_gradient": ("forward_dynamics", "minv",
                                            "inverse_dynamics_regressor"),
    "inverse_dynamics_wrt_params": ("inverse_dynamics", "inverse_dynamics_regressor"),
    "forward_dynamics_wrt_params": ("forward_dynamics", "minv",
                                    "inverse_dynamics_regressor"),
}


def _require(handle: Any, method: str) -> None:
    missing = [a for a in NEEDS[method] if a not in handle.algorithms]
    if missing:
        raise RuntimeError(f"{method} needs {', '.join(NEEDS[method])}; this artifact lacks "
                           f"{', '.join(missing)}: register with algorithm_list=['core', "
                           "'centroidal']")


class ParameterSensitivities:
    """Mixin of the three handles. A handle supplies `_stop_gradient(x)` (the identity
    on numpy) and its methods `forward_dynamics`, `minv`, `inverse_dynamics`,
    `inverse_dynamics_regressor`."""

    def _stop_gradient(self, x: Any) -> Any:
        return x

    def _as_array(self, x: Any) -> Any:
        """An input of a composed method as this handle's array type (numpy: as is)."""
        return x

    def _needs_gradient(self, x: Any) -> bool:
        """Whether a cotangent may be asked of `x` (torch: only when it requires grad)."""
        return True

    def forward_dynamics_parameter_gradient(self, q: Any, qd: Any, u: Any, *,
                                            gravity: float = -9.81) -> Any:
        """`dqdd/dpi = -M^-1 Y(q, qd, qdd)` at `qdd = FD(q, qd, u)`: `(B, nv, 10*nb)`,
        columns in the order of `set_inertia_params` (body by body, Pinocchio's
        `[m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`). Forward-only; needs the core and
        centroidal profiles."""
        _require(self, "forward_dynamics_parameter_gradient")
        q, qd, u = (self._stop_gradient(x) for x in (q, qd, u))
        qdd = self.forward_dynamics(q, qd, u, gravity=gravity)
        Y = self.inverse_dynamics_regressor(q, qd, qdd, gravity=gravity)
        return -(self.minv(q) @ Y)


class ParameterOperands(ParameterSensitivities):
    """The `*_wrt_params` methods of the JAX and torch handles."""

    def _parameter_direction(self, params: Any) -> Any:
        """`params - stop_gradient(params)` as `(..., 10 nb, 1)`: zero in value, the
        identity for the cotangent. `params`: `(10 nb,)` or `(nb, 10)` shared by the
        batch, or `(B, 10 nb)` / `(B, nb, 10)` per item."""
        nb = self.nb
        shape = tuple(params.shape)
        if shape[-2:] == (nb, 10):
            params = params.reshape(shape[:-2] + (10 * nb,))
        elif not shape or shape[-1] != 10 * nb or len(shape) > 2:
            raise ValueError(f"params has shape {shape}; this robot's are (10*nb,) = "
                             f"({10 * nb},) or (nb, 10) = ({nb}, 10), optionally with a "
                             "batch axis in front")
        delta = params - self._stop_gradient(params)
        return delta[..., None]

    def inverse_dynamics_wrt_params(self, q: Any, qd: Any, params: Any, qdd: Any = None, *,
                                    gravity: float = -9.81) -> Any:
        """`inverse_dynamics(q, qd, qdd)` (qdd None: zero, the bias) of the context's
        table; the backward gives `params` the cotangent `ct . Y` (and `q`, `qd` their
        ordinary ones). `params` only carries the cotangent: its values are not used."""
        _require(self, "inverse_dynamics_wrt_params")
        tau = self.inverse_dynamics(q, qd, qdd, gravity=gravity)
        if not self._needs_gradient(params):
            return tau
        direction = self._parameter_direction(params)
        Y = self.inverse_dynamics_regressor(
            self._stop_gradient(q), self._stop_gradient(qd),
            None if qdd is None else self._stop_gradient(qdd), gravity=gravity)
        return tau + (Y @ direction)[..., 0]

    def forward_dynamics_wrt_params(self, q: Any, qd: Any, u: Any, params: Any, *,
                                    gravity: float = -9.81) -> Any:
        """`forward_dynamics(q, qd, u)` of the context's table; the backward gives
        `params` the cotangent `ct . (-M^-1 Y)` (and `q`, `qd`, `u` their ordinary
        ones). `params` only carries the cotangent: its values are not used."""
        _require(self, "forward_dynamics_wrt_params")
        qdd = self.forward_dynamics(q, qd, u, gravity=gravity)
        if not self._needs_gradient(params):
            return qdd
        direction = self._parameter_direction(params)
        G = self.forward_dynamics_parameter_gradient(q, qd, u, gravity=gravity)
        return qdd + (G @ direction)[..., 0]
