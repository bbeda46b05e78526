"""Resolve the toolchain, generate and compile into staging, publish into the store.

`ensure_entry` is the whole registration short of loading the artifact: it returns the
store entry for (URDF, options, toolchain), building it only when no honoured pointer
and no identical content exists. Order of checks:

1. the stage-1 pointer `bykey/<input_key>`, honoured when the entry's build_inputs.json
   equals the current identity (no lock: entries appear by rename, so they are whole);
2. under the input key's build lock, the pointer again (another process may have built
   it while this one waited);
3. parse + generate, then the stage-2 entry `store/<content_key>`: when present with the
   same identity only the pointer is written (a codegen edit that emits the same bytes);
4. compile in a staging directory, write meta.json and build_inputs.json, publish by
   rename, write the pointer.
The manifest (name -> content key) is updated on every successful path.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grid_rbd._env_knobs import knob, knob_archs, knob_flags, knob_values
from grid_rbd._integrity import FILE_MODE, StoreError, atomic_write
from grid_rbd._progress import Progress
from grid_rbd._store import (
    BUILD_INPUTS,
    META,
    DamagedEntryError,
    Entry,
    Store,
    cache_root,
    canonical_json,
    content_key,
    input_key,
    sha256_bytes,
)

BACKENDS = ("cpu", "cuda")
IDENTITY_SCHEMA = 1


@dataclass(frozen=True)
class Toolchain:
    """How an artifact is compiled: backend, compiler executable, architectures and the
    extra flags from the environment knobs."""

    backend: str
    compiler: str
    archs: tuple[str, ...]
    extra_flags: tuple[str, ...]
    host_compiler: str | None = None  # nvcc's host compiler (CUDA builds)


@dataclass(frozen=True)
class Registration:
    """What `ensure_entry` did.

    outcome: "hit" (stage-1 pointer honoured), "content" (generated sources matched a
    published entry: no compile) or "built". waited: this call blocked on another
    process's build of the same input key. phases: (name, seconds) of the build path."""

    name: str
    store_root: Path
    input_key: str
    content_key: str
    entry_dir: Path
    outcome: str
    waited: bool
    seconds: float
    phases: tuple[tuple[str, float], ...]

    @property
    def compiled(self) -> bool:
        return self.outcome == "built"

    @property
    def so_path(self) -> Path:
        return self.entry_dir / "robot.so"


# -- the toolchain and its identity ------------------------------------------------------
def _which(name: str, what: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{what} {name!r} was not found (not an executable path and "
                                "not on PATH)")
    return os.path.abspath(found)


def resolve_toolchain(backend: str) -> Toolchain:
    """The compiler, architectures and flags of a `backend` ("cpu" | "cuda") build."""
    if backend == "cpu":
        override = knob("GRID_RBD_CXX")
        if override:
            compiler = _which(override, "GRID_RBD_CXX")
        else:
            from grid_codegen.compile import find_cxx

            compiler = _which(find_cxx(), "host C++ compiler")
        return Toolchain("cpu", compiler, ("cpu",), knob_flags("GRID_RBD_CXXFLAGS"))
    if backend == "cuda":
        from grid_rbd._device import cuda_status

        status = cuda_status()
        if status.nvcc is None:
            raise RuntimeError(f"a CUDA build needs nvcc: {status.reason}")
        archs = knob_archs() or ((status.arch,) if status.arch else ())
        if not archs:
            raise RuntimeError("a CUDA build needs a target architecture and none was "
                               f"detected ({status.reason}); set GRID_RBD_CUDA_ARCH")
        from grid_codegen.compile import find_cxx

        try:
            host = _which(find_cxx(), "host C++ compiler")
        except FileNotFoundError:
            host = None
        return Toolchain("cuda", os.path.abspath(status.nvcc), archs,
                         knob_flags("GRID_RBD_NVCCFLAGS"), host)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


@functools.lru_cache(maxsize=32)
def _compiler_identity_cached(path: str, real: str, mtime_ns: int, size: int
                              ) -> tuple[tuple[str, str], ...]:
    from grid_codegen.compile import compile_environment

    try:
        # The compile's own environment: LANG=C, so the text is not translated.
        proc = subprocess.run([path, "--version"], capture_output=True, timeout=120,
                              env=compile_environment(None, [path]),
                              stdin=subprocess.DEVNULL)
        version = (proc.stdout + proc.stderr).decode("utf-8", "backslashreplace").strip()
    except (OSError, subprocess.SubprocessError) as exc:
        version = f"<--version failed: {exc}>"
    with open(real, "rb") as fh:
        digest = sha256_bytes(fh.read())
    return (("path", path), ("realpath", real), ("sha256", digest), ("version", version))


def compiler_identity(path: str) -> dict[str, str]:
    """path, realpath, `--version` output and the executable's SHA-256 (cached per file
    state, so a warm registration does not re-run the compiler)."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return dict(_compiler_identity_cached(path, real, st.st_mtime_ns, st.st_size))


def compile_command(toolchain: Toolchain) -> list[str]:
    """The compiler's command line with placeholder file names (its flags enter the keys).

    CPU builds are recorded with OpenMP requested: whether `-fopenmp` is then used is
    decided by a probe of the compiler, a function of the compiler identity beside it
    (running the probe on every warm registration would cost a compile)."""
    from grid_codegen.compile import cpu_command, cuda_command

    source, output = Path("wrapper.cu"), Path("robot.so")
    if toolchain.backend == "cpu":
        return cpu_command(toolchain.compiler, source, output, True, toolchain.extra_flags)
    return cuda_command(toolchain.compiler, source, output, toolchain.archs,
                        toolchain.extra_flags)


def build_identity(toolchain: Toolchain) -> dict[str, Any]:
    """The build identity recorded as build_inputs.json (JSON-normalised)."""
    import grid_codegen.compile as compile_driver

    identity: dict[str, Any] = {
        "schema": IDENTITY_SCHEMA,
        "backend": toolchain.backend,
        "compiler": compiler_identity(toolchain.compiler),
        "host_compiler": (compiler_identity(toolchain.host_compiler)
                          if toolchain.host_compiler else None),
        "archs": list(toolchain.archs),
        "command": compile_command(toolchain),
        "compile_driver_sha256": sha256_bytes(Path(compile_driver.__file__).read_bytes()),
        "env": knob_values(),
        "compile_env": compile_driver.keyed_environment(),
        "machine": os.uname().machine,
    }
    return json.loads(canonical_json(identity))


def _contact_frames(model: Any, names: Any) -> list[str]:
    """The contact frames as given, each a fixed joint or a link that moves."""
    out = []
    for name in names:
        try:
            frame = model.resolve_frame(name)
        except KeyError as exc:
            raise ValueError(f"contact_frames: {exc.args[0]}") from None
        if frame.kind == "body" and name in model.joint_names:
            raise ValueError(f"contact_frames: '{name}' is a moving joint; name the fixed "
                             "joint or the link of the contact point")
        if frame.body < 0:
            raise ValueError(f"contact_frames: '{name}' is welded to the world; a contact "
                             "frame must move with the robot")
        out.append(str(name))
    if len(set(out)) != len(out):
        raise ValueError(f"contact_frames names a frame twice: {out}")
    return out


def _moving_frames(model: Any, names: Any, what: str) -> list[str]:
    """Frames named as users name them (fixed joints, joints, links) that move."""
    for name in names:
        try:
            frame = model.resolve_frame(name)
        except KeyError as exc:
            raise ValueError(f"{what}: {exc.args[0]}") from None
        if frame.body < 0:
            raise ValueError(f"{what}: '{name}' is welded to the world")
    return [str(n) for n in names]


# -- the entry ----------------------------------------------------------------------------
def _names(model: Any, ee_frames: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "robot_name": model.name,
        "joint_names": list(model.joint_names),
        "body_names": list(model.body_names),
        "ee_frames": [{"name": f.name, "kind": f.kind, "body": int(f.body)} for f in ee_frames],
        # What the handles' frame lookups need (grid_rbd._frames): every link and fixed
        # joint with its placement in its body, and the tree's parents and dof ranges.
        "frames": [{"name": f.name, "kind": f.kind, "body": int(f.body),
                    "R": [float(x) for x in f.placement.R.reshape(9)],
                    "p": [float(x) for x in f.placement.p]} for f in model.frames],
        "tree": [{"parent": int(j.parent), "idx_v": int(j.idx_v), "nv": int(j.nv)}
                 for j in model.joints],
    }


def _meta(model: Any, options: Any, names: dict[str, Any], toolchain: Toolchain,
          floating_base: bool, keys: dict[str, str], urdf: dict[str, str],
          phases: list[tuple[str, float]], compile_seconds: float) -> dict[str, Any]:
    from grid_rbd import __version__

    return {
        "schema": 1,
        **names,
        "nq": model.reduced_nq, "nv": model.reduced_nv, "nb": model.nb,
        "num_ees": len(names["ee_frames"]),
        "dtype": options.dtype,
        "floating_base": bool(floating_base),
        "q_chart": _q_chart(model),
        "options": options.to_dict(),
        "backend": toolchain.backend,
        "archs": list(toolchain.archs),
        "package_version": __version__,
        "built_from": {**keys, **urdf},
        "build_phases": [[name, round(seconds, 4)] for name, seconds in phases],
        "compile_seconds": round(compile_seconds, 4),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _q_chart(model: Any) -> list[dict[str, Any]]:
    """The joints whose configuration is not their tangent (free flyer, ball, planar):
    type and first q and tangent index, in the coordinates the kernels take (a coupled
    model's reduced ones), for the JAX/torch q pullback (`_framework.tangent_chart`).
    In meta.json only: no key reads it."""
    coupling = model.coupling
    return [{"type": j.type.value,
             "idx_q": int(j.idx_q if coupling is None else coupling.q_source[j.idx_q][0]),
             "idx_v": int(j.idx_v if coupling is None else coupling.v_source[j.idx_v][0])}
            for j in model.joints if not j.type.scalar]


def _has_mimic(urdf_bytes: bytes) -> bool:
    """Whether the URDF may have a `<mimic>` element (a byte test, conservative: without
    one, mimic=True parses to the same model as mimic=False, so the key stays the same)."""
    return b"<mimic" in urdf_bytes


def ensure_entry(name: str, urdf_bytes: bytes, urdf_source: str, floating_base: bool,
                 options: Any, backend: str, cache_dir: str | os.PathLike | None = None,
                 force_rebuild: bool = False, plant: dict[str, Any] | None = None,
                 mimic: bool = False, collision: Any = None) -> Registration:
    """The store entry of (`urdf_bytes`, `options`, `floating_base`) for `backend`,
    built and published when needed; records `name` in the manifest.

    options: a `grid_codegen.options.CodegenOptions`. urdf_source: a label for messages
    and meta.json (the path, or "<urdf string>"). mimic: couple the URDF's mimic joints
    (keyed only when it changes the model: True on a URDF that has any). Raises
    `grid_codegen.compile.CompileError` (the log is kept under `<root>/logs/`) when the
    compiler fails.
    """
    from grid_rbd import __version__

    start = time.monotonic()
    store = Store(cache_root(cache_dir))
    toolchain = resolve_toolchain(backend)
    identity = build_identity(toolchain)
    plant = dict(plant or {})
    key_options = {"codegen": options.to_dict(), "floating_base": bool(floating_base)}
    if plant:  # contact frames, a tool: only keyed when asked for (other keys unchanged)
        key_options["plant"] = plant
    if mimic and _has_mimic(urdf_bytes):  # the coupled model: only keyed when it differs
        key_options["mimic"] = True
    if collision is not None:  # a grid_codegen.collision.CollisionRequest: keyed when set
        key_options["collision"] = collision.key(urdf_bytes, urdf_source)
    ikey = input_key(urdf_bytes, key_options, __version__, identity)
    urdf = {"urdf_sha256": sha256_bytes(urdf_bytes), "urdf_source": urdf_source}

    def done(entry: Entry, outcome: str, waited: bool, phases: tuple = ()) -> Registration:
        record = {"content_key": entry.content_key, "input_key": ikey,
                  "backend": toolchain.backend, "dtype": options.dtype, **urdf}
        current = store.read_manifest().get(name, {})
        if {k: current.get(k) for k in record} != record:  # a warm hit writes nothing
            store.record(name, {**record,
                                "registered": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        return Registration(name, store.root, ikey, entry.content_key, entry.path, outcome,
                            waited, time.monotonic() - start, tuple(phases))

    if not force_rebuild:
        entry = store.lookup(ikey, identity)
        if entry is not None:
            return done(entry, "hit", False)
    lock_start = time.monotonic()
    with store.build_lock(ikey):
        waited = time.monotonic() - lock_start > 0.05
        if not force_rebuild:
            entry = store.lookup(ikey, identity)
            if entry is not None:
                return done(entry, "hit", waited)
        return _build(store, name, urdf_bytes, urdf_source, floating_base, options,
                      toolchain, identity, ikey, urdf, force_rebuild, waited, done, plant,
                      "mimic" in key_options, collision)


def _build(store: Store, name: str, urdf_bytes: bytes, urdf_source: str,
           floating_base: bool, options: Any, toolchain: Toolchain,
           identity: dict[str, Any], ikey: str, urdf: dict[str, str], force_rebuild: bool,
           waited: bool, done: Any, plant: dict[str, Any], mimic: bool = False,
           collision: Any = None) -> Registration:
    from grid_codegen import parse_urdf
    from grid_codegen.compile import CompileError, compile_artifact
    from grid_codegen.generate import generate

    tuning = toolchain.backend == "cuda" and options.strategy == "auto"
    progress = Progress(name, total_phases=5 if tuning else 4)
    with progress.phase("parse", urdf_source):
        model = parse_urdf(urdf_bytes, floating_base=floating_base, source=urdf_source,
                           mimic=mimic)
        try:
            ee_frames = model.end_effector_frames(options.ee_joint_names or None)
        except KeyError as exc:
            raise ValueError(f"ee_joint_names: {exc.args[0]}") from None
        contacts = _contact_frames(model, plant.get("contact_frames", ()))
        costs = _moving_frames(model, plant.get("cost_frames", ()), "cost_frames")
        spheres = None
        if collision is not None:
            from grid_codegen.collision import build_sphere_model

            spheres = build_sphere_model(model, collision, urdf_bytes, urdf_source)
    with progress.phase("generate", f"{len(options.algorithms)} algorithms, {options.dtype}"):
        files = generate(model, options, units=True, collision=spheres)
    names = _names(model, ee_frames)
    if spheres is not None:
        names["collision"] = spheres.to_dict()
    if contacts:
        names["contact_frames"] = contacts
    if costs:
        names["cost_frames"] = costs
    if plant.get("enable_tool"):
        names["enable_tool"] = True
    ckey = content_key(files, identity, names)
    try:
        existing = store.entry(ckey)
    except DamagedEntryError:
        existing = None  # reported and quarantined: built again below
    if existing is not None and existing.build_inputs == identity and not force_rebuild:
        store.write_pointer(ikey, ckey)
        progress.finish(f"generated sources match entry {ckey[:12]}: no compile; registered")
        return done(existing, "content", waited, progress.phases)

    with store.staging_dir() as staging:
        detail = f"{toolchain.backend}, {os.path.basename(toolchain.compiler)}"
        if toolchain.backend == "cuda":
            detail += f", {','.join(toolchain.archs)}"
        with progress.phase("compile", detail):
            try:
                result = compile_artifact(
                    files, staging, backend=toolchain.backend, gpu_archs=toolchain.archs
                    if toolchain.backend == "cuda" else ("sm_90",), detect_arch=False,
                    compiler=toolchain.compiler, extra_flags=toolchain.extra_flags)
            except CompileError as exc:
                kept = _keep_failed_log(store, name, ikey, exc.log_path)
                raise CompileError(str(exc).replace(str(exc.log_path), str(kept)),
                                   kept) from None
        tuned = _autotune(progress, toolchain, options, result.so_path)
        with progress.phase("publish", f"store/{ckey[:12]}"):
            meta = _meta(model, options, names, toolchain, floating_base,
                         {"input_key": ikey, "content_key": ckey}, urdf,
                         progress.phases, result.seconds)
            meta.update(tuned)
            atomic_write(staging / META, json.dumps(meta, indent=1, sort_keys=True) + "\n",
                         FILE_MODE)
            atomic_write(staging / BUILD_INPUTS,
                         json.dumps(identity, indent=1, sort_keys=True) + "\n", FILE_MODE)
            entry = store.publish(staging, ckey, replace=force_rebuild or existing is not None)
            store.write_pointer(ikey, ckey)
    progress.finish(f"built and published {ckey[:12]}")
    return done(entry, "built", waited, progress.phases)


def _autotune(progress: Progress, toolchain: Toolchain, options: Any, so_path: Path
              ) -> dict[str, Any]:
    """On a CUDA build of several variants (strategy "auto"), time them on this GPU
    (`grid_rbd._autotune`) and return what meta.json records: the measured dispatch
    tables. Skipped (the cost model's tables stand) with GRID_RBD_AUTOTUNE=0, or where no
    GPU can run the artifact; a failed measurement is reported, never fatal."""
    from grid_rbd import _autotune as tune

    if toolchain.backend != "cuda" or options.strategy != "auto" or not tune.enabled():
        return {}
    from grid_rbd._device import cuda_status

    if not cuda_status().usable:
        return {}
    with progress.phase("autotune", "timing each variant at batch sizes "
                        f"{', '.join(map(str, tune.BATCHES))}"):
        try:
            return tune.autotune(so_path).to_meta()
        except (OSError, RuntimeError, MemoryError) as exc:
            return {"autotune_error": str(exc)[:500]}


def failed_log_name(name: str, ikey: str) -> str:
    """The file name of a failed build's log under `<root>/logs/`: the input key, a digest
    of the registration name and the name's plain letters, digits, `_` and `-` (at most 32
    of them), so no name can make a path ("../x" gives "<key>-<digest>-x.build.log")."""
    plain = "".join(ch for ch in name if ch.isascii() and (ch.isalnum() or ch in "_-"))[:32]
    digest = sha256_bytes(name.encode("utf-8", "surrogatepass"))[:8]
    return f"{ikey[:16]}-{digest}" + (f"-{plain}" if plain else "") + ".build.log"


def _keep_failed_log(store: Store, name: str, ikey: str, log_path: Path) -> Path:
    kept = store.logs / failed_log_name(name, ikey)
    try:
        atomic_write(kept, log_path.read_text(encoding="utf-8", errors="backslashreplace"))
    except (OSError, StoreError):
        return log_path
    return kept
