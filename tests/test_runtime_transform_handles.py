"""The runtime joint-origin table through the handles: `register_robot(runtime_transform=
True)`, `set_transform_params` / `get_transform_params` (exclusive admission, a model
version bump, refused stale torch backwards), bad tables, and the GPU build (tag `gpu`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built")

from artifact_harness import states_in  # noqa: E402
from support import cuda_available, random_states, scaled_error  # noqa: E402
from test_runtime_transform import (  # noqa: E402
    IIWA,
    edited_urdf,
    model_of,
    origin_table,
)

import grid_rbd  # noqa: E402
from grid_rbd._transforms import placement_rows  # noqa: E402
from grid_rbd.reference import ReferenceRobot  # noqa: E402

ALGORITHMS = ["inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient",
              "end_effector_pose", "end_effector_pose_gradient", "fk_batched", "com"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("grid_rbd_store")


def _register(cache_dir, device="cpu", backend="numpy", dtype="float64", strategy="thread",
              name="iiwa_rt", **kw):
    return grid_rbd.register_robot(
        name, urdf_path=str(IIWA), dtype=dtype, algorithm_list=ALGORITHMS, device=device,
        backend=backend, cache_dir=cache_dir, runtime_transform=True, strategy=strategy,
        **kw)


def _check(h, model, s, tol):
    s = states_in(s, h.dtype)  # the handle's dtype; the reference sees the same values
    ref = ReferenceRobot(model)
    assert scaled_error(h.inverse_dynamics(s.q, s.qd, s.qdd),
                        ref.inverse_dynamics(s.q, s.qd, s.qdd)) < tol
    assert scaled_error(h.forward_dynamics_gradient(s.q, s.qd, s.u),
                        ref.forward_dynamics_gradient(s.q, s.qd, s.u)) < tol
    assert scaled_error(h.end_effector_pose(s.q), ref.end_effector_pose(s.q)) < tol
    assert scaled_error(h.end_effector_pose_gradient(s.q),
                        ref.end_effector_pose_gradient(s.q)) < tol
    c, J = h.com(s.q)
    rc, rJ = ref.com(s.q)
    assert scaled_error(c, rc) < tol and scaled_error(J, rJ) < tol
    fk = h.fk_batched(s.q)
    T = ref.forward_kinematics(s.q)[:, -1]  # the leaf body is the first end effector
    assert np.abs(fk[:, :3] - T[:, :3, 3]).max() < tol * 10


def _edit_and_check(h, tol):
    model, edited = model_of(), model_of(edited_urdf())
    s = random_states(model, 6, seed=21, max_velocity=2.0)
    got = h.get_transform_params()
    np.testing.assert_allclose(got, origin_table(model), atol=tol)
    _check(h, model, s, tol)
    before = h.model_version
    after = h.set_transform_params(origin_table(edited))
    assert after > before and h.model_version == after
    np.testing.assert_allclose(h.get_transform_params(), origin_table(edited), atol=tol)
    _check(h, edited, s, tol)
    # Rotation matrices through the helper, and an unnormalised quaternion (normalised).
    R = np.stack([j.placement.R for j in edited.joints])
    p = np.stack([j.placement.p for j in edited.joints])
    rows = placement_rows(R, p)
    rows[:, 3:] *= 2.5
    h.set_transform_params(rows)
    _check(h, edited, s, tol)
    h.set_transform_params(origin_table(model))


def test_numpy_handle_follows_set_transform_params(store):
    h = _register(store)
    assert h.runtime_transform
    _edit_and_check(h, 1e-9)


@pytest.mark.parametrize("bad, error, message", [
    (np.ones((6, 7)), ValueError, "has shape (6, 7)"),
    (np.full((7, 7), np.nan), ValueError, "NaN or inf"),
    (np.zeros((7, 7)), ValueError, "is zero"),
    (np.array([["a"] * 7] * 7), ValueError, "expected real numbers"),
])
def test_bad_tables_are_refused(store, bad, error, message):
    h = _register(store)
    version = h.model_version
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        h.set_transform_params(bad)
    assert h.model_version == version


def test_rotation_helper_refuses_a_non_rotation():
    with pytest.raises(ValueError, match="not a rotation matrix"):
        placement_rows(np.diag([1.0, 1.0, -1.0])[None], np.zeros((1, 3)))
    with pytest.raises(ValueError, match="not a rotation matrix"):
        placement_rows(1.1 * np.eye(3)[None], np.zeros((1, 3)))


def test_baked_build_refuses_set_transform_params(tmp_path):
    h = grid_rbd.register_robot("iiwa_rt_baked", urdf_path=str(IIWA), dtype="float64",
                                algorithm_list=["inverse_dynamics"], device="cpu",
                                cache_dir=tmp_path, strategy="thread")
    assert not h.runtime_transform
    with pytest.raises(RuntimeError, match="runtime_transform=True"):
        h.set_transform_params(origin_table(model_of()))


def test_torch_backward_after_set_transform_params_is_refused(store):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    h = _register(store, backend="torch")
    s = random_states(model_of(), 4, seed=22, max_velocity=2.0)
    q, qd, u = (torch.tensor(x, requires_grad=True) for x in (s.q, s.qd, s.u))
    before = h.model_version
    qdd = h.forward_dynamics(q, qd, u)
    after = h.set_transform_params(origin_table(model_of(edited_urdf())))
    with pytest.raises(RuntimeError, match=rf"model mutated between forward and backward "
                                           rf"\(version {before} -> {after}\)"):
        qdd.sum().backward()
    qdd = h.forward_dynamics(q, qd, u)
    qdd.sum().backward()
    jac = h.numpy.forward_dynamics_gradient(s.q, s.qd, s.u)
    assert scaled_error(qd.grad.numpy(), jac[:, :, 7:].sum(axis=1)) < 1e-9
    h.set_transform_params(origin_table(model_of()))


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no usable CUDA GPU (tag gpu: run on the "
                    "GPU machine)")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gpu_runtime_transform_every_strategy(tmp_path, dtype):
    tol = 1e-9 if dtype == "float64" else 3e-3
    for strategy in ("thread", "warp", "block"):
        h = _register(tmp_path, device="cuda", dtype=dtype, strategy=strategy,
                      name=f"iiwa_rt_{strategy}")
        _edit_and_check(h, tol)
