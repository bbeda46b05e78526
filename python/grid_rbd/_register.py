"""`register_robot`, `get_robot`, `load_robot`: from a URDF (or a store entry, or an
artifact file) to a handle."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grid_rbd._handle import RobotHandle

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("numpy", "jax", "torch")


def with_backend(handle: RobotHandle, backend: str) -> Any:
    """`handle` as the handle of `backend`: itself for numpy, else a JAX or torch view."""
    if backend == "numpy":
        return handle
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    try:
        if backend == "jax":
            from grid_rbd.jax import JaxRobotHandle as view
        else:
            from grid_rbd.torch import TorchRobotHandle as view
    except ModuleNotFoundError as exc:
        if exc.name not in ("jax", "jaxlib", "torch"):
            raise
        raise ImportError(f"backend={backend!r} needs {exc.name}, which is not installed "
                          f"(pip install -e '.[{backend}]'); the artifact itself is built "
                          "and usable with backend='numpy'") from exc
    return view(handle)


def resolve_device(device: str) -> str:
    """The build backend for `device`: "cpu" or "cuda" ("auto": cuda when usable)."""
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu":
        return "cpu"
    from grid_rbd._device import cuda_status

    status = cuda_status()
    if device == "auto":
        return "cuda" if status.usable else "cpu"
    if not status.usable:
        raise RuntimeError(f"device='cuda' needs a usable CUDA GPU, but {status.reason}; "
                           "use device='cpu' for the host build, or device='auto' to pick")
    return "cuda"


def register_robot(name: str, urdf_path: str | os.PathLike | None = None,
                   urdf_string: str | None = None, floating_base: bool = False,
                   mimic: bool = False,
                   max_batch_size: int = 65536, dtype: str = "float32",
                   ee_joint_names: Sequence[str] | None = None,
                   algorithm_list: Sequence[str] | None = None,
                   runtime_inertia: bool = False, device: str = "auto",
                   backend: str = "numpy", cache_dir: str | os.PathLike | None = None,
                   force_rebuild: bool = False, strategy: str = "auto",
                   contact_frames: Sequence[str] | None = None,
                   cost_frames: Sequence[str] | None = None,
                   enable_tool: bool = False, allow_fp64: bool = False,
                   emit_plant: bool = False,
                   output_convention: str = "pinocchio",
                   enable_mujoco_kernels: bool | None = None,
                   use_joint_dynamics: bool = False, friction_model: str = "sign",
                   friction_width: float | Sequence[float] | None = None,
                   runtime_joint_dynamics: bool = False,
                   runtime_transform: bool = False,
                   collision: bool = False, collision_res: Any = None,
                   collision_native: bool | str = False, spherized_urdf: Any = None,
                   allowed_collision_pairs: Sequence[Sequence[str]] | None = None,
                   mesh_roots: Sequence[str | os.PathLike] | None = None) -> Any:
    """Compile (or find in the store) the artifact of a robot and return its handle.

    name: the name `get_robot(name)` finds it under later.
    urdf_path / urdf_string: exactly one: a URDF file, or the URDF text.
    floating_base: add a free-flyer root (q = [p(3), quat xyzw(4), joints], nv = 6 + joints).
    mimic: couple each URDF `<mimic>` joint to its leader (q = multiplier * q_leader +
        offset): nq and nv count the independent joints only and every method and
        gradient is in those reduced coordinates (docs/joints.md). Default False reads
        mimic joints as independent joints, as Pinocchio does. Keyed only when True and
        the URDF has mimic joints.
    max_batch_size: the largest batch a call accepts.
    dtype: "float32" (default) or "float64": the compute dtype of inputs and outputs.
    ee_joint_names: fixed-joint frames used as end effectors (default: the leaf bodies).
    algorithm_list: the algorithms to build, by name or profile: "core" (the default:
        dynamics, mass matrix, kinematics and their gradients), "centroidal" (centre of
        mass, centroidal momentum, energy, Coriolis matrix, gravity, regressors),
        "kinematics" (fk_batched, world_kinematics, the end-effector Hessian),
        "second_order" (idsva_so, fdsva_so; docs/second_order.md), "plant" (the fused
        step gradients, as emit_plant=True), "collision" (as collision=True), "all"
        (every profile but plant and collision).
        A method whose algorithm was not built says which profile to add.
    runtime_inertia: read inertias from a per-context table (`set_inertia_params`).
    use_joint_dynamics: add the URDF's joint damping and Coulomb friction to inverse and
        forward dynamics and their gradients (tau = ID_rigid + damping qd + friction
        phi(qd); free-flyer dofs excluded; docs/numpy.md "Joint dynamics").
    friction_model: "sign" (default) or "tanh" (`tanh(qd / friction_width)`, smooth for
        gradients; needs joint dynamics on). friction_width: the tanh velocity scale, one
        value or one per joint-dynamics dof (default 0.01).
    runtime_joint_dynamics: the damping and friction coefficients are a per-context table
        (`set_joint_dynamics`), initialised from the URDF; implies the terms.
    runtime_transform: each joint's origin (parent body -> joint frame) is a per-context
        table (`set_transform_params`, (nb, 7) [xyz, quat xyzw]) that every kernel reads,
        kinematics included; initialised from the URDF; keyed only when True.
    device: "auto" (the GPU when one is usable, else the CPU), "cuda" or "cpu".
    backend: "numpy" (a `RobotHandle`), "jax" (a `grid_rbd.jax.JaxRobotHandle`) or "torch"
        (a `grid_rbd.torch.TorchRobotHandle`); all three share the store entry.
    cache_dir: the store root (default `$GRID_RBD_CACHE_DIR`, else ~/.cache/grid-rbd).
    force_rebuild: compile again and republish even when the store has the entry.
    contact_frames: fixed-joint or link names whose frames are contact points: the handle
        gains `contact_frames`, `contact_fext`, `contact_positions` and
        `contact_jacobians` (docs/plant.md); part of the store key.
    cost_frames: the frames `ee_pos_cost` tracks by default (any frame names; default:
        the end effectors); part of the store key.
    emit_plant: also build the "plant" profile: plant_step_gradient of euler and
        semi-implicit euler as one fused kernel each (a vector configuration or a
        free-flyer root over revolute and prismatic joints; docs/plant.md).
        Keyed only when True (it adds the profile to algorithm_list).
    enable_tool: a welded tool or payload can be attached at run time (`attach_tool`);
        implies runtime_inertia; part of the store key.
    allow_fp64: the methods also take float64 inputs of a float32 build, compute in
        float32 and return float64 (a convenience cast, shown in the handle's repr; not
        part of the store key).
    output_convention: "pinocchio" (default: q = [p, quat xyzw, joints], the local
        free-flyer tangent) or "mujoco" (a `grid_rbd.MujocoHandle`: the free joint as
        MuJoCo has it, q = [p, quat wxyz, joints], qd = [v world, omega local, joints],
        forces, accelerations, matrices and gradients on that chart;
        docs/mujoco_convention.md). Not part of the store key: the same artifact serves
        both, through an exact conversion layer in the handle.
    enable_mujoco_kernels: whether handles of this registration may use the MuJoCo
        convention (True; None: False when GRID_ENABLE_MUJOCO_KERNELS=0, else True).
        False gives a Pinocchio-only handle (`grid_rbd.as_mujoco` refuses it) and is
        mutually exclusive with output_convention="mujoco". The twins are handle-side
        conversions, not kernels: the build is the same either way, so neither is keyed.
    strategy: how a batch item maps to the hardware: "auto" (default: the artifact carries
        the thread, warp and block variants that suit the robot, and each call runs the one
        fastest at its batch size, as measured on the GPU at registration or predicted by
        the cost model on the CPU), or one of "thread" (one item per thread: straight-line
        code specialised to the robot; SIMD vectors of items on the CPU), "warp" (one item
        per warp) or "block" (one item per thread block). An explicit strategy builds only
        that variant and is a different store entry.
    collision: build the collision profile (docs/collision.md): spheres per link fitted
        to the URDF's `<collision>` geometry (boxes, cylinders, capsules, spheres, meshes
        read with trimesh) at `collision_res` (metres, default 0.05; or a {link: res}
        mapping), or read from `spherized_urdf` (a path or the URDF text of `<collision>`
        spheres, keyed by its content); the checked link pairs leave out adjacent links,
        links in contact at the neutral configuration and `allowed_collision_pairs`.
        `mesh_roots`: the folders mesh files may come from (default: the URDF's folder's
        parent; package:// and relative paths never leave them). The handle gains
        `collision_spheres`, `collision_pairs`, `sphere_positions`,
        `self_collision_distance`, `world_collision_distance`, `collision_cost` and
        their gradients. Keyed only when set. `collision_native=True` keeps `<capsule>`s
        as exact capsule primitives (segment and radius; `collision_capsules`);
        `collision_native="capsules+cylinders"` also bounds each cylinder by its capsule
        (conservative, not exact); spheres are exact either way.

    A cold build reports its phases (parse, generate, compile, publish; autotune on a GPU
    build with strategy "auto") on stderr; a warm
    one finds the entry by its key and loads it. Raises `ValueError` for bad arguments,
    `RuntimeError` for device="cuda" without a usable GPU, `ImportError` when the chosen
    backend's framework is not installed, and `grid_codegen.compile.CompileError` when the
    compiler fails.
    """
    from grid_codegen.options import DEFAULT_ALGORITHMS, CodegenOptions
    from grid_rbd._build import ensure_entry
    from grid_rbd._mujoco_convention import MujocoHandle, check_convention

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    mujoco_kernels = check_convention(output_convention, enable_mujoco_kernels)
    check_name(name, "name")
    if (urdf_path is None) == (urdf_string is None):
        raise ValueError("pass exactly one of urdf_path= and urdf_string=")
    if urdf_path is not None:
        if "\0" in os.fspath(urdf_path):
            raise ValueError(f"urdf_path {os.fspath(urdf_path)!r} holds a NUL character")
        path = Path(urdf_path)
        if not path.is_file():
            raise FileNotFoundError(f"no URDF at {urdf_path}")
        urdf_bytes, source = path.read_bytes(), str(path.resolve())
    else:
        urdf_bytes, source = _urdf_string_bytes(urdf_string), "<urdf string>"
    try:
        dtype_name = np.dtype(dtype).name
    except TypeError as exc:
        raise ValueError(f"dtype {dtype!r} is not a numpy dtype; use float32 or float64") from exc
    if any(isinstance(x, str) for x in (ee_joint_names, algorithm_list, contact_frames,
                                        cost_frames)):
        raise ValueError("ee_joint_names, algorithm_list, contact_frames and cost_frames "
                         "are lists of names, not a str")
    for ee in ee_joint_names or ():
        check_name(ee, "ee_joint_names entry")
    for frame in contact_frames or ():
        check_name(frame, "contact_frames entry")
    for frame in cost_frames or ():
        check_name(frame, "cost_frames entry")
    if enable_tool:
        runtime_inertia = True  # a tool is composed into the run-time inertia table
    if emit_plant:  # the fused step gradients: the "plant" profile, keyed through it
        algorithm_list = (*(algorithm_list if algorithm_list is not None
                            else DEFAULT_ALGORITHMS), "plant")
    from grid_rbd._collision import collision_request

    collision_req = collision_request(
        collision, collision_res, collision_native, spherized_urdf,
        allowed_collision_pairs, mesh_roots, urdf_path, bool(mimic))
    if collision_req is not None:
        algorithm_list = (*(algorithm_list if algorithm_list is not None
                            else DEFAULT_ALGORITHMS), "collision")
    options = CodegenOptions(
        dtype=dtype_name, max_batch_size=max_batch_size,
        algorithms=(tuple(algorithm_list) if algorithm_list is not None
                    else DEFAULT_ALGORITHMS),
        ee_joint_names=tuple(ee_joint_names or ()), runtime_inertia=bool(runtime_inertia),
        strategy=strategy, use_joint_dynamics=use_joint_dynamics,
        runtime_joint_dynamics=runtime_joint_dynamics, friction_model=friction_model,
        friction_width=(tuple(friction_width) if isinstance(friction_width, (list, tuple))
                        else friction_width),
        runtime_transform=runtime_transform)
    target = resolve_device(device)
    plant = {}
    if contact_frames:
        plant["contact_frames"] = [str(f) for f in contact_frames]
    if cost_frames:
        plant["cost_frames"] = [str(f) for f in cost_frames]
    if enable_tool:
        plant["enable_tool"] = True
    registration = ensure_entry(name, urdf_bytes, source, bool(floating_base), options,
                                target, cache_dir=cache_dir, force_rebuild=force_rebuild,
                                plant=plant, mimic=bool(mimic), collision=collision_req)
    handle = RobotHandle._open(registration.so_path, name, registration)
    _check_descriptor(handle, registration.entry_dir, name)
    handle._allow_fp64 = bool(allow_fp64)
    handle._mujoco_kernels = mujoco_kernels
    view = with_backend(handle, backend)
    return MujocoHandle(view) if output_convention == "mujoco" else view


def get_robot(name: str, cache_dir: str | os.PathLike | None = None,
              backend: str = "numpy", allow_fp64: bool = False) -> Any:
    """The handle of a robot registered earlier under `name` (from the store's manifest;
    nothing is compiled), for `backend` as in register_robot.

    The entry is verified before it is loaded (file sizes and SHA-256 against its
    integrity record) and its descriptor checked against its meta.json after. Raises
    `KeyError` when the name is unknown, `grid_rbd._store.DamagedEntryError` (naming the
    entry; it is moved to the store's quarantine) when the entry is damaged, and
    `grid_rbd._store.StoreError` when the manifest cannot be read."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    from grid_rbd._integrity import is_digest
    from grid_rbd._store import DamagedEntryError, Store, StoreError, cache_root

    store = Store(cache_root(cache_dir))
    manifest = store.read_manifest()
    record = manifest.get(name) if isinstance(name, str) else None
    if record is None:
        raise KeyError(f"no robot named {name!r} in {store.manifest_path} (registered: "
                       f"{', '.join(sorted(manifest)) or 'none'}); call register_robot first")
    key = record.get("content_key")
    if not is_digest(key):
        raise StoreError(f"the manifest record of {name!r} in {store.manifest_path} holds "
                         f"content key {str(key)[:80]!r}, which is not a store key (64 hex "
                         f"digits): the manifest was edited or damaged; register {name!r} "
                         "again")
    try:
        entry = store.entry(key)
    except DamagedEntryError as exc:
        raise DamagedEntryError(f"robot {name!r}: {exc}; call register_robot({name!r}, ...) "
                                "to rebuild it", exc.key, exc.problems,
                                exc.quarantined) from None
    if entry is None:
        raise StoreError(f"{name!r} points at store entry {key}, which is missing from "
                         f"{store.entries}; register it again")
    handle = RobotHandle._open(entry.so_path, name)
    _check_descriptor(handle, entry.path, name)
    handle._allow_fp64 = bool(allow_fp64)
    return with_backend(handle, backend)


def load_robot(path: str | os.PathLike, backend: str = "numpy",
               allow_fp64: bool = False) -> Any:
    """A handle on an artifact file (`robot.so`) or a store entry directory holding one,
    for `backend` as in register_robot. Joint and body names come from the meta.json
    beside it, when present. A store entry (a folder with integrity.json) is verified
    before it is loaded, and its descriptor checked against meta.json after (a
    `StoreError` when either fails; nothing is moved)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    from grid_rbd._integrity import INTEGRITY, StoreError, verify_folder
    from grid_rbd._store import ARTIFACT, RECORDED_FILES

    path = Path(path)
    so_path = path / "robot.so" if path.is_dir() else path
    if not so_path.is_file():
        raise FileNotFoundError(f"no artifact at {so_path}")
    folder = so_path.parent
    if so_path.name == ARTIFACT and (folder / INTEGRITY).is_file():
        problems = verify_folder(folder, folder.name, RECORDED_FILES, code=(ARTIFACT,))
        if problems:
            raise StoreError(f"store entry {folder} is damaged: {'; '.join(problems)}")
    handle = RobotHandle._open(so_path)
    if (folder / "meta.json").is_file():
        problems = descriptor_problems(getattr(handle, "_info", {}), handle._meta)
        if problems:
            raise StoreError(f"artifact {so_path} contradicts its meta.json: "
                             f"{'; '.join(problems)}")
    handle._allow_fp64 = bool(allow_fp64)
    return with_backend(handle, backend)


def check_name(value: object, what: str) -> None:
    """`ValueError` unless `value` is a valid name (`grid_codegen.urdf_xml.name_problem`:
    printable text, 1 to 256 characters, no control, format or separator characters)."""
    from grid_codegen.urdf_xml import name_problem, quoted

    problem = name_problem(value)
    if problem is not None:
        shown = quoted(value) if isinstance(value, str) else repr(value)
        raise ValueError(f"{what} {shown} {problem}")


def _urdf_string_bytes(urdf_string: object) -> bytes:
    """`urdf_string` as UTF-8 bytes; a `ValueError` naming the offset of a NUL or a lone
    surrogate (neither can be URDF text)."""
    if not isinstance(urdf_string, str):
        raise ValueError(f"urdf_string must be a str, got {type(urdf_string).__name__}")
    nul = urdf_string.find("\0")
    if nul >= 0:
        raise ValueError(f"urdf_string holds a NUL character at offset {nul} (a URDF is "
                         "text)")
    try:
        return urdf_string.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"urdf_string holds a lone surrogate, "
                         f"U+{ord(urdf_string[exc.start]):04X}, at offset {exc.start}: it "
                         "is not text that UTF-8 can hold (decode the file with "
                         "errors='strict', or pass urdf_path=)") from None


_DESCRIBED = ("robot_name", "nq", "nv", "nb", "num_ees", "dtype")


def descriptor_problems(info: Any, meta: dict[str, Any]) -> list[str]:
    """Where the loaded artifact's descriptor (`_core.Artifact.info`) contradicts its
    meta.json: robot name, dimensions and dtype ([] when they agree)."""
    problems = []
    for field in _DESCRIBED:
        got, want = info.get(field) if hasattr(info, "get") else None, meta.get(field)
        if isinstance(got, bytes):
            got = got.decode("utf-8", "backslashreplace")
        if str(got) != str(want):
            problems.append(f"its descriptor says {field} {str(got)[:80]!r}, meta.json says "
                            f"{str(want)[:80]!r}")
    return problems


def _check_descriptor(handle: RobotHandle, entry_dir: Path, name: str) -> None:
    """After loading: the descriptor must describe the robot meta.json describes. A
    mismatch quarantines the entry; the artifact is already mapped into this process and
    cannot be unloaded, so the error asks for a fresh process."""
    from grid_rbd._store import DamagedEntryError, Store

    problems = descriptor_problems(getattr(handle, "_info", {}), handle._meta)
    if not problems:
        return
    store = Store(entry_dir.parent.parent)
    moved, problems = store.quarantine(entry_dir.name, problems, force=True)
    raise DamagedEntryError(
        f"robot {name!r}: store entry {entry_dir} holds another robot's artifact "
        f"({'; '.join(problems)}); moved to {moved}. It is loaded into this process now "
        f"and cannot be unloaded: call register_robot({name!r}, ...) again in a new "
        "process to rebuild it", entry_dir.name, problems, moved)


def bound_to_backend(backend: str) -> tuple[Any, Any, Any]:
    """`register_robot`, `get_robot` and `load_robot` with `backend` fixed: what
    grid_rbd.jax and grid_rbd.torch export. Each keeps the signature and documentation of
    the function it wraps, without the `backend` parameter."""
    import functools
    import inspect

    def bind(function: Any) -> Any:
        @functools.wraps(function)
        def bound(*args: Any, **kwargs: Any) -> Any:
            if "backend" in kwargs:
                raise TypeError(f"grid_rbd.{backend}.{function.__name__} always uses "
                                f"backend={backend!r}")
            return function(*args, backend=backend, **kwargs)

        signature = inspect.signature(function)
        bound.__signature__ = signature.replace(parameters=[
            p for name, p in signature.parameters.items() if name != "backend"])
        bound.__doc__ = f"`grid_rbd.{function.__name__}(..., backend={backend!r})`.\n\n" + \
            (function.__doc__ or "")
        return bound

    return bind(register_robot), bind(get_robot), bind(load_robot)

