"""Collision sphere models (docs/collision.md): URDF collision geometry to spheres per
link (`fit`, `geometry`) or exact capsule primitives (`collision_native`), the checked
link pairs and the store-key part (`model`), closest points of the exact primitives
(`primitives`) and the loop-form kernels and tables of `grid.cuh` (`emit`)."""

from grid_codegen.collision.model import (
    DEFAULT_RES,
    NATIVE_MODES,
    CollisionCapsule,
    CollisionRequest,
    CollisionSphere,
    SphereModel,
    build_sphere_model,
)

__all__ = ["DEFAULT_RES", "NATIVE_MODES", "CollisionCapsule", "CollisionRequest",
           "CollisionSphere", "SphereModel", "build_sphere_model"]
