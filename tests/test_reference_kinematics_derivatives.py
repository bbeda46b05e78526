"""Layer 1: frame Jacobians, their time variation, the operational-space inertia and the
end-effector pose derivatives of the reference, against Pinocchio where it has the
quantity and against central finite differences along `pin.integrate` where it does not."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from support import (
    ROBOTS,
    assert_scaled_close,
    pinocchio_case,
    pinocchio_model,
    random_states,
    scaled_error,
)

import grid_rbd.reference as reference
from grid_rbd.reference.pose_derivatives import rpy_rate_inverse

TOL = 1e-8
FD_TOL = 1e-5
BATCH = 4
HESSIAN_BATCH = 3
REFERENCE_FRAMES = {"LOCAL": pin.LOCAL, "WORLD": pin.WORLD,
                    "LOCAL_WORLD_ALIGNED": pin.LOCAL_WORLD_ALIGNED}


@pytest.fixture(scope="module", params=sorted(ROBOTS), ids=sorted(ROBOTS))
def case(request):
    return pinocchio_case(request.param, BATCH, seed=7 + len(request.param))


def _frames(ref, pm) -> list[tuple[str | int, int]]:
    """`(our frame argument, Pinocchio frame id)`: a leaf body's link, a moving joint, a body
    index, fixed-joint frames, an offset link and a frame welded to the world."""
    model = ref.model
    out = [(ref.ee_frames[-1].name, pm.getFrameId(ref.ee_frames[-1].name, pin.BODY)),
           (f"joint:{model.joint_names[-1]}",
            pm.getFrameId(model.joint_names[-1], pin.JOINT)),
           (model.nb // 2, pm.getFrameId(model.joint_names[model.nb // 2], pin.JOINT))]
    fixed = [f for f in model.frames if f.kind == "fixed_joint" and f.body >= 0]
    for f in fixed[:1] + fixed[-1:]:
        out.append((f.name, pm.getFrameId(f.name, pin.FIXED_JOINT)))
    offset = [f for f in model.frames if f.kind == "link" and f.body >= 0
              and np.linalg.norm(f.placement.p) > 0.0]
    for f in offset[:1]:
        out.append((f"link:{f.name}", pm.getFrameId(f.name, pin.BODY)))
    welded = [f for f in model.frames if f.kind == "link" and f.body < 0]
    for f in welded[:1]:
        out.append((f.name, pm.getFrameId(f.name, pin.BODY)))
    return out


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (angle + np.pi) % (2.0 * np.pi) - np.pi


def _perturbed(pm, q: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """`q ⊕ (±step e_i)` for every item and tangent direction, `(B * nv, nq)` each."""
    eye = np.eye(pm.nv)
    plus = np.array([pin.integrate(pm, qb, step * e) for qb in q for e in eye])
    minus = np.array([pin.integrate(pm, qb, -step * e) for qb in q for e in eye])
    return plus, minus


def test_panda_has_a_tcp_frame():
    robot = ROBOTS["panda"]
    ref = reference.load(robot.path)
    assert ref.model.frame("panda_hand_tcp_joint").kind == "fixed_joint"


@pytest.mark.parametrize("rf", sorted(REFERENCE_FRAMES))
def test_frame_jacobian(case, rf):
    ref, pm, pd, s = case
    for frame, fid in _frames(ref, pm):
        ours = ref.frame_jacobian(s.q, frame, rf)
        theirs = []
        for b in range(BATCH):
            pin.computeJointJacobians(pm, pd, s.q[b])
            pin.updateFramePlacements(pm, pd)
            theirs.append(pin.getFrameJacobian(pm, pd, fid, REFERENCE_FRAMES[rf]))
        assert_scaled_close(ours, np.array(theirs), TOL, f"frame_jacobian({frame!r}, {rf})")


@pytest.mark.parametrize("rf", sorted(REFERENCE_FRAMES))
def test_frame_jacobian_dot(case, rf):
    ref, pm, pd, s = case
    for frame, fid in _frames(ref, pm):
        ours = ref.frame_jacobian_dot(s.q, s.qd, frame, rf)
        theirs = []
        for b in range(BATCH):
            pin.computeJointJacobiansTimeVariation(pm, pd, s.q[b], s.qd[b])
            pin.updateFramePlacements(pm, pd)
            theirs.append(pin.getFrameJacobianTimeVariation(pm, pd, fid, REFERENCE_FRAMES[rf]))
        # A frame whose Jacobian is constant in `rf` (a LOCAL frame one joint from a fixed
        # world, or on a free flyer) has dJ = 0 up to rounding: scale by |J| |qd| as well.
        J = ref.frame_jacobian(s.q, frame, rf)
        scale = np.maximum(np.abs(np.array(theirs)).max(axis=(1, 2)),
                           np.abs(J).max(axis=(1, 2)) * np.abs(s.qd).max(axis=1))
        err = (np.abs(ours - np.array(theirs)).max(axis=(1, 2))
               / np.maximum(scale, 1e-12)).max()
        assert err <= TOL, f"frame_jacobian_dot({frame!r}, {rf}): {err:.3e}"


def test_frame_jacobian_dot_is_the_time_derivative(case):
    ref, pm, _, s = case
    h = 1e-6
    frame = ref.ee_frames[0].name
    for rf in REFERENCE_FRAMES:
        plus = np.array([pin.integrate(pm, s.q[b], h * s.qd[b]) for b in range(BATCH)])
        minus = np.array([pin.integrate(pm, s.q[b], -h * s.qd[b]) for b in range(BATCH)])
        fd = (ref.frame_jacobian(plus, frame, rf) - ref.frame_jacobian(minus, frame, rf)) / (2 * h)
        assert_scaled_close(ref.frame_jacobian_dot(s.q, s.qd, frame, rf), fd, FD_TOL,
                            f"frame_jacobian_dot {rf} vs finite differences")


def test_osc_inertia(case):
    ref, pm, pd, s = case
    frame = ref.ee_frames[0]
    moved_by = sum(ref.model.joints[j].nv for j in ref.model.ancestors(frame.body))
    if moved_by < 6:
        with pytest.raises(ValueError, match="needs at least 6"):
            ref.osc_inertia(s.q)
        return
    fid = pm.getFrameId(frame.name, pin.BODY)
    for rf in ("LOCAL", "LOCAL_WORLD_ALIGNED"):
        theirs = []
        for b in range(BATCH):
            M = pin.crba(pm, pd, s.q[b])
            M = np.triu(M) + np.triu(M, 1).T
            pin.computeJointJacobians(pm, pd, s.q[b])
            pin.updateFramePlacements(pm, pd)
            J = pin.getFrameJacobian(pm, pd, fid, REFERENCE_FRAMES[rf])
            theirs.append(np.linalg.inv(J @ np.linalg.solve(M, J.T)))
        ours = ref.osc_inertia(s.q, reference_frame=rf)
        assert_scaled_close(ours, np.array(theirs), 1e-7, f"osc_inertia {rf}")
        np.testing.assert_array_equal(ours, np.swapaxes(ours, 1, 2))
    np.testing.assert_array_equal(ref.osc_inertia(s.q), ref.osc_inertia(s.q, frame.name))


def test_rpy_rate_inverse_matches_pinocchio():
    rng = np.random.default_rng(3)
    rpy = rng.uniform([-np.pi, -1.4, -np.pi], [np.pi, 1.4, np.pi], (16, 3))
    theirs = np.array([pin.rpy.computeRpyJacobianInverse(r, pin.WORLD) for r in rpy])
    assert_scaled_close(rpy_rate_inverse(rpy)[0], theirs, 1e-12, "rpy_rate_inverse")


def test_end_effector_pose_gradient(case):
    ref, pm, pd, s = case
    grad = ref.end_effector_pose_gradient(s.q)
    nee, nv = ref.num_ees, ref.nv
    assert grad.shape == (BATCH, 6 * nee, nv)
    # Position rows are the LOCAL_WORLD_ALIGNED linear Jacobian.
    for k, frame in enumerate(ref.ee_frames):
        fid = pm.getFrameId(frame.name, pin.BODY)
        for b in range(BATCH):
            pin.computeJointJacobians(pm, pd, s.q[b])
            pin.updateFramePlacements(pm, pd)
            J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL_WORLD_ALIGNED)
            assert_scaled_close(grad[b:b + 1, 6 * k:6 * k + 3], J[None, :3], TOL,
                                "end_effector_pose_gradient position rows")
    h = 1e-6
    plus, minus = _perturbed(pm, s.q, h)
    diff = (ref.end_effector_pose(plus) - ref.end_effector_pose(minus)).reshape(
        BATCH, nv, nee, 6)
    diff[..., 3:] = _wrap(diff[..., 3:])
    fd = np.swapaxes(diff.reshape(BATCH, nv, 6 * nee), 1, 2) / (2 * h)
    assert_scaled_close(grad, fd, FD_TOL, "end_effector_pose_gradient vs finite differences")


def test_end_effector_pose_hessian(case):
    ref, pm, _, s = case
    q, nv = s.q[:HESSIAN_BATCH], ref.nv
    hess = ref.end_effector_pose_hessian(q)
    assert hess.shape == (HESSIAN_BATCH, 6 * ref.num_ees, nv, nv)
    np.testing.assert_array_equal(hess, np.swapaxes(hess, -1, -2))
    h = 1e-5
    plus, minus = _perturbed(pm, q, h)
    fd = (ref.end_effector_pose_gradient(plus) - ref.end_effector_pose_gradient(minus))
    fd = np.moveaxis(fd.reshape(HESSIAN_BATCH, nv, 6 * ref.num_ees, nv), 1, -1) / (2 * h)
    # On a free flyer grad(q ⊕ e_j)_i is d/d delta_i f((q ⊕ e_j) ⊕ delta), whose mixed
    # derivative differs from that of f(q ⊕ (e_i + e_j)) by an antisymmetric Lie-bracket
    # term (BCH); the symmetric part is the chart Hessian.
    fd = 0.5 * (fd + np.swapaxes(fd, -1, -2))
    assert_scaled_close(hess, fd, FD_TOL, "end_effector_pose_hessian vs finite differences")


def test_end_effector_pose_hessian_definition_on_a_free_flyer():
    """The Hessian is d2/de_i de_j f(q ⊕ e): second differences of the pose itself."""
    robot = ROBOTS["solo12"]
    ref = reference.load(robot.path, floating_base=True)
    pm = pinocchio_model(robot)
    q = random_states(ref.model, 1, seed=11).q[0]
    nv, h, eye = ref.nv, 1e-4, np.eye(ref.nv)
    signs = [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    points = np.array([pin.integrate(pm, q, h * (si * eye[i] + sj * eye[j]))
                       for i in range(nv) for j in range(nv) for si, sj in signs])
    f = ref.end_effector_pose(points).reshape(nv, nv, 4, ref.num_ees, 6)
    d = f - f[:, :, :1]
    d[..., 3:] = _wrap(d[..., 3:])
    fd = (d[:, :, 0] - d[:, :, 1] - d[:, :, 2] + d[:, :, 3]).reshape(nv, nv, -1) / (4 * h * h)
    err = scaled_error(ref.end_effector_pose_hessian(q), np.moveaxis(fd, -1, 0)[None])
    assert err <= FD_TOL, f"end_effector_pose_hessian vs second differences: {err:.3e}"


def test_frame_arguments_are_checked():
    robot = ROBOTS["panda"]
    ref = reference.load(robot.path)
    q = np.zeros((1, ref.nq))
    with pytest.raises(KeyError, match="no frame 'nowhere'"):
        ref.frame_jacobian(q, "nowhere")
    with pytest.raises(IndexError, match="out of range"):
        ref.frame_jacobian(q, ref.nb)
    with pytest.raises(ValueError, match="reference_frame 'BODY'"):
        ref.frame_jacobian(q, "panda_link7", "BODY")
    np.testing.assert_array_equal(ref.frame_jacobian(q, "panda_joint7"),
                                  ref.frame_jacobian(q, 6))
    np.testing.assert_array_equal(ref.frame_jacobian(q, "joint:panda_joint7"),
                                  ref.frame_jacobian(q, 6))


def test_ambiguous_frame_names_need_a_kind():
    robot = ROBOTS["anymal_c"]
    ref = reference.load(robot.path, floating_base=True)
    q = random_states(ref.model, 1).q
    with pytest.raises(ValueError, match="'joint:LF_HAA', 'link:LF_HAA'"):
        ref.frame_jacobian(q, "LF_HAA")
    np.testing.assert_array_equal(ref.frame_jacobian(q, "joint:LF_HAA"),
                                  ref.frame_jacobian(q, ref.model.joint_index("LF_HAA")))
    assert not np.array_equal(ref.frame_jacobian(q, "link:LF_HAA", "LOCAL"),
                              ref.frame_jacobian(q, "joint:LF_HAA", "LOCAL"))


def test_pose_derivatives_of_a_fixed_joint_end_effector():
    robot = ROBOTS["panda"]
    ref = reference.load(robot.path, ee_joint_names=["panda_hand_tcp_joint"])
    pm = pinocchio_model(robot)
    q, nv = random_states(ref.model, 2, seed=5).q, ref.nv
    h = 1e-6
    plus, minus = _perturbed(pm, q, h)
    diff = (ref.end_effector_pose(plus) - ref.end_effector_pose(minus)).reshape(2, nv, 6)
    diff[..., 3:] = _wrap(diff[..., 3:])
    assert_scaled_close(ref.end_effector_pose_gradient(q), np.swapaxes(diff, 1, 2) / (2 * h),
                        FD_TOL, "TCP pose gradient vs finite differences")
    h = 1e-5
    plus, minus = _perturbed(pm, q, h)
    fd = (ref.end_effector_pose_gradient(plus) - ref.end_effector_pose_gradient(minus))
    fd = np.moveaxis(fd.reshape(2, nv, 6, nv), 1, -1) / (2 * h)
    assert_scaled_close(ref.end_effector_pose_hessian(q), fd, FD_TOL,
                        "TCP pose Hessian vs finite differences")
