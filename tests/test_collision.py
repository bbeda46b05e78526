"""Collision sphere models and kernels on the CPU build (docs/collision.md):

* coverage: every surface point of every shape (sampled four times finer than the fit)
  lies inside a sphere of its link; meshes (an STL written here, read with trimesh) too;
* determinism: the same inputs give the same spheres and the same key part; a changed
  mesh file changes the key;
* kernels against the float64 reference (grid_rbd.reference.collision) and central
  differences: sphere_positions[_gradient], self_collision_distance[_gradient], world
  distances and the collision cost, on a synthetic arm and on iiwa14 with cylinders;
* conservativeness against Pinocchio's collision module (coal `computeDistances`): the
  spheres never report free a pair that is in collision, and never a larger distance;
* bad inputs (unknown links, bad resolutions, mesh paths leaving the roots) are refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from collision_support import arm_urdf, iiwa14_with_cylinders

import grid_rbd
from grid_codegen import parse_urdf
from grid_codegen.collision import CollisionRequest, build_sphere_model
from grid_codegen.collision.geometry import (
    read_shapes,
    resolve_mesh,
    sample_primitive,
    surface_points,
    to_link_frame,
)
from grid_rbd.reference import collision as ref

RES = 0.03


def _register(urdf: str, tmp: str, **kw):
    return grid_rbd.register_robot("coll", urdf_string=urdf, collision=True, device="cpu",
                                   dtype="float64", algorithm_list=["collision"],
                                   cache_dir=tmp, **kw)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return str(tmp_path_factory.mktemp("collision_store"))


@pytest.fixture(scope="module")
def arm(store):
    return _register(arm_urdf(), store, collision_res=RES)


@pytest.fixture(scope="module")
def iiwa(store):
    return _register(iiwa14_with_cylinders(), store)


def _states(nq: int, n: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.5, 2.5, (n, nq))


def _inside(points: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> np.ndarray:
    d = np.linalg.norm(points[:, None] - centres[None], axis=2) - radii[None]
    return d.min(axis=1)


# -- the sphere model -------------------------------------------------------------------
def test_spheres_cover_every_primitive():
    urdf = arm_urdf().encode()
    model = parse_urdf(urdf)
    for res in (0.02, 0.05):
        spheres = build_sphere_model(model, CollisionRequest.make(res), urdf, "arm")
        for shape in read_shapes(urdf, "arm"):
            if shape.kind == "sphere":
                continue
            points = to_link_frame(shape, sample_primitive(shape, res / 16))
            mine = [s for s in spheres.spheres if s.link == shape.link]
            worst = _inside(points, np.array([s.center for s in mine]),
                            np.array([s.radius for s in mine])).max()
            assert worst <= 1e-9, (shape.kind, res, worst)


def _mesh_robot(tmp_path, name="part.stl"):
    trimesh = pytest.importorskip("trimesh")
    (tmp_path / "robot/meshes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "robot/urdf").mkdir(exist_ok=True)
    mesh = trimesh.creation.icosphere(subdivisions=2, radius=0.08)
    mesh.vertices *= [1.0, 0.6, 1.8]
    mesh.export(tmp_path / "robot/meshes" / name)
    urdf = arm_urdf(l3_geometry=f'<mesh filename="package://robot/meshes/{name}"/>')
    path = tmp_path / "robot/urdf/arm.urdf"
    path.write_text(urdf)
    return path, mesh


def test_spheres_cover_a_mesh_and_are_deterministic(tmp_path):
    path, mesh = _mesh_robot(tmp_path)
    urdf = path.read_bytes()
    roots = (tmp_path / "robot",)
    request = CollisionRequest.make(RES, roots=roots)
    model = parse_urdf(urdf)
    a = build_sphere_model(model, request, urdf, str(path))
    b = build_sphere_model(model, CollisionRequest.make(RES, roots=roots), urdf, str(path))
    assert a == b and request.key(urdf, "x") == CollisionRequest.make(
        RES, roots=roots).key(urdf, "x")
    shape = [s for s in read_shapes(urdf, "x") if s.kind == "mesh"][0]
    dense = surface_points(shape, RES / 16, roots)
    mine = [s for s in a.spheres if s.link == "l3"]
    worst = _inside(dense, np.array([s.center for s in mine]),
                    np.array([s.radius for s in mine])).max()
    assert worst <= 1e-9 and len(mine) < 60
    key = request.key(urdf, "x")
    mesh.vertices *= 1.01
    mesh.export(tmp_path / "robot/meshes/part.stl")
    assert CollisionRequest.make(RES, roots=roots).key(urdf, "x") != key
    assert "mesh_sha256" in key and str(tmp_path) not in str(key)


# -- kernels against the reference and finite differences --------------------------------
def _check_handle(h, urdf: str, tol: float = 1e-9):
    model = parse_urdf(urdf.encode())
    spheres = h._meta["collision"]
    q = _states(h.nq)
    np.testing.assert_allclose(h.sphere_positions(q), ref.sphere_positions(model, spheres, q),
                               atol=tol)
    np.testing.assert_allclose(h.sphere_positions_gradient(q),
                               ref.sphere_positions_gradient(model, spheres, q), atol=tol)
    d = h.self_collision_distance(q)
    np.testing.assert_allclose(d, ref.self_collision_distance(model, spheres, q), atol=tol)
    G = h.self_collision_distance_gradient(q)
    np.testing.assert_allclose(G, ref.self_collision_distance_gradient(model, spheres, q),
                               atol=1e-7)
    eps = 1e-6
    fd = np.stack([(h.self_collision_distance(q + eps * e) - h.self_collision_distance(
        q - eps * e)) / (2 * eps) for e in np.eye(h.nq)], -1)
    assert np.abs(fd - G).max() < 1e-5
    fdp = np.stack([(h.sphere_positions(q + eps * e) - h.sphere_positions(q - eps * e))
                    / (2 * eps) for e in np.eye(h.nq)], -1)
    assert np.abs(fdp - h.sphere_positions_gradient(q)).max() < 1e-6


def test_arm_kernels_match_the_reference(arm):
    assert len(arm.collision_pairs) > 0 and arm.collision_spheres[0].link == "base"
    assert ("l1", "l2") not in arm.collision_pairs  # adjacent
    assert ("l3", "tool") not in arm.collision_pairs  # one body
    _check_handle(arm, arm_urdf())


def test_iiwa14_kernels_match_the_reference(iiwa):
    assert iiwa.sphere_positions(np.zeros((2, 7))).shape == (2, len(iiwa.collision_spheres), 3)
    _check_handle(iiwa, iiwa14_with_cylinders())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_loop_form_matches_the_reference(tmp_path, monkeypatch, dtype):
    """The loop forms (grid/collision.h, taken above UNROLL_MAX_PAIRS primitive pairs and
    UNROLL_MAX_JACOBIAN Jacobian entries, as on g1) forced on the arm: the same numbers
    as the reference, on SIMD vectors of items (37 items: a partial last vector)."""
    from grid_codegen.collision import emit

    monkeypatch.setattr(emit, "UNROLL_MAX_PAIRS", 0)
    monkeypatch.setattr(emit, "UNROLL_MAX_JACOBIAN", 0)
    h = grid_rbd.register_robot("loops", urdf_string=arm_urdf(), collision=True,
                                device="cpu", dtype=dtype, algorithm_list=["collision"],
                                cache_dir=str(tmp_path), collision_res=RES)
    header = (h._registration.entry_dir / "grid.cuh").read_text()
    for name in emit.LOOP_FORMS:
        assert f"{name}_loops" in header
    if dtype == "float64":
        _check_handle(h, arm_urdf())
        return
    model = parse_urdf(arm_urdf().encode())
    spheres = h._meta["collision"]
    q = _states(3, 37, seed=5)  # not a multiple of the SIMD width
    np.testing.assert_allclose(h.self_collision_distance(q.astype(np.float32)),
                               ref.self_collision_distance(model, spheres, q), atol=2e-5)
    np.testing.assert_allclose(h.self_collision_distance_gradient(q.astype(np.float32)),
                               ref.self_collision_distance_gradient(model, spheres, q),
                               atol=2e-4)
    np.testing.assert_allclose(h.sphere_positions_gradient(q.astype(np.float32)),
                               ref.sphere_positions_gradient(model, spheres, q), atol=2e-5)


def test_world_distance_and_cost(arm):
    model = parse_urdf(arm_urdf().encode())
    spheres = arm._meta["collision"]
    q = _states(3, 8, seed=1)
    centers = np.array([[0.3, 0.0, 0.4], [0.0, -0.25, 0.6], [0.1, 0.1, 0.9]])
    radii = np.array([0.05, 0.1, 0.02])
    d, g = ref.world_collision_distance(model, spheres, q, centers, radii, True)
    np.testing.assert_allclose(arm.world_collision_distance(q, centers, radii), d, atol=1e-12)
    np.testing.assert_allclose(arm.world_collision_distance_gradient(q, centers, radii), g,
                               atol=1e-9)
    per_item = np.broadcast_to(centers, (8, 3, 3)).copy()
    np.testing.assert_allclose(arm.world_collision_distance(q, per_item, np.tile(radii, (8, 1))),
                               d, atol=1e-12)
    v, grad, hess = arm.collision_cost(q, margin=0.3, centers=centers, radii=radii)
    rv, rg, rh = ref.collision_cost(model, spheres, q, margin=0.3, centers=centers,
                                    radii=radii)
    np.testing.assert_allclose(v, rv, atol=1e-12)
    np.testing.assert_allclose(grad, rg, atol=1e-9)
    np.testing.assert_allclose(hess, rh, atol=1e-9)
    assert grad.shape == (8, 6) and hess.shape == (8, 6, 6) and (v > 0).any()
    eps = 1e-6
    fd = np.stack([(arm.collision_cost(q + eps * e, 0.3, centers=centers, radii=radii)[0]
                    - arm.collision_cost(q - eps * e, 0.3, centers=centers, radii=radii)[0])
                   / (2 * eps) for e in np.eye(3)], -1)
    np.testing.assert_allclose(fd, grad[:, :3], atol=1e-5)


# -- conservativeness against Pinocchio / coal --------------------------------------------
def test_spheres_are_conservative_against_coal(tmp_path, store):
    pin = pytest.importorskip("pinocchio")
    if not hasattr(pin, "GeometryModel") or not hasattr(pin, "computeDistances"):
        pytest.skip("this Pinocchio has no collision module (coal)")
    urdf = arm_urdf(capsule=False)
    path = tmp_path / "arm.urdf"
    path.write_text(urdf)
    h = _register(urdf, store, collision_res=RES)
    model = pin.buildModelFromUrdf(str(path))
    geom = pin.buildGeomFromUrdf(model, str(path), pin.GeometryType.COLLISION)
    names = [g.name for g in geom.geometryObjects]
    index = {}
    for k, g in enumerate(geom.geometryObjects):
        index.setdefault(g.name.rsplit("_", 1)[0], k)
    for a, b in h.collision_pairs:
        geom.addCollisionPair(pin.CollisionPair(index[a], index[b]))
    data, gdata = model.createData(), pin.GeometryData(geom)
    q = _states(3, 200, seed=2)
    d = h.self_collision_distance(q)
    colliding = 0
    for i in range(len(q)):
        pin.computeDistances(model, data, geom, gdata, q[i])
        exact = np.array([r.min_distance for r in gdata.distanceResults])
        colliding += int((exact <= 0).sum())
        assert (d[i][exact <= 0] <= 1e-9).all(), (i, names)
        free = exact > 0  # apart, the sphere distance is a lower bound of the exact one
        assert (d[i][free] <= exact[free] + 1e-7).all(), (i, d[i], exact)
    assert colliding > 0  # the sample holds configurations in collision


# -- bad inputs -----------------------------------------------------------------------------
def test_bad_inputs_are_refused(tmp_path, store):
    urdf = arm_urdf()
    with pytest.raises(ValueError, match="unknown link 'nope'"):
        _register(urdf, store, allowed_collision_pairs=[("l1", "nope")])
    for bad in (0.0, -1.0, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="collision_res"):
            _register(urdf, store, collision_res=bad)
    with pytest.raises(ValueError, match="unknown links"):
        _register(urdf, store, collision_res={"nope": 0.1})
    with pytest.raises(ValueError, match="need collision=True"):
        grid_rbd.register_robot("x", urdf_string=urdf, collision_res=0.1, device="cpu",
                                cache_dir=store)
    with pytest.raises(ValueError, match="collision_native must be"):
        _register(urdf, store, collision_native="boxes")
    with pytest.raises(Exception, match="spheres only"):
        _register(urdf, store, spherized_urdf=urdf)
    root = tmp_path / "root"
    (root / "meshes").mkdir(parents=True)
    (tmp_path / "secret.stl").write_text("solid x\nendsolid x\n")
    for name in ("../secret.stl", "package://root/../secret.stl", str(tmp_path / "secret.stl"),
                 "file://" + str(tmp_path / "secret.stl")):
        with pytest.raises(ValueError, match="outside the allowed mesh roots"):
            resolve_mesh(name, (root,), "l3")
    (root / "meshes/link.stl").symlink_to(tmp_path / "secret.stl")
    with pytest.raises(ValueError, match="outside the allowed mesh roots"):
        resolve_mesh("meshes/link.stl", (root,), "l3")
    with pytest.raises(FileNotFoundError, match="not a file inside the mesh roots"):
        resolve_mesh("package://root/meshes/missing.stl", (root,), "l3")
    mesh_urdf = arm_urdf(l3_geometry='<mesh filename="../../secret.stl"/>')
    with pytest.raises(ValueError, match="outside the allowed mesh roots"):
        _register(mesh_urdf, store, mesh_roots=[str(root)])


def test_allowed_pairs_and_spherized_urdf(arm, store):
    pair = arm.collision_pairs[0]
    h = _register(arm_urdf(), store, collision_res=RES,
                  allowed_collision_pairs=[pair[::-1]])
    assert pair not in h.collision_pairs and len(h.collision_pairs) == len(
        arm.collision_pairs) - 1
    spheres = "".join(f'<link name="{s.link}"><collision><origin xyz="{s.center[0]} '
                      f'{s.center[1]} {s.center[2]}"/><geometry><sphere radius="{s.radius}"/>'
                      '</geometry></collision></link>' for s in arm.collision_spheres)
    mine = _register(arm_urdf(), store, spherized_urdf=f"<robot name='s'>{spheres}</robot>")
    assert mine.collision_spheres == arm.collision_spheres
    q = _states(3, 4)
    np.testing.assert_allclose(mine.self_collision_distance(q), arm.self_collision_distance(q))


# -- JAX and torch: the analytic backward through the kernels ------------------------------
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_frameworks_differentiate_the_distances(arm, framework):
    from grid_rbd._register import with_backend

    q = _states(3, 4, seed=3)
    c, r = np.array([[0.3, 0.0, 0.4], [0.0, -0.25, 0.6]]), np.array([0.05, 0.1])
    want_self = arm.self_collision_distance_gradient(q).sum(1)
    want_world = arm.world_collision_distance_gradient(q, c, r).sum(1)
    if framework == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed")
        view = with_backend(arm, "torch")
        got = []
        for f in (lambda x: view.self_collision_distance(x),
                  lambda x: view.world_collision_distance(x, c, r)):
            x = torch.tensor(q, requires_grad=True)
            f(x).sum().backward()
            got.append(x.grad.numpy())
    else:
        jax = pytest.importorskip("jax", reason="jax is not installed")
        jax.config.update("jax_enable_x64", True)
        view = with_backend(arm, "jax")
        got = [np.asarray(jax.grad(lambda x: view.self_collision_distance(x).sum())(q)),
               np.asarray(jax.grad(lambda x: view.world_collision_distance(x, c, r).sum())(q))]
    np.testing.assert_allclose(got[0], want_self, atol=1e-12)
    np.testing.assert_allclose(got[1], want_world, atol=1e-12)


def test_builds_without_collision_carry_none_of_it():
    """grid/collision.h and the tables are inlined only into collision builds: the text
    of every other registration (and so its content key) does not change with them."""
    from support import REPO

    from grid_codegen.generate import generate
    from grid_codegen.options import CodegenOptions

    model = parse_urdf((REPO / "robots/iiwa14/iiwa14.urdf").read_bytes())
    for device_api in (False, True):
        text = generate(model, CodegenOptions(algorithms=("crba",)),
                        device_api=device_api)["grid.cuh"]
        assert "collision" not in text.lower()
