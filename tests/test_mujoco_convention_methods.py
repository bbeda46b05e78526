"""`output_convention="mujoco"` beyond the core methods, against MuJoCo itself: frame
Jacobians and their time variation (mj_jac, mj_jacDot), the operational-space inertia
(mj_jac, mj_fullM), run-time poses (xpos, xmat), contacts (mj_jac, mj_applyFT), the
Coriolis matrix (qfrc_bias, mj_fullM's rate), the centroidal map (mj_subtreeVel) and its
derivatives, the pose Hessian and the second-order dynamics tensors (`idsva_so`,
`fdsva_so`: nested central differences of mj_rne and mj_forward's qacc along
mj_integratePos), and the parameter gradient (differences over the inertia table). On
the fixed-base iiwa14 (where the convention is the identity: the Pinocchio-convention
methods checked against MuJoCo) and the floating toy of test_mujoco_convention.py.
Float64 CPU builds, one per robot."""

from __future__ import annotations

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco package is not installed "
                             "(requirements-test.lock)")
from support import REPO  # noqa: E402
from test_mujoco_convention import TOY, _mujoco_model  # noqa: E402

import grid_rbd  # noqa: E402
from grid_codegen.registry import REFERENCE_FRAME_CODES  # noqa: E402
from grid_rbd.reference.spatial import matrix_to_rpy  # noqa: E402

# Per robot: the frame the frame methods look at (a link whose MuJoCo body frame is its
# URDF frame) and a second link for the run-time poses.
FRAMES = {"iiwa14": ("iiwa_link_5", "iiwa_link_7"), "toy_free": ("shin", "slider")}


class Case:
    def __init__(self, name, handle, m, floating):
        self.name, self.h, self.m, self.floating = name, handle, m, floating
        self.d = mujoco.MjData(m)
        self.nv = m.nv

    # -- MuJoCo at a state ---------------------------------------------------------------
    def forward(self, q, v=None, a=None, u=None):
        d = self.d
        d.qpos[:] = q
        d.qvel[:] = 0 if v is None else v
        d.qfrc_applied[:] = 0 if u is None else u
        mujoco.mj_forward(self.m, d)
        if a is not None:
            d.qacc[:] = a
        return d

    def rne(self, q, v, a):
        self.forward(q, v, a)
        out = np.zeros(self.nv)
        mujoco.mj_rne(self.m, self.d, 1, out)
        return out

    def qacc(self, q, v, u):
        return self.forward(q, v, u=u).qacc.copy()

    def mass(self, q):
        self.forward(q)
        full = np.zeros((self.nv, self.nv))
        mujoco.mj_fullM(self.m, self.d, full)
        return full

    def body(self, name):
        return self.m.body(name).id

    def pose(self, q, name):
        d = self.forward(q)
        b = self.body(name)
        return d.xpos[b].copy(), d.xmat[b].reshape(3, 3).copy()

    def jac(self, q, name, point=None):
        """(6, nv) [jacp; jacr] of body `name` at `point` (its origin by default)."""
        d = self.forward(q)
        b = self.body(name)
        jp, jr = np.zeros((3, self.nv)), np.zeros((3, self.nv))
        mujoco.mj_jac(self.m, d, jp, jr, d.xpos[b] if point is None else point, b)
        return np.concatenate([jp, jr])

    def moved(self, q, dq, scale=1.0):
        out = q.copy()
        mujoco.mj_integratePos(self.m, out, np.asarray(dq, dtype=np.float64), scale)
        return out

    def tangent_differences(self, f, q, h=1e-6):
        """(..., nv): central differences of f along each mj_integratePos direction."""
        eye = np.eye(self.nv)
        return np.stack([(f(self.moved(q, eye[k], h)) - f(self.moved(q, eye[k], -h)))
                         / (2 * h) for k in range(self.nv)], axis=-1)

    def along_motion(self, f, q, v, h=1e-6):
        """d/dt f(q(t)) with q(t) = mj_integratePos(q, v, t), central differences."""
        return (f(self.moved(q, v, h)) - f(self.moved(q, v, -h))) / (2 * h)


def registered(robot: str, store) -> Case:
    """The robot's MuJoCo-convention handle (every profile but plant and collision, a
    contact frame, a cost frame, a run-time inertia table and tool) and MuJoCo's model of
    it, in `store`: the session store (tests/conftest.py), so the test files that use it
    compile it once."""
    floating = robot == "toy_free"
    urdf = TOY if floating else (REPO / "robots/iiwa14/iiwa14.urdf").read_text()
    h = grid_rbd.register_robot(f"mjm_{robot}", urdf_string=urdf, floating_base=floating,
                                dtype="float64", device="cpu", algorithm_list=["all"],
                                runtime_inertia=True, enable_tool=True,
                                contact_frames=[FRAMES[robot][1]],
                                cost_frames=[FRAMES[robot][0]], output_convention="mujoco",
                                cache_dir=store)
    m = _mujoco_model(urdf, floating)
    assert (m.nq, m.nv) == (h.nq, h.nv)
    return Case(robot, h, m, floating)


@pytest.fixture(scope="module", params=["iiwa14", "toy_free"])
def case(request, shared_store):
    case = registered(request.param, shared_store)
    yield case
    case.h.close()


def _states(case, batch, seed):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.2, 1.2, (batch, case.m.nq))
    if case.floating:
        quat = rng.normal(size=(batch, 4))
        q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return (q, *(rng.uniform(-2, 2, (batch, case.nv)) for _ in range(3)))


def _close(actual, expected, tol, what=""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    err = np.abs(actual - expected).max() / (1.0 + np.abs(expected).max())
    assert err < tol, f"{what}: relative error {err:.2e} >= {tol:.0e}"


# -- frames ------------------------------------------------------------------------------
def _mj_frame_jacobian(case, q, name, rf):
    if rf == "WORLD":
        return case.jac(q, name, np.zeros(3))
    J = case.jac(q, name)
    if rf == "LOCAL":
        R = case.pose(q, name)[1]
        J = np.concatenate([R.T @ J[:3], R.T @ J[3:]])
    return J


@pytest.mark.parametrize("rf", ["LOCAL_WORLD_ALIGNED", "WORLD", "LOCAL"])
def test_frame_jacobian_and_its_rate_match_mujoco(case, rf):
    h, name = case.h, FRAMES[case.name][0]
    q, v, _, _ = _states(case, 2, seed=300)
    J, dJ = h.frame_jacobian(q, name, rf), h.frame_jacobian_dot(q, v, name, rf)
    for b in range(len(q)):
        _close(J[b], _mj_frame_jacobian(case, q[b], name, rf), 1e-12, f"J {rf}")
        rate = case.along_motion(lambda x: _mj_frame_jacobian(case, x, name, rf), q[b], v[b])
        _close(dJ[b], rate, 1e-7, f"dJ/dt {rf}")
        if rf == "LOCAL_WORLD_ALIGNED":  # MuJoCo's own time derivative too
            d = case.forward(q[b], v[b])
            jp, jr = np.zeros((3, case.nv)), np.zeros((3, case.nv))
            body = case.body(name)
            mujoco.mj_jacDot(case.m, d, jp, jr, d.xpos[body], body)
            _close(dJ[b], np.concatenate([jp, jr]), 1e-10, "mj_jacDot")
    _close(h.frame_jacobian(q[0], name, rf), J[0], 1e-15, "one state")
    # the rate kernel's own method, converted to MuJoCo's velocities, gives the same
    selector = np.tile([h._inner._frame_table().resolve(name).index,
                        REFERENCE_FRAME_CODES[rf]], (len(q), 1)).astype(np.float64)
    _close(h.frame_jacobian_dot_indexed(q, v, selector), dJ, 1e-13, "the kernel's method")


def test_osc_inertia_matches_mujoco(case):
    h, name = case.h, FRAMES[case.name][1]
    q, *_ = _states(case, 2, seed=301)
    lam = h.osc_inertia(q, name)
    for b in range(len(q)):
        J = case.jac(q[b], name)
        _close(lam[b], np.linalg.inv(J @ np.linalg.solve(case.mass(q[b]), J.T)), 1e-8)


def _mj_pose(case, q, name, offset):
    p, R = case.pose(q, name)
    return np.concatenate([p + R @ offset, matrix_to_rpy(R)])


def test_runtime_poses_match_mujoco(case):
    h = case.h
    names = list(FRAMES[case.name])
    offsets = np.array([[0.05, -0.02, 0.1], [0.0, 0.03, -0.04]])
    q, *_ = _states(case, 2, seed=302)
    pose = h.end_effector_pose_runtime(q, names, offsets)
    grad = h.end_effector_pose_gradient_runtime(q, names, offsets)
    pairs = list(zip(names, offsets, strict=True))
    for b in range(len(q)):
        def f(x):
            return np.concatenate([_mj_pose(case, x, n, o) for n, o in pairs])
        _close(pose[b], f(q[b]), 1e-12, "pose")
        _close(grad[b], case.tangent_differences(f, q[b]), 1e-8, "pose gradient")


def test_contacts_match_mujoco(case):
    h, name = case.h, FRAMES[case.name][1]
    q, v, a, _ = _states(case, 2, seed=303)
    wrench = np.random.default_rng(304).normal(size=(2, 6))
    points, J = h.contact_positions(q), h.contact_jacobians(q)
    fext = h.contact_fext(q, wrench)
    tau = h.inverse_dynamics(q, v, a, fext) - h.inverse_dynamics(q, v, a)
    for b in range(len(q)):
        p, _ = case.pose(q[b], name)
        _close(points[b, 0], p, 1e-12, "contact point")
        _close(J[b, 0], case.jac(q[b], name)[:3], 1e-12, "contact Jacobian")
        qfrc = np.zeros(case.nv)
        case.forward(q[b])
        mujoco.mj_applyFT(case.m, case.d, wrench[b, :3], wrench[b, 3:], p, case.body(name),
                          qfrc)
        _close(tau[b], -qfrc, 1e-10, "f_ext of a contact wrench")


def test_tool_wrench_matches_mujoco(case):
    """tool_fext of a wrench at the tip of a tool welded to a link, against mj_applyFT at
    that point (the tool's mass is set to zero so MuJoCo's model stays the robot's)."""
    h, name = case.h, FRAMES[case.name][0]
    tip = np.array([0.02, -0.05, 0.08])
    h.attach_tool(name, mass=0.0, tip=tip)
    try:
        q, v, a, _ = _states(case, 2, seed=310)
        wrench = np.random.default_rng(311).normal(size=(2, 6))
        tau = h.inverse_dynamics(q, v, a, h.tool_fext(q, wrench)) - h.inverse_dynamics(q, v, a)
        for b in range(len(q)):
            p, R = case.pose(q[b], name)
            qfrc = np.zeros(case.nv)
            mujoco.mj_applyFT(case.m, case.d, wrench[b, :3], wrench[b, 3:], p + R @ tip,
                              case.body(name), qfrc)
            _close(tau[b], -qfrc, 1e-10, "f_ext of a tool-tip wrench")
    finally:
        h.detach_tool()


# -- dynamics matrices -------------------------------------------------------------------
def test_coriolis_matrix_matches_mujoco(case):
    """C qvel is qfrc_bias less gravity, and C + C^T is the rate of mj_fullM."""
    h = case.h
    q, v, _, _ = _states(case, 2, seed=305)
    C = h.coriolis_matrix(q, v)
    for b in range(len(q)):
        bias = case.forward(q[b], v[b]).qfrc_bias.copy()
        gravity = case.forward(q[b]).qfrc_bias.copy()
        _close(C[b] @ v[b], bias - gravity, 1e-10, "C qvel")
        _close(C[b] + C[b].T, case.along_motion(case.mass, q[b], v[b]), 1e-7, "M_dot")


def _mj_momentum(case, q, v, com):
    """MuJoCo's centroidal momentum [linear; angular about `com`] (world axes)."""
    d = case.forward(q, v)
    mujoco.mj_subtreeVel(case.m, d)
    mass = case.m.body_subtreemass[0]
    linear = mass * d.subtree_linvel[0]
    angular = d.subtree_angmom[0] + np.cross(d.subtree_com[0] - com, linear)
    return np.concatenate([linear, angular])


def test_centroidal_map_and_its_derivatives(case):
    h = case.h
    q, v, _, _ = _states(case, 2, seed=306)
    A, momentum = h.ccrba(q, v)
    dA, Adot = h.dccrba(q), h.cmm_time_variation(q, v)
    com = h.com(q)[0]
    for b in range(len(q)):
        _close(momentum[b], _mj_momentum(case, q[b], v[b], com[b]), 1e-10, "h = A qvel")
        _close(A[b] @ v[b], momentum[b], 1e-12, "A qvel")

        def A_of(x, b=b):
            return h.ccrba(x, v[b])[0]
        _close(dA[b], case.tangent_differences(A_of, q[b]), 1e-7, "dA/dq")
        _close(Adot[b], case.along_motion(A_of, q[b], v[b]), 1e-7, "dA/dt")
        _close(Adot[b], np.einsum("rjk,k->rj", dA[b], v[b]), 1e-10, "sum dA/dq_k qvel_k")


# -- second order ------------------------------------------------------------------------
def _pose_coordinates(case, q, frames):
    return np.concatenate([np.concatenate([case.pose(q, f)[0],
                                           matrix_to_rpy(case.pose(q, f)[1])])
                           for f in frames])


def test_pose_hessian_matches_mujoco_differences(case):
    h = case.h
    frames = [case.h.body_names[f["body"]] for f in h.pinocchio._meta["ee_frames"]]
    q, *_ = _states(case, 1, seed=307)
    H = h.end_effector_pose_hessian(q)[0]
    n, s = case.nv, 1e-4
    eye = np.eye(n) * s
    want = np.zeros_like(H)
    for j in range(n):
        for k in range(n):
            want[:, j, k] = sum(x * y * _pose_coordinates(case, case.moved(q[0], x * eye[j]
                                                                          + y * eye[k]),
                                                          frames)
                                for x in (1, -1) for y in (1, -1)) / (4 * s * s)
    _close(H, want, 1e-6, "pose Hessian")


def _nested(case, f, q, v, x, s=1e-4):
    """[d2/dd_k dd_j (iterated: k first), d2/dv2, d2/dd dv, d2/dx_j dd_k] of f(q, v, x) by
    central differences, d along mj_integratePos."""
    n = case.nv
    eye = np.eye(n)
    out = [np.zeros((len(f(q, v, x)), n, n)) for _ in range(4)]
    signs = [(1, 1), (1, -1), (-1, 1), (-1, -1)]
    for j in range(n):
        for k in range(n):
            terms = [[], [], [], []]
            for sj, sk in signs:
                w = sj * sk / (4 * s * s)
                qk = case.moved(q, eye[k], sk * s)
                terms[0].append(w * f(case.moved(qk, eye[j], sj * s), v, x))
                terms[1].append(w * f(q, v + s * (sj * eye[j] + sk * eye[k]), x))
                terms[2].append(w * f(case.moved(q, eye[j], sj * s), v + sk * s * eye[k], x))
                terms[3].append(w * f(qk, v, x + sj * s * eye[j]))
            for block, t in zip(out, terms, strict=True):
                block[:, j, k] = sum(t)
    return out


@pytest.mark.parametrize("method", ["idsva_so", "fdsva_so"])
def test_second_order_dynamics_match_mujoco_differences(case, method):
    h = case.h
    q, v, a, u = _states(case, 1, seed=308)
    if method == "idsva_so":
        blocks, f, x = h.idsva_so(q, v, a), case.rne, a
    else:
        blocks, f, x = h.fdsva_so(q, v, u), case.qacc, u
    want = _nested(case, f, q[0], v[0], x[0])
    for name, got, expected in zip(("q-q", "v-v", "q-v", "x-q"), blocks, want, strict=True):
        # nested differences of qacc (a solve) carry a few 1e-6 of truncation/round-off
        _close(got[0], expected, 1e-5, f"{method} {name}")
    if case.floating:  # the iterated q-q block is not symmetric on the free joint
        qq = blocks[0][0]
        assert np.abs(qq - qq.transpose(0, 2, 1)).max() > 1e-3
    single = getattr(h, method)(q[0], v[0], x[0])
    _close(single[0], blocks[0][0], 1e-15, "one state")


# -- parameters --------------------------------------------------------------------------
def test_parameter_gradient_matches_table_differences(case):
    """d qacc / d pi against central differences of forward_dynamics over the context's
    inertia table (set_inertia_params), in MuJoCo's convention."""
    h = case.h
    q, v, _, u = _states(case, 2, seed=309)
    G = h.forward_dynamics_parameter_gradient(q, v, u)
    table = h.get_inertia_params()
    flat = table.reshape(-1)
    try:
        for k in range(0, flat.size, 3):  # every third parameter: each kind is covered
            step = 1e-6 * max(1.0, abs(flat[k]))
            moved = [flat.copy(), flat.copy()]
            moved[0][k] += step
            moved[1][k] -= step
            values = []
            for t in moved:
                h.set_inertia_params(t.reshape(table.shape))
                values.append(h.forward_dynamics(q, v, u))
            _close(G[:, :, k], (values[0] - values[1]) / (2 * step), 1e-6, f"pi[{k}]")
    finally:
        h.set_inertia_params(table)
    assert not hasattr(h, "inverse_dynamics_wrt_params")  # numpy has no *_wrt_params
    assert hasattr(h, "forward_dynamics_parameter_gradient")
