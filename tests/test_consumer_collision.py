"""The collision part of the device-level API (docs/consumer.md): a consumer unit built
with build_artifact(collision=True, ...) calls grid::device's collision functions from
its own loop over a batch (one item per call, the one-thread forms) on the CPU build;
its numbers are judged by the float64 reference (grid_rbd.reference.collision) and by
central differences of its own distances. Also: the tables it reads agree with the
sphere model, the collision options are keyed by content, and (where nvcc exists) the
same unit compiles as a CUDA kernel."""

from __future__ import annotations

import ctypes
import os
import shutil

import numpy as np
import pytest
from collision_support import capsule_arm_urdf, iiwa14_with_cylinders

import grid_rbd
from grid_codegen import parse_urdf
from grid_codegen.collision import SphereModel
from grid_rbd.reference import collision as ref

UNIT = r"""// collision_probe.cu: grid::device's collision functions from a consumer's kernel
#include "grid.cuh"
namespace gd = grid::device;
typedef gd::Scalar T;
#define EXPORT extern "C" __attribute__((visibility("default")))

// One item per thread on the GPU; a loop over the batch on the CPU build.
GRID_KERNEL void probe_kernel(const T* q, int batch, int m, const T* centers,
                              const T* radii, T* pos, T* dpos, T* self_d, T* self_g,
                              T* world_d, T* world_d2, T* world_g) {
#if GRID_IS_CUDA
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b < batch) {
#else
  for (int b = 0; b < batch; ++b) {
#endif
    const T* qb = q + b * gd::kNq;
    gd::sphere_positions<T>(qb, pos + b * gd::kSpherePositionsOutSize);
    gd::sphere_positions_gradient<T>(qb, dpos + b * gd::kSpherePositionsGradientOutSize);
    gd::self_collision_distance<T>(qb, self_d + b * gd::kNumCollisionPairs);
    gd::self_collision_distance_gradient<T>(qb, self_g + b * gd::kNumCollisionPairs * gd::kNv);
    gd::world_collision_distance<T>(qb, m, centers, radii, world_d + b * m);
    gd::world_collision_distance_gradient<T>(qb, m, centers, radii, world_g + b * m * gd::kNv,
                                             world_d2 + b * m);
  }
}

#if !GRID_IS_CUDA
EXPORT void probe(const T* q, int batch, int m, const T* centers, const T* radii, T* pos,
                  T* dpos, T* self_d, T* self_g, T* world_d, T* world_d2, T* world_g) {
  probe_kernel(q, batch, m, centers, radii, pos, dpos, self_d, self_g, world_d, world_d2,
               world_g);
}

EXPORT int probe_counts(int* out) {
  out[0] = gd::kNumSpheres; out[1] = gd::kNumCapsules; out[2] = gd::kNumCollisionPairs;
  out[3] = gd::kNumCollisionLinks; out[4] = gd::kNq; out[5] = gd::kNv;
  return (int)sizeof(T);
}

// The tables as a consumer's device code reads them (collision()), and the host alias.
EXPORT void probe_tables(double* center, double* radius, int* link, int* pairs,
                         double* capsule_ends, int* same) {
  const gd::CollisionTables& t = gd::collision();
  for (int i = 0; i < gd::kNumSpheres; ++i) {
    for (int k = 0; k < 3; ++k) center[3 * i + k] = t.sphere_link_center[3 * i + k];
    radius[i] = t.sphere_radius[i];
    link[i] = t.sphere_link[i];
  }
  for (int p = 0; p < 2 * gd::kNumCollisionPairs; ++p) pairs[p] = t.pair_links[p];
  for (int c = 0; c < 6 * gd::kNumCapsules; ++c) capsule_ends[c] = t.capsule_link_ends[c];
  *same = &t != &gd::kCollision && t.sphere_radius[0] == gd::kCollision.sphere_radius[0];
}
#endif
"""

OBSTACLES = (np.array([[0.25, 0.0, 0.45], [0.0, -0.2, 0.7], [-0.15, 0.1, 0.95]]),
             np.array([0.05, 0.1, 0.03]))


def _build(tmp, urdf_text: str, name: str, dtype: str, **kw):
    urdf = tmp / f"{name}.urdf"
    urdf.write_text(urdf_text)
    src = tmp / "collision_probe.cu"
    src.write_text(UNIT)
    return grid_rbd.build_artifact("collision_probe", name, urdf, sources=[src],
                                   cache_dir=tmp / "cache", backend=kw.pop("backend", "cpu"),
                                   dtype=dtype, algorithm_list=["collision"], collision=True,
                                   **kw)


class Probe:
    """ctypes over the probe unit."""

    def __init__(self, art) -> None:
        self.lib = ctypes.CDLL(os.fspath(art.path))
        counts = (ctypes.c_int * 6)()
        size = self.lib.probe_counts(counts)
        self.S, self.C, self.P, self.L, self.nq, self.nv = list(counts)
        self.dtype = np.float64 if size == 8 else np.float32

    def __call__(self, q: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> dict:
        q = np.ascontiguousarray(q, self.dtype)
        c = np.ascontiguousarray(centers, self.dtype)
        r = np.ascontiguousarray(radii, self.dtype)
        B, M, S, P, nv = len(q), len(r), self.S, self.P, self.nv
        out = {"pos": (B, S, 3), "dpos": (B, S, 3, nv), "self": (B, P), "self_g": (B, P, nv),
               "world": (B, M), "world2": (B, M), "world_g": (B, M, nv)}
        out = {k: np.full(v, np.nan, self.dtype) for k, v in out.items()}
        ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (q, c, r)]
        self.lib.probe(ptr[0], ctypes.c_int(B), ctypes.c_int(M), ptr[1], ptr[2],
                       *(a.ctypes.data_as(ctypes.c_void_p) for a in out.values()))
        return out

    def tables(self) -> dict:
        S, P, C = self.S, self.P, max(self.C, 1)
        out = {"center": np.zeros((S, 3)), "radius": np.zeros(S),
               "link": np.zeros(S, np.int32), "pairs": np.zeros((P, 2), np.int32),
               "capsules": np.zeros((C, 6))}
        same = ctypes.c_int(0)
        self.lib.probe_tables(*(a.ctypes.data_as(ctypes.c_void_p) for a in out.values()),
                              ctypes.byref(same))
        out["same"] = same.value
        return out


def _check(probe: Probe, art, urdf_text: str, q: np.ndarray, tol: float, fd_tol: float):
    model = parse_urdf(urdf_text.encode())
    spheres = SphereModel.from_dict(art.meta["collision"])
    c, r = OBSTACLES
    got = probe(q, c, r)
    dw, gw = ref.world_collision_distance(model, spheres, q, c, r, True)
    want = {"pos": ref.sphere_positions(model, spheres, q),
            "dpos": ref.sphere_positions_gradient(model, spheres, q),
            "self": ref.self_collision_distance(model, spheres, q),
            "self_g": ref.self_collision_distance_gradient(model, spheres, q),
            "world": dw, "world2": dw, "world_g": gw}
    for key, value in want.items():
        scale = 10 if key.endswith("_g") or key == "dpos" else 1
        np.testing.assert_allclose(got[key], value, atol=scale * tol, err_msg=key)
    eps = 1e-6 if probe.dtype == np.float64 else 1e-3
    for key, grad in (("self", "self_g"), ("world", "world_g")):
        fd = np.stack([(probe(q + eps * e, c, r)[key] - probe(q - eps * e, c, r)[key])
                       / (2 * eps) for e in np.eye(q.shape[1])], -1)
        np.testing.assert_allclose(got[grad], fd, atol=fd_tol, err_msg=grad)
    return spheres


def test_native_capsules_through_the_device_api_match_the_reference(tmp_path):
    """float64, collision_native: capsules and spheres, the loop form."""
    art = _build(tmp_path, capsule_arm_urdf(), "capsule_arm", "float64",
                 collision_native=True)
    probe = Probe(art)
    assert (probe.S, probe.C, probe.nq, probe.nv) == (10, 4, 4, 4) and probe.P > 5
    q = np.random.default_rng(0).uniform(-2.5, 2.5, (24, 4))
    spheres = _check(probe, art, capsule_arm_urdf(), q, 1e-12, 1e-6)
    tables = probe.tables()
    assert tables["same"] == 1
    np.testing.assert_array_equal(tables["center"], [s.center for s in spheres.spheres])
    np.testing.assert_array_equal(tables["radius"], [s.radius for s in spheres.spheres])
    links = spheres.links
    assert [links[k] for k in tables["link"]] == [s.link for s in spheres.spheres]
    assert [(links[a], links[b]) for a, b in tables["pairs"]] == list(spheres.pairs)
    np.testing.assert_array_equal(tables["capsules"], [c.a + c.b for c in spheres.capsules])
    header = art.header.read_text()
    assert "world_collision_distance_gradient" in header and "CollisionTables" in header


def test_fitted_spheres_in_float32_match_the_reference(tmp_path):
    """float32, iiwa14 with cylinders fitted by spheres (the traced form)."""
    art = _build(tmp_path, iiwa14_with_cylinders(), "iiwa14_spheres", "float32")
    probe = Probe(art)
    assert probe.C == 0 and probe.nq == 7 and probe.dtype == np.float32
    q = np.random.default_rng(1).uniform(-2.0, 2.0, (16, 7))
    _check(probe, art, iiwa14_with_cylinders(), q, 3e-6, 5e-3)


def test_two_robots_in_one_process_keep_their_own_tables(tmp_path):
    """Each artifact reads its own robot's tables when both are loaded in one process
    (they have internal linkage: a function-local static of an external inline function
    would be one object per process, STB_GNU_UNIQUE, and the second robot would read the
    first one's spheres)."""
    arm = _build(tmp_path, capsule_arm_urdf(), "two_arm", "float64", collision_native=True)
    iiwa = _build(tmp_path, iiwa14_with_cylinders(), "two_iiwa", "float64")
    probes = [Probe(arm), Probe(iiwa)]  # both loaded before either is called
    c, r = OBSTACLES
    for probe, art, text in ((probes[0], arm, capsule_arm_urdf()),
                             (probes[1], iiwa, iiwa14_with_cylinders())):
        q = np.random.default_rng(2).uniform(-2.0, 2.0, (6, probe.nq))
        spheres = SphereModel.from_dict(art.meta["collision"])
        np.testing.assert_allclose(
            probe(q, c, r)["world"],
            ref.world_collision_distance(parse_urdf(text.encode()), spheres, q, c, r),
            atol=1e-12)
        np.testing.assert_array_equal(probe.tables()["radius"],
                                      [s.radius for s in spheres.spheres])


def test_collision_options_are_keyed_by_content(tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(capsule_arm_urdf())
    src = tmp_path / "collision_probe.cu"
    src.write_text(UNIT)
    common = {"sources": [src], "cache_dir": tmp_path / "cache", "backend": "cpu",
              "plan_only": True, "algorithm_list": ["collision"]}
    plain = grid_rbd.build_artifact("collision_probe", "a", urdf, **common)
    keys = {plain["input_key"]}
    for extra in ({"collision": True}, {"collision": True, "collision_native": True},
                  {"collision": True, "collision_res": 0.02},
                  {"collision": True, "spherized_urdf": '<robot name="s"><link name="l1">'
                   '<collision><geometry><sphere radius="0.1"/></geometry></collision>'
                   '</link></robot>'}):
        keys.add(grid_rbd.build_artifact("collision_probe", "a", urdf, **common,
                                         **extra)["input_key"])
    assert len(keys) == 5
    again = grid_rbd.build_artifact("collision_probe", "a", urdf, **common, collision=True,
                                    collision_res=0.02)
    assert again["input_key"] in keys
    with pytest.raises(ValueError, match="need collision=True"):
        grid_rbd.build_artifact("collision_probe", "a", urdf, **common, collision_res=0.02)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_probe_compiles_as_a_cuda_kernel(tmp_path, monkeypatch):
    """Device code may not index namespace-scope constexpr arrays: the collision (and
    contact) tables are read through function-local copies. nvcc compiles the unit; the
    artifact is not loaded (no GPU is needed)."""
    monkeypatch.setenv("GRID_RBD_CUDA_ARCH", "sm_90")
    art = _build(tmp_path, capsule_arm_urdf(), "capsule_arm_cuda", "float32",
                 collision_native=True, backend="cuda")
    assert art.path.is_file() and art.arch == "sm_90"
