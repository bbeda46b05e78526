"""URDF -> RobotModel: topology, joint order, merged inertias and every bad-input class."""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import pytest
from support import ROBOTS, assert_scaled_close

import grid_rbd.reference as reference
from grid_codegen import JointType, URDFError, parse_urdf

FULL_INERTIA = 'ixx="0.1" ixy="0.01" ixz="-0.02" iyy="0.2" iyz="0.03" izz="0.3"'
LIMIT = '<limit lower="-3" upper="3" effort="10" velocity="5"/>'


def _link(name: str, mass: float = 1.0, inertia: str = FULL_INERTIA,
          com: str = "0.01 0.02 0.03") -> str:
    return (f'<link name="{name}"><inertial><origin xyz="{com}" rpy="0.1 0.2 0.3"/>'
            f'<mass value="{mass}"/><inertia {inertia}/></inertial></link>')


def _joint(name: str, parent: str, child: str, kind: str = "revolute",
           axis: str = "0 0 1", origin: str = 'xyz="0.1 0 0.2" rpy="0.3 -0.2 0.1"',
           extra: str = LIMIT) -> str:
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin {origin}/><axis xyz="{axis}"/>{extra}</joint>')


def _robot(*parts: str) -> bytes:
    return ('<?xml version="1.0"?>\n<robot name="test">\n' + "\n".join(parts)
            + "\n</robot>\n").encode()


# A branching tree with a fixed link in the middle, an unaligned axis, a prismatic and a
# continuous joint, children declared out of name order.
TREE = _robot(
    _link("base"), _link("a"), _link("b"), _link("welded", 0.7), _link("c"), _link("d"),
    _link("e", 0.4),
    _joint("j_z", "base", "a", axis="0.3 -0.5 0.81"),
    _joint("j_b", "a", "b", kind="prismatic", axis="1 1 0",
           extra='<limit lower="-0.1" upper="0.2" effort="5" velocity="1"/>'
                 '<dynamics damping="0.25" friction="0.125"/>'),
    _joint("fix", "a", "welded", kind="fixed"),
    _joint("j_c", "welded", "c", kind="continuous", axis="0 1 0"),
    _joint("j_a", "c", "d", axis="-1 0 0"),
    _joint("j_e", "b", "e"),
)


def test_tree_topology_and_pinocchio_order(tmp_path):
    path = tmp_path / "tree.urdf"
    path.write_bytes(TREE)
    model = parse_urdf(path)
    pm = pin.buildModelFromUrdf(str(path))
    assert model.joint_names == tuple(pm.names[1:])
    # 'fix' sorts before 'j_b', so the welded link's subtree comes first.
    assert model.joint_names == ("j_z", "j_c", "j_a", "j_b", "j_e")
    assert model.body_names == ("a", "c", "d", "b", "e")
    assert model.parents == (-1, 0, 1, 0, 3)
    assert model.levels == ((0,), (1, 3), (2, 4))
    assert model.subtrees[0] == (0, 1, 2, 3, 4) and model.subtrees[1] == (1, 2)
    assert model.leaves == (2, 4)
    assert model.joints[1].type is JointType.REVOLUTE and model.joints[1].nq == 1
    assert model.joints[3].type is JointType.PRISMATIC
    np.testing.assert_allclose(model.joints[0].axis, np.array([0.3, -0.5, 0.81])
                               / np.linalg.norm([0.3, -0.5, 0.81]))
    limits = model.joints[3].limits
    assert (limits.lower, limits.upper, limits.effort, limits.velocity) == (-0.1, 0.2, 5, 1)
    assert (model.joints[3].damping, model.joints[3].friction) == (0.25, 0.125)
    assert np.isinf(model.joints[1].limits.upper)  # continuous: unbounded
    # The welded link's inertia is composed into body 'a', as Pinocchio does.
    for i in range(model.nb):
        np.testing.assert_allclose(model.bodies[i].inertia.spatial_matrix(),
                                   pm.inertias[i + 1].matrix(), atol=1e-12)
    assert model.frame("fix").body == 0 and model.frame("welded").body == 0


def test_tree_dynamics_match_pinocchio_with_continuous_joint(tmp_path):
    path = tmp_path / "tree.urdf"
    path.write_bytes(TREE)
    ref = reference.load(path)
    pm = pin.buildModelFromUrdf(str(path))
    pd = pm.createData()
    rng = np.random.default_rng(3)
    q = rng.uniform(-np.pi, np.pi, (6, ref.nq))
    qd, qdd = rng.uniform(-10, 10, (2, 6, ref.nv))
    for b in range(6):
        # Pinocchio encodes a continuous joint as (cos, sin); ours is the angle itself.
        c = ref.model.joints[1].idx_q
        q_pin = np.concatenate([q[b, :c], [np.cos(q[b, c]), np.sin(q[b, c])], q[b, c + 1:]])
        tau = pin.rnea(pm, pd, q_pin, qd[b], qdd[b])
        assert_scaled_close(ref.inverse_dynamics(q[b], qd[b], qdd[b]), tau[None], 1e-12,
                            "rnea on the test tree")


def test_floating_base_adds_free_flyer(tmp_path):
    path = tmp_path / "tree.urdf"
    path.write_bytes(TREE)
    model = parse_urdf(path, floating_base=True)
    assert model.joint_names[0] == "root_joint"
    assert model.joints[0].type is JointType.FREE_FLYER
    assert (model.nq, model.nv, model.nb) == (7 + 5, 6 + 5, 6)
    assert model.body_names[0] == "base" and model.parents[1] == 0


def test_mimic_is_read_as_independent_joint_with_warning(caplog):
    with caplog.at_level(logging.WARNING):
        model = parse_urdf(ROBOTS["panda"].path)
    finger = model.joints[model.joint_index("panda_finger_joint2")]
    assert finger.mimic is not None and finger.mimic.joint == "panda_finger_joint1"
    assert "panda_finger_joint2" in caplog.text and "independent" in caplog.text


def test_end_effector_frames_default_to_leaves_and_accept_fixed_joints():
    model = parse_urdf(ROBOTS["panda"].path)
    assert [f.name for f in model.end_effector_frames()] == ["panda_leftfinger",
                                                             "panda_rightfinger"]
    (tcp,) = model.end_effector_frames(("panda_hand_tcp_joint",))
    assert tcp.kind == "fixed_joint" and model.body_names[tcp.body] == "panda_link7"
    with pytest.raises(KeyError, match="no_such_joint"):
        model.end_effector_frames(("no_such_joint",))


def test_model_is_immutable():
    model = parse_urdf(ROBOTS["iiwa14"].path)
    with pytest.raises(AttributeError):
        model.name = "other"  # type: ignore[misc]
    with pytest.raises(ValueError):
        model.joints[0].axis[0] = 2.0


BAD = {
    "malformed XML": (b"<robot name='x'><link name='a'></robot>", r":1: XML: malformed XML"),
    "DOCTYPE": (b'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY e "boom">]>\n'
                b'<robot name="x"><link name="&e;"/></robot>', r"DOCTYPE declarations are refused"),
    "missing parent link": (_robot(_link("a"), _joint("j", "ghost", "a")),
                            r"joint 'j': parent link 'ghost' does not exist"),
    "missing child link": (_robot(_link("a"), _joint("j", "a", "ghost")),
                           r"joint 'j': child link 'ghost' does not exist"),
    "cycle": (_robot(_link("a"), _link("b"), _joint("j1", "a", "b"), _joint("j2", "b", "a")),
              r"cycle"),
    "cycle beside a root": (_robot(_link("r"), _link("a"), _link("b"), _joint("j0", "r", "a"),
                                   _joint("j1", "a", "b"), _joint("j2", "b", "a")),
                            r"joint 'j2': link 'a' already has parent joint 'j0'"),
    "unreachable cycle": (_robot(_link("r"), _link("a"), _link("b"),
                                 _joint("j1", "a", "b"), _joint("j2", "b", "a")),
                          r"cycle: links a, b are not reachable from the root 'r'"),
    "two roots": (_robot(_link("a"), _link("b"), _link("c"), _joint("j", "a", "b")),
                  r"2 roots \(a, c\)"),
    "negative mass": (_robot(_link("a", -1.0)), r"link 'a': mass -1.0 is negative"),
    "indefinite inertia": (_robot(_link("a", inertia='ixx="0.1" iyy="0.1" izz="0.1" ixy="0.5" '
                                                  'ixz="0" iyz="0"')),
                           r"link 'a': inertia is not positive semi-definite"),
    "unknown joint type": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", kind="hinge")),
                           r"joint 'j': unknown joint type 'hinge'"),
    "planar joint": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", kind="planar")),
                     r"joint 'j': joint type 'planar' is not supported"),
    "NaN": (_robot(_link("a", com="0 nan 0")), r"link 'a': xyz=\"0 nan 0\" holds NaN or inf"),
    "inf": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis="0 inf 1")),
            r"joint 'j': xyz=\"0 inf 1\" holds NaN or inf"),
    "zero axis": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis="0 0 0")),
                  r"joint 'j': axis is zero"),
    "not a number": (_robot(_link("a", mass="heavy")),  # type: ignore[arg-type]
                     r"link 'a': value=\"heavy\" is not a list of numbers"),
    "duplicate link": (_robot(_link("a"), _link("a")), r"link 'a': defined twice"),
    "not a robot": (b"<model/>", r"the root element must be <robot>"),
}


@pytest.mark.parametrize("case", sorted(BAD), ids=sorted(BAD))
def test_bad_urdf_is_refused_naming_file_and_element(tmp_path, case):
    data, pattern = BAD[case]
    path = tmp_path / "bad.urdf"
    path.write_bytes(data)
    with pytest.raises(URDFError, match=pattern) as info:
        parse_urdf(path)
    assert str(info.value).startswith(str(path) + ":")


def test_urdf_string_source_is_named():
    with pytest.raises(URDFError, match=r"^<urdf string>:"):
        parse_urdf(_robot(_link("a", -2.0)))
