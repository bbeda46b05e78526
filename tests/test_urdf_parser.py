"""URDF -> RobotModel: topology, joint order, merged inertias and every bad-input class."""

from __future__ import annotations

import logging

import numpy as np
import pinocchio as pin
import pytest
from support import ROBOTS, assert_scaled_close, example_robot_data_dir

import grid_rbd.reference as reference
from grid_codegen import JointType, URDFError, parse_urdf


def robot_data_path(relative: str):
    return example_robot_data_dir() / relative


def robot_data_has(relative: str) -> bool:
    try:
        return robot_data_path(relative).is_file()
    except FileNotFoundError:
        return False


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


def test_frames_are_found_by_fixed_joint_moving_joint_or_link_name():
    """A link welded by a fixed joint is the same frame as that joint's; a moving joint
    names its child body's frame; an unknown name lists the three kinds of choices."""
    model = parse_urdf(ROBOTS["panda"].path)
    by_joint, by_link = model.end_effector_frames(("panda_hand_tcp_joint", "panda_hand_tcp"))
    assert by_link.kind == "link" and by_link.name == "panda_hand_tcp"
    assert by_link.body == by_joint.body
    np.testing.assert_allclose(by_link.placement.R, by_joint.placement.R, atol=1e-15)
    np.testing.assert_allclose(by_link.placement.p, by_joint.placement.p, atol=1e-15)
    moving = model.resolve_frame("panda_joint4")
    assert moving.kind == "body" and model.body_names[moving.body] == "panda_link4"
    link4 = model.resolve_frame("panda_link4")
    assert link4.body == moving.body and not link4.placement.p.any()
    with pytest.raises(KeyError) as err:
        model.resolve_frame("tool0")
    text = str(err.value)
    assert "no frame 'tool0'" in text and "panda_hand_tcp_joint" in text
    assert "panda_joint1" in text and "panda_leftfinger" in text


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
    "planar joint off the xy plane": (
        _robot(_link("a"), _link("b"), _joint("j", "a", "b", kind="planar", axis="1 0 0")),
        r"joint 'j': a planar joint moves in the xy plane of its frame"),
    "NaN": (_robot(_link("a", com="0 nan 0")), r"link 'a': xyz=\"0 nan 0\" holds NaN or inf"),
    "inf": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis="0 inf 1")),
            r"joint 'j': xyz=\"0 inf 1\" holds NaN or inf"),
    "zero axis": (_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis="0 0 0")),
                  r"joint 'j': axis is zero"),
    "not a number": (_robot(_link("a", mass="heavy")),  # type: ignore[arg-type]
                     r"link 'a': value=\"heavy\" is not a list of numbers"),
    "duplicate link": (_robot(_link("a"), _link("a")), r"link 'a': defined twice"),
    "absurd length": (_robot(_link("a", com="1e200 0 0")),
                      r"link 'a': origin xyz 1e\+200 0 0 lies beyond 1e\+06 m"),
    "absurd joint offset": (_robot(_link("a"), _link("b"), _joint(
        "j", "a", "b", origin='xyz="0 -2e6 0"')), r"joint 'j': origin xyz 0 -2e\+06 0 lies"),
    "absurd mass": (_robot(_link("a", 1e300)), r"link 'a': mass 1e\+300 is beyond 1e\+09 kg"),
    "absurd inertia": (_robot(_link("a", inertia='ixx="1e200" iyy="1e200" izz="1e200"')),
                       r"link 'a': an inertia entry of 1e\+200 is beyond 1e\+12 kg m\^2"),
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


# -- names (issue 12): validated where they enter -------------------------------------------
UNSAFE_NAMES = {
    "carriage return": "j&#13;x", "line feed": "j&#10;x", "tab": "j&#9;x",
    "C1 next line": "j&#x85;x", "bidi override": "j&#x202E;x", "zero-width joiner": "j&#x200D;x",
    "line separator": "j&#x2028;x", "paragraph separator": "j&#x2029;x",
    "private use": "j&#xE000;x", "empty": "", "too long": "n" * 257,
}
PLACES = {
    "robot": lambda n: _robot(_link("a"), _link("b"), _joint("j", "a", "b")).replace(
        b'name="test"', f'name="{n}"'.encode()),
    "link": lambda n: _robot(_link(n), _link("b"), _joint("j", n, "b")),
    "joint": lambda n: _robot(_link("a"), _link("b"), _joint(n, "a", "b")),
    "child link": lambda n: _robot(_link("a"), _link("b"), _joint("j", "a", n)),
    "mimic joint": lambda n: _robot(_link("a"), _link("b"), _joint(
        "j", "a", "b", extra=LIMIT + f'<mimic joint="{n}"/>')),
}
ELEMENT = {"robot": r"<robot> name", "link": r"<link> name", "joint": r"<joint> name",
           "child link": r"joint 'j': <child> link", "mimic joint": r"joint 'j': <mimic> joint"}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", sorted(UNSAFE_NAMES))
def test_unsafe_names_are_refused_naming_the_element(place, kind):
    data = PLACES[place](UNSAFE_NAMES[kind])
    with pytest.raises(URDFError, match=rf"^<urdf string>:\d+: {ELEMENT[place]}: ") as info:
        parse_urdf(data)
    message = str(info.value)
    assert message.isprintable(), "the error itself must not carry the unsafe character"
    expected = {"empty": "is empty", "too long": "is 257 characters long"}.get(
        kind, "names must be printable text")
    assert expected in message


def test_printable_unicode_and_punctuation_names_are_kept_exactly():
    names = ["\u00e9l\u00e9ment \u4e2d\u6587", "q&quot;uote\\back*/slash", "??/ #define X 1",
             "100% sure"]
    decoded = ["\u00e9l\u00e9ment \u4e2d\u6587", 'q"uote\\back*/slash', "??/ #define X 1",
               "100% sure"]
    data = _robot(_link(names[0]), _link(names[1]), _link("c"),
                  _joint(names[2], names[0], names[1]), _joint(names[3], names[1], "c"))
    model = parse_urdf(data)
    assert model.body_names == (decoded[1], "c")
    assert model.joint_names == (decoded[2], decoded[3])
    assert model.frames[0].name == decoded[0]


def test_nul_byte_and_non_ascii_digits_are_refused():
    with pytest.raises(URDFError, match=r"NUL byte at offset"):
        parse_urdf(_robot(_link("a")).replace(b"<link", b"\0<link", 1))
    for text in ("1_0", "\u0661", "0x10", "1e", "."):
        with pytest.raises(URDFError, match=r"is not a list of numbers"):
            parse_urdf(_robot(_link("a", mass=text)))  # type: ignore[arg-type]
    with pytest.raises(URDFError, match=r"overflows a double"):
        parse_urdf(_robot(_link("a", mass="1e999")))  # type: ignore[arg-type]


def test_error_lines_are_exact_on_the_fast_and_the_checked_path():
    body = [_link("a"), _link("b"), _joint("j", "a", "b"), _joint("k", "b", "bad")]
    lines = ['<?xml version="1.0"?>', '<robot name="r">', *body, "",
             '<link name="bad"><inertial><mass value="-2"/></inertial></link>', "</robot>"]
    fast = "\n".join(lines).encode()
    with pytest.raises(URDFError, match=r"^<urdf string>:8: link 'bad': mass -2.0 is negative"):
        parse_urdf(fast)
    # A declared encoding outside the ASCII-compatible set takes the checked parser.
    checked = fast.replace(b'version="1.0"', b'version="1.0" encoding="cp1252"')
    with pytest.raises(URDFError, match=r"^<urdf string>:8: link 'bad'"):
        parse_urdf(checked)
    with pytest.raises(URDFError, match=r"DOCTYPE declarations are refused"):
        parse_urdf(checked.replace(b"<robot", b'<!DOCTYPE r [<!ENTITY e "x">]><robot', 1))


# -- structure at scale: iterative and linear ---------------------------------------------
def _chain(n: int, seed: int = 0, fixed_every: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    parts = ['<robot name="chain">']
    for i in range(n + 1):
        m, c = rng.uniform(0.1, 2.0), rng.uniform(-0.1, 0.1, 3)
        d = rng.uniform(0.01, 0.1, 3)
        parts.append(f'<link name="l{i}"><inertial><origin xyz="{c[0]} {c[1]} {c[2]}" '
                     f'rpy="{c[2]} {c[0]} {c[1]}"/><mass value="{m}"/><inertia ixx="{d[0]}" '
                     f'ixy="0" ixz="0" iyy="{d[1]}" iyz="0" izz="{d[2]}"/></inertial></link>')
    for i in range(n):
        kind = "fixed" if fixed_every and i % fixed_every == fixed_every - 1 else "revolute"
        a, o = rng.normal(size=3), rng.uniform(-0.2, 0.2, 3)
        parts.append(f'<joint name="j{i}" type="{kind}"><parent link="l{i}"/>'
                     f'<child link="l{i + 1}"/><origin xyz="{o[0]} {o[1]} {o[2]}" '
                     f'rpy="{o[1]} {o[2]} {o[0]}"/><axis xyz="{a[0]} {a[1]} {a[2]}"/>'
                     f'<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>')
    return ("\n".join(parts) + "\n</robot>\n").encode()


def test_deep_chain_parses_without_recursion_and_matches_pinocchio(tmp_path):
    import sys

    depth = max(3000, sys.getrecursionlimit() * 3)
    model = parse_urdf(_chain(depth, fixed_every=5))
    moving = depth - depth // 5
    assert model.nv == moving and model.parents == (-1, *range(moving - 1))
    assert model.joint_names[:4] == ("j0", "j1", "j2", "j3") and "j4" not in model.joint_names
    # The first 60 bodies' dynamics against Pinocchio on the same URDF prefix.
    path = tmp_path / "chain.urdf"
    path.write_bytes(_chain(60, fixed_every=5))
    ref, pm = reference.load(path), pin.buildModelFromUrdf(str(path))
    rng = np.random.default_rng(1)
    q, qd, qdd = (rng.uniform(-1, 1, ref.nv) for _ in range(3))
    assert_scaled_close(ref.inverse_dynamics(q, qd, qdd),
                        pin.rnea(pm, pm.createData(), q, qd, qdd)[None], 1e-10, "chain rnea")


def test_parse_time_is_linear_in_the_number_of_links():
    import time

    def seconds(n: int) -> float:
        data = _chain(n, seed=n, fixed_every=3)
        start = time.process_time()
        parse_urdf(data)
        return time.process_time() - start

    seconds(500)  # warm the caches
    small, large = min(seconds(1500) for _ in range(2)), seconds(15000)
    # Ten times the links: linear is about 10x; the old quadratic parser was about 100x.
    assert large < 25 * small + 0.5, f"1,500 links {small:.2f} s, 15,000 links {large:.2f} s"


# -- axes, degrees of freedom ---------------------------------------------------------------
@pytest.mark.parametrize("axis", ["1e200 0 0", "1e-300 0 0", "5e-324 0 0", "1e308 0 0"])
def test_extreme_axis_scales_are_the_unit_x_axis(axis):
    tiny = parse_urdf(_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis=axis)))
    unit = parse_urdf(_robot(_link("a"), _link("b"), _joint("j", "a", "b", axis="1 0 0")))
    np.testing.assert_array_equal(tiny.joints[0].axis, [1.0, 0.0, 0.0])
    robot, plain = reference.ReferenceRobot(tiny), reference.ReferenceRobot(unit)
    q, qd, u = np.array([[0.3]]), np.array([[-2.0]]), np.array([[0.7]])
    qdd = robot.forward_dynamics(q, qd, u)
    assert np.isfinite(qdd).all()
    np.testing.assert_array_equal(qdd, plain.forward_dynamics(q, qd, u))


def test_huge_components_normalise_without_overflow():
    model = parse_urdf(_robot(_link("a"), _link("b"),
                              _joint("j", "a", "b", axis="1e308 -1e308 1e308")))
    np.testing.assert_allclose(model.joints[0].axis, np.array([1.0, -1.0, 1.0]) / np.sqrt(3),
                               rtol=0, atol=1e-16)


def test_zero_dof_models_are_refused_and_a_free_base_is_not_zero_dof():
    fixed_only = _robot(_link("a"), _link("b"), _joint("j", "a", "b", kind="fixed"))
    with pytest.raises(URDFError, match=r"robot 'test': has no degree of freedom: every joint "
                                        r"of the fixed base 'a' is fixed"):
        parse_urdf(fixed_only)
    with pytest.raises(URDFError, match=r"has no degree of freedom"):
        parse_urdf(_robot(_link("lonely")))
    floating = parse_urdf(fixed_only, floating_base=True)
    assert (floating.nq, floating.nv, floating.nb) == (7, 6, 1)


# -- robots as they come (issue 21, item 3) ---------------------------------------------------
def _rotated_inertia(moments: tuple[float, float, float]) -> tuple[str, np.ndarray]:
    R = reference_rotation()
    I = R @ np.diag(moments) @ R.T
    attrs = (f'ixx="{I[0, 0]!r}" ixy="{I[0, 1]!r}" ixz="{I[0, 2]!r}" iyy="{I[1, 1]!r}" '
             f'iyz="{I[1, 2]!r}" izz="{I[2, 2]!r}"')
    return attrs.replace("np.float64(", "").replace(")", ""), R


def reference_rotation() -> np.ndarray:
    from grid_codegen import rpy_to_matrix

    return rpy_to_matrix(0.4, -0.7, 1.1)


def test_small_negative_principal_moment_is_clamped_with_one_warning(caplog):
    from grid_codegen.urdf import INERTIA_CLAMP_TOLERANCE

    negative = -0.5 * INERTIA_CLAMP_TOLERANCE * 3.0  # half the tolerance of the trace 3.0
    attrs, R = _rotated_inertia((negative, 1.0, 2.0))
    data = _robot(_link("base"), f'<link name="arm"><inertial><mass value="2"/>'
                                 f'<inertia {attrs}/></inertial></link>',
                  _joint("j", "base", "arm", origin='xyz="0 0 0" rpy="0 0 0"'))
    with caplog.at_level(logging.WARNING, logger="grid_codegen.urdf"):
        model = parse_urdf(data)
    records = [r for r in caplog.records if "negative principal moment" in r.getMessage()]
    assert len(records) == 1 and "link 'arm'" in records[0].getMessage()
    # The nearest positive semi-definite inertia: the negative moment set to zero.
    np.testing.assert_allclose(model.bodies[0].inertia.inertia_com,
                               R @ np.diag([0.0, 1.0, 2.0]) @ R.T, rtol=0, atol=1e-14)
    assert np.linalg.eigvalsh(model.bodies[0].inertia.inertia_com).min() > -1e-15


def test_larger_negative_moment_stays_an_error():
    from grid_codegen.urdf import INERTIA_CLAMP_TOLERANCE

    attrs, _ = _rotated_inertia((-2 * INERTIA_CLAMP_TOLERANCE * 3.0, 1.0, 2.0))
    data = _robot(_link("base"), f'<link name="arm"><inertial><mass value="2"/>'
                                 f'<inertia {attrs}/></inertial></link>',
                  _joint("j", "base", "arm"))
    with pytest.raises(URDFError, match=r"link 'arm': inertia is not positive semi-definite "
                                        r"\(principal moments -0.006, 1, 2\)"):
        parse_urdf(data)


@pytest.mark.skipif(not robot_data_has("tiago_description/robots/tiago.urdf"),
                    reason="example-robot-data's tiago is not installed")
def test_tiago_loads_as_pinocchio_does_with_its_antennas_clamped(caplog):
    path = robot_data_path("tiago_description/robots/tiago.urdf")
    with caplog.at_level(logging.WARNING, logger="grid_codegen.urdf"):
        model = parse_urdf(path, floating_base=True)
    clamped = sorted(r.getMessage().split("link '")[1].split("'")[0] for r in caplog.records
                     if "negative principal moment" in r.getMessage())
    assert clamped == ["base_antenna_left_link", "base_antenna_right_link"]
    pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    assert model.joint_names == tuple(pm.names[1:])
    for i in range(model.nb):
        ours, theirs = model.bodies[i].inertia.spatial_matrix(), pm.inertias[i + 1].matrix()
        if i == 0:  # the base carries both antennas: their clamps, and nothing else
            delta = ours - theirs
            assert np.abs(delta[:3]).max() < 1e-12 and np.abs(delta[:, :3]).max() < 1e-12
            moments = np.linalg.eigvalsh(delta[3:, 3:])  # what the clamps added: PSD
            np.testing.assert_allclose(moments.sum(), 2 * 3.5348562509602795e-08, rtol=1e-5)
            assert moments.min() > -1e-13
        else:
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def test_mimic_warnings_are_one_line_per_robot(caplog):
    mimics = "".join(f'<mimic joint="j{k}"/>' for k in range(1))
    data = _robot(_link("a"), _link("b"), _link("c"), _link("d"),
                  _joint("j0", "a", "b"), _joint("m1", "b", "c", extra=LIMIT + mimics),
                  _joint("m2", "c", "d", extra=LIMIT + '<mimic joint="m1" multiplier="2"/>'))
    with caplog.at_level(logging.WARNING, logger="grid_codegen.urdf"):
        parse_urdf(data)
    lines = [r.getMessage() for r in caplog.records if "mimic" in r.getMessage()]
    assert len(lines) == 1
    assert "2 mimic joints read as independent joints" in lines[0]
    assert "m1 (mimics j0)" in lines[0] and "m2 (mimics m1)" in lines[0]
