"""grid_rbd.interop against Pinocchio: configurations converted to and from Pinocchio's
layout give the same dynamics there as here, and every Pinocchio frame is found by its
name with the same world placement."""

from __future__ import annotations

import numpy as np
import pytest
from support import example_robot_data_dir, robot_available

import grid_rbd.reference as reference
from grid_rbd import interop

pin = pytest.importorskip("pinocchio", reason="pinocchio (pin) is not installed")

# A branching robot with every joint kind: continuous, revolute, prismatic and fixed (a
# welded tool link and a sensor frame), so the Pinocchio layout differs from ours.
MIXED = """<robot name="mixed">
  <link name="base"><inertial><mass value="3"/><origin xyz="0 0 0.1"/>
    <inertia ixx="0.05" iyy="0.06" izz="0.04" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="wheel" type="continuous"><parent link="base"/><child link="l1"/>
    <origin xyz="0.1 0 0.2" rpy="0.3 0 0"/><axis xyz="0 0 1"/></joint>
  <link name="l1"><inertial><mass value="1.5"/><origin xyz="0.05 0.01 0"/>
    <inertia ixx="0.01" iyy="0.02" izz="0.015" ixy="0.001" ixz="0" iyz="0"/></inertial></link>
  <joint name="elbow" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0.2 0.1" rpy="0 0.4 0.1"/><axis xyz="1 0 0"/>
    <limit lower="-2" upper="2" effort="10" velocity="3"/></joint>
  <link name="l2"><inertial><mass value="1.0"/><origin xyz="0 0 0.1"/>
    <inertia ixx="0.02" iyy="0.01" izz="0.01" ixy="0" ixz="0.002" iyz="0"/></inertial></link>
  <joint name="slide" type="prismatic"><parent link="base"/><child link="l3"/>
    <origin xyz="-0.1 0 0.1"/><axis xyz="0 1 0"/>
    <limit lower="-0.5" upper="0.5" effort="10" velocity="1"/></joint>
  <link name="l3"><inertial><mass value="0.8"/><origin xyz="0 0 0.05"/>
    <inertia ixx="0.004" iyy="0.003" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="spin" type="continuous"><parent link="l3"/><child link="l4"/>
    <origin xyz="0 0 0.15" rpy="0 0 0.7"/><axis xyz="0 1 0"/></joint>
  <link name="l4"><inertial><mass value="0.5"/><origin xyz="0.02 0 0"/>
    <inertia ixx="0.002" iyy="0.002" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="tool_weld" type="fixed"><parent link="l2"/><child link="tool"/>
    <origin xyz="0 0 0.3" rpy="0.2 0.1 0"/></joint>
  <link name="tool"><inertial><mass value="0.2"/><origin xyz="0 0 0.02"/>
    <inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="sensor_mount" type="fixed"><parent link="l4"/><child link="sensor"/>
    <origin xyz="0.05 0 0" rpy="0 0 1.2"/></joint>
  <link name="sensor"/>
</robot>
"""


def _robots(tmp_path):
    path = tmp_path / "mixed.urdf"
    path.write_text(MIXED)
    yield "mixed fixed", path, False
    yield "mixed floating", path, True
    if robot_available("panda"):
        kinova = example_robot_data_dir() / "kinova_description/robots/kinova.urdf"
        yield "kinova", kinova, False


def _pin_model(path, floating):
    if floating:
        return pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(str(path))


def _our_states(ref, batch, rng):
    q = rng.uniform(-np.pi, np.pi, (batch, ref.nq))
    for s in interop.layout(ref):
        if s.kind == "free_flyer":
            i = s.q[0]
            quat = rng.normal(size=(batch, 4))
            q[:, i + 3:i + 7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    v = rng.uniform(-3, 3, (batch, ref.nv))
    a = rng.uniform(-5, 5, (batch, ref.nv))
    return q, v, a


def test_configurations_give_pinocchio_the_same_dynamics(tmp_path):
    rng = np.random.default_rng(7)
    for label, path, floating in _robots(tmp_path):
        ref = reference.load(path, floating_base=floating)
        pm = _pin_model(path, floating)
        pd = pm.createData()
        assert interop.pinocchio_nq(ref) == pm.nq, label
        assert sum(s.v[1] for s in interop.layout(ref)) == pm.nv == ref.nv
        assert [s.name for s in interop.layout(ref)] == list(pm.names)[1:], label
        q, v, a = _our_states(ref, 4, rng)
        q_pin = interop.to_pinocchio(ref, q)
        assert q_pin.shape == (4, pm.nq)
        tau = ref.inverse_dynamics(q, v, a)
        M = ref.crba(q)
        for b in range(4):
            np.testing.assert_allclose(pin.rnea(pm, pd, q_pin[b], v[b], a[b]), tau[b],
                                       rtol=1e-9, atol=1e-9, err_msg=label)
            Mp = pin.crba(pm, pd, q_pin[b])
            Mp = np.triu(Mp) + np.triu(Mp, 1).T
            np.testing.assert_allclose(Mp, M[b], rtol=1e-9, atol=1e-10, err_msg=label)


def test_from_pinocchio_reads_random_pinocchio_configurations(tmp_path):
    for label, path, floating in _robots(tmp_path):
        ref = reference.load(path, floating_base=floating)
        pm = _pin_model(path, floating)
        pd = pm.createData()
        pm.lowerPositionLimit[:] = np.maximum(pm.lowerPositionLimit, -3.0)
        pm.upperPositionLimit[:] = np.minimum(pm.upperPositionLimit, 3.0)
        q_pin = np.stack([pin.randomConfiguration(pm) for _ in range(3)])
        q = interop.from_pinocchio(ref, q_pin)
        assert q.shape == (3, ref.nq)
        np.testing.assert_allclose(interop.to_pinocchio(ref, q), q_pin, atol=1e-12)
        v = np.random.default_rng(3).uniform(-2, 2, (3, ref.nv))
        zero = np.zeros_like(v)
        tau = ref.inverse_dynamics(q, v, zero)
        for b in range(3):
            np.testing.assert_allclose(pin.rnea(pm, pd, q_pin[b], v[b], zero[b]), tau[b],
                                       rtol=1e-9, atol=1e-9, err_msg=label)


def test_single_states_stay_one_dimensional(tmp_path):
    path = tmp_path / "mixed.urdf"
    path.write_text(MIXED)
    ref = reference.load(path)
    q = np.array([0.3, -0.4, 0.1, 2.9])
    q_pin = interop.to_pinocchio(ref, q)
    names = [s.name for s in interop.layout(ref)]
    assert q_pin.shape == (6,)
    wheel = names.index("wheel")
    start = interop.layout(ref)[wheel].q_pin[0]
    np.testing.assert_allclose(q_pin[start:start + 2], [np.cos(q[wheel]), np.sin(q[wheel])])
    np.testing.assert_allclose(interop.from_pinocchio(ref, q_pin), q)
    R, p = interop.frame_placement(ref, q, "sensor")
    assert R.shape == (3, 3) and p.shape == (3,)


def test_every_pinocchio_frame_is_found_with_its_placement(tmp_path):
    kinds = {pin.FrameType.BODY: "link", pin.FrameType.JOINT: "joint",
             pin.FrameType.FIXED_JOINT: "fixed_joint"}
    rng = np.random.default_rng(11)
    for label, path, floating in _robots(tmp_path):
        ref = reference.load(path, floating_base=floating)
        pm = _pin_model(path, floating)
        pd = pm.createData()
        q, _, _ = _our_states(ref, 2, rng)
        q_pin = interop.to_pinocchio(ref, q)
        checked = 0
        for fid, frame in enumerate(pm.frames):
            if frame.type not in kinds or frame.name == "universe":
                continue
            qualified = f"{kinds[frame.type]}:{frame.name}"
            R, p = interop.frame_placement(ref, q, qualified)
            for b in range(2):
                pin.framesForwardKinematics(pm, pd, q_pin[b])
                np.testing.assert_allclose(R[b], pd.oMf[fid].rotation, atol=1e-10,
                                           err_msg=f"{label} {qualified}")
                np.testing.assert_allclose(p[b], pd.oMf[fid].translation, atol=1e-10,
                                           err_msg=f"{label} {qualified}")
            checked += 1
        assert checked >= ref.nb + 2, label


def test_ee_joint_names_make_end_effector_pose_report_those_frames(tmp_path):
    path = tmp_path / "mixed.urdf"
    path.write_text(MIXED)
    for floating in (False, True):
        wanted = ["tool", "sensor", "l1", "elbow", "sensor_mount"]
        names = interop.ee_joint_names(path, wanted, floating_base=floating)
        assert names == ["tool_weld", "sensor_mount", "wheel", "elbow", "sensor_mount"]
        ref = reference.load(path, floating_base=floating, ee_joint_names=names)
        pm = _pin_model(path, floating)
        pd = pm.createData()
        q, _, _ = _our_states(ref, 2, np.random.default_rng(5))
        pose = ref.end_effector_pose(q).reshape(2, len(wanted), 6)
        q_pin = interop.to_pinocchio(ref, q)
        for b in range(2):
            pin.framesForwardKinematics(pm, pd, q_pin[b])
            for k, name in enumerate(wanted):
                np.testing.assert_allclose(pose[b, k, :3],
                                           pd.oMf[pm.getFrameId(name)].translation,
                                           atol=1e-10, err_msg=name)


def test_link_names_are_end_effectors_directly(tmp_path):
    """`ee_joint_names` takes link names as they are (no interop mapping needed), on the
    reference and through register_robot; the handle reports the names as given, and an
    unknown name is a ValueError listing the choices."""
    import grid_rbd
    path = tmp_path / "mixed.urdf"
    path.write_text(MIXED)
    wanted = ["tool", "sensor", "l1", "elbow"]
    ref = reference.load(path, ee_joint_names=wanted)
    pm = _pin_model(path, False)
    pd = pm.createData()
    q, _, _ = _our_states(ref, 3, np.random.default_rng(6))
    pose = ref.end_effector_pose(q).reshape(3, len(wanted), 6)
    q_pin = interop.to_pinocchio(ref, q)
    for b in range(3):
        pin.framesForwardKinematics(pm, pd, q_pin[b])
        for k, name in enumerate(wanted):
            np.testing.assert_allclose(pose[b, k, :3], pd.oMf[pm.getFrameId(name)].translation,
                                       atol=1e-10, err_msg=name)
    h = grid_rbd.register_robot("mixed_links", urdf_path=str(path), dtype="float64",
                                ee_joint_names=wanted, algorithm_list=["end_effector_pose"],
                                device="cpu", cache_dir=tmp_path / "store")
    assert h.ee_names == tuple(wanted)
    np.testing.assert_allclose(h.end_effector_pose(q), ref.end_effector_pose(q), atol=1e-12)
    h.close()
    with pytest.raises(ValueError, match=r"ee_joint_names: .*no frame 'tool0'.*tool_weld.*"
                                         r"wheel.*l4"):
        grid_rbd.register_robot("mixed_bad", urdf_path=str(path), ee_joint_names=["tool0"],
                                algorithm_list=["end_effector_pose"], device="cpu",
                                cache_dir=tmp_path / "store")


def test_bad_inputs_are_refused_naming_what_was_expected(tmp_path):
    path = tmp_path / "mixed.urdf"
    path.write_text(MIXED)
    ref = reference.load(path)
    with pytest.raises(ValueError, match=r"q has shape \(2, 5\); expected \(4,\) or \(B, 4\)"):
        interop.to_pinocchio(ref, np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"expected \(6,\) or \(B, 6\)"):
        interop.from_pinocchio(ref, np.zeros(4))
    with pytest.raises(ValueError, match=r"continuous joint '\w+' has \(cos, sin\) = \(0, 0\)"):
        interop.from_pinocchio(ref, np.zeros(6))
    with pytest.raises(KeyError, match="no frame 'gripper'"):
        interop.find_frame(ref, "gripper")
    with pytest.raises(ValueError, match="welded to the world"):
        interop.ee_joint_names(ref, ["base"])
    with pytest.raises(TypeError):
        interop.to_pinocchio(ref, np.array(["a", "b", "c", "d"]))
