"""The reverse-mode methods in `output_convention="mujoco"`: `forward_dynamics_vjp(q, qd,
u, ct)` and `inverse_dynamics_vjp(q, qd, ct, qdd)` (`grid_rbd._mujoco_vjp`), on the
fixed-base iiwa14 (where the convention is the identity) and the floating toy of
test_mujoco_convention.py. Checked

* against central differences of the MuJoCo-convention forward methods in every raw
  input number (the q cotangent is in q's raw layout, pos + quaternion w, x, y, z; the
  quaternion given unnormalised, as the kernels read quat/|quat|);
* against MuJoCo itself: central differences of mj_forward's qacc along mj_integratePos,
  qvel and qfrc_applied, and mjd_inverseFD's DfDq / DfDv (the q cotangent contracted
  with the raw velocity of each mj_integratePos direction);
* against the converted gradients (`ct^T forward_dynamics_gradient`, `ct^T minv`) and
  torch's autograd through the converted `forward_dynamics`, which defines the same q
  cotangent; the torch and JAX handles against the numpy one.

Float64 CPU builds of the core profile, one per robot; a gpu-tagged twin: a float32 CUDA
build of the toy against the CPU build (on an H200: 2e-7 FD, 1.2e-6 ID relative).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco", reason="the mujoco package is not installed "
                             "(requirements-test.lock)")
from test_mujoco_convention import TOY, register_pair  # noqa: E402

import grid_rbd  # noqa: E402
from grid_rbd._register import with_backend  # noqa: E402


class Case:
    def __init__(self, name, handle, m, floating):
        self.name, self.h, self.m, self.floating = name, handle, m, floating
        self.d = mujoco.MjData(m)
        self.nq, self.nv = m.nq, m.nv

    def qacc(self, q, v, u):
        d = self.d
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, u
        mujoco.mj_forward(self.m, d)
        return d.qacc.copy()

    def inverse_jacobians(self, q, v, a):
        """mjd_inverseFD's (DfDq, DfDv), as d qfrc_inverse / d(input) (nv, nv)."""
        d = self.d
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = q, v, 0.0
        mujoco.mj_forward(self.m, d)
        d.qacc[:] = a
        dq, dv = np.zeros((self.nv, self.nv)), np.zeros((self.nv, self.nv))
        mujoco.mjd_inverseFD(self.m, d, 1e-7, False, dq, dv, None, None, None, None, None)
        return dq.T, dv.T  # MuJoCo stores them transposed (row: the input)

    def moved(self, q, dq, scale):
        out = q.copy()
        mujoco.mj_integratePos(self.m, out, np.asarray(dq, dtype=np.float64), scale)
        return out

    def directions(self, q):
        """(nq, nv): column k is d/ds mj_integratePos(q, s e_k) at s = 0 (raw numbers,
        the quaternion's scale kept: q (x) (0, e_k / 2) on the free joint)."""
        out = np.zeros((self.nq, self.nv))
        for k in range(self.nv):
            e = np.eye(self.nv)[k]
            out[:, k] = (self.moved(q, e, 1e-7) - self.moved(q, e, -1e-7)) / 2e-7
        if self.floating:  # mj_integratePos normalises the quaternion: restore its scale
            out[3:7] *= np.linalg.norm(q[3:7])
        return out


@pytest.fixture(scope="module", params=["iiwa14", "toy_free"])
def case(request, shared_store):
    # The session store (tests/conftest.py): on the CPU, iiwa14's build is
    # test_handle_numpy's iiwa14-f64 (float64, the core profile; the URDF's bytes).
    h, m, floating = register_pair(request.param, "mjv", ["core"], shared_store)
    assert (m.nq, m.nv) == (h.nq, h.nv)
    yield Case(request.param, h, m, floating)
    h.close()


def _states(case, batch, seed, scale=1.0):
    """q (the quaternion of norm `scale`), qd, qdd, u and a cotangent ct."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.2, 1.2, (batch, case.nq))
    if case.floating:
        quat = rng.normal(size=(batch, 4))
        q[:, 3:7] = scale * quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return (q, *(rng.uniform(-2, 2, (batch, case.nv)) for _ in range(4)))


def _close(actual, expected, tol, what=""):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    err = np.abs(actual - expected).max() / (1.0 + np.abs(expected).max())
    assert err < tol, f"{what}: relative error {err:.2e} >= {tol:.0e}"


def _raw_differences(f, ct, args, eps=1e-6):
    """`ct . d f / d(args)` by central differences in every number of every arg."""
    out = []
    for i, a in enumerate(args):
        grad = np.zeros_like(a)
        for j in range(a.shape[1]):
            values = []
            for s in (eps, -eps):
                moved = list(args)
                moved[i] = a.copy()
                moved[i][:, j] += s
                values.append((f(*moved) * ct).sum(1))
            grad[:, j] = (values[0] - values[1]) / (2 * eps)
        out.append(grad)
    return np.concatenate(out, axis=1)


@pytest.mark.parametrize("scale", [1.0, 1.3])
def test_vjps_match_raw_differences(case, scale):
    """Every cotangent against central differences of the MuJoCo-convention forward
    method, the quaternion given at norm `scale` (the rotation is quat/|quat|)."""
    h = case.h
    q, qd, qdd, u, ct = _states(case, 3, seed=400, scale=scale)
    fd = h.forward_dynamics_vjp(q, qd, u, ct)
    _close(fd, _raw_differences(h.forward_dynamics, ct, [q, qd, u]), 1e-7, "FD VJP")
    for acc in (qdd, None):
        got = h.inverse_dynamics_vjp(q, qd, ct, acc)
        want = _raw_differences(lambda q, qd, acc=acc: h.inverse_dynamics(q, qd, acc), ct,
                                [q, qd])
        _close(got, want, 1e-7, f"ID VJP (qdd {'given' if acc is not None else 'None'})")
    if case.floating:  # no radial component: invariant to the quaternion's scale
        for out in (fd, got):
            assert np.abs((out[:, 3:7] * q[:, 3:7]).sum(1)).max() < 1e-9
    else:  # the identity: the wrapped handle's own
        _close(fd, h.pinocchio.forward_dynamics_vjp(q, qd, u, ct), 1e-15, "fixed base")


def test_vjps_match_mujoco(case):
    """The tangent cotangent (ct_q contracted with mj_integratePos's directions), ct_qvel
    and ct_qfrc against MuJoCo: differences of mj_forward's qacc, mjd_inverseFD."""
    h, nq, nv = case.h, case.nq, case.nv
    q, qd, qdd, u, ct = _states(case, 2, seed=401)
    fd = h.forward_dynamics_vjp(q, qd, u, ct)
    id_ = h.inverse_dynamics_vjp(q, qd, ct, qdd)
    eps, eye = 1e-6, np.eye(nv)
    for b in range(len(q)):
        dirs = case.directions(q[b])
        dq = np.stack([(case.qacc(case.moved(q[b], eye[k], eps), qd[b], u[b])
                        - case.qacc(case.moved(q[b], eye[k], -eps), qd[b], u[b]))
                       / (2 * eps) for k in range(nv)], axis=1)
        dv = np.stack([(case.qacc(q[b], qd[b] + eps * eye[k], u[b])
                        - case.qacc(q[b], qd[b] - eps * eye[k], u[b])) / (2 * eps)
                       for k in range(nv)], axis=1)
        du = np.stack([(case.qacc(q[b], qd[b], u[b] + eps * eye[k])
                        - case.qacc(q[b], qd[b], u[b] - eps * eye[k])) / (2 * eps)
                       for k in range(nv)], axis=1)
        _close(fd[b, :nq] @ dirs, ct[b] @ dq, 1e-6, "FD ct_q (mj_integratePos)")
        _close(fd[b, nq:nq + nv], ct[b] @ dv, 1e-6, "FD ct_qvel")
        _close(fd[b, nq + nv:], ct[b] @ du, 1e-6, "FD ct_qfrc")
        Dq, Dv = case.inverse_jacobians(q[b], qd[b], qdd[b])
        _close(id_[b, :nq] @ dirs, ct[b] @ Dq, 1e-5, "ID ct_q (mjd_inverseFD)")
        _close(id_[b, nq:], ct[b] @ Dv, 1e-5, "ID ct_qvel (mjd_inverseFD)")


def test_vjps_are_the_converted_gradients_transposed(case):
    h, nq, nv = case.h, case.nq, case.nv
    q, qd, qdd, u, ct = _states(case, 3, seed=402)
    dirs = np.stack([case.directions(x) for x in q])
    fd = h.forward_dynamics_vjp(q, qd, u, ct)
    grad = np.einsum("bi,bij->bj", ct, h.forward_dynamics_gradient(q, qd, u))
    _close(np.einsum("bi,bik->bk", fd[:, :nq], dirs), grad[:, :nv], 1e-6, "FD q")
    _close(fd[:, nq:nq + nv], grad[:, nv:], 1e-12, "FD qvel")
    _close(fd[:, nq + nv:], np.einsum("bi,bij->bj", ct, h.minv(q)), 1e-12, "FD qfrc")
    id_ = h.inverse_dynamics_vjp(q, qd, ct, qdd)
    grad = np.einsum("bi,bij->bj", ct, h.inverse_dynamics_gradient(q, qd, qdd))
    _close(np.einsum("bi,bik->bk", id_[:, :nq], dirs), grad[:, :nv], 1e-6, "ID q")
    _close(id_[:, nq:], grad[:, nv:], 1e-12, "ID qvel")
    # one state, out=, gravity=
    _close(h.forward_dynamics_vjp(q[0], qd[0], u[0], ct[0]), fd[0], 1e-15, "one state")
    out = np.empty_like(id_)
    assert h.inverse_dynamics_vjp(q, qd, ct, qdd, out=out) is not None
    _close(out, id_, 1e-15, "out=")
    free = h.forward_dynamics_vjp(q, qd, u, ct, gravity=0.0)
    want = _raw_differences(lambda *x: h.forward_dynamics(*x, gravity=0.0), ct, [q, qd, u])
    _close(free, want, 1e-7, "gravity=0")


def test_torch_vjps_match_numpy_and_autograd(case):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    th = grid_rbd.as_mujoco(with_backend(case.h.pinocchio, "torch"))
    q, qd, qdd, u, ct = _states(case, 3, seed=403, scale=1.2)
    t = [torch.tensor(x) for x in (q, qd, qdd, u, ct)]
    fd = th.forward_dynamics_vjp(t[0], t[1], t[3], t[4])
    assert isinstance(fd, torch.Tensor)
    _close(fd.numpy(), case.h.forward_dynamics_vjp(q, qd, u, ct), 1e-12, "torch FD")
    _close(th.inverse_dynamics_vjp(t[0], t[1], t[4], t[2]).numpy(),
           case.h.inverse_dynamics_vjp(q, qd, ct, qdd), 1e-12, "torch ID")
    # autograd through the converted forward_dynamics gives the same cotangents
    leaves = [x.clone().requires_grad_(True) for x in (t[0], t[1], t[3])]
    (th.forward_dynamics(*leaves) * t[4]).sum().backward()
    _close(torch.cat([x.grad for x in leaves], 1).numpy(), fd.numpy(), 1e-10, "autograd")


def test_jax_vjps_match_numpy(case):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    jh = grid_rbd.as_mujoco(with_backend(case.h.pinocchio, "jax"))
    q, qd, qdd, u, ct = _states(case, 3, seed=404, scale=0.8)
    j = [jnp.asarray(x) for x in (q, qd, qdd, u, ct)]
    _close(np.asarray(jh.forward_dynamics_vjp(j[0], j[1], j[3], j[4])),
           case.h.forward_dynamics_vjp(q, qd, u, ct), 1e-12, "jax FD")
    _close(np.asarray(jax.jit(jh.inverse_dynamics_vjp)(j[0], j[1], j[4], j[2])),
           case.h.inverse_dynamics_vjp(q, qd, ct, qdd), 1e-12, "jax ID (jit)")
    grads = jax.grad(lambda *x: (jh.forward_dynamics(*x) * j[4]).sum(),
                     argnums=(0, 1, 2))(j[0], j[1], j[3])
    _close(np.concatenate([np.asarray(g) for g in grads], 1),
           case.h.forward_dynamics_vjp(q, qd, u, ct), 1e-10, "jax.grad")


def test_still_refused_methods_name_the_way_out(case):
    if not case.floating:
        pytest.skip("a fixed base forwards every method")
    jh = grid_rbd.as_mujoco(with_backend(case.h.pinocchio, "jax"))
    with pytest.raises(NotImplementedError, match="mujoco_to_pinocchio"):
        jh.forward_dynamics_checked  # noqa: B018 (the JAX twins take Pinocchio's state)


@pytest.mark.gpu
def test_cuda_vjps_match_the_cpu_build(case, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("no CUDA GPU: nvcc is not on PATH")
    from grid_rbd._device import cuda_status
    if not cuda_status().usable:
        pytest.skip(f"no CUDA GPU: {cuda_status().reason}")
    if not case.floating:
        pytest.skip("the floating toy carries the conversion")
    h = grid_rbd.register_robot("mjv_toy_gpu", urdf_string=TOY, floating_base=True,
                                device="cuda", algorithm_list=["core"],
                                output_convention="mujoco",
                                cache_dir=tmp_path)
    try:
        q, qd, qdd, u, ct = _states(case, 64, seed=405)
        f32 = [x.astype(np.float32) for x in (q, qd, qdd, u, ct)]
        _close(h.forward_dynamics_vjp(f32[0], f32[1], f32[3], f32[4]),
               case.h.forward_dynamics_vjp(q, qd, u, ct), 1e-4, "cuda FD VJP")
        _close(h.inverse_dynamics_vjp(f32[0], f32[1], f32[4], f32[2]),
               case.h.inverse_dynamics_vjp(q, qd, ct, qdd), 1e-4, "cuda ID VJP")
    finally:
        h.close()
