"""Spherical, planar and floating URDF joints and true mimic coupling (issue 15, items 1
and 2): the parser's checks, the float64 reference against Pinocchio 4.1 (its
JointModelSpherical / JointModelPlanar, and `buildModelFromUrdf(..., mimic=True)`),
finite differences of the reduced-coordinate gradients, the generated CPU build against
the reference, and the store key (mimic=True keyed only when it changes the model).
GPU twins of the kernel checks carry the `gpu` tag."""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import Artifact
from joint_type_robots import BALL_CHAIN, GRIPPER, _joint, _link, _robot
from joint_type_robots import artifact as _artifact
from joint_type_robots import check_kernels as _check_kernels
from joint_type_robots import close as _close
from joint_type_robots import states as _states
from support import ROBOTS, robot_available

import grid_rbd.reference as reference
from grid_codegen import URDFError, parse_urdf
from grid_codegen.model import JointType
from grid_codegen.options import CodegenOptions
from grid_rbd.reference import configuration as C

pin = pytest.importorskip("pinocchio")

def _write(tmp_path, data: bytes, name: str) -> str:
    path = tmp_path / f"{name}.urdf"
    path.write_bytes(data)
    return str(path)


def _pin_twin(model):
    """Pinocchio's model of ours, joint by joint (its URDF parser has no ball joint)."""
    pm = pin.Model()
    ids: list[int] = []
    for i, j in enumerate(model.joints):
        kinds = {JointType.SPHERICAL: pin.JointModelSpherical,
                 JointType.PLANAR: pin.JointModelPlanar,
                 JointType.FREE_FLYER: pin.JointModelFreeFlyer}
        if j.type in kinds:
            jm = kinds[j.type]()
        elif j.type is JointType.REVOLUTE:
            jm = pin.JointModelRevoluteUnaligned(*j.axis)
        else:
            jm = pin.JointModelPrismaticUnaligned(*j.axis)
        jid = pm.addJoint(0 if j.parent < 0 else ids[j.parent], jm,
                          pin.SE3(j.placement.R, j.placement.p), j.name)
        b = model.bodies[i].inertia
        pm.appendBodyToJoint(jid, pin.Inertia(b.mass, b.com, b.inertia_com), pin.SE3.Identity())
        ids.append(jid)
    return pm


# -- the parser ------------------------------------------------------------------------
def test_joint_types_parse_as_pinocchio():
    model = parse_urdf(BALL_CHAIN)
    assert [j.type for j in model.joints] == [JointType.PLANAR, JointType.REVOLUTE,
                                              JointType.SPHERICAL, JointType.REVOLUTE]
    assert (model.nq, model.nv) == (4 + 1 + 4 + 1, 3 + 1 + 3 + 1)
    ball = parse_urdf(_robot("r", _link("a"), _link("b"), _joint("j", "a", "b", "ball")))
    assert ball.joints[0].type is JointType.SPHERICAL
    free = parse_urdf(_robot("r", _link("a"), _link("b"), _joint("j", "a", "b", "floating")))
    assert free.joints[0].type is JointType.FREE_FLYER and (free.nq, free.nv) == (7, 6)


@pytest.mark.parametrize("extra, kind, match", [
    ('<mimic joint="nope"/>', "revolute", r"joint 'm': <mimic joint=\"nope\">: the leader "
                                          "does not exist"),
    ('<mimic joint="fx"/>', "revolute", r"the leader is a fixed joint"),
    ('<mimic joint="m"/>', "revolute", r"joint 'm': mimics itself"),
    ('<mimic joint="j"/>', "spherical", r"a spherical joint cannot mimic"),
    ('<mimic joint="b"/>', "revolute", r"mimics 'b', a spherical joint"),
])
def test_bad_mimics_are_refused(extra, kind, match):
    data = _robot("r", _link("a"), _link("b"), _link("c"), _link("d"), _link("e"),
                  _joint("j", "a", "b"), _joint("m", "b", "c", kind, extra=extra),
                  _joint("fx", "c", "d", "fixed"), _joint("b", "d", "e", "spherical"))
    with pytest.raises(URDFError, match=match):
        parse_urdf(data, mimic=True)
    assert parse_urdf(data).coupling is None  # the independent reading stays lenient


def test_mimic_chains_and_cycles_are_refused():
    chain = _robot("r", _link("a"), _link("b"), _link("c"), _link("d"),
                   _joint("j", "a", "b"), _joint("m1", "b", "c", extra='<mimic joint="j"/>'),
                   _joint("m2", "c", "d", extra='<mimic joint="m1"/>'))
    with pytest.raises(URDFError, match=r"mimics 'm1', which mimics 'j' itself"):
        parse_urdf(chain, mimic=True)
    cycle = _robot("r", _link("a"), _link("b"), _link("c"),
                   _joint("m1", "a", "b", extra='<mimic joint="m2"/>'),
                   _joint("m2", "b", "c", extra='<mimic joint="m1"/>'))
    with pytest.raises(URDFError, match=r"which mimics"):
        parse_urdf(cycle, mimic=True)


# -- the reference against Pinocchio ---------------------------------------------------
def test_spherical_and_planar_reference_matches_pinocchio():
    model = parse_urdf(BALL_CHAIN)
    ref = reference.ReferenceRobot(model)
    pm = _pin_twin(model)
    pd = pm.createData()
    q, qd, qdd, u = _states(model, 4, 3, model.nq, model.nv)
    nv = model.nv
    for b in range(len(q)):
        _close(ref.inverse_dynamics(q[b], qd[b], qdd[b])[0], pin.rnea(pm, pd, q[b], qd[b],
                                                                       qdd[b]), 1e-12, "rnea")
        _close(ref.aba(q[b], qd[b], u[b])[0], pin.aba(pm, pd, q[b], qd[b], u[b]), 1e-10, "aba")
        M = pin.crba(pm, pd, q[b])
        _close(ref.crba(q[b])[0], np.triu(M) + np.triu(M, 1).T, 1e-12, "crba")
        pin.computeRNEADerivatives(pm, pd, q[b], qd[b], qdd[b])
        D = ref.inverse_dynamics_gradient(q[b], qd[b], qdd[b])[0]
        _close(D[:, :nv], pd.dtau_dq, 1e-11, "dtau/dq (quaternion block in the local chart)")
        _close(D[:, nv:], pd.dtau_dv, 1e-11, "dtau/dqd")
        pin.computeABADerivatives(pm, pd, q[b], qd[b], u[b])
        F = ref.forward_dynamics_gradient(q[b], qd[b], u[b])[0]
        _close(F[:, :nv], pd.ddq_dq, 1e-9, "dqdd/dq")
        dq = np.random.default_rng(b).normal(size=nv) * 0.4
        q1 = pin.integrate(pm, q[b], dq)
        _close(C.integrate(model, q[b], dq)[0], q1, 1e-12, "integrate")
        _close(C.difference(model, q[b], q1)[0], pin.difference(pm, q[b], q1), 1e-10,
               "difference")
        d0, d1 = C.integrate_jacobians(model, q[b], dq)
        _close(d0[0], pin.dIntegrate(pm, q[b], dq, pin.ARG0), 1e-12, "dIntegrate ARG0")
        _close(d1[0], pin.dIntegrate(pm, q[b], dq, pin.ARG1), 1e-12, "dIntegrate ARG1")
        _close(C.difference_jacobian(model, q[b], q1)[0],
               pin.dDifference(pm, q[b], q1, pin.ARG1), 1e-10, "dDifference ARG1")


def test_planar_urdf_matches_pinocchio_parser(tmp_path):
    path = _write(tmp_path, BALL_CHAIN.replace(b'type="spherical"', b'type="revolute"'), "p")
    ref = reference.load(path)
    pm = pin.buildModelFromUrdf(path)
    assert pm.joints[1].shortname() == "JointModelPlanar" and (pm.nq, pm.nv) == (ref.nq, ref.nv)
    q, qd, qdd, _ = _states(ref.model, 2, 5, ref.nq, ref.nv)
    _close(ref.inverse_dynamics(q, qd, qdd)[1], pin.rnea(pm, pm.createData(), q[1], qd[1],
                                                          qdd[1]), 1e-12, "rnea")


def test_mimic_reference_matches_pinocchio(tmp_path):
    path = _write(tmp_path, GRIPPER, "gripper")
    ref = reference.load(path, mimic=True)
    pm = pin.buildModelFromUrdf(path, mimic=True)
    pd = pm.createData()
    assert (ref.nq, ref.nv) == (pm.nq, pm.nv) == (3, 3)
    assert isinstance(reference.load(path), reference.ReferenceRobot)  # default: independent
    q, qd, qdd, u = _states(ref.model, 3, 7, ref.nq, ref.nv)
    for b in range(len(q)):
        _close(ref.inverse_dynamics(q[b], qd[b], qdd[b])[0],
               pin.rnea(pm, pd, q[b], qd[b], qdd[b]), 1e-12, "G^T rnea")
        M = pin.crba(pm, pd, q[b])
        M = np.triu(M) + np.triu(M, 1).T
        _close(ref.crba(q[b])[0], M, 1e-12, "G^T M G")
        nle = pin.nonLinearEffects(pm, pd, q[b], qd[b])
        _close(ref.forward_dynamics(q[b], qd[b], u[b])[0], np.linalg.solve(M, u[b] - nle),
               1e-10, "reduced forward dynamics")
        pin.framesForwardKinematics(pm, pd, q[b])
        for i, joint in enumerate(ref.model.joints):
            oMi = pd.oMi[pm.getJointId(joint.name)]
            fk = ref.forward_kinematics(q[b])[0, i]
            _close(fk[:3, :3], oMi.rotation, 1e-12, f"{joint.name} rotation")
            _close(fk[:3, 3], oMi.translation, 1e-12, f"{joint.name} position")


@pytest.mark.skipif(not robot_available("panda"), reason="example-robot-data is not installed")
def test_panda_fingers_mimic_matches_pinocchio():
    path = str(ROBOTS["panda"].path)
    ref = reference.load(path, mimic=True)
    pm = pin.buildModelFromUrdf(path, mimic=True)
    pd = pm.createData()
    assert (ref.nq, ref.nv) == (pm.nq, pm.nv) == (8, 8)
    assert ref.coupling.mimics == (("panda_finger_joint2", "panda_finger_joint1", 1.0, 0.0),)
    q, qd, qdd, _ = _states(ref.model, 2, 11, ref.nq, ref.nv)
    _close(ref.inverse_dynamics(q, qd, qdd)[1], pin.rnea(pm, pd, q[1], qd[1], qdd[1]), 1e-12,
           "panda rnea")


def test_mimic_gradients_match_finite_differences():
    model = parse_urdf(GRIPPER, mimic=True)
    ref = reference.CoupledReference(model)
    q, qd, qdd, u = (x[:1] for x in _states(model, 1, 2, ref.nq, ref.nv))
    h = 1e-6
    for name, f, D in (
            ("inverse dynamics", lambda q_, v_: ref.inverse_dynamics(q_, v_, qdd),
             ref.inverse_dynamics_gradient(q, qd, qdd)),
            ("forward dynamics", lambda q_, v_: ref.forward_dynamics(q_, v_, u),
             ref.forward_dynamics_gradient(q, qd, u))):
        cols = []
        for which in (0, 1):
            for k in range(ref.nv):
                e = np.zeros((1, ref.nv))
                e[0, k] = h
                args = [(q + e, qd), (q - e, qd)] if which == 0 else [(q, qd + e), (q, qd - e)]
                cols.append((f(*args[0]) - f(*args[1]))[0] / (2 * h))
        _close(D[0], np.stack(cols, axis=1), 1e-7, f"{name} gradient vs central differences")


# -- the generated build ----------------------------------------------------------------
def test_mimic_cpu_build_matches_reference():
    model = parse_urdf(GRIPPER, mimic=True)
    artifact = _artifact(model, "cpu")
    assert {a.variants for a in artifact.algorithms.values()} == {("thread",)}
    _check_kernels(artifact, reference.CoupledReference(model),
                   *_states(model, 5, 1, model.reduced_nq, model.reduced_nv))


def test_ball_chain_cpu_build_matches_reference():
    model = parse_urdf(BALL_CHAIN)
    artifact = _artifact(model, "cpu")
    q, qd, qdd, u = _states(model, 5, 4, model.nq, model.nv)
    q[0, 2:4] *= 3.0  # the kernels normalise the (cos, sin) pair and the quaternion,
    q[1, 5:9] *= 0.5  # as the reference does
    _check_kernels(artifact, reference.ReferenceRobot(model), q, qd, qdd, u)


def test_mimic_keys_only_when_it_changes_the_model(tmp_path):
    from grid_rbd._build import ensure_entry

    options = CodegenOptions(dtype="float64", algorithms=("inverse_dynamics",))

    def entry(name: str, data: bytes, mimic: bool):
        return ensure_entry(name, data, "<urdf string>", False, options, "cpu",
                            cache_dir=tmp_path, mimic=mimic)

    plain = _robot("plain", _link("a"), _link("b"), _joint("j", "a", "b"))
    r0 = entry("plain", plain, False)
    r1 = entry("plain", plain, True)  # no <mimic>: the same model, the same key
    assert r1.input_key == r0.input_key and r1.outcome == "hit"
    g0 = entry("gripper", GRIPPER, False)
    g1 = entry("gripper", GRIPPER, True)
    assert g1.input_key != g0.input_key
    assert Artifact(g1.so_path).nv == 3 and Artifact(g0.so_path).nv == 5
