"""collision_native (docs/collision.md): capsules as exact primitives.

* the closest points (grid_codegen.collision.primitives) against brute force: a fine
  grid over one segment's parameter with the exact closest point on the other, and
  closed forms for parallel, collinear and crossing segments;
* the model: capsules and their end spheres, the key (`native` only when set);
* the CPU kernels (loop form) against the float64 reference and central differences, in
  float64 and float32: self distances and gradients, world distances (capsules included)
  and their gradients, at generic, collinear and nearly parallel configurations;
* the exact distances of Pinocchio's collision module (coal capsules and spheres):
  equal for every free pair and obstacle, both <= 0 for colliding ones; with
  "capsules+cylinders" the capsules bound coal's exact cylinders (never a larger
  distance, never a colliding pair reported free).
"""

from __future__ import annotations

import numpy as np
import pytest
from collision_support import CAPSULE_ARM, arm_urdf, capsule_arm_urdf

import grid_rbd
from grid_codegen import parse_urdf
from grid_codegen.collision import CollisionRequest, build_sphere_model
from grid_codegen.collision.primitives import segment_point, segment_segment
from grid_rbd.reference import collision as ref

OBSTACLES = (np.array([[0.25, 0.0, 0.45], [0.0, -0.2, 0.7], [-0.15, 0.1, 0.95],
                       [0.3, 0.3, 0.2]]), np.array([0.05, 0.1, 0.03, 0.12]))


def _register(urdf: str, store, dtype: str = "float64", native=True):
    return grid_rbd.register_robot("native", urdf_string=urdf, collision=True, device="cpu",
                                   dtype=dtype, algorithm_list=["collision"],
                                   cache_dir=str(store), collision_native=native)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("native_store")


@pytest.fixture(scope="module")
def arm(store):
    return _register(capsule_arm_urdf(), store)


def _states(n: int, seed: int) -> np.ndarray:
    q = np.random.default_rng(seed).uniform(-2.5, 2.5, (n, 4))
    q[-3:, 2:] = [[0.0, 0.0], [1e-9, -1e-9], [0.0, 1e-7]]  # collinear, nearly parallel
    return q


# -- closest points ---------------------------------------------------------------------
def _brute_segment_segment(a1, b1, a2, b2, n: int = 200001) -> float:
    s = np.linspace(0.0, 1.0, n)[:, None]
    x = a1 + s * (b1 - a1)
    y, _ = segment_point(a2, b2, x)
    return float(np.linalg.norm(x - y, axis=1).min())


def test_segment_point_against_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b, p = rng.normal(size=(3, 3))
        x, t = segment_point(a, b, p)
        ts = np.linspace(0, 1, 100001)[:, None]
        brute = np.linalg.norm(a + ts * (b - a) - p, axis=1).min()
        assert 0 <= t <= 1 and abs(np.linalg.norm(x - p) - brute) < 1e-9


def test_segment_segment_against_brute_force_and_closed_forms():
    rng = np.random.default_rng(1)
    cases = [rng.normal(size=(4, 3)) for _ in range(40)]
    d = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    off = np.cross(d, [0.0, 0.0, 1.0])
    off /= np.linalg.norm(off)
    for shift, gap, eps in ((0.3, 0.2, 0.0), (1.5, 0.2, 0.0), (0.3, 0.0, 0.0),
                            (0.3, 0.2, 1e-9), (0.3, 0.2, 1e-6), (-2.0, 0.1, 0.0)):
        a1, b1 = np.zeros(3), d.copy()  # a unit segment, then a parallel one shifted along
        a2 = shift * d + gap * off      # it by `shift` and apart by `gap`, tilted by eps
        b2 = a2 + d + eps * off
        cases.append(np.array([a1, b1, a2, b2]))
        if eps == 0.0:  # closed form: overlap -> gap; else the end-to-end distance
            overlap = -1.0 <= shift <= 1.0
            want = gap if overlap else np.hypot(gap, abs(shift) - 1.0)
            x1, x2 = segment_segment(a1, b1, a2, b2)
            assert abs(np.linalg.norm(x1 - x2) - want) < 1e-12, (shift, gap)
    crossing = np.array([[-1.0, 0, 0], [1.0, 0, 0], [0, -1.0, 0], [0, 1.0, 0]])
    cases.append(crossing)
    for a1, b1, a2, b2 in cases:
        x1, x2 = segment_segment(a1, b1, a2, b2)
        # both points on their segments, and the distance the brute force finds
        for x, a, b in ((x1, a1, b1), (x2, a2, b2)):
            assert np.linalg.norm(segment_point(a, b, x)[0] - x) < 1e-12
        assert abs(np.linalg.norm(x1 - x2) - _brute_segment_segment(a1, b1, a2, b2)) < 1e-9
    x1, x2 = segment_segment(*crossing)
    assert np.linalg.norm(x1 - x2) < 1e-15 and np.linalg.norm(x1) < 1e-15


# -- the model and its key ------------------------------------------------------------------
def test_model_holds_capsules_with_end_spheres_and_is_keyed_only_when_set():
    urdf = capsule_arm_urdf().encode()
    model = parse_urdf(urdf)
    spheres = build_sphere_model(model, CollisionRequest.make(native=True), urdf, "x")
    assert [c.link for c in spheres.capsules] == [name for name, _, _ in CAPSULE_ARM]
    for cap, (_, radius, length) in zip(spheres.capsules, CAPSULE_ARM, strict=True):
        a, b = np.array(cap.a), np.array(cap.b)
        np.testing.assert_allclose(a, [0, 0, 0], atol=1e-7)
        np.testing.assert_allclose(b, [0, 0, float(length)], atol=1e-7)
        assert float(radius) <= cap.radius <= float(radius) + 2e-7
        for end, point in zip(cap.ends, (a, b), strict=True):
            s = spheres.spheres[end]
            assert s.link == cap.link and s.capsule >= 0 and np.allclose(s.center, point)
    assert len(spheres.spheres) == 2 + 2 * len(CAPSULE_ARM)  # base, tool and the ends
    again = build_sphere_model(model, CollisionRequest.make(native=True), urdf, "x")
    assert again == spheres
    plain = CollisionRequest.make().key(urdf, "x")
    assert "native" not in plain
    assert CollisionRequest.make(native=True).key(urdf, "x") == {**plain, "native": "capsules"}
    fitted = build_sphere_model(model, CollisionRequest.make(0.03), urdf, "x")
    assert not fitted.capsules and len(fitted.spheres) > len(spheres.spheres)
    with pytest.raises(ValueError, match="collision_native must be"):
        CollisionRequest.make(native="boxes")


def test_bad_native_arguments_are_refused(store):
    with pytest.raises(ValueError, match="need collision=True"):
        grid_rbd.register_robot("x", urdf_string=capsule_arm_urdf(), collision_native=True,
                                device="cpu", cache_dir=str(store))
    with pytest.raises(ValueError, match="spherized_urdf holds spheres"):
        grid_rbd.register_robot("x", urdf_string=capsule_arm_urdf(), collision=True,
                                collision_native=True, spherized_urdf="<robot/>",
                                device="cpu", cache_dir=str(store))


# -- kernels against the reference and finite differences ------------------------------------
def _check(h, urdf: str, q: np.ndarray, tol: float, fd_tol: float) -> None:
    model = parse_urdf(urdf.encode())
    spheres = h._meta["collision"]
    qx = q.astype(h._dtype)
    d = h.self_collision_distance(qx)
    G = h.self_collision_distance_gradient(qx)
    np.testing.assert_allclose(d, ref.self_collision_distance(model, spheres, q), atol=tol)
    np.testing.assert_allclose(G, ref.self_collision_distance_gradient(model, spheres, q),
                               atol=10 * tol)
    c, r = OBSTACLES
    dw, gw = ref.world_collision_distance(model, spheres, q, c, r, True)
    np.testing.assert_allclose(h.world_collision_distance(qx, c, r), dw, atol=tol)
    np.testing.assert_allclose(h.world_collision_distance_gradient(qx, c, r), gw,
                               atol=10 * tol)
    eps = 1e-6
    for f, grad in ((lambda x: ref.self_collision_distance(model, spheres, x), G),
                    (lambda x: ref.world_collision_distance(model, spheres, x, c, r), gw)):
        fd = np.stack([(f(q + eps * e) - f(q - eps * e)) / (2 * eps)
                       for e in np.eye(q.shape[1])], -1)
        np.testing.assert_allclose(grad, fd, atol=fd_tol)


def test_native_kernels_match_the_reference_in_float64(arm):
    assert len(arm.collision_capsules) == 4 and arm.collision_capsules[0].link == "l1"
    assert ("l2", "l4") in arm.collision_pairs and ("l3", "l4") not in arm.collision_pairs
    q = _states(24, seed=0)
    _check(arm, capsule_arm_urdf(), q, 1e-12, 1e-6)
    # the collinear configuration: l2 and l4 on one line, l3 between them
    d = arm.self_collision_distance(q)[-3:, arm.collision_pairs.index(("l2", "l4"))]
    np.testing.assert_allclose(d[0], 0.25 - 0.035 - 0.03, atol=1e-6)


def test_native_kernels_match_the_reference_in_float32(store):
    h = _register(capsule_arm_urdf(), store, dtype="float32")
    _check(h, capsule_arm_urdf(), _states(16, seed=1), 2e-5, 2e-3)


def test_capsules_and_cylinders_mode_on_a_mixed_arm(store):
    """Boxes sphere-covered, the cylinder and the capsule native, the tool sphere exact."""
    h = _register(arm_urdf(), store, native="capsules+cylinders")
    assert [c.link for c in h.collision_capsules] == ["l1", "l2"]
    q = np.random.default_rng(2).uniform(-2.5, 2.5, (16, 3))
    _check(h, arm_urdf(), q, 1e-12, 1e-6)


# -- against Pinocchio / coal ---------------------------------------------------------------
def _coal_model(tmp_path, urdf: str, capsules: bool):
    pin = pytest.importorskip("pinocchio")
    if not hasattr(pin, "GeometryModel") or not hasattr(pin, "computeDistances"):
        pytest.skip("this Pinocchio has no collision module (coal)")
    coal = pytest.importorskip("coal")
    path = tmp_path / "robot.urdf"
    path.write_text(urdf)
    model = pin.buildModelFromUrdf(str(path))
    geom = pin.buildGeomFromUrdf(model, str(path), pin.GeometryType.COLLISION)
    if capsules:  # Pinocchio reads the cylinders; coal gets the capsules
        for g in geom.geometryObjects:
            if isinstance(g.geometry, coal.Cylinder):
                g.geometry = coal.Capsule(g.geometry.radius, 2 * g.geometry.halfLength)
    return pin, coal, model, geom


def _link_of(geom) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for k, g in enumerate(geom.geometryObjects):
        out.setdefault(g.name.rsplit("_", 1)[0], []).append(k)
    return out


def test_native_distances_equal_coal_exact_distances(tmp_path, arm):
    pin, coal, model, geom = _coal_model(tmp_path, capsule_arm_urdf(capsule=False), True)
    links = _link_of(geom)
    for a, b in arm.collision_pairs:
        geom.addCollisionPair(pin.CollisionPair(links[a][0], links[b][0]))
    c, r = OBSTACLES
    for m in range(len(r)):  # obstacle spheres fixed to the world, against every link
        k = geom.addGeometryObject(pin.GeometryObject(f"obstacle{m}", 0,
                                                      pin.SE3(np.eye(3), c[m]),
                                                      coal.Sphere(r[m])))
        for link in links:
            geom.addCollisionPair(pin.CollisionPair(links[link][0], k))
    data, gdata = model.createData(), pin.GeometryData(geom)
    q = _states(120, seed=3)
    d = arm.self_collision_distance(q)
    w = arm.world_collision_distance(q, c, r)
    P = len(arm.collision_pairs)
    counts = {"self hit": 0, "self free": 0, "world hit": 0, "world free": 0}
    for i in range(len(q)):
        pin.computeDistances(model, data, geom, gdata, q[i])
        exact = np.array([res.min_distance for res in gdata.distanceResults])
        exact_world = exact[P:].reshape(len(r), len(links)).min(1)
        for what, ours, truth in (("self", d[i], exact[:P]), ("world", w[i], exact_world)):
            hit = truth <= 0
            counts[f"{what} hit"] += int(hit.sum())
            counts[f"{what} free"] += int((~hit).sum())
            assert (ours[hit] <= 1e-9).all(), (what, i, ours, truth)
            np.testing.assert_allclose(ours[~hit], truth[~hit], atol=1e-6)
    assert min(counts.values()) > 10, counts


def test_capsule_bounds_of_cylinders_are_conservative_against_coal(tmp_path, store):
    pin, _, model, geom = _coal_model(tmp_path, arm_urdf(capsule=False), False)
    h = _register(arm_urdf(capsule=False), store, native="capsules+cylinders")
    assert len(h.collision_capsules) == 2  # l1's and l2's cylinders
    links = _link_of(geom)
    for a, b in h.collision_pairs:
        geom.addCollisionPair(pin.CollisionPair(links[a][0], links[b][0]))
    data, gdata = model.createData(), pin.GeometryData(geom)
    q = np.random.default_rng(4).uniform(-2.5, 2.5, (150, 3))
    d = h.self_collision_distance(q)
    colliding = 0
    for i in range(len(q)):
        pin.computeDistances(model, data, geom, gdata, q[i])
        exact = np.array([res.min_distance for res in gdata.distanceResults])
        colliding += int((exact <= 0).sum())
        assert (d[i][exact <= 0] <= 1e-9).all(), (i, d[i], exact)
        assert (d[i][exact > 0] <= exact[exact > 0] + 1e-7).all(), (i, d[i], exact)
    assert colliding > 0


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_frameworks_differentiate_through_the_capsules(arm, framework):
    """The world distance to capsules is composed in the framework from the end spheres'
    positions: its autodiff gradient equals the analytic one (and the self distance's
    backward is its gradient kernel)."""
    from grid_rbd._register import with_backend

    q = _states(6, seed=5)[:3]
    c, r = OBSTACLES
    want_world = arm.world_collision_distance_gradient(q, c, r).sum(1)
    want_self = arm.self_collision_distance_gradient(q).sum(1)
    if framework == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed")
        view = with_backend(arm, "torch")
        got = []
        for f in (lambda x: view.world_collision_distance(x, c, r),
                  lambda x: view.self_collision_distance(x)):
            x = torch.tensor(q, requires_grad=True)
            f(x).sum().backward()
            got.append(x.grad.numpy())
    else:
        jax = pytest.importorskip("jax", reason="jax is not installed")
        jax.config.update("jax_enable_x64", True)
        view = with_backend(arm, "jax")
        got = [np.asarray(jax.grad(lambda x: view.world_collision_distance(x, c, r).sum())(q)),
               np.asarray(jax.grad(lambda x: view.self_collision_distance(x).sum())(q))]
    np.testing.assert_allclose(got[0], want_world, atol=1e-12)
    np.testing.assert_allclose(got[1], want_self, atol=1e-12)
