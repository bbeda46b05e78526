"""Layer 1: the float64 reference oracle against Pinocchio, robot by robot."""

from __future__ import annotations

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio", reason="pinocchio (pin, pinned in requirements.lock) is "
                          "not installed in this interpreter")

from support import (  # noqa: E402
    ROBOTS,
    assert_scaled_close,
    pinocchio_case,
    pinocchio_forces,
    symmetric_from_upper,
)

TOL = 1e-9
BATCH = 24


@pytest.fixture(scope="module", params=sorted(ROBOTS), ids=sorted(ROBOTS))
def case(request):
    return pinocchio_case(request.param, BATCH, seed=len(request.param))


def test_dimensions_and_joint_order(case):
    ref, pm, _, _ = case
    assert (ref.nq, ref.nv, ref.nb) == (pm.nq, pm.nv, pm.njoints - 1)
    assert ref.joint_names == tuple(pm.names[1:])
    for i, body in enumerate(ref.model.bodies):
        assert pm.inertias[i + 1].mass == pytest.approx(body.inertia.mass, rel=1e-12)
        np.testing.assert_allclose(body.inertia.spatial_matrix(), pm.inertias[i + 1].matrix(),
                                   atol=1e-12)


@pytest.mark.parametrize("with_qdd", [False, True])
@pytest.mark.parametrize("with_fext", [False, True])
def test_inverse_dynamics(case, with_qdd, with_fext):
    ref, pm, pd, s = case
    qdd = s.qdd if with_qdd else np.zeros_like(s.qd)
    f_ext = s.f_ext if with_fext else None
    ours = ref.inverse_dynamics(s.q, s.qd, qdd if with_qdd else None, f_ext)
    theirs = np.stack([
        pin.rnea(pm, pd, s.q[b], s.qd[b], qdd[b], pinocchio_forces(s.f_ext[b], ref.nb))
        if with_fext else pin.rnea(pm, pd, s.q[b], s.qd[b], qdd[b])
        for b in range(BATCH)])
    assert_scaled_close(ours, theirs, TOL, "inverse_dynamics")
    np.testing.assert_array_equal(ref.rnea(s.q, s.qd, qdd, f_ext), ours)


@pytest.mark.parametrize("gravity", [-3.71, np.array([0.4, -1.0, -9.0])])
def test_inverse_dynamics_gravity(case, gravity):
    ref, pm, pd, s = case
    pm_g = pm.copy()
    pm_g.gravity.linear = np.array([0.0, 0.0, gravity]) if np.ndim(gravity) == 0 else gravity
    pd_g = pm_g.createData()
    theirs = np.stack([pin.rnea(pm_g, pd_g, s.q[b], s.qd[b], s.qdd[b]) for b in range(BATCH)])
    assert_scaled_close(ref.inverse_dynamics(s.q, s.qd, s.qdd, gravity=gravity), theirs, TOL,
                        "inverse_dynamics with gravity")


def test_mass_matrix_and_inverse(case):
    ref, pm, pd, s = case
    M = ref.crba(s.q)
    Minv = ref.minv(s.q)
    theirs_M = np.stack([symmetric_from_upper(pin.crba(pm, pd, s.q[b])) for b in range(BATCH)])
    theirs_Minv = np.stack([symmetric_from_upper(pin.computeMinverse(pm, pd, s.q[b]))
                            for b in range(BATCH)])
    assert_scaled_close(M, theirs_M, TOL, "crba")
    np.testing.assert_array_equal(M, np.swapaxes(M, 1, 2))
    assert_scaled_close(Minv, theirs_Minv, TOL, "minv")


@pytest.mark.parametrize("method", ["forward_dynamics", "aba"])
def test_forward_dynamics(case, method):
    ref, pm, pd, s = case
    ours = getattr(ref, method)(s.q, s.qd, s.u, s.f_ext)
    theirs = np.stack([pin.aba(pm, pd, s.q[b], s.qd[b], s.u[b],
                               pinocchio_forces(s.f_ext[b], ref.nb)) for b in range(BATCH)])
    assert_scaled_close(ours, theirs, TOL, method)
    ours_free = getattr(ref, method)(s.q, s.qd, s.u)
    theirs_free = np.stack([pin.aba(pm, pd, s.q[b], s.qd[b], s.u[b]) for b in range(BATCH)])
    assert_scaled_close(ours_free, theirs_free, TOL, f"{method} without f_ext")


def test_forward_kinematics_every_body(case):
    ref, pm, pd, s = case
    ours = ref.forward_kinematics(s.q)
    for b in range(BATCH):
        pin.forwardKinematics(pm, pd, s.q[b])
        theirs = np.stack([pd.oMi[i + 1].homogeneous for i in range(ref.nb)])
        assert_scaled_close(ours[b:b + 1], theirs[None], TOL, "forward_kinematics")


def test_end_effector_pose_leaves(case):
    ref, pm, pd, s = case
    ours = ref.end_effector_pose(s.q)
    assert ours.shape == (BATCH, 6 * len(ref.model.leaves))
    for b in range(BATCH):
        pin.forwardKinematics(pm, pd, s.q[b])
        theirs = np.concatenate([
            np.concatenate([pd.oMi[i + 1].translation, pin.rpy.matrixToRpy(pd.oMi[i + 1].rotation)])
            for i in ref.model.leaves])
        assert_scaled_close(ours[b:b + 1], theirs[None], TOL, "end_effector_pose")


def test_center_of_mass_and_energy(case):
    ref, pm, pd, s = case
    com, J = ref.com(s.q)
    energy = ref.energy(s.q, s.qd)
    for b in range(BATCH):
        np.testing.assert_allclose(com[b], pin.centerOfMass(pm, pd, s.q[b]), rtol=0, atol=TOL)
        J_pin = pin.jacobianCenterOfMass(pm, pd, s.q[b])
        assert_scaled_close(J[b:b + 1], J_pin[None], TOL, "com jacobian")
        kinetic = pin.computeKineticEnergy(pm, pd, s.q[b], s.qd[b])
        potential = pin.computePotentialEnergy(pm, pd, s.q[b])
        assert_scaled_close(energy[b:b + 1], np.array([[kinetic, potential,
                                                         kinetic + potential]]),
                            TOL, "energy")
