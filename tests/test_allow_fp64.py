"""`allow_fp64=True` (issue 15, item 4): a float32 build takes float64 inputs, computes
in float32 and returns float64, on the numpy and torch handles, with autograd through the
casts; without it a float64 input is refused as before."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, random_states

import grid_rbd
import grid_rbd.reference as reference

ALGORITHMS = ["inverse_dynamics", "inverse_dynamics_gradient", "world_kinematics", "com"]


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    h = grid_rbd.register_robot("go2_fp64_io", urdf_path=str(ROBOTS["go2"].path),
                                floating_base=True, dtype="float32", allow_fp64=True,
                                algorithm_list=ALGORITHMS, device="cpu",
                                cache_dir=tmp_path_factory.mktemp("store"))
    yield h
    h.close()


def _scaled(a, b):
    return float(np.abs(a - b).max() / (1.0 + np.abs(b).max()))


def test_float64_in_and_out_with_float32_compute(handle):
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    s = random_states(ref.model, 6, seed=130)
    tau = handle.inverse_dynamics(s.q, s.qd, s.qdd)
    assert tau.dtype == np.float64 and handle.dtype == np.float32
    assert _scaled(tau, ref.inverse_dynamics(s.q, s.qd, s.qdd)) < 2e-5
    assert _scaled(tau, ref.inverse_dynamics(s.q, s.qd, s.qdd)) > 1e-12  # float32 compute
    narrow = handle.inverse_dynamics(*(x.astype(np.float32) for x in (s.q, s.qd, s.qdd)))
    assert narrow.dtype == np.float32  # float32 inputs take the ordinary path
    out = np.empty((6, ref.nv))
    view = handle.inverse_dynamics(s.q, s.qd, s.qdd, out=out)
    assert np.shares_memory(view, out) and np.array_equal(out, tau)
    c, J = handle.com(s.q)
    assert c.dtype == J.dtype == np.float64 and J.shape == (6, 3, ref.nv)
    J_frame = handle.frame_jacobian(s.q, "FL_foot")
    assert J_frame.dtype == np.float64
    assert _scaled(J_frame, ref.frame_jacobian(s.q, "FL_foot")) < 2e-5
    assert "allow_fp64" in repr(handle)


def test_torch_gradients_flow_through_the_casts(handle):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(handle)
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    s = random_states(ref.model, 3, seed=131)
    qd = torch.from_numpy(s.qd).requires_grad_(True)
    tau = th.inverse_dynamics(torch.from_numpy(s.q), qd, torch.from_numpy(s.qdd))
    assert tau.dtype == torch.float64
    tau.sum().backward()
    assert qd.grad.dtype == torch.float64
    want = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)[:, :, ref.nv:].sum(1)
    assert _scaled(qd.grad.numpy(), want) < 1e-4


def test_without_the_flag_float64_is_refused(handle):
    plain = grid_rbd.load_robot(handle.path)
    s = random_states(reference.load(ROBOTS["go2"].path, floating_base=True).model, 1)
    with pytest.raises(ValueError, match="has dtype float64; this robot computes in float32"):
        plain.inverse_dynamics(s.q, s.qd)
    assert not plain.allow_fp64 and "allow_fp64" not in repr(plain)
    wide = grid_rbd.load_robot(handle.path, allow_fp64=True)
    assert wide.inverse_dynamics(s.q, s.qd).dtype == np.float64
    plain.close()
    wide.close()
