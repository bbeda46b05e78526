"""The device-level API of `grid.cuh` (`namespace grid::device`): what a consumer's own
kernel calls, emitted only on request (`generate(..., device_api=True)`).

Registration builds leave it out, so their generated text, and hence every store key,
is what it was; consumer builds (`grid_rbd.consumer.build_artifact`, the Bazel macro
`grid_consumer`) ask for it. It adds, after the kernels:

* the robot as constexpr: dimensions, scalar type, robot / joint / body / end-effector
  names (through `c_string`), the baked inertial parameters and a 64-bit model id;
* per algorithm, `k<Name>OutSize` and one `k<Name><Port>Width` per input, then
  - the thread form `<name>(inputs..., out, inertia, gravity)`: one thread, one item,
    registers and stack only (`k<Name>ThreadScratch` is 0), host and device;
  - the cooperative forms `<name>_warp(s, ...)` (all 32 lanes of one warp together) and
    `<name>_block(s, ...)` (every thread of one block together), `s` pointing at
    `k<Name>WarpScratch` / `k<Name>BlockScratch` scalars of shared memory; they end on a
    barrier, so `out` is whole for every participant when they return;
  a form the build does not hold is absent and its `kHas<Name><Form>` is false;
* contact frames, when the build has them: their names, bodies and placements, and
  (with `world_kinematics` built) `contact_positions` / `contact_jacobians` of one item;
* the collision model, when the build has one (`collision=`): counts, link names, the
  tables (`kCollision` on the host, `collision()` in device code) and the world
  distances to caller-given obstacle spheres with their gradients (the per-algorithm
  forms above cover sphere positions and self distances);
* the host-side per-robot device state: `State<T>`, `state_bytes<T>()`,
  `create_state` (optionally in a caller-owned slab, refused when too small with nothing
  written), `check_state` and `free_state`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from grid_codegen.emit.writer import Writer, c_string, comment_text, lit
from grid_codegen.model import Frame, RobotModel
from grid_codegen.options import CodegenOptions
from grid_codegen.registry import Dims, algorithm

STATE_MAGIC = 0x47524944535431  # "GRIDST1"
STATE_ALIGN = 256  # the state's size is a multiple of this
SLAB_ALIGN = 16  # a caller's slab must start on this (cudaMalloc gives 256)


def double_lit(x: float) -> str:
    """A C++ double literal that round-trips `x` (`lit` writes `T(...)` for item code)."""
    text = repr(float(x))
    if not all(ch in "0123456789.e+-" for ch in text):
        raise ValueError(f"cannot emit the non-finite constant {text}")
    return text


def camel(name: str) -> str:
    """`end_effector_pose` -> `EndEffectorPose` (constant names)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def model_id(model: RobotModel, options: CodegenOptions, dims: Dims) -> int:
    """A 64-bit digest of what the device state must match: the robot, its dimensions,
    inertias and the scalar type (a state of another robot is refused)."""
    h = hashlib.sha256()
    h.update(f"{model.name}|{dims}|{options.dtype}|{options.runtime_inertia}".encode())
    for body in model.bodies:
        h.update(",".join(lit(x) for x in body.inertia.dynamic_parameters()).encode())
    return int.from_bytes(h.digest()[:8], "little") & 0x7FFFFFFFFFFFFFFF


def _names(w: Writer, constant: str, names: Sequence[str]) -> None:
    items = ", ".join(c_string(n) for n in names) if names else "nullptr"
    w.line(f"constexpr const char* {constant}[{max(len(names), 1)}] = {{{items}}};")


def _emit_robot(w: Writer, model: RobotModel, options: CodegenOptions, dims: Dims,
                ee_frames: Sequence[Frame]) -> None:
    w.doc("The robot as constants (the same values as grid::kNq ... and the descriptor).")
    w.line(f"typedef {options.scalar} Scalar;  // the build's dtype ({options.dtype})")
    w.line(f"constexpr const char* kRobotName = {c_string(model.name)};")
    for const in ("kNq", "kNv", "kNb", "kNumEes", "kMaxBatch"):
        w.line(f"constexpr int {const} = grid::{const};")
    w.line(f"constexpr bool kFloatingBase = {'true' if model.floating_base else 'false'};")
    w.line(f"constexpr unsigned long long kModelId = {model_id(model, options, dims)}ULL;")
    w.doc("Joint (body) names in body order, and the end-effector frames' names.")
    _names(w, "kJointNames", [j.name for j in model.joints])
    _names(w, "kBodyNames", list(model.body_names))
    _names(w, "kEeNames", [f.name for f in ee_frames])
    w.doc("Baked inertial parameters, 10 per body (Pinocchio's order: m, m*c, I about the\n"
          "body origin xx, xy, yy, xz, yz, zz): what create_state copies into the state.")
    params = [double_lit(x) for b in model.bodies for x in b.inertia.dynamic_parameters()]
    w.line(f"constexpr double kInertiaParams[{10 * dims.nb}] = {{{', '.join(params)}}};")
    w.line()


def _emit_algorithm(w: Writer, name: str, dims: Dims, strategies: Sequence[str],
                    runtime_inertia: bool) -> None:
    entry = algorithm(name)
    cname = camel(name)
    w.comment(f"-- {name}: {comment_text(entry.doc)}")
    w.line(f"constexpr int k{cname}OutSize = {entry.output_size(dims)};")
    for port in entry.inputs:
        w.line(f"constexpr int k{cname}{camel(port.name)}Width = {port.width(dims)};")
    for form in ("thread", "warp", "block"):
        w.line(f"constexpr bool kHas{cname}{camel(form)} = "
               f"{'true' if form in strategies else 'false'};")
    if "thread" in strategies:
        w.line(f"constexpr int k{cname}ThreadScratch = 0;")
    for form in ("warp", "block"):
        if form in strategies:
            w.line(f"constexpr int k{cname}{camel(form)}Scratch = "
                   f"grid::layout_{name}_{form}::kSize;")
    ports = [f"const T* GRID_RESTRICT {p.name}" for p in entry.inputs]
    tail = ["T* GRID_RESTRICT out", "const T* GRID_RESTRICT inertia = nullptr",
            "T gravity = T(-9.81)"]
    optional = ", ".join(p.name for p in entry.inputs if not p.required)
    note = f" `{optional}` may be NULL (zero)." if optional else ""
    table = (" `inertia`: the state's table (10 per body; required, this build reads it)."
             if runtime_inertia else " `inertia` is ignored (baked); pass the state's.")
    inputs = ", ".join(p.name for p in entry.inputs)
    if "thread" in strategies:
        w.doc(f"`{name}` of one item by one thread: per-item pointers ({inputs}), `out`\n"
              f"of k{cname}OutSize scalars.{note}{table}")
        w.line("template <typename T>")
        with w.block(f"GRID_INLINE void {name}({', '.join(ports + tail)})"):
            args = [p.name for p in entry.inputs] + ["inertia", "gravity", "out"]
            w.line(f"grid::{name}_thread<T, T>({', '.join(args)});")
        w.line()
    for form in ("warp", "block"):
        if form not in strategies:
            continue
        who = "the 32 lanes of one warp" if form == "warp" else "every thread of one block"
        sync = "GRID_WARP_SYNC()" if form == "warp" else "GRID_SYNC()"
        w.doc(f"`{name}` of one item by {who}, all calling with the same arguments; `s`:\n"
              f"k{cname}{camel(form)}Scratch scalars of shared memory for this item. Ends\n"
              f"on a barrier: `out` is whole for every caller on return.{note}")
        w.line("template <typename T>")
        with w.block(f"GRID_DEVICE void {name}_{form}(T* GRID_RESTRICT s, "
                     f"{', '.join(ports + tail)})"):
            w.line("grid::Args<T> a = {};")
            for k, port in enumerate(entry.inputs):
                w.line(f"a.in[{k}] = {port.name};")
            w.line("a.out = out;")
            w.line("a.inertia = inertia;")
            w.line("a.gravity = gravity;")
            w.line("a.batch = 1;")
            w.line(f"grid::{name}_{form}_item<T>(s, a, 0);")
            w.line(f"{sync};")
        w.line()


def _emit_contacts(w: Writer, model: RobotModel, contacts: Sequence[str],
                   has_world_kinematics: bool) -> None:
    frames = [model.resolve_frame(n) for n in contacts]
    nc, nb, nv = len(frames), model.nb, model.nv
    support = []
    for f in frames:
        mask, body = [0] * nv, f.body
        while body >= 0:
            joint = model.joints[body]
            mask[joint.idx_v:joint.idx_v + joint.nv] = [1] * joint.nv
            body = joint.parent
        support.extend(mask)
    placements = [double_lit(x) for f in frames
                  for x in list(f.placement.R.reshape(9)) + list(f.placement.p)]
    w.doc("Contact frames baked into this build (register_robot's contact_frames=): names,\n"
          "the body each is fixed to, its placement in that body (R row-major, p) and which\n"
          "tangent columns move it (1: the dof is on its body's path). The arrays are for\n"
          "host code; device code reads the same tables through contact_tables() (nvcc\n"
          "does not let device code index a namespace-scope constexpr array).")
    w.line(f"constexpr int kNumContacts = {nc};")
    _names(w, "kContactNames", list(contacts))
    with w.namespace(""):  # internal linkage: one copy per library (collision/emit.py)
        with w.block("struct ContactTables", "};"):
            w.line(f"int body[{max(nc, 1)}];")
            w.line(f"double placement[{12 * max(nc, 1)}];")
            w.line(f"unsigned char support[{max(nc * nv, 1)}];")
        w.line(f"constexpr ContactTables kContactTables = "
               f"{{{{{', '.join(str(f.body) for f in frames) or '0'}}}, "
               f"{{{', '.join(placements) or '0'}}}, "
               f"{{{', '.join(map(str, support)) or '0'}}}}};")
        with w.block("GRID_INLINE const ContactTables& contact_tables()"):
            w.line("static constexpr ContactTables tables = kContactTables;")
            w.line("return tables;")
    # References at namespace scope have external linkage unless static: one per unit.
    w.line(f"static constexpr const int (&kContactBody)[{max(nc, 1)}] = kContactTables.body;")
    w.line(f"static constexpr const double (&kContactPlacement)[{12 * max(nc, 1)}] = "
           "kContactTables.placement;")
    w.line(f"static constexpr const unsigned char (&kContactSupport)[{max(nc * nv, 1)}] = "
           "kContactTables.support;")
    w.line(f"constexpr bool kHasContactKinematics = "
           f"{'true' if has_world_kinematics else 'false'};")
    if not has_world_kinematics:
        w.comment("contact_positions / contact_jacobians need world_kinematics in the build "
                  "(algorithm_list \"kinematics\").")
        w.line()
        return
    wk = 18 * nb + 6 * nv
    w.doc("World positions of the contact points from a world_kinematics output `wk`\n"
          "(18 nb + 6 nv scalars): out[3 * kNumContacts], p_c = R_b p + p_b.")
    w.line("template <typename T>")
    with w.block("GRID_INLINE void contact_positions_from_kinematics(const T* GRID_RESTRICT wk, "
                 "T* GRID_RESTRICT out)"):
        w.line("const ContactTables& tables = contact_tables();")
        with w.block(f"for (int c = 0; c < {nc}; ++c)"):
            w.line("const T* R = wk + 9 * tables.body[c];")
            w.line(f"const T* pb = wk + {9 * nb} + 3 * tables.body[c];")
            w.line("const double* pf = tables.placement + 12 * c + 9;")
            with w.block("for (int i = 0; i < 3; ++i)"):
                w.line("out[3 * c + i] = R[3 * i] * T(pf[0]) + R[3 * i + 1] * T(pf[1]) + "
                       "R[3 * i + 2] * T(pf[2]) + pb[i];")
    w.line()
    w.doc("World-aligned linear Jacobians of the contact points from `wk`:\n"
          "out[kNumContacts][3][kNv] row-major; column j is v_j - p_c x w_j of the world\n"
          "motion-subspace column [v_j; w_j] (about the world origin), zero off the path.")
    w.line("template <typename T>")
    with w.block("GRID_INLINE void contact_jacobians_from_kinematics(const T* GRID_RESTRICT wk, "
                 "T* GRID_RESTRICT out)"):
        w.line("T p[3 * kNumContacts];")
        w.line("contact_positions_from_kinematics<T>(wk, p);")
        w.line(f"const T* S = wk + {12 * nb};  // (6, nv) row-major")
        w.line("const unsigned char* support = contact_tables().support;")
        with w.block(f"for (int c = 0; c < {nc}; ++c)"):
            w.line("const T* pc = p + 3 * c;")
            with w.block(f"for (int j = 0; j < {nv}; ++j)"):
                w.line(f"const bool on = support[c * {nv} + j] != 0;")
                w.line(f"const T v0 = S[j], v1 = S[{nv} + j], v2 = S[{2 * nv} + j];")
                w.line(f"const T w0 = S[{3 * nv} + j], w1 = S[{4 * nv} + j], "
                       f"w2 = S[{5 * nv} + j];")
                w.line(f"T* o = out + c * {3 * nv} + j;")
                w.line("o[0] = on ? v0 - (pc[1] * w2 - pc[2] * w1) : T(0);")
                w.line(f"o[{nv}] = on ? v1 - (pc[2] * w0 - pc[0] * w2) : T(0);")
                w.line(f"o[{2 * nv}] = on ? v2 - (pc[0] * w1 - pc[1] * w0) : T(0);")
    w.line()
    for what, size in (("positions", "3 * kNumContacts"), ("jacobians", "3 * kNumContacts * kNv")):
        w.doc(f"Contact {what} of one item from q (one thread): out[{size}].")
        w.line("template <typename T>")
        with w.block(f"GRID_INLINE void contact_{what}(const T* GRID_RESTRICT q, "
                     "T* GRID_RESTRICT out)"):
            w.line(f"T wk[{wk}];")
            w.line("grid::world_kinematics_thread<T, T>(q, nullptr, nullptr, T(0), wk);")
            w.line(f"contact_{what}_from_kinematics<T>(wk, out);")
        w.line()


def _emit_state(w: Writer) -> None:
    w.doc("The per-robot device state a consumer creates in its own process: the inertia\n"
          "table the item functions take (device memory under nvcc, host memory on the CPU\n"
          "build), gravity, and what it was created for. Plain data: pass it by value.")
    w.line("template <typename T>")
    with w.block("struct State", "};"):
        w.line("unsigned long long magic;     // kStateMagic while the state is live")
        w.line("unsigned long long model_id;  // kModelId of the robot it was made for")
        w.line("T* inertia;                   // 10 * kNb scalars (the baked parameters)")
        w.line("T gravity;                    // signed, along z")
        w.line("int device_arch;              // compute capability at creation; 0 on the CPU")
        w.line("int owns_memory;              // 0: carved from the caller's slab")
        w.line("size_t bytes;                 // state_bytes<T>()")
    w.line(f"constexpr unsigned long long kStateMagic = {STATE_MAGIC}ULL;")
    w.line()
    w.doc(f"Bytes of device memory one state needs (a slab must hold at least this much,\n"
          f"{SLAB_ALIGN}-byte aligned).")
    w.line("template <typename T>")
    with w.block("constexpr size_t state_bytes()"):
        w.line(f"return (sizeof(T) * 10 * kNb + {STATE_ALIGN - 1}) / {STATE_ALIGN} * "
               f"{STATE_ALIGN};")
    w.line()
    w.doc("An empty kernel: whether the artifact holds an image for the current device.")
    w.line("template <typename T>")
    w.line("GRID_KERNEL void state_probe_kernel() {}")
    w.line()
    w.doc("The compute capability of the current device (major * 10 + minor), 0 on the\n"
          "CPU build, -1 when it cannot be read.")
    with w.block("inline int current_device_arch()"):
        w.line("#if GRID_IS_CUDA")
        w.line("int device = 0, major = 0, minor = 0;")
        w.line("if (cudaGetDevice(&device) != cudaSuccess ||")
        w.line("    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) "
               "!= cudaSuccess ||")
        w.line("    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) "
               "!= cudaSuccess) {")
        w.line("  cudaGetLastError();")
        w.line("  return -1;")
        w.line("}")
        w.line("return major * 10 + minor;")
        w.line("#else")
        w.line("return 0;")
        w.line("#endif")
    w.line()
    w.doc("Create a state in `*state` (host call). `slab`/`slab_bytes`: caller-owned device\n"
          "memory to carve it from (NULL: allocate). Returns GRID_OK, GRID_ERROR_NULL_POINTER\n"
          "(no `state`), GRID_ERROR_OUT_OF_MEMORY (the slab holds fewer than\n"
          "state_bytes<T>() bytes, or allocation failed), GRID_ERROR_INVALID_ARGUMENT (a\n"
          f"slab not {SLAB_ALIGN}-byte aligned) or GRID_ERROR_ARCH_MISMATCH (no kernel "
          "image for\nthis device). On any error `*state` and the slab are left untouched.")
    w.line("template <typename T>")
    with w.block("inline int create_state(State<T>* state, void* slab = nullptr, "
                 "size_t slab_bytes = 0, T gravity = T(-9.81))"):
        w.line("if (state == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("const size_t need = state_bytes<T>();")
        with w.block("if (slab != nullptr)"):
            w.line("if (slab_bytes < need) return GRID_ERROR_OUT_OF_MEMORY;")
            w.line(f"if (reinterpret_cast<uintptr_t>(slab) % {SLAB_ALIGN} != 0) "
                   "return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("#if GRID_IS_CUDA")
        w.line("cudaFuncAttributes attributes;")
        with w.block("if (cudaFuncGetAttributes(&attributes, state_probe_kernel<T>) != "
                     "cudaSuccess)"):
            w.line("cudaGetLastError();")
            w.line("return GRID_ERROR_ARCH_MISMATCH;")
        w.line("#endif")
        w.line("const int arch = current_device_arch();")
        w.line("if (arch < 0) return GRID_ERROR_DEVICE;")
        w.line("T table[10 * kNb];")
        w.line("for (int k = 0; k < 10 * kNb; ++k) table[k] = T(kInertiaParams[k]);")
        w.line("void* memory = slab != nullptr ? slab : grid::device_alloc(need);")
        w.line("if (memory == nullptr) return GRID_ERROR_OUT_OF_MEMORY;")
        with w.block("if (grid::copy_to_device(memory, table, sizeof(table)) != GRID_OK)"):
            w.line("if (slab == nullptr) grid::device_free(memory);")
            w.line("return GRID_ERROR_DEVICE;")
        w.line("State<T> made = {kStateMagic, kModelId, static_cast<T*>(memory), gravity, arch,")
        w.line("                 slab == nullptr ? 1 : 0, need};")
        w.line("*state = made;")
        w.line("return GRID_OK;")
    w.line()
    w.doc("Whether `state` is a live state of this robot usable on the current device:\n"
          "GRID_OK, GRID_ERROR_NULL_POINTER, GRID_ERROR_INVALID_ARGUMENT (freed, never made,\n"
          "or made by another robot's header) or GRID_ERROR_ARCH_MISMATCH (another device).")
    w.line("template <typename T>")
    with w.block("inline int check_state(const State<T>* state)"):
        w.line("if (state == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (state->magic != kStateMagic || state->model_id != kModelId ||")
        w.line("    state->bytes != state_bytes<T>()) return GRID_ERROR_INVALID_ARGUMENT;")
        w.line("if (state->inertia == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (state->device_arch != current_device_arch()) "
               "return GRID_ERROR_ARCH_MISMATCH;")
        w.line("return GRID_OK;")
    w.line()
    w.doc("Release `state` (its memory unless it lives in the caller's slab) and clear it;\n"
          "freeing a cleared state does nothing. The caller's work on it must be complete.")
    w.line("template <typename T>")
    with w.block("inline int free_state(State<T>* state)"):
        w.line("if (state == nullptr) return GRID_ERROR_NULL_POINTER;")
        w.line("if (state->magic != kStateMagic) return GRID_OK;")
        w.line("if (state->owns_memory) grid::device_free(state->inertia);")
        w.line("memset(static_cast<void*>(state), 0, sizeof(*state));")
        w.line("return GRID_OK;")
    w.line()


def _emit_collision(w: Writer, model: RobotModel, spheres) -> None:
    from grid_codegen.collision.emit import kinematics_size

    links = spheres.links
    w.doc("The collision model (register_robot's collision=; docs/collision.md): spheres\n"
          "(capsule end spheres included), capsules (collision_native), the links that hold\n"
          "them and the checked link pairs. Per sphere: link index (into\n"
          "kCollisionLinkNames), centre in the link frame (sphere_link_center), radius;\n"
          "pairs as link indices (pair_links). kCollision is for host code and constant\n"
          "expressions; device code reads the same tables through collision().")
    for name, value in (("kNumSpheres", len(spheres.spheres)),
                        ("kNumCapsules", len(spheres.capsules)),
                        ("kNumCollisionLinks", len(links)),
                        ("kNumCollisionPairs", len(spheres.pairs)),
                        ("kCollisionKinematicsSize", kinematics_size(model))):
        w.line(f"constexpr int {name} = {value};")
    _names(w, "kCollisionLinkNames", list(links))
    w.line("typedef grid::CollisionTables CollisionTables;")
    w.line("constexpr const CollisionTables& kCollision = grid::kCollisionTables;")
    with w.block("GRID_INLINE const CollisionTables& collision()"):
        w.line("return grid::collision_tables();")
    w.line()
    w.doc("The collision kinematics of one item from q (one thread):\n"
          "out[kCollisionKinematicsSize], the bodies' world poses and world motion-subspace\n"
          "columns (grid/collision.h K).")
    w.line("template <typename T>")
    with w.block("GRID_INLINE void collision_kinematics(const T* GRID_RESTRICT q, "
                 "T* GRID_RESTRICT out)"):
        w.line("grid::collision_kinematics_thread<T, T>(q, out);")
    w.line()
    w.doc("Signed distances of one item to `m` obstacle spheres (one thread): centers[3 m],\n"
          "radii[m] given by the caller; out[m], per obstacle the closest robot primitive\n"
          "(negative: penetration). Stack: kCollisionKinematicsSize + 3 kNumSpheres scalars.")
    w.line("template <typename T>")
    with w.block("GRID_INLINE void world_collision_distance(const T* GRID_RESTRICT q, int m, "
                 "const T* GRID_RESTRICT centers, const T* GRID_RESTRICT radii, "
                 "T* GRID_RESTRICT out)"):
        w.line("T K[kCollisionKinematicsSize];")
        w.line("grid::collision_kinematics_thread<T, T>(q, K);")
        w.line("grid::collision_world_distance<T, T>(grid::collision_tables(), K, m, centers, "
               "radii, out, static_cast<T*>(nullptr));")
    w.line()
    w.doc("Their gradients (one thread): out[m][kNv] row-major, d(distance)/d(tangent) of the\n"
          "active robot primitive (n . J(x)); `distance` (m scalars) may be NULL.")
    w.line("template <typename T>")
    with w.block("GRID_INLINE void world_collision_distance_gradient(const T* GRID_RESTRICT q, "
                 "int m, const T* GRID_RESTRICT centers, const T* GRID_RESTRICT radii, "
                 "T* GRID_RESTRICT out, T* GRID_RESTRICT distance = nullptr)"):
        w.line("T K[kCollisionKinematicsSize];")
        w.line("grid::collision_kinematics_thread<T, T>(q, K);")
        w.line("grid::collision_world_distance<T, T>(grid::collision_tables(), K, m, centers, "
               "radii, distance, out);")
    w.line()


def emit_device_api(w: Writer, model: RobotModel, options: CodegenOptions, dims: Dims,
                    ee_frames: Sequence[Frame], built: Sequence[tuple[str, Sequence[str]]],
                    contact_frames: Sequence[str] = (), collision: object = None) -> None:
    """`namespace grid::device` (module doc). `built`: (algorithm, its strategies) of
    every algorithm the build holds, in descriptor order; `collision`: the build's
    `grid_codegen.collision.SphereModel` (None without)."""
    w.comment("---- device-level API: what a consumer's kernel calls (docs/consumer.md) ----")
    w.line()
    with w.namespace("grid"):
        with w.namespace("device"):
            w.line()
            _emit_robot(w, model, options, dims, ee_frames)
            for name, strategies in built:
                _emit_algorithm(w, name, dims, strategies, options.runtime_inertia)
            if contact_frames:
                _emit_contacts(w, model, contact_frames,
                               any(name == "world_kinematics" and "thread" in s
                                   for name, s in built))
            else:
                w.line("constexpr int kNumContacts = 0;  // no contact frames in this build")
                w.line()
            if collision is not None:
                _emit_collision(w, model, collision)
            _emit_state(w)


__all__ = ["STATE_MAGIC", "camel", "emit_device_api", "model_id"]
