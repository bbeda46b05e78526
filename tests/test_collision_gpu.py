"""The collision profile on the CUDA build (tag `gpu`): sphere positions, self-collision
distances and their gradients against the float64 reference, float32 and float64, on
the synthetic arm and on iiwa14 with cylinders (tests/collision_support.py), in the
traced form, the loop form (forced) and with native capsules (the capsule arm, the world
distances included), and the torch backward on device tensors."""

from __future__ import annotations

import numpy as np
import pytest
from collision_support import arm_urdf, capsule_arm_urdf, iiwa14_with_cylinders
from test_codegen_gpu import _require_cuda

import grid_rbd
from grid_codegen import parse_urdf
from grid_rbd.reference import collision as ref

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    _require_cuda()
    return str(tmp_path_factory.mktemp("collision_gpu_store"))


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-9), ("float32", 2e-4)])
@pytest.mark.parametrize("robot", ["arm", "iiwa14", "arm_loops", "capsule_arm"])
def test_gpu_collision_matches_the_reference(store, robot, dtype, tol, monkeypatch,
                                             tmp_path):
    urdf = {"iiwa14": iiwa14_with_cylinders(), "capsule_arm": capsule_arm_urdf()}.get(
        robot, arm_urdf())
    extra = {"collision_native": True} if robot == "capsule_arm" else {}
    cache = store
    if robot == "arm_loops":  # every loop form, in a store of its own
        from grid_codegen.collision import emit

        monkeypatch.setattr(emit, "UNROLL_MAX_PAIRS", 0)
        monkeypatch.setattr(emit, "UNROLL_MAX_JACOBIAN", 0)
        cache = str(tmp_path)
    h = grid_rbd.register_robot(f"coll_{robot}", urdf_string=urdf, collision=True,
                                device="cuda", dtype=dtype, algorithm_list=["collision"],
                                cache_dir=cache, **extra)
    model = parse_urdf(urdf.encode())
    spheres = h._meta["collision"]
    q = np.random.default_rng(0).uniform(-2.5, 2.5, (4096, h.nq))
    qd = q.astype(dtype)
    checks = [(h.sphere_positions, ref.sphere_positions),
              (h.sphere_positions_gradient, ref.sphere_positions_gradient),
              (h.self_collision_distance, ref.self_collision_distance)]
    for method, oracle in checks:
        np.testing.assert_allclose(method(qd), oracle(model, spheres, q), atol=tol,
                                   err_msg=method.__name__)
    G = h.self_collision_distance_gradient(qd)
    want = ref.self_collision_distance_gradient(model, spheres, q)
    # float32 may pick another sphere pair where two nearly tie: compare where they agree
    close = np.abs(G - want).max(axis=2) <= 100 * tol
    assert close.mean() > (0.999 if dtype == "float32" else 1.0 - 1e-12)
    if robot == "capsule_arm":
        c, r = np.array([[0.25, 0.0, 0.45], [0.0, -0.2, 0.7]]), np.array([0.05, 0.1])
        dw, gw = ref.world_collision_distance(model, spheres, q, c, r, True)
        np.testing.assert_allclose(h.world_collision_distance(qd, c, r), dw, atol=tol)
        close = np.abs(h.world_collision_distance_gradient(qd, c, r) - gw).max(axis=2)
        assert (close <= 100 * tol).mean() > 0.999


def test_gpu_torch_backward_on_device_tensors(store):
    torch = _require_cuda()
    from grid_rbd._register import with_backend

    h = grid_rbd.register_robot("coll_arm", urdf_string=arm_urdf(), collision=True,
                                device="cuda", dtype="float64",
                                algorithm_list=["collision"], cache_dir=store)
    t = with_backend(h, "torch")
    q = np.random.default_rng(1).uniform(-2, 2, (256, 3))
    x = torch.tensor(q, device="cuda", requires_grad=True)
    t.self_collision_distance(x).sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(),
                               h.self_collision_distance_gradient(q).sum(1), atol=1e-9)
