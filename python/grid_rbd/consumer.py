"""Consumer artifacts: a caller's own CUDA / C++ sources compiled against the `grid.cuh`
generated for one robot, under the store's rules (spec: consumer artifacts).

    art = grid_rbd.build_artifact("my_ik", "iiwa14", "robots/iiwa14/iiwa14.urdf",
                                  sources=["ik.cu"], backend="cpu")
    lib = ctypes.CDLL(str(art.path))        # the caller binds its own symbols

Layout, one namespace per consumer under the cache directory (folders 0700):

    <cache>/consumers/<consumer>/store/<content_key>/   grid.cuh, <artifact_name>,
                                  meta.json, build_inputs.json, build.log, integrity.json
    <cache>/consumers/<consumer>/bykey/<input_key>       pointer: request -> content key
    <cache>/consumers/<consumer>/objects/<unit>-<key>.o  per-unit objects, keyed by inputs
    <cache>/consumers/<consumer>/manifest.json           name -> record, under manifest.lock
    (and staging/, locks/, quarantine/, logs/ as in the robot store, `grid_rbd._store`)

The input key covers the URDF bytes, the codegen options, the consumer's sources and
headers by content, include folders (by path), defines, flags, the artifact name and the
identity; the identity (recorded as build_inputs.json) is the toolchain, the target
architecture, the codegen tree, this module and the package version. A pointer is
honoured only when the recorded identity equals the current one. The content key covers
exactly what the compiler sees (the generated header, the sources and headers, the
command lines with the staging folder's path removed, the toolchain). Builders of one
input key serialise on its lock (concurrent builds compile once); a build runs in a
private staging folder and is published by one rename, so a killed build leaves nothing
visible. Each unit's object is cached by its inputs, so editing one of two units
recompiles one.

Everything read back from disk is untrusted: keys must be 64-hex digests, names must
match `^[A-Za-z0-9][A-Za-z0-9_.-]*$`, entries are verified against their integrity
record before they are returned. `load_artifact` needs no toolchain; it refuses an entry
recorded for another architecture or key schema. GRiD never loads or binds the artifact.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grid_codegen.urdf_xml import name_problem
from grid_rbd import _consumer_inputs as inputs
from grid_rbd._env_knobs import parse_arch
from grid_rbd._integrity import FILE_MODE, StoreError, atomic_write, is_digest
from grid_rbd._store import (
    BUILD_INPUTS,
    META,
    STORE_SCHEMA,
    DamagedEntryError,
    Entry,
    Store,
    cache_root,
    canonical_json,
    codegen_sources_hash,
    sha256_bytes,
)

ARTIFACT_SCHEMA = 1
BUILD_LOG = "build.log"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")
MAX_NAME = 128


class ConsumerArtifactError(RuntimeError):
    """Base of the consumer-artifact errors (a failed compile is one, with its log)."""


class ArtifactNotFoundError(ConsumerArtifactError, KeyError):
    """No artifact of that name in the consumer's manifest."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ArtifactIncompatibleError(ConsumerArtifactError):
    """The recorded artifact cannot be used here (another architecture, another key or
    artifact schema, or a damaged entry)."""


@dataclass(frozen=True)
class ConsumerArtifact:
    """A built (or found) consumer artifact. `path` is the shared object to load;
    `compiled`: the compiler ran in this call (False: reused or loaded);
    `compiled_units`: the sources it compiled (the others came from the object cache)."""

    consumer: str
    name: str
    path: Path
    header: Path
    store_dir: Path
    content_key: str
    input_key: str | None
    arch: str
    meta: dict[str, Any]
    compiled: bool
    compiled_units: tuple[str, ...] = ()


class _ConsumerStore(Store):
    """The robot store's protocol over a consumer entry's files."""

    def __init__(self, root: Path, artifact_name: str) -> None:
        self.recorded_files = ("grid.cuh", artifact_name, META, BUILD_INPUTS, BUILD_LOG)
        self.code_files = (artifact_name,)
        super().__init__(root)
        self.objects = self.root / "objects"


def check_name(value: object, what: str) -> str:
    """`value` when it is a short identifier (letters, digits, `_`, `.`, `-`, not
    starting with a separator), else `ValueError`: it becomes a folder or file name."""
    if not isinstance(value, str) or not NAME_RE.match(value) or len(value) > MAX_NAME \
            or value in (".", ".."):
        shown = repr(value)[:80]
        raise ValueError(f"{what} must match {NAME_RE.pattern} (at most {MAX_NAME} "
                         f"characters), got {shown}")
    return value


def consumer_root(consumer: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """`<cache>/consumers/<consumer>` (the name validated)."""
    return cache_root(cache_dir) / "consumers" / check_name(consumer, "consumer")


# -- the toolchain -------------------------------------------------------------------------
def _backend(backend: str) -> str:
    if backend not in ("auto", "cpu", "cuda"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'cuda', got {backend!r}")
    if backend != "auto":
        return backend
    from grid_rbd._device import cuda_status

    return "cuda" if cuda_status().usable else "cpu"


def _commands(toolchain: Any, gen_dir: Path, include_dirs: list[Path], defines: list[str],
              extra_flags: list[str], link_flags: list[str]) -> tuple[list[str], list[str]]:
    """(unit compile command without `-c <src> -o <obj>`, link command without the objects
    and output). The CPU form compiles every unit as C++ (`-x c++`)."""
    from grid_codegen import consumer_build as B
    from grid_codegen.compile import host_isa_flags, openmp_works

    includes = [f"-I{gen_dir}"] + [f"-I{d}" for d in include_dirs]
    macros = [f"-D{d}" for d in defines]
    if toolchain.backend == "cpu":
        openmp = openmp_works(toolchain.compiler)
        flags = B.cpu_flags(openmp, host_isa_flags())
        link = B.cpu_link(openmp)
    else:
        flags, link = B.cuda_flags(toolchain.archs), B.cuda_link(toolchain.archs)
    flags = [*flags, *toolchain.extra_flags, *includes, *macros, *extra_flags]
    return [toolchain.compiler, *flags], [toolchain.compiler, *link]


def _keyed(cmd: list[str], gen_dir: Path) -> list[str]:
    """A command as keyed: the staging folder's path (its content is keyed) removed."""
    staged = str(gen_dir)
    return [a.replace(staged, "<gen>") for a in cmd]


def identity(toolchain: Any) -> dict[str, Any]:
    """Every artifact-shaping input that is not a caller argument (build_inputs.json)."""
    from grid_rbd import __version__
    from grid_rbd._build import build_identity

    return json.loads(canonical_json({
        "key_schema": STORE_SCHEMA,
        "artifact_schema": ARTIFACT_SCHEMA,
        "arch": ",".join(toolchain.archs),
        "machine": os.uname().machine,
        "toolchain": build_identity(toolchain),
        "codegen_sha256": codegen_sources_hash(),
        "consumer_py_sha256": sha256_bytes(Path(__file__).read_bytes()),
        "package_version": __version__,
    }))


# -- the build -------------------------------------------------------------------------------
def _unit_key(unit: Path, header: bytes, headers: dict[str, str], cmd: list[str]) -> str:
    return sha256_bytes(canonical_json({
        "schema": ARTIFACT_SCHEMA, "command": cmd, "grid.cuh": sha256_bytes(header),
        "headers": headers, "unit": unit.name, "source": sha256_bytes(unit.read_bytes()),
    }).encode())


def _compile(store: _ConsumerStore, staging: Path, sources: list[Path], headers: dict[str, str],
             compile_cmd: list[str], link_cmd: list[str], link_flags: list[str],
             artifact_name: str, backend: str, reuse: bool, timeout: float | None
             ) -> dict[str, Any]:
    """Each unit from the object cache or compiled (in parallel), then the link; the log
    of every step goes to `staging/build.log`. Returns {unit: {"object", "compiled"}}."""
    from grid_codegen.compile import build_jobs, resolve_tool, run_compiler
    from grid_codegen.consumer_build import unit_command

    tools = [resolve_tool(compile_cmd[0])]
    tmp = staging / "tmp"
    tmp.mkdir(mode=0o700)
    header = (staging / "grid.cuh").read_bytes()
    keyed = _keyed(compile_cmd, staging)
    store.objects.mkdir(mode=0o700, exist_ok=True)

    def one(unit: Path) -> tuple[str, dict[str, Any], str, int]:
        key = _unit_key(unit, header, headers, keyed)
        cached = store.objects / f"{unit.stem[:40]}-{key}.o"
        if reuse and cached.is_file() and not cached.is_symlink():
            return unit.name, {"object": cached.name, "compiled": False}, \
                f"[{unit.name}] object cache hit {cached.name}\n", 0
        obj = tmp / f"{unit.stem}.o"
        cmd = unit_command(compile_cmd[0], compile_cmd[1:], backend, unit, obj)
        start = time.monotonic()
        rc, text = run_compiler(cmd, tmp, tools, cwd=unit.parent, timeout=timeout)
        seconds = round(time.monotonic() - start, 3)
        log = f"$ {' '.join(cmd)}\n{text}[{unit.name}] rc={rc} {seconds}s\n"
        if rc == 0:
            part = cached.with_name(f".{cached.name}.{os.getpid()}.{secrets.token_hex(4)}")
            shutil.copyfile(obj, part)
            os.chmod(part, FILE_MODE)
            os.replace(part, cached)  # whole or absent, never half-written
        return unit.name, {"object": cached.name, "compiled": True, "seconds": seconds}, \
            log, rc

    with ThreadPoolExecutor(max_workers=max(1, min(build_jobs(), len(sources)))) as pool:
        results = list(pool.map(one, sources))
    log = "".join(text for _, _, text, _ in results)
    failed = [(name, rc) for name, _, _, rc in results if rc != 0]
    if not failed:
        objects = [str(store.objects / rec["object"]) for _, rec, _, _ in results]
        cmd = [*link_cmd, *objects, "-o", str(staging / artifact_name), *link_flags]
        rc, text = run_compiler(cmd, tmp, tools, cwd=staging, timeout=timeout)
        log += f"\n$ {' '.join(cmd)}\n{text}[link] rc={rc}\n"
        if rc != 0:
            failed = [("link", rc)]
    atomic_write(staging / BUILD_LOG, log)
    shutil.rmtree(tmp, ignore_errors=True)
    if failed:
        kept = store.logs / f"{secrets.token_hex(8)}.build.log"
        try:
            atomic_write(kept, log)
        except (OSError, StoreError):
            kept = staging / BUILD_LOG
        tail = "\n".join(log.splitlines()[-40:])
        raise ConsumerArtifactError(f"compiling the consumer artifact failed at "
                                    f"{failed[0][0]} (exit {failed[0][1]}); log kept at "
                                    f"{kept}:\n{tail}")
    return {name: rec for name, rec, _, _ in results}


def _refuse_unsupported(runtime_transform: bool, runtime_joint_dynamics: bool,
                        enable_mujoco_kernels: bool | None) -> None:
    """The codegen keywords of register_robot that a consumer build cannot honour."""
    if runtime_transform or runtime_joint_dynamics:
        which = "runtime_transform" if runtime_transform else "runtime_joint_dynamics"
        raise ValueError(f"{which}=True: the device API passes no run-time tables to a "
                         "consumer's kernels; bake the values (use_joint_dynamics=True reads "
                         "the URDF's damping and friction) or call the robot's own kernels")
    if enable_mujoco_kernels is not None and not isinstance(enable_mujoco_kernels, bool):
        raise ValueError(f"enable_mujoco_kernels must be True, False or None; got "
                         f"{enable_mujoco_kernels!r}")


def _with_arch(toolchain: Any, cuda_arch: int | str | None) -> Any:
    """`toolchain` compiling for `cuda_arch` (90, "90", "sm_90") when one is given."""
    if cuda_arch is None:
        return toolchain
    arch = parse_arch(cuda_arch, "cuda_arch")
    if toolchain.backend != "cuda":
        raise ValueError("cuda_arch applies to a CUDA build (backend='cuda')")
    return dataclasses.replace(toolchain, archs=(arch,))


def _generate(urdf_bytes: bytes, source: str, floating_base: bool, options: Any,
              contact_frames: list[str], cost_frames: Sequence[str] = (),
              collision: Any = None) -> tuple[str, dict[str, Any] | None]:
    """(grid.cuh with the device API, the sphere model as a dict or None)."""
    from grid_codegen import parse_urdf
    from grid_codegen.generate import generate
    from grid_rbd._build import _moving_frames

    model = parse_urdf(urdf_bytes, floating_base=floating_base, source=source)
    _moving_frames(model, contact_frames, "contact_frames")
    for frame in cost_frames:
        try:
            model.resolve_frame(frame)
        except KeyError as exc:
            raise ValueError(f"cost_frames entry {frame!r}: {exc.args[0]}") from None
    spheres = None
    if collision is not None:
        from grid_codegen.collision import build_sphere_model

        spheres = build_sphere_model(model, collision, urdf_bytes, source)
    header = generate(model, options, device_api=True, contact_frames=tuple(contact_frames),
                      collision=spheres)["grid.cuh"]
    return header, (spheres.to_dict() if spheres is not None else None)


def build_artifact(consumer: str, name: str, urdf_path: str | os.PathLike, *,
                   sources: Sequence[str | os.PathLike],
                   headers: Sequence[str | os.PathLike] = (),
                   include_dirs: Sequence[str | os.PathLike] = (),
                   defines: Sequence[str] | Mapping[str, Any] | None = None,
                   extra_flags: Sequence[str] = (), link_flags: Sequence[str] = (),
                   artifact_name: str = "artifact.so",
                   cache_dir: str | os.PathLike | None = None, backend: str = "auto",
                   force_rebuild: bool = False, plan_only: bool = False,
                   floating_base: bool = False, dtype: str = "float32",
                   ee_joint_names: Sequence[str] | None = None,
                   algorithm_list: Sequence[str] | None = None,
                   runtime_inertia: bool = False, strategy: str = "auto",
                   max_batch_size: int = 65536,
                   contact_frames: Sequence[str] | None = None,
                   cost_frames: Sequence[str] | None = None,
                   use_joint_dynamics: bool = False, friction_model: str = "sign",
                   friction_width: float | Sequence[float] | None = None,
                   emit_plant: bool = False, enable_mujoco_kernels: bool | None = None,
                   runtime_transform: bool = False, runtime_joint_dynamics: bool = False,
                   collision: bool = False, collision_res: Any = None,
                   collision_native: bool | str = False, spherized_urdf: Any = None,
                   allowed_collision_pairs: Sequence[Sequence[str]] | None = None,
                   mesh_roots: Sequence[str | os.PathLike] | None = None,
                   cuda_arch: int | str | None = None,
                   timeout: float | None = None) -> ConsumerArtifact | dict[str, Any]:
    """Build (or find) the consumer's artifact `name` for one robot; returns where it is.

    consumer: the namespace in the cache (one per consuming project); name: the artifact
    in it (one per robot and configuration); both, and `artifact_name`, must match
    `^[A-Za-z0-9][A-Za-z0-9_.-]*$`. sources: the translation units (.cu/.cpp/.cc/.cxx),
    each compiled with `-c` against the generated `grid.cuh` (its folder is on the include
    path) and linked into one shared object; headers: the consumer's own headers, keyed
    by content (an include folder is keyed by path only: list the headers whose edits must
    re-key the build); defines: `NAME` / `NAME=VALUE`; extra_flags: every unit compile;
    link_flags: the link. backend: "cpu" (the host compiler, every unit as C++), "cuda"
    (nvcc for GRID_RBD_CUDA_ARCH or the detected GPU) or "auto" (cuda when usable).
    The codegen keywords mean what they mean on `register_robot`; `contact_frames` adds the
    contact-frame constants (and, with the "kinematics" profile, their positions and
    Jacobians) to `grid::device`. `use_joint_dynamics` / `friction_model` /
    `friction_width` bake the joint dynamics into the item functions; `emit_plant` adds
    the plant profile's fused step gradients; `cost_frames` are checked and keyed (a
    handle-side notion: nothing in the header changes); `enable_mujoco_kernels` changes
    no build (as on `register_robot`). `collision` (with `collision_res`,
    `collision_native`, `spherized_urdf`, `allowed_collision_pairs`, `mesh_roots`, as on
    `register_robot`, keyed by content: the spherized URDF and mesh files by SHA-256)
    adds the collision profile and, in `grid::device`, the collision tables and the world
    distances to caller-given obstacle spheres (docs/consumer.md); meta.json records the
    spheres. The run-time tables (`runtime_transform`, `runtime_joint_dynamics`) are
    refused: the device API passes no tables. cuda_arch: the architecture to compile
    for (e.g. 90 or "sm_90"; default GRID_RBD_CUDA_ARCH or the detected GPU).
    plan_only: report the keys and whether the artifact is there, compiling nothing.
    timeout: seconds per compiler run.

    Raises ValueError (bad names, flags, options), FileNotFoundError (a missing URDF,
    source, header or include folder) and ConsumerArtifactError (a failed compile, its log
    tail in the message)."""
    from grid_codegen.options import DEFAULT_ALGORITHMS, CodegenOptions
    from grid_rbd._build import resolve_toolchain

    check_name(consumer, "consumer")
    check_name(name, "name")
    check_name(artifact_name, "artifact_name")
    if "\0" in os.fspath(urdf_path):
        raise ValueError("urdf_path holds a NUL character")
    urdf = Path(urdf_path).expanduser().resolve()
    if not urdf.is_file():
        raise FileNotFoundError(f"URDF not found: {urdf}")
    srcs = inputs.files(sources, "source", SOURCE_SUFFIXES)
    if not srcs:
        raise ValueError("sources must name at least one translation unit")
    hdrs = inputs.files(headers, "header", None)
    incs = [Path(os.fspath(d)).expanduser().resolve() for d in include_dirs]
    for d in incs:
        if not d.is_dir():
            raise FileNotFoundError(f"include_dirs entry is not a folder: {d}")
    defs = inputs.defines(defines)
    xflags = inputs.flags(extra_flags, "extra_flags")
    lflags = inputs.flags(link_flags, "link_flags")
    contacts = [str(c) for c in contact_frames or ()]
    if any(isinstance(x, str) for x in (ee_joint_names, algorithm_list, contact_frames,
                                        cost_frames)):
        raise ValueError("ee_joint_names, algorithm_list, contact_frames and cost_frames "
                         "are lists")
    costs = [str(c) for c in cost_frames or ()]
    for frame in (*contacts, *costs):
        problem = name_problem(frame)
        if problem:
            raise ValueError(f"frame name {frame!r}: {problem}")
    _refuse_unsupported(runtime_transform, runtime_joint_dynamics, enable_mujoco_kernels)
    from grid_rbd._collision import collision_request

    coll = collision_request(bool(collision), collision_res, collision_native,
                             spherized_urdf, allowed_collision_pairs, mesh_roots, urdf, False)
    algorithms = tuple(algorithm_list) if algorithm_list is not None else DEFAULT_ALGORITHMS
    if emit_plant:
        algorithms = (*algorithms, "plant")
    if coll is not None:
        algorithms = (*algorithms, "collision")
    options = CodegenOptions(
        dtype=dtype, max_batch_size=max_batch_size, algorithms=algorithms,
        ee_joint_names=tuple(ee_joint_names or ()), runtime_inertia=bool(runtime_inertia),
        strategy=strategy, use_joint_dynamics=bool(use_joint_dynamics),
        friction_model=friction_model,
        friction_width=(tuple(friction_width) if isinstance(friction_width, (list, tuple))
                        else friction_width))
    toolchain = _with_arch(resolve_toolchain(_backend(backend)), cuda_arch)
    ident = identity(toolchain)
    urdf_bytes = urdf.read_bytes()
    request = {
        "schema": ARTIFACT_SCHEMA, "urdf_sha256": sha256_bytes(urdf_bytes),
        "codegen": options.to_dict(), "floating_base": bool(floating_base),
        "contact_frames": contacts, **({"cost_frames": costs} if costs else {}),
        **({"collision": coll.key(urdf_bytes, str(urdf))} if coll is not None else {}),
        "sources": inputs.digests(srcs), "headers": inputs.digests(hdrs),
        "include_dirs": [str(d) for d in incs], "defines": defs, "extra_flags": xflags,
        "link_flags": lflags, "artifact_name": artifact_name, "identity": ident,
    }
    ikey = sha256_bytes(canonical_json(request).encode())
    store = _ConsumerStore(consumer_root(consumer, cache_dir), artifact_name)

    def done(entry: Entry, compiled: tuple[str, ...] = (), ran: bool = False
             ) -> ConsumerArtifact:
        record = {"content_key": entry.content_key, "input_key": ikey,
                  "artifact": artifact_name, "arch": ident["arch"],
                  "backend": toolchain.backend, "urdf_sha256": request["urdf_sha256"]}
        if {k: store.read_manifest().get(name, {}).get(k) for k in record} != record:
            store.record(name, {**record, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        return ConsumerArtifact(consumer, name, entry.path / artifact_name,
                                entry.path / "grid.cuh", entry.path, entry.content_key,
                                ikey, ident["arch"], entry.meta, ran, compiled)

    if plan_only:
        entry = store.lookup(ikey, ident)
        return {"consumer": consumer, "name": name, "input_key": ikey,
                "identity": ident, "backend": toolchain.backend, "cached": entry is not None,
                "content_key": entry.content_key if entry else None,
                "store_dir": str(entry.path) if entry else None,
                "would": "load" if entry else "generate and compile"}
    if not force_rebuild:
        entry = store.lookup(ikey, ident)
        if entry is not None:
            return done(entry)
    with store.build_lock(ikey):
        if not force_rebuild:
            entry = store.lookup(ikey, ident)
            if entry is not None:
                return done(entry)
        with store.staging_dir() as staging:
            header, spheres = _generate(urdf_bytes, str(urdf), bool(floating_base),
                                        options, contacts, costs, coll)
            atomic_write(staging / "grid.cuh", header)
            compile_cmd, link_cmd = _commands(toolchain, staging, incs, defs, xflags, lflags)
            ckey = sha256_bytes(canonical_json({
                "schema": ARTIFACT_SCHEMA, "grid.cuh": sha256_bytes(header.encode()),
                "sources": request["sources"], "headers": request["headers"],
                "compile": _keyed(compile_cmd, staging), "link": link_cmd + lflags,
                "artifact_name": artifact_name, "identity": ident["toolchain"],
            }).encode())
            try:
                existing = None if force_rebuild else store.entry(ckey)
            except DamagedEntryError:
                existing = None
            if existing is not None and existing.build_inputs == ident:
                store.write_pointer(ikey, ckey)
                return done(existing)
            start = time.monotonic()
            units = _compile(store, staging, srcs, request["headers"], compile_cmd,
                             link_cmd, lflags, artifact_name, toolchain.backend,
                             not force_rebuild, timeout)
            meta = {
                "schema": ARTIFACT_SCHEMA, "consumer": consumer, "name": name,
                "artifact": artifact_name, "backend": toolchain.backend,
                "arch": ident["arch"], "urdf_source": str(urdf), **{
                    k: request[k] for k in ("urdf_sha256", "codegen", "floating_base",
                                            "contact_frames", "sources", "headers",
                                            "include_dirs", "defines", "extra_flags",
                                            "link_flags")},
                **({"collision": spheres} if spheres is not None else {}),
                "units": units, "build_seconds": round(time.monotonic() - start, 3),
                "built_from": {"input_key": ikey, "content_key": ckey},
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            atomic_write(staging / META, json.dumps(meta, indent=1, sort_keys=True) + "\n")
            atomic_write(staging / BUILD_INPUTS,
                         json.dumps(ident, indent=1, sort_keys=True) + "\n")
            for leftover in staging.iterdir():  # the entry is exactly its recorded files
                if leftover.name not in store.recorded_files:
                    leftover.unlink()
            entry = store.publish(staging, ckey, replace=force_rebuild or
                                  os.path.lexists(store.entry_path(ckey)))
            store.write_pointer(ikey, ckey)
        compiled = tuple(u for u, rec in units.items() if rec["compiled"])
        return done(entry, compiled, True)


def load_artifact(consumer: str, name: str, cache_dir: str | os.PathLike | None = None,
                  arch: str | None = None) -> ConsumerArtifact:
    """The prepared artifact `name` of `consumer`, without a toolchain: named by the
    manifest, verified against its integrity record, and recorded for this architecture
    (`arch`: "cpu" or "sm_XY"; default: the detected GPU for a CUDA artifact, this
    machine for a CPU one; with no GPU detectable the recorded device is trusted) and
    for this key and artifact schema. Raises ArtifactNotFoundError (no such name) and
    ArtifactIncompatibleError (anything else that keeps it from being used here)."""
    check_name(consumer, "consumer")
    check_name(name, "name")
    root = consumer_root(consumer, cache_dir)
    if not root.is_dir():
        raise ArtifactNotFoundError(f"no artifact {name!r} for consumer {consumer!r}: "
                                    f"{root} does not exist (build_artifact first)")
    probe = _ConsumerStore(root, "artifact.so")
    record = probe.read_manifest().get(name)
    if record is None:
        raise ArtifactNotFoundError(f"no artifact {name!r} for consumer {consumer!r} in "
                                    f"{probe.manifest_path} (build_artifact first)")
    key, artifact_name = record.get("content_key"), record.get("artifact")
    if not is_digest(key):
        raise ArtifactIncompatibleError(f"the manifest record of {name!r} holds content key "
                                        f"{str(key)[:80]!r}, not a store key")
    try:
        check_name(artifact_name, "artifact")
    except ValueError as exc:
        raise ArtifactIncompatibleError(f"the manifest record of {name!r}: {exc}") from None
    store = _ConsumerStore(root, artifact_name)
    try:
        entry = store.entry(key)
    except DamagedEntryError as exc:
        raise ArtifactIncompatibleError(f"artifact {name!r} of {consumer!r}: {exc}; build it "
                                        "again") from None
    if entry is None:
        raise ArtifactIncompatibleError(f"artifact {name!r} of {consumer!r} points at "
                                        f"{store.entries / key}, which is missing")
    recorded = entry.build_inputs
    reasons = []
    for field, current in (("key_schema", STORE_SCHEMA), ("artifact_schema", ARTIFACT_SCHEMA)):
        if recorded.get(field) != current:
            reasons.append(f"{field}: recorded {recorded.get(field)!r}, this grid_rbd "
                           f"expects {current!r}")
    want = arch if arch is not None else _current_arch(str(recorded.get("arch", "")))
    if want is not None and not _arch_loadable(recorded, want):
        reasons.append(f"architecture: recorded {recorded.get('arch')!r} "
                       f"({recorded.get('machine')}), this machine needs {want!r}")
    if reasons:
        raise ArtifactIncompatibleError(f"artifact {name!r} of {consumer!r} cannot be "
                                        f"loaded here: {'; '.join(reasons)}")
    return ConsumerArtifact(consumer, name, entry.path / artifact_name, entry.path / "grid.cuh",
                            entry.path, key, record.get("input_key"),
                            str(recorded.get("arch")), entry.meta, False)


def _current_arch(recorded: str) -> str | None:
    """This machine's architecture label for an artifact recorded as `recorded`."""
    if recorded == "cpu":
        return "cpu"
    from grid_rbd._device import cuda_status

    found = cuda_status().arch
    return found or None


def _arch_loadable(recorded: Mapping[str, Any], want: str) -> bool:
    archs = str(recorded.get("arch", "")).split(",")
    if want == "cpu":
        return archs == ["cpu"] and recorded.get("machine") == os.uname().machine
    return want in archs


def list_artifacts(consumer: str, cache_dir: str | os.PathLike | None = None
                   ) -> list[dict[str, Any]]:
    """Every artifact the consumer's manifest names: `{"name", "content_key", "arch",
    "artifact", ...}`, sorted by name ([] for a consumer with none)."""
    root = consumer_root(consumer, cache_dir)
    if not root.is_dir():
        return []
    manifest = _ConsumerStore(root, "artifact.so").read_manifest()
    return [{"name": n, **rec} for n, rec in sorted(manifest.items())]


__all__ = ["ArtifactIncompatibleError", "ArtifactNotFoundError", "ConsumerArtifact",
           "ConsumerArtifactError", "build_artifact", "consumer_root", "identity",
           "list_artifacts", "load_artifact"]
