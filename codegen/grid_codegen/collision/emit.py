"""The collision part of `grid.cuh`: the robot's collision tables, the loop form of the
self-distance kernels and the kinematics item the device API's world distances use.

Two forms of `self_collision_distance[_gradient]`:

* **traced** (`grid_codegen.symbolic.collision`): every sphere pair unrolled into
  straight-line code. Register-resident and fast for small models, but its size grows
  with the number of sphere pairs (g1 at collision_res 0.1, 13,864 sphere pairs: a 27 MB
  header, two minutes of g++ for the gradient unit alone);
* **loops** (`grid/collision.h`): one traced pass for the poses of the bodies (and, for
  the gradient, the world motion-subspace columns), then loops over the pair table;
  code size is independent of the pair count. Used when the model holds capsules
  (`collision_native`) or more than `UNROLL_MAX_PAIRS` primitive pairs.

`sphere_positions` stays traced (its size grows with the sphere count only);
`sphere_positions_gradient` takes the loop form too when it has more than
`UNROLL_MAX_JACOBIAN` entries (g1: 20,160, a 66 s unit traced).

The tables (`struct CollisionTables`, constant `kCollisionTables`) are emitted once per
file; device code reads them through `collision_tables()`, a function-local static copy
(nvcc does not let device code index a namespace-scope constexpr array). They sit in an
unnamed namespace: a function-local static of an inline function with external linkage
is one object per process (GCC's STB_GNU_UNIQUE), so two robots' consumer artifacts in
one process would share the first one's tables; internal linkage keeps each robot's
tables, and every routine instantiated on them, to its own library.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen.collision.model import SphereModel
from grid_codegen.emit.writer import Writer
from grid_codegen.model import RobotModel
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import spatial as sp
from grid_codegen.symbolic.emit import Array, ItemBuilder, PassLibrary

UNROLL_MAX_PAIRS = 1024
"""Primitive pairs up to which the traced form is emitted (above: the loop form)."""

UNROLL_MAX_JACOBIAN = 4096
"""Entries of sphere_positions_gradient up to which it is traced (above: loops)."""

LOOP_FORMS = {
    "self_collision_distance": "collision_self_distance",
    "self_collision_distance_gradient": "collision_self_distance_gradient",
    "sphere_positions_gradient": "collision_sphere_positions_gradient",
}
"""Algorithms with a loop form -> their routine in grid/collision.h."""


def use_loops(spheres: SphereModel, name: str = "self_collision_distance",
              nv: int = 0) -> bool:
    """Whether algorithm `name` of `spheres` takes the loop form (module doc)."""
    if name == "sphere_positions_gradient":
        return 3 * len(spheres.spheres) * nv > UNROLL_MAX_JACOBIAN
    return name in LOOP_FORMS and (bool(spheres.capsules)
                                   or spheres.sphere_pair_count() > UNROLL_MAX_PAIRS)


def kinematics_size(model: RobotModel, columns: bool = True) -> int:
    """Scalars of the collision kinematics `K` (grid/collision.h)."""
    return 12 * (model.nb + 1) + (6 * model.nv if columns else 0)


def kinematics(model: RobotModel, X: list, columns: bool) -> list:
    """`K` of grid/collision.h: per body its world pose (R row-major, then p), the world
    as the identity, then (columns) the world motion-subspace columns `[v; w]`."""
    oX = A.world_poses(model, X)
    out: list = []
    for R, p in oX:
        out += list(R) + list(p)
    out += [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    if columns:
        for i, joint in enumerate(model.joints):
            for column in A.subspace(joint):
                out += list(sp.motion_to_parent(oX[i], column))
    return out


def _support(model: RobotModel, body: int) -> list[int]:
    row = [0] * model.nv
    if body >= 0:
        for b in model.ancestors(body):
            j = model.joints[b]
            row[j.idx_v:j.idx_v + j.nv] = [1] * j.nv
    return row


def _ints(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(int(v)) for v in values or [0]) + "}"


def _doubles(values: Sequence[float]) -> str:
    from grid_codegen.emit.device_api import double_lit

    return "{" + ", ".join(double_lit(v) for v in values or [0.0]) + "}"


def emit_tables(w: Writer, model: RobotModel, spheres: SphereModel) -> None:
    """grid/collision.h, then `CollisionTables`, `kCollisionTables` and
    `collision_tables()` in namespace grid (module doc)."""
    from grid_codegen.emit.prelude import header

    w.line("// ---- grid/collision.h " + "-" * 62)
    w.raw(header("collision.h"))
    links = spheres.links
    index = {name: k for k, name in enumerate(links)}
    body = {s.link: s.body for s in spheres.spheres}
    world = model.nb

    def pose(link: str) -> int:
        return body[link] if body[link] >= 0 else world

    S, C, L, P = (len(spheres.spheres), len(spheres.capsules), len(links),
                  len(spheres.pairs))
    link_spheres, link_capsules = [], []
    for link in links:
        own = spheres.plain_of_link(link)
        caps = spheres.capsules_of_link(link)
        first = spheres.of_link(link)[0]
        link_spheres += [own[0], own[-1] + 1] if own else [first, first]
        link_capsules += [caps[0], caps[-1] + 1] if caps else [0, 0]
    fields = [
        ("int", "link_pose", [pose(name) for name in links]),
        ("int", "link_spheres", link_spheres),
        ("int", "link_capsules", link_capsules),
        ("int", "sphere_pose", [pose(s.link) for s in spheres.spheres]),
        ("int", "sphere_link", [index[s.link] for s in spheres.spheres]),
        ("double", "sphere_center", [x for s in spheres.spheres for x in s.body_center]),
        ("double", "sphere_link_center", [x for s in spheres.spheres for x in s.center]),
        ("double", "sphere_radius", [s.radius for s in spheres.spheres]),
        ("int", "capsule_link", [index[c.link] for c in spheres.capsules]),
        ("int", "capsule_ends", [e for c in spheres.capsules for e in c.ends]),
        ("double", "capsule_link_ends", [x for c in spheres.capsules for x in c.a + c.b]),
        ("double", "capsule_radius", [c.radius for c in spheres.capsules]),
        ("int", "pair_links", [index[x] for pair in spheres.pairs for x in pair]),
        ("unsigned char", "support", [v for b in range(model.nb + 1)
                                      for v in _support(model, b if b < world else -1)]),
    ]
    with w.namespace("grid"), w.namespace(""):
        w.doc(f"The collision model of '{model.name}' (grid_codegen.collision): {S} spheres "
              f"(capsule end spheres included),\n{C} capsules, {L} links with "
              f"primitives, {P} checked link pairs; poses are body indices, {world} the "
              "world.\nCentres in the body frame (sphere_center) and in the link frame "
              "(sphere_link_center).")
        with w.block("struct CollisionTables", "};"):
            for name, value in (("kSpheres", S), ("kCapsules", C), ("kLinks", L),
                                ("kPairs", P), ("kPoses", model.nb + 1), ("kNv", model.nv)):
                w.line(f"static constexpr int {name} = {value};")
            for ctype, name, values in fields:
                w.line(f"{ctype} {name}[{max(len(values), 1)}];")
        w.line("constexpr CollisionTables kCollisionTables = {")
        for ctype, name, values in fields:
            text = _doubles(values) if ctype == "double" else _ints(values)
            w.line(f"    {text},  // {name}")
        w.line("};")
        w.doc("The tables for host and device code alike (a function-local static copy).")
        with w.block("GRID_INLINE const CollisionTables& collision_tables()"):
            w.line("static constexpr CollisionTables tables = kCollisionTables;")
            w.line("return tables;")
        w.line()


def emit_loops(kb: ItemBuilder, model: RobotModel, spheres: SphereModel, name: str,
               X: Array, out: Array, unX) -> None:
    """The loop form of algorithm `name` (a key of LOOP_FORMS) into the item builder."""
    gradient = name.endswith("_gradient")
    what = "poses and world motion-subspace columns" if gradient else "poses"
    K = kb.call(f"collision_{'kinematics' if gradient else 'poses'}",
                f"World {what} of the bodies for the collision loops (grid/collision.h K).",
                lambda x: kinematics(model, unX(x), gradient), [X], "K", dense=True)
    S = len(spheres.spheres)
    if name == "sphere_positions_gradient":
        ops = 15 * S + 9 * S * model.nv
    else:
        ops = 15 * spheres.sphere_pair_count() + 15 * S \
            + (12 * model.nv * len(spheres.pairs) if gradient else 0)
    routine = LOOP_FORMS[name]
    kb.call_static(f"{name}_loops",
                   lambda w: w.line(f"{routine}<T, S>(collision_tables(), K, out);"),
                   f"`{name}` by loops over the pair table (grid/collision.h).",
                   [(f"const T* GRID_RESTRICT {K.name}", K.name), ("T* GRID_RESTRICT out",
                                                                   "out")], ops)


def build_kinematics_item(library: PassLibrary, model: RobotModel, w: Writer) -> None:
    """`collision_kinematics_thread<T, S>(q, out)`: K of one item (the device API's world
    distances start from it)."""
    from grid_codegen.emit.thread import _Plan

    kb = ItemBuilder(library)
    q = Array.runtime("q", model.nq, "item")
    out = Array.runtime("out", kinematics_size(model), "out")
    X = _Plan(model, (), False, library).transforms(kb, q)
    kb.call("collision_kinematics_out", "World poses of the bodies and world motion-"
            "subspace columns (grid/collision.h K).",
            lambda x: kinematics(model, A.unflatten_placements(x, model.nb), True), [X], out)
    kb.emit_item_function(w, "collision_kinematics_thread", "The collision kinematics K "
                          f"of one item ({kinematics_size(model)} scalars: grid/collision.h).",
                          ["const T* GRID_RESTRICT q", "T* GRID_RESTRICT out"])
    w.line()


__all__ = ["LOOP_FORMS", "UNROLL_MAX_JACOBIAN", "UNROLL_MAX_PAIRS", "build_kinematics_item",
           "emit_loops", "emit_tables", "kinematics", "kinematics_size", "use_loops"]
