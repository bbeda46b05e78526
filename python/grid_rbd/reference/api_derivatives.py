"""`DerivativesMixin`: first- and second-order dynamics derivatives of `ReferenceRobot`.

Conventions (Pinocchio's, so results compare index for index):

* Derivatives with respect to `q` are taken in the local tangent chart
  `[v_lin, omega, joints]`: `q (+) dq` right-multiplies a free flyer's placement by
  `exp(dq)` (`configuration.integrate`). For revolute and prismatic joints this is the
  plain partial derivative.
* Second derivatives with respect to `q` twice are iterated: `T[:, i, j, k]` is
  `d/dq_k (d y_i / dq_j)`, the outer derivative taken of the local-chart gradient (so on
  a free flyer `T` is not symmetric in `(j, k)`); this is what Pinocchio's
  `ComputeRNEASecondOrderDerivatives` returns.
* `f_ext (B, 6*nb)` is held constant in each body's local frame.
"""

from __future__ import annotations

import numpy as np

from grid_codegen.model import GRAVITY
from grid_rbd.reference import configuration, kinematics
from grid_rbd.reference import crba as _crba
from grid_rbd.reference import rnea as _rnea
from grid_rbd.reference import rnea_derivatives as _rnea_derivatives
from grid_rbd.reference import rnea_second_order as _rnea_second_order


class DerivativesMixin:
    """Analytic derivatives of inverse and forward dynamics (see the module docstring)."""

    def inverse_dynamics_gradient(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY
                                  ) -> np.ndarray:
        """`(B, nv, 2*nv)`: `[dtau/dq | dtau/dqd]` of `tau = ID(q, qd, qdd, f_ext)`.

        `q (B, nq)`, `qd`, `qdd` `(B, nv)` (`qdd=None`: zero), `f_ext (B, 6*nb)`. Computed
        by the chain rule through RNEA's forward and backward passes
        (`rnea_derivatives`); `dtau/dqdd` is the mass matrix (`crba`)."""
        q, qd, qdd, kin = self._derivative_inputs(q, qd, qdd, "qdd")
        return self._with_passive(self._first_order(q, qd, qdd, kin, f_ext, gravity).dtau, qd)

    def forward_dynamics_gradient(self, q, qd, u, f_ext=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nv, 2*nv)`: `[dqdd/dq | dqdd/dqd]` of `qdd = FD(q, qd, u, f_ext)`, i.e.
        `-Minv @ inverse_dynamics_gradient(q, qd, qdd, f_ext)` at that `qdd`
        (`dqdd/du` is `minv`). Shapes as `inverse_dynamics_gradient`, `u (B, nv)`."""
        q, qd, u, kin = self._derivative_inputs(q, qd, u, "u")
        qdd, Minv = self._forward_dynamics(q, qd, u, kin, f_ext, gravity)
        return -Minv @ self._with_passive(
            self._first_order(q, qd, qdd, kin, f_ext, gravity).dtau, qd)

    def forward_dynamics_vjp(self, q, qd, u, ct, gravity=GRAVITY) -> np.ndarray:
        """`(B, nq + 2*nv)`: `ct^T d FD / d(q, qd, u)` without f_ext, q's block in the
        configuration layout (`configuration.configuration_cotangent`), u's `M^-1 ct`."""
        nv = self.model.nv
        jac = self.forward_dynamics_gradient(q, qd, u, None, gravity)
        tangent = np.einsum("bi,bij->bj", ct, jac)
        ct_q = configuration.configuration_cotangent(self.model, q, tangent[:, :nv])
        return np.concatenate([ct_q, tangent[:, nv:], np.einsum("bij,bj->bi", self.minv(q),
                                                                  ct)], axis=1)

    def inverse_dynamics_vjp(self, q, qd, ct, qdd=None, gravity=GRAVITY) -> np.ndarray:
        """`(B, nq + nv)`: `ct^T d ID / d(q, qd)` without f_ext (the q block as in
        `forward_dynamics_vjp`)."""
        nv = self.model.nv
        tangent = np.einsum("bi,bij->bj", ct,
                            self.inverse_dynamics_gradient(q, qd, qdd, None, gravity))
        ct_q = configuration.configuration_cotangent(self.model, q, tangent[:, :nv])
        return np.concatenate([ct_q, tangent[:, nv:]], axis=1)

    def idsva_so(self, q, qd, qdd=None, f_ext=None, gravity=GRAVITY
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Second-order derivatives of `tau = ID(q, qd, qdd, f_ext)` (inputs as
        `inverse_dynamics_gradient`): four `(B, nv, nv, nv)` tensors, laid out as
        Pinocchio's `ComputeRNEASecondOrderDerivatives` (which has no `f_ext`):

        * `d2tau_dq2[:, i, j, k]     = d/dq_k (dtau_i/dq_j)` (iterated on a free flyer);
        * `d2tau_dqd2[:, i, j, k]    = d2tau_i / dqd_j dqd_k` (symmetric in `j, k`);
        * `d2tau_dq_dqd[:, i, j, k]  = d2tau_i / dq_j dqd_k`;
        * `dM_dq[:, i, j, k]         = dM_ij / dq_k = d2tau_i / dqdd_j dq_k`.

        Computed by a second-order chain-rule pass (`rnea_second_order`); `dM_dq` by one
        first-order pass per column of `M`."""
        self._no_passive("idsva_so")
        q, qd, qdd, kin = self._derivative_inputs(q, qd, qdd, "qdd")
        _, dM, H = self._inverse_dynamics_second_order(q, qd, qdd, kin, f_ext, gravity)
        nv = self.model.nv
        blocks = (H[:, :, :nv, :nv], H[:, :, nv:, nv:], H[:, :, :nv, nv:], dM)
        return tuple(np.ascontiguousarray(T) for T in blocks)

    def fdsva_so(self, q, qd, u, f_ext=None, gravity=GRAVITY
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Second-order derivatives of `qdd = FD(q, qd, u, f_ext)` (inputs as
        `forward_dynamics_gradient`): four `(B, nv, nv, nv)` tensors in `idsva_so`'s
        layout, `u` taking the place of `qdd`:

        * `d2qdd_dq2[:, i, j, k]    = d/dq_k (dqdd_i/dq_j)` (iterated on a free flyer);
        * `d2qdd_dqd2[:, i, j, k]   = d2qdd_i / dqd_j dqd_k`;
        * `d2qdd_dq_dqd[:, i, j, k] = d2qdd_i / dq_j dqd_k`;
        * `dMinv_dq[:, i, j, k]     = dMinv_ij / dq_k = d2qdd_i / du_j dq_k`.

        From `ID(q, qd, FD(q, qd, u)) = u` differentiated twice (implicit function
        theorem), with every `ID` derivative at `qdd = FD(q, qd, u)` and `z`, `z'` any of
        `q`, `qd` (`dM/dqd = 0`):
        `d2qdd/dz dz' = -Minv (d2tau/dz dz' + dM/dz dqdd/dz' + dM/dz' dqdd/dz)` and
        `dMinv/dq_k = -Minv (dM/dq_k) Minv`."""
        self._no_passive("fdsva_so")
        q, qd, u, kin = self._derivative_inputs(q, qd, u, "u")
        qdd, Minv = self._forward_dynamics(q, qd, u, kin, f_ext, gravity)
        first, dM, H = self._inverse_dynamics_second_order(q, qd, qdd, kin, f_ext, gravity)
        nv = self.model.nv
        dqdd = -Minv @ first.dtau
        dqdd_dq, dqdd_dqd = dqdd[:, :, :nv], dqdd[:, :, nv:]
        # (dM/dq_j) dqdd/dz_k, as [b, l, j, k].
        dM_dqdd_dq = np.einsum("blmj,bmk->bljk", dM, dqdd_dq)
        dM_dqdd_dqd = np.einsum("blmj,bmk->bljk", dM, dqdd_dqd)
        qq = H[:, :, :nv, :nv] + dM_dqdd_dq + np.swapaxes(dM_dqdd_dq, 2, 3)
        qv = H[:, :, :nv, nv:] + dM_dqdd_dqd
        vv = H[:, :, nv:, nv:]
        dMinv = -np.einsum("bil,bljk->bijk", Minv, np.einsum("blmk,bmj->bljk", dM, Minv))
        return tuple(-np.einsum("bil,bljk->bijk", Minv, T) for T in (qq, vv, qv)) + (dMinv,)

    # -- shared steps ------------------------------------------------------------------
    def _with_passive(self, dtau: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """`dtau` plus the joint dynamics' `d/dqd` slope (`ReferenceRobot.joint_dynamics`)."""
        jd = getattr(self, "joint_dynamics", None)
        return dtau if jd is None else jd.add_to_gradient(dtau, qd)

    def _no_passive(self, what: str) -> None:
        if getattr(self, "joint_dynamics", None) is not None:
            raise NotImplementedError(f"{what}: the second-order derivatives do not carry "
                                      "joint dynamics")

    def _derivative_inputs(self, q, qd, x, name: str):
        q = self._q(q)
        qd = self._v(qd, "qd", len(q))
        x = np.zeros_like(qd) if x is None else self._v(x, name, len(q))
        return q, qd, x, kinematics.forward_pass(self.model, q)

    def _first_order(self, q, qd, qdd, kin, f_ext, gravity):
        return _rnea_derivatives.rnea_derivatives(
            self.model, kin, self._S, self._I, qd, qdd,
            self._root_acceleration(gravity, len(q)), self._fext(f_ext, len(q)))

    def _forward_dynamics(self, q, qd, u, kin, f_ext, gravity):
        """`(qdd, Minv)`: `qdd = Minv (u - bias)`, through the mass matrix."""
        Minv = np.linalg.inv(_crba.crba(self.model, kin, self._S, self._I))
        bias = _rnea.rnea(self.model, kin, self._S, self._I, qd, np.zeros_like(qd),
                          self._root_acceleration(gravity, len(q)), self._fext(f_ext, len(q)))
        jd = getattr(self, "joint_dynamics", None)
        if jd is not None:
            bias = bias + jd.torque(qd)
        return (Minv @ (u - bias)[..., None])[..., 0], Minv

    def _inverse_dynamics_second_order(self, q, qd, qdd, kin, f_ext, gravity):
        """`(first-order results, dM/dq, d2tau over (q, qd))` at `qdd`."""
        first, H = _rnea_second_order.rnea_second_order(
            self.model, kin, self._S, self._I, qd, qdd,
            self._root_acceleration(gravity, len(q)), self._fext(f_ext, len(q)))
        dM = _rnea_second_order.mass_matrix_derivative(self.model, kin, self._S, self._I)
        return first, dM, H
