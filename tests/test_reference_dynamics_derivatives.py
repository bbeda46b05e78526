"""Layer 1: the reference oracle's analytic dynamics derivatives, robot by robot.

First order against Pinocchio's `computeRNEADerivatives` / `computeABADerivatives`;
second order of inverse dynamics against Pinocchio's second-order derivatives; second
order of forward dynamics against central differences of our own first-order gradient.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from support import (
    ROBOTS,
    assert_scaled_close,
    pinocchio_case,
    pinocchio_forces,
    scaled_error,
    symmetric_from_upper,
)

from grid_rbd.reference.configuration import integrate

TOL = 1e-8
FD_TOL = 1e-5
BATCH = 8


@pytest.fixture(scope="module", params=sorted(ROBOTS), ids=sorted(ROBOTS))
def case(request):
    return pinocchio_case(request.param, BATCH, seed=7 + len(request.param))


def _second_order_states(ref) -> int:
    """Second-order checks cost O(nv^3) per state: 4 states, 2 for the large g1."""
    return 2 if ref.nv > 30 else 4


def _pin_rnea_first_order(pm, pd, q, v, a, f_ext_row=None, nb=0):
    """`(dtau_dq, dtau_dv, M)` of one state, from Pinocchio (copies: `pd` is reused)."""
    if f_ext_row is None:
        out = pin.computeRNEADerivatives(pm, pd, q, v, a)
    else:
        out = pin.computeRNEADerivatives(pm, pd, q, v, a, pinocchio_forces(f_ext_row, nb))
    return out[0].copy(), out[1].copy(), symmetric_from_upper(out[2])


def _pin_rnea_second_order(pm, pd, q, v, a, f_ext_row=None, nb=0):
    """Pinocchio's second-order RNEA derivatives of one state, in the layout of its
    `ComputeRNEASecondOrderDerivatives`: `[d2tau_dqdq, d2tau_dvdv, d2tau_dqdv, dM_dq]`
    with `dqdq[i, j, k] = d/dq_k (dtau_i/dq_j)`, `dqdv[i, j, k] = d/dv_k (dtau_i/dq_j)`,
    `dM_dq[i, j, k] = dM_ij/dq_k`.

    pin 4.1's Python bindings lack that function (it is C++ only), so this differentiates
    Pinocchio's analytic first-order derivatives once more: along `pin.integrate` in `q`
    (Richardson-extrapolated central differences, error O(h^4)), and by central
    differences in `v`, which are exact because `dtau/d(q, v)` is a polynomial of
    degree at most 2 in `v`. Checked against the C++ function on every robot here (free
    flyers included, whose `dqdq` is not symmetric in `j, k`): they agree to 3e-10."""
    nv = pm.nv

    def first(q_, v_):
        return _pin_rnea_first_order(pm, pd, q_, v_, a, f_ext_row, nb)

    def central(k, h):
        e = np.zeros(nv)
        e[k] = h
        plus, minus = first(pin.integrate(pm, q, e), v), first(pin.integrate(pm, q, -e), v)
        return [(p - m) / (2 * h) for p, m in zip(plus, minus, strict=True)]

    dqdq, dvdv, dqdv, dM = (np.zeros((nv, nv, nv)) for _ in range(4))
    h_q, h_v = 1e-3, 1e-2
    for k in range(nv):
        coarse, fine = central(k, h_q), central(k, h_q / 2)
        dqdq[:, :, k] = (4 * fine[0] - coarse[0]) / 3
        dM[:, :, k] = (4 * fine[2] - coarse[2]) / 3
        e = np.zeros(nv)
        e[k] = h_v
        plus, minus = first(q, v + e), first(q, v - e)
        dqdv[:, :, k] = (plus[0] - minus[0]) / (2 * h_v)
        dvdv[:, :, k] = (plus[1] - minus[1]) / (2 * h_v)
    return dqdq, dvdv, dqdv, dM


# -- first order ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
def test_inverse_dynamics_gradient(case, with_fext):
    ref, pm, pd, s = case
    f_ext = s.f_ext if with_fext else None
    ours = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd, f_ext)
    assert ours.shape == (BATCH, ref.nv, 2 * ref.nv)
    theirs = np.stack([
        np.concatenate(_pin_rnea_first_order(pm, pd, s.q[b], s.qd[b], s.qdd[b],
                                             s.f_ext[b] if with_fext else None, ref.nb)[:2],
                       axis=1)
        for b in range(BATCH)])
    assert_scaled_close(ours, theirs, TOL, "inverse_dynamics_gradient")


def test_inverse_dynamics_gradient_defaults_and_gravity(case):
    ref, pm, _, s = case
    gravity = np.array([0.4, -1.0, -9.0])
    pm_g = pm.copy()
    pm_g.gravity.linear = gravity
    pd_g = pm_g.createData()
    zero = np.zeros(ref.nv)
    theirs = np.stack([np.concatenate(pin.computeRNEADerivatives(pm_g, pd_g, s.q[b], s.qd[b],
                                                                 zero)[:2], axis=1)
                       for b in range(BATCH)])
    assert_scaled_close(ref.inverse_dynamics_gradient(s.q, s.qd, gravity=gravity), theirs, TOL,
                        "inverse_dynamics_gradient (qdd=None, gravity vector)")
    one = ref.inverse_dynamics_gradient(s.q[0], s.qd[0], s.qdd[0])
    assert one.shape == (1, ref.nv, 2 * ref.nv)


@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
def test_forward_dynamics_gradient(case, with_fext):
    ref, pm, pd, s = case
    f_ext = s.f_ext if with_fext else None
    ours = ref.forward_dynamics_gradient(s.q, s.qd, s.u, f_ext)
    theirs = []
    for b in range(BATCH):
        args = (pm, pd, s.q[b], s.qd[b], s.u[b])
        out = pin.computeABADerivatives(*args, pinocchio_forces(s.f_ext[b], ref.nb)) if with_fext \
            else pin.computeABADerivatives(*args)
        theirs.append(np.concatenate([out[0], out[1]], axis=1))
    assert_scaled_close(ours, np.stack(theirs), TOL, "forward_dynamics_gradient")


# -- second order --------------------------------------------------------------------------
IDSVA_NAMES = ("d2tau_dq2", "d2tau_dqd2", "d2tau_dq_dqd", "dM_dq")


@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
def test_idsva_so(case, with_fext):
    ref, pm, pd, s = case
    nb_states = _second_order_states(ref)
    sl = slice(0, nb_states)
    f_ext = s.f_ext[sl] if with_fext else None
    ours = ref.idsva_so(s.q[sl], s.qd[sl], s.qdd[sl], f_ext)
    theirs = [_pin_rnea_second_order(pm, pd, s.q[b], s.qd[b], s.qdd[b],
                                     s.f_ext[b] if with_fext else None, ref.nb)
              for b in range(nb_states)]
    for t, name in enumerate(IDSVA_NAMES):
        assert ours[t].shape == (nb_states, ref.nv, ref.nv, ref.nv)
        assert_scaled_close(ours[t], np.stack([th[t] for th in theirs]), TOL, f"idsva_so {name}")
    dq2, dqd2, _, dM = ours
    assert scaled_error(dqd2, np.swapaxes(dqd2, 2, 3)) <= 1e-12
    assert scaled_error(dM, np.swapaxes(dM, 1, 2)) <= 1e-12
    if not ref.model.floating_base:
        # Without a free flyer the chart is flat and the q-Hessian symmetric.
        assert scaled_error(dq2, np.swapaxes(dq2, 2, 3)) <= 1e-12


def test_fdsva_so(case):
    """Against central differences of `forward_dynamics_gradient`, all perturbed states in
    one batch: along `integrate` in `q` (h = 1e-5, error O(h^2)), and in `qd` and `u`
    (h = 1e-3; the gradient is a polynomial of degree <= 2 in `qd` and linear in `u`,
    so these differences are exact up to rounding). External forces are applied; the
    first-order tests cover both cases."""
    ref, _, _, s = case
    nv, nb_states = ref.nv, _second_order_states(ref)
    q, qd, u = s.q[:nb_states], s.qd[:nb_states], s.u[:nb_states]
    f_ext = s.f_ext[:nb_states]
    ours = ref.fdsva_so(q, qd, u, f_ext)

    # Perturbations [b, sign, k]: 2 * nv per state and per variable.
    eye = np.eye(nv)
    signs = np.array([1.0, -1.0])[:, None, None]
    h_q, h = 1e-5, 1e-3

    def rows(x):
        return np.repeat(x, 2 * nv, axis=0)

    dq = (signs * eye * h_q)[None].repeat(nb_states, 0).reshape(-1, nv)
    dx = (signs * eye * h)[None].repeat(nb_states, 0).reshape(-1, nv)
    f_rows = rows(f_ext)

    def central(grad, step):
        g = grad.reshape(nb_states, 2, nv, nv, 2 * nv)  # [b, sign, k, i, col]
        return np.moveaxis((g[:, 0] - g[:, 1]) / (2 * step), 1, 3)  # [b, i, col, k]

    by_q = central(ref.forward_dynamics_gradient(integrate(ref.model, rows(q), dq), rows(qd),
                                                 rows(u), f_rows), h_q)
    by_qd = central(ref.forward_dynamics_gradient(rows(q), rows(qd) + dx, rows(u), f_rows), h)
    by_u = central(ref.forward_dynamics_gradient(rows(q), rows(qd), rows(u) + dx, f_rows), h)
    expected = (by_q[:, :, :nv], by_qd[:, :, nv:], by_qd[:, :, :nv],
                np.swapaxes(by_u[:, :, :nv], 2, 3))
    names = ("d2qdd_dq2", "d2qdd_dqd2", "d2qdd_dq_dqd", "dMinv_dq")
    for t, name in enumerate(names):
        assert ours[t].shape == (nb_states, nv, nv, nv)
        assert_scaled_close(ours[t], expected[t], FD_TOL, f"fdsva_so {name}")


# -- configuration -------------------------------------------------------------------------
def test_integrate_matches_pinocchio(case):
    ref, pm, _, s = case
    rng = np.random.default_rng(3)
    scales = np.array([1e-9, 1e-5, 0.3, 2.0, 5.0, 9.0, 30.0, 1.0])[:, None]
    dq = rng.normal(size=(BATCH, ref.nv)) * scales
    ours = integrate(ref.model, s.q, dq)
    theirs = np.stack([pin.integrate(pm, s.q[b], dq[b]) for b in range(BATCH)])
    assert np.abs(ours - theirs).max() <= 1e-12 * (1 + np.abs(theirs).max())
    assert integrate(ref.model, s.q[0], dq[0]).shape == (1, ref.nq)
    with pytest.raises(ValueError, match="integrate expects"):
        integrate(ref.model, s.q, dq[:, :-1])
