"""Synthetic robots with spherical, planar and mimic joints, and their random states:
shared by the joint-type, pullback, plant and reverse-mode tests (no Pinocchio needed)."""

from __future__ import annotations

import numpy as np
from artifact_harness import Artifact, _build

from grid_codegen.model import JointType
from grid_codegen.options import CodegenOptions

INERTIA = ('<inertia ixx="0.012" iyy="0.021" izz="0.015" ixy="0.001" ixz="-0.0005" '
           'iyz="0.002"/>')


def _link(name: str, mass: float = 0.6) -> str:
    return (f'<link name="{name}"><inertial><origin xyz="0.01 0.02 0.05" rpy="0.1 0.2 0.3"/>'
            f'<mass value="{mass}"/>{INERTIA}</inertial></link>')


def _joint(name: str, parent: str, child: str, kind: str = "revolute", axis: str = "0 0 1",
           xyz: str = "0.1 0 0.2", extra: str = "") -> str:
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz}" rpy="0.3 -0.2 0.1"/>'
            f'<axis xyz="{axis}"/><limit lower="-1" upper="1" effort="10" velocity="1"/>'
            f'{extra}</joint>')


def _robot(name: str, *parts: str) -> bytes:
    return f'<?xml version="1.0"?><robot name="{name}">{"".join(parts)}</robot>'.encode()


# A planar base, a revolute joint, a ball joint, a revolute joint after it.
BALL_CHAIN = _robot("ball_chain", _link("world", 0.0), _link("base"), _link("a"), _link("b"),
                    _link("c"),
                    _joint("plane", "world", "base", "planar"), _joint("j1", "base", "a"),
                    _joint("ball", "a", "b", "spherical"),
                    _joint("j3", "b", "c", axis="1 0 0"))
# An arm with a two-finger gripper: the second finger mimics the first (scaled, offset),
# and a revolute "thumb" mimics the wrist with a negative multiplier.
GRIPPER = _robot("gripper", _link("base"), _link("a"), _link("b"), _link("f1", 0.1),
                 _link("f2", 0.1), _link("thumb", 0.05),
                 _joint("j1", "base", "a"), _joint("j2", "a", "b", axis="0 1 0"),
                 _joint("fa", "b", "f1", "prismatic", axis="0 1 0"),
                 _joint("fb", "b", "f2", "prismatic", axis="0 -1 0",
                        extra='<mimic joint="fa" multiplier="1.5" offset="0.01"/>'),
                 _joint("th", "b", "thumb", axis="1 0 0",
                        extra='<mimic joint="j2" multiplier="-0.7" offset="0.2"/>'))


def states(model, batch: int, seed: int, nq: int, nv: int):
    """Random q (unit quaternions, unit (cos, sin) pairs), qd, qdd, u in the widths given."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.0, 1.0, (batch, nq))
    if model.coupling is None:
        for j in model.joints:
            if j.type is JointType.SPHERICAL:
                quat = rng.normal(size=(batch, 4))
                q[:, j.idx_q:j.idx_q + 4] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
            elif j.type is JointType.PLANAR:
                t = rng.uniform(-np.pi, np.pi, batch)
                q[:, j.idx_q + 2], q[:, j.idx_q + 3] = np.cos(t), np.sin(t)
    return (q, rng.uniform(-3, 3, (batch, nv)), rng.uniform(-5, 5, (batch, nv)),
            rng.uniform(-5, 5, (batch, nv)))


def close(actual, expected, tol: float, what: str) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected).reshape(np.shape(actual))
    err = np.abs(actual - expected).max() / max(1e-12, np.abs(expected).max())
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e}"


def artifact(model, backend: str, algorithms=("core",)):
    so, _ = _build(model, CodegenOptions(dtype="float64", algorithms=algorithms), backend)
    return Artifact(so)


def check_kernels(artifact, ref, q, qd, qdd, u, torch=None):
    state = artifact.state()
    rng = np.random.default_rng(0)
    fe = rng.uniform(-2, 2, (len(q), 6 * ref.nb))

    def call(name, *xs):
        if torch is None:
            return state.call(name, *xs)
        dev = [None if x is None else torch.from_numpy(np.ascontiguousarray(x)).cuda()
               for x in xs]
        return state.call(name, *dev).cpu().numpy()

    try:
        assert (artifact.nq, artifact.nv) == (ref.nq, ref.nv)
        for name, xs, expected in (
                ("inverse_dynamics", (q, qd, qdd, fe), ref.inverse_dynamics(q, qd, qdd, fe)),
                ("crba", (q,), ref.crba(q)),
                ("minv", (q,), ref.minv(q)),
                ("forward_dynamics", (q, qd, u, fe), ref.forward_dynamics(q, qd, u, fe)),
                ("aba", (q, qd, u, fe), ref.aba(q, qd, u, fe)),
                ("end_effector_pose", (q,), ref.end_effector_pose(q)),
                ("end_effector_pose_gradient", (q,), ref.end_effector_pose_gradient(q)),
                ("inverse_dynamics_gradient", (q, qd, qdd, fe),
                 ref.inverse_dynamics_gradient(q, qd, qdd, fe)),
                ("forward_dynamics_gradient", (q, qd, u, fe),
                 ref.forward_dynamics_gradient(q, qd, u, fe))):
            close(call(name, *xs), expected, 1e-9, name)
    finally:
        state.close()
