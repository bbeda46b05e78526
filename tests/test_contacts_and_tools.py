"""Contact frames and welded tools (issue 16, items 3 and 4) on the CPU build: contact
points and Jacobians against the float64 reference's frames; `contact_fext` and
`tool_fext` against the generalized force `J^T w` the reference's inverse dynamics sees
(`ID(f_ext) = ID - sum J_c^T w_c`); an attached tool against a reference rebuilt with the
payload merged into the body by the parallel-axis theorem."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from support import ROBOTS, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen.model import Inertia
from grid_rbd import interop
from grid_rbd.reference import ReferenceRobot

FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def go2(store):
    h = grid_rbd.register_robot("go2_contacts", urdf_path=str(ROBOTS["go2"].path),
                                floating_base=True, dtype="float64", contact_frames=FEET,
                                algorithm_list=["world_kinematics", "inverse_dynamics"],
                                device="cpu", cache_dir=store)
    yield h
    h.close()


@pytest.fixture(scope="module")
def iiwa(store):
    h = grid_rbd.register_robot("iiwa14_tool", urdf_path=str(ROBOTS["iiwa14"].path),
                                dtype="float64", enable_tool=True,
                                algorithm_list=["world_kinematics", "inverse_dynamics",
                                                "forward_dynamics"],
                                device="cpu", cache_dir=store)
    yield h
    h.close()


def _ref(robot):
    return reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)


def _generalized(ref, q, frame, wrench):
    """`J^T w` of a world-aligned wrench about `frame`'s origin."""
    J = ref.frame_jacobian(q, frame, "LOCAL_WORLD_ALIGNED")
    return np.einsum("bri,br->bi", J, wrench)


def test_contact_points_and_jacobians(go2):
    ref = _ref("go2")
    s = random_states(ref.model, 5, seed=120)
    assert go2.contact_frames == tuple(FEET)
    P = go2.contact_positions(s.q)
    J = go2.contact_jacobians(s.q)
    assert P.shape == (5, 4, 3) and J.shape == (5, 4, 3, ref.nv)
    for k, name in enumerate(FEET):
        _, p = interop.frame_placement(ref, s.q, name)
        np.testing.assert_allclose(P[:, k], p, atol=1e-12)
        np.testing.assert_allclose(J[:, k], ref.frame_jacobian(s.q, name)[:, :3], atol=1e-12)
    np.testing.assert_allclose(go2.contact_positions(s.q[0]), P[0], atol=1e-15)


def test_contact_wrenches_act_as_their_generalized_forces(go2):
    ref = _ref("go2")
    s = random_states(ref.model, 4, seed=121)
    wrenches = np.random.default_rng(122).standard_normal((4, 4, 6)) * 20.0
    fext = go2.contact_fext(s.q, wrenches)
    assert fext.shape == (4, 6 * ref.nb)
    np.testing.assert_allclose(go2.contact_fext(s.q, wrenches.reshape(4, 24)), fext)
    plain = ref.inverse_dynamics(s.q, s.qd, s.qdd)
    expected = plain - sum(_generalized(ref, s.q, name, wrenches[:, k])
                           for k, name in enumerate(FEET))
    np.testing.assert_allclose(ref.inverse_dynamics(s.q, s.qd, s.qdd, fext), expected,
                               rtol=1e-10, atol=1e-9)
    with pytest.raises(ValueError, match=r"expected \(B, 4, 6\) or \(B, 24\)"):
        go2.contact_fext(s.q, wrenches[:, :3])


def test_contact_frames_are_checked_and_keyed(store):
    kw = dict(urdf_path=str(ROBOTS["go2"].path), floating_base=True, dtype="float64",
              algorithm_list=["world_kinematics"], device="cpu", cache_dir=store)
    with pytest.raises(ValueError, match="'FL_calf_joint' is a moving joint"):
        grid_rbd.register_robot("bad1", contact_frames=["FL_calf_joint"], **kw)
    with pytest.raises(ValueError, match="contact_frames: .*no frame 'toe'"):
        grid_rbd.register_robot("bad2", contact_frames=["toe"], **kw)
    plain = grid_rbd.register_robot("go2_no_contacts", **kw)
    with_two = grid_rbd.register_robot("go2_two_contacts", contact_frames=FEET[:2], **kw)
    assert plain.contact_frames == () and with_two.contact_frames == tuple(FEET[:2])
    assert plain.registration.entry_dir != with_two.registration.entry_dir
    with pytest.raises(RuntimeError, match="registered without contact frames"):
        plain.contact_fext(np.zeros((1, plain.nq)), np.zeros((1, 0, 6)))
    plain.close()
    with_two.close()


def _with_payload(model, body, mass, com, inertia):
    """The model with a point-of-view-independent merge: the payload (mass at `com`,
    `inertia` about it, both in the body frame) and the body's own inertia combined by
    the parallel-axis theorem."""
    own = model.bodies[body].inertia
    m = own.mass + mass
    c = (own.mass * own.com + mass * com) / m

    def about(c_own, m_own, I_own):
        d = c_own - c
        return I_own + m_own * (d @ d * np.eye(3) - np.outer(d, d))

    I = about(own.com, own.mass, own.inertia_com) + about(com, mass, inertia)
    bodies = list(model.bodies)
    bodies[body] = dataclasses.replace(bodies[body], inertia=Inertia(m, c, I))
    return dataclasses.replace(model, bodies=tuple(bodies))


def test_an_attached_tool_changes_the_dynamics_and_detaches(iiwa):
    ref = _ref("iiwa14")
    s = random_states(ref.model, 5, seed=123)
    before = iiwa.inverse_dynamics(s.q, s.qd, s.qdd)
    version = iiwa.model_version
    com, inertia, tip = np.array([0.01, 0.0, 0.08]), np.diag([0.02, 0.02, 0.01]), [0, 0, 0.15]
    assert iiwa.attach_tool("iiwa_link_7", mass=2.5, com=com, inertia=inertia, tip=tip) \
        > version
    body = ref.model.joint_index("iiwa_joint_7")
    loaded = ReferenceRobot(_with_payload(ref.model, body, 2.5, com, inertia))
    np.testing.assert_allclose(iiwa.inverse_dynamics(s.q, s.qd, s.qdd),
                               loaded.inverse_dynamics(s.q, s.qd, s.qdd), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(iiwa.forward_dynamics(s.q, s.qd, s.u),
                               loaded.forward_dynamics(s.q, s.qd, s.u), rtol=1e-9, atol=1e-9)
    assert iiwa.tool["mass"] == 2.5 and iiwa.tool["frame"] == "iiwa_link_7"
    # the tip: a frame of the frame methods, and the point tool_fext's wrench acts at
    R7, p7 = interop.frame_placement(ref, s.q, "iiwa_link_7")
    tip_pose = iiwa.end_effector_pose_runtime(s.q, ["tool_tip"]).reshape(5, 6)
    np.testing.assert_allclose(tip_pose[:, :3], p7 + R7 @ np.array(tip, float), atol=1e-12)
    wrench = np.random.default_rng(124).standard_normal((5, 6)) * 10.0
    fext = iiwa.tool_fext(s.q, wrench)
    J_tip = iiwa.frame_jacobian(s.q, "tool_tip")
    np.testing.assert_allclose(
        loaded.inverse_dynamics(s.q, s.qd, s.qdd, fext),
        loaded.inverse_dynamics(s.q, s.qd, s.qdd) - np.einsum("bri,br->bi", J_tip, wrench),
        rtol=1e-10, atol=1e-9)
    iiwa.detach_tool()
    assert iiwa.tool is None
    np.testing.assert_allclose(iiwa.inverse_dynamics(s.q, s.qd, s.qdd), before, atol=1e-12)
    with pytest.raises(KeyError, match="no frame 'tool_tip'"):
        iiwa.frame_jacobian(s.q, "tool_tip")
    with pytest.raises(RuntimeError, match="no tool is attached"):
        iiwa.detach_tool()


def test_tool_arguments_are_checked(iiwa, go2):
    with pytest.raises(RuntimeError, match="without enable_tool=True"):
        go2.attach_tool("FL_foot", mass=1.0)
    with pytest.raises(ValueError, match="mass must be finite and >= 0"):
        iiwa.attach_tool("iiwa_link_7", mass=-1.0)
    with pytest.raises(ValueError, match="positive semi-definite"):
        iiwa.attach_tool("iiwa_link_7", mass=1.0, inertia=[1.0, -2.0, 1.0])
    with pytest.raises(ValueError, match="com must be 3 finite numbers"):
        iiwa.attach_tool("iiwa_link_7", mass=1.0, com=[0, 0])
    assert iiwa.tool is None
