"""Layer 1: generalized gravity, nonlinear effects, the Coriolis matrix, the centroidal
momentum matrix and its derivatives, and the inertial-parameter regressors of the
reference, against Pinocchio and (for dA/dq) central finite differences."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from support import (
    ROBOTS,
    assert_scaled_close,
    pinocchio_case,
)

TOL = 1e-8
FD_TOL = 1e-5
BATCH = 4
DCCRBA_BATCH = 3


@pytest.fixture(scope="module", params=sorted(ROBOTS), ids=sorted(ROBOTS))
def case(request):
    return pinocchio_case(request.param, BATCH, seed=3 + len(request.param))


def _per_item(fn, *arrays) -> np.ndarray:
    return np.array([np.array(fn(*(a[b] for a in arrays)), copy=True)
                     for b in range(len(arrays[0]))])


def _parameters(ref) -> np.ndarray:
    return np.concatenate([body.inertia.dynamic_parameters() for body in ref.model.bodies])


def _with_gravity(pm, gravity: float):
    pm_g = pm.copy()
    pm_g.gravity.linear = np.array([0.0, 0.0, gravity])
    return pm_g, pm_g.createData()


def _along(pm, q: np.ndarray, dq: np.ndarray, step: float) -> np.ndarray:
    return np.array([pin.integrate(pm, q[b], step * dq[b]) for b in range(len(q))])


@pytest.mark.parametrize("gravity", [-9.81, -3.71])
def test_generalized_gravity_and_nonlinear_effects(case, gravity):
    ref, pm, _, s = case
    pm_g, pd_g = _with_gravity(pm, gravity)
    g = ref.generalized_gravity(s.q, gravity=gravity)
    nle = ref.nonlinear_effects(s.q, s.qd, gravity=gravity)
    assert_scaled_close(g, _per_item(lambda q: pin.computeGeneralizedGravity(pm_g, pd_g, q),
                                     s.q), TOL, "generalized_gravity")
    assert_scaled_close(nle, _per_item(lambda q, v: pin.nonLinearEffects(pm_g, pd_g, q, v),
                                       s.q, s.qd), TOL, "nonlinear_effects")


def test_coriolis_matrix(case):
    ref, pm, pd, s = case
    C = ref.coriolis_matrix(s.q, s.qd)
    assert C.shape == (BATCH, ref.nv, ref.nv)
    assert_scaled_close(C, _per_item(lambda q, v: pin.computeCoriolisMatrix(pm, pd, q, v),
                                     s.q, s.qd), TOL, "coriolis_matrix")
    Cqd_g = np.einsum("bij,bj->bi", C, s.qd) + ref.generalized_gravity(s.q)
    assert_scaled_close(Cqd_g, ref.nonlinear_effects(s.q, s.qd), TOL, "C qd + g")
    # M_dot = C + C^T, M_dot by central differences along qd.
    h = 1e-6
    M_dot = (ref.crba(_along(pm, s.q, s.qd, h)) - ref.crba(_along(pm, s.q, s.qd, -h))) / (2 * h)
    assert_scaled_close(C + np.swapaxes(C, 1, 2), M_dot, FD_TOL, "C + C^T = M_dot")


def test_ccrba(case):
    ref, pm, pd, s = case
    A, h = ref.ccrba(s.q, s.qd)
    assert A.shape == (BATCH, 6, ref.nv) and h.shape == (BATCH, 6)
    theirs_A, theirs_h = [], []
    for b in range(BATCH):
        theirs_A.append(pin.ccrba(pm, pd, s.q[b], s.qd[b]).copy())
        theirs_h.append(pd.hg.vector.copy())
    assert_scaled_close(A, np.array(theirs_A), TOL, "ccrba A")
    assert_scaled_close(h, np.array(theirs_h), TOL, "ccrba h")
    assert_scaled_close(A, _per_item(lambda q: pin.computeCentroidalMap(pm, pd, q), s.q), TOL,
                        "computeCentroidalMap")


def test_dccrba_against_finite_differences(case):
    ref, pm, _, s = case
    q, nv = s.q[:DCCRBA_BATCH], ref.nv
    dA = ref.dccrba(q)
    assert dA.shape == (DCCRBA_BATCH, 6, nv, nv)
    step, eye = 1e-5, np.eye(nv)
    plus = np.array([pin.integrate(pm, qb, step * e) for qb in q for e in eye])
    minus = np.array([pin.integrate(pm, qb, -step * e) for qb in q for e in eye])
    zero = np.zeros((len(plus), nv))
    fd = (ref.ccrba(plus, zero)[0] - ref.ccrba(minus, zero)[0]) / (2 * step)
    fd = np.moveaxis(fd.reshape(DCCRBA_BATCH, nv, 6, nv), 1, -1)
    assert_scaled_close(dA, fd, FD_TOL, "dccrba vs finite differences")


def test_cmm_time_variation(case):
    ref, pm, pd, s = case
    A, h = ref.ccrba(s.q, s.qd)
    A_dot = ref.cmm_time_variation(s.q, s.qd)
    assert_scaled_close(np.einsum("brci,bi->brc", ref.dccrba(s.q), s.qd), A_dot, TOL,
                        "dccrba . qd")
    theirs = _per_item(lambda q, v: pin.computeCentroidalMapTimeVariation(pm, pd, q, v),
                       s.q, s.qd)
    # Pinocchio's dAg leaves out the motion of the CoM the angular rows are taken about,
    # [0; -c_dot × A_lin], which dAg qd does not see (c_dot × m c_dot = 0).
    assert_scaled_close(np.einsum("bij,bj->bi", A_dot, s.qd),
                        np.einsum("bij,bj->bi", theirs, s.qd), TOL, "A_dot qd")
    mass = sum(body.inertia.mass for body in ref.model.bodies)
    c_dot = h[:, :3] / mass
    shifted = A_dot.copy()
    shifted[:, 3:] += np.swapaxes(np.cross(c_dot[:, None, :], np.swapaxes(A[:, :3], 1, 2)),
                                  1, 2)
    assert_scaled_close(shifted, theirs, TOL, "cmm_time_variation vs Pinocchio's dAg")
    step = 1e-6
    fd = (ref.ccrba(_along(pm, s.q, s.qd, step), s.qd)[0]
          - ref.ccrba(_along(pm, s.q, s.qd, -step), s.qd)[0]) / (2 * step)
    assert_scaled_close(A_dot, fd, FD_TOL, "cmm_time_variation vs finite differences")


def test_energy_regressors(case):
    ref, pm, pd, s = case
    pi = _parameters(ref)
    y_kin = ref.kinetic_energy_regressor(s.q, s.qd)
    y_pot = ref.potential_energy_regressor(s.q)
    assert y_kin.shape == y_pot.shape == (BATCH, 10 * ref.nb)
    assert_scaled_close(y_kin, _per_item(
        lambda q, v: pin.computeKineticEnergyRegressor(pm, pd, q, v), s.q, s.qd), TOL,
        "kinetic_energy_regressor")
    assert_scaled_close(y_pot, _per_item(
        lambda q: pin.computePotentialEnergyRegressor(pm, pd, q), s.q), TOL,
        "potential_energy_regressor")
    energy = ref.energy(s.q, s.qd)
    assert_scaled_close((y_kin @ pi)[:, None], energy[:, :1], TOL, "y_kin . pi")
    assert_scaled_close((y_pot @ pi)[:, None], energy[:, 1:2], TOL, "y_pot . pi")
    pm_g, pd_g = _with_gravity(pm, -3.71)
    assert_scaled_close(ref.potential_energy_regressor(s.q, gravity=-3.71), _per_item(
        lambda q: pin.computePotentialEnergyRegressor(pm_g, pd_g, q), s.q), TOL,
        "potential_energy_regressor with gravity")


@pytest.mark.parametrize("with_qdd", [False, True])
def test_inverse_dynamics_regressor(case, with_qdd):
    ref, pm, pd, s = case
    qdd = s.qdd if with_qdd else np.zeros_like(s.qd)
    Y = ref.inverse_dynamics_regressor(s.q, s.qd, qdd if with_qdd else None)
    assert Y.shape == (BATCH, ref.nv, 10 * ref.nb)
    assert_scaled_close(Y, _per_item(
        lambda q, v, a: pin.computeJointTorqueRegressor(pm, pd, q, v, a), s.q, s.qd, qdd),
        TOL, "inverse_dynamics_regressor")
    assert_scaled_close(Y @ _parameters(ref), ref.inverse_dynamics(s.q, s.qd, qdd), TOL,
                        "Y pi = inverse_dynamics")
    Y_g = ref.inverse_dynamics_regressor(s.q, s.qd, qdd, gravity=-3.71)
    assert_scaled_close(Y_g @ _parameters(ref),
                        ref.inverse_dynamics(s.q, s.qd, qdd, gravity=-3.71), TOL,
                        "Y pi = inverse_dynamics with gravity")
