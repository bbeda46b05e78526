"""Collision sphere models (docs/collision.md): URDF collision geometry to spheres per
link (`fit`, `geometry`), the checked link pairs and the store-key part (`model`)."""

from grid_codegen.collision.model import (
    DEFAULT_RES,
    CollisionRequest,
    CollisionSphere,
    SphereModel,
    build_sphere_model,
)

__all__ = ["DEFAULT_RES", "CollisionRequest", "CollisionSphere", "SphereModel",
           "build_sphere_model"]
