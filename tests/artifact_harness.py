"""Load a built grid-rbd artifact through its C descriptor and call it from tests.

`Artifact(path)` reads `grid_get_descriptor()`; `artifact.state()` creates a per-context
state; `state.call(name, *inputs)` launches an algorithm on numpy arrays (CPU build,
host pointers) or on CUDA torch tensors (GPU build: device pointers, the current torch
stream). `build_cached(...)` generates and compiles one artifact per configuration per
test session, so every test module shares it.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from support import ROBOTS

from grid_codegen import parse_urdf
from grid_codegen.compile import ARTIFACT, compile_artifact
from grid_codegen.generate import generate
from grid_codegen.model import GRAVITY, RobotModel
from grid_codegen.options import CodegenOptions
from grid_rbd._abi_ctypes import (  # noqa: E402
    ABI_VERSION,
    GridDescriptor,
    GridDeviceInfo,
    GridLaunchConfig,
)


class GridError(RuntimeError):
    """A nonzero status from the artifact; `code` is the C error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"grid error {code}: {message}")
        self.code = code


@dataclass(frozen=True)
class AlgorithmInfo:
    name: str
    id: int
    inputs: tuple[tuple[str, int, bool], ...]  # (name, width per item, required)
    output_shape: tuple[int, ...]  # per item
    uses_gravity: bool
    variants: tuple[str, ...]  # strategy names, in descriptor order
    dispatch: tuple[tuple[int, int], ...]  # the default (min_batch, variant) table


class Artifact:
    """A loaded `robot.so`: its descriptor, dimensions and algorithm table."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.grid_get_descriptor.restype = ctypes.POINTER(GridDescriptor)
        self.desc = self.lib.grid_get_descriptor().contents
        if self.desc.abi_version != ABI_VERSION:
            raise RuntimeError(f"{path}: ABI version {self.desc.abi_version}, expected "
                               f"{ABI_VERSION}")
        if self.desc.struct_size != ctypes.sizeof(GridDescriptor):
            raise RuntimeError(f"{path}: descriptor size {self.desc.struct_size}, ctypes "
                               f"mirror {ctypes.sizeof(GridDescriptor)}")
        d = self.desc
        self.nq, self.nv, self.nb, self.num_ees = d.nq, d.nv, d.nb, d.num_ees
        self.dtype = np.dtype(d.dtype.decode())
        self.max_batch = d.max_batch
        self.archs = d.archs.decode()
        self.is_gpu = bool(d.is_gpu)
        self.options_json = d.options_json.decode()
        self.algorithms: dict[str, AlgorithmInfo] = {}
        for k in range(d.num_algorithms):
            a = d.algorithms[k]
            inputs = tuple((a.input_names[i].decode(), a.input_widths[i],
                            bool(a.input_required[i])) for i in range(a.num_inputs))
            info = AlgorithmInfo(a.name.decode(), a.id, inputs,
                                 tuple(a.output_shape[i] for i in range(a.output_rank)),
                                 bool(a.uses_gravity),
                                 tuple(a.variants[v].name.decode()
                                       for v in range(a.num_variants)),
                                 tuple((a.dispatch_min_batch[k], a.dispatch_variant[k])
                                       for k in range(a.num_dispatch)))
            self.algorithms[info.name] = info

    def error_message(self, code: int) -> str:
        return self.desc.error_string(code).decode()

    def check(self, code: int) -> None:
        if code != 0:
            raise GridError(code, self.error_message(code))

    def query_device(self) -> GridDeviceInfo:
        info = GridDeviceInfo()
        self.check(self.desc.query_device(ctypes.byref(info)))
        return info

    def state(self) -> State:
        return State(self)


class State:
    """A per-context state of an artifact; `close()` (or garbage collection) frees it."""

    def __init__(self, artifact: Artifact) -> None:
        self.artifact = artifact
        handle = ctypes.c_void_p()
        artifact.check(artifact.desc.create_state(ctypes.byref(handle)))
        self.handle = handle

    def close(self) -> None:
        if self.handle:
            self.artifact.desc.destroy_state(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self) -> None:
        self.close()

    def set_inertia_table(self, table: np.ndarray) -> None:
        """`table` (nb, 10): each body's `Inertia.dynamic_parameters()`."""
        table = np.ascontiguousarray(table, dtype=self.artifact.dtype)
        if table.size != 10 * self.artifact.nb:
            raise ValueError(f"inertia table has {table.size} values; expected "
                             f"{10 * self.artifact.nb} (nb x 10)")
        self.artifact.check(self.artifact.desc.set_inertia_table(
            self.handle, table.ctypes.data_as(ctypes.c_void_p)))

    def launch_raw(self, name: str, inputs: list[int], output: int, batch: int,
                   gravity: float = GRAVITY, stream: int = 0, variant: str | None = None,
                   threads: int = 0, max_blocks: int = 0) -> int:
        """The raw C call with integer pointers; returns the status code. `variant`
        names a strategy of the artifact (None: dispatch by batch size); `threads` is
        the launch width (GPU) or host thread count (CPU), 0 for the default."""
        info = self.artifact.algorithms[name]
        ins = (ctypes.c_void_p * 4)(*[ctypes.c_void_p(p or None) for p in inputs])
        outs = (ctypes.c_void_p * 1)(ctypes.c_void_p(output or None))
        config = GridLaunchConfig(0 if variant is None else info.variants.index(variant) + 1,
                                  threads, max_blocks, 0)
        return self.artifact.desc.launch_ex(self.handle, info.id, ctypes.byref(config), ins,
                                            outs, batch, gravity,
                                            ctypes.c_void_p(stream or None))

    def set_dispatch(self, name: str, table: list[tuple[int, str]]) -> int:
        """Install a dispatch table [(min_batch, strategy), ...]; returns the status."""
        info = self.artifact.algorithms[name]
        n = len(table)
        mins = (ctypes.c_int32 * max(n, 1))(*[b for b, _ in table])
        variants = (ctypes.c_int32 * max(n, 1))(*[info.variants.index(v) if v in info.variants
                                                   else 99 for _, v in table])
        return self.artifact.desc.set_dispatch(self.handle, info.id, n, mins, variants)

    def chosen_variant(self, name: str, batch: int) -> str:
        info = self.artifact.algorithms[name]
        return info.variants[self.artifact.desc.chosen_variant(self.handle, info.id, batch)]

    def call(self, name: str, *inputs: Any, gravity: float = GRAVITY,
             variant: str | None = None, threads: int = 0, max_blocks: int = 0) -> Any:
        """Run `name` on numpy arrays (CPU build) or CUDA torch tensors (GPU build);
        missing trailing / None inputs are optional ones left NULL. The output starts as
        NaN, so an entry the kernel does not write fails every comparison."""
        info = self.artifact.algorithms[name]
        if len(inputs) > len(info.inputs):
            raise ValueError(f"{name} takes {len(info.inputs)} inputs, got {len(inputs)}")
        if inputs and _is_torch(inputs[0]):
            return self._call_torch(info, inputs, gravity, variant, threads, max_blocks)
        batch = int(np.asarray(inputs[0]).reshape(-1, info.inputs[0][1]).shape[0])
        keep, ptrs = [], []
        for (in_name, width, required), x in zip(info.inputs, list(inputs) + [None] * 4,
                                                 strict=False):
            if x is None:
                if required:
                    raise ValueError(f"{name}: input {in_name} is required")
                ptrs.append(0)
                continue
            arr = np.ascontiguousarray(np.asarray(x).reshape(batch, width),
                                       dtype=self.artifact.dtype)
            keep.append(arr)
            ptrs.append(arr.ctypes.data)
        out = np.full((batch, *info.output_shape), np.nan, dtype=self.artifact.dtype)
        self.artifact.check(self.launch_raw(name, ptrs, out.ctypes.data, batch, gravity,
                                            variant=variant, threads=threads,
                                            max_blocks=max_blocks))
        return out

    def _call_torch(self, info: AlgorithmInfo, inputs: tuple[Any, ...], gravity: float,
                    variant: str | None = None, threads: int = 0, max_blocks: int = 0
                    ) -> Any:
        import torch
        dtype = torch.float32 if self.artifact.dtype == np.float32 else torch.float64
        device = inputs[0].device
        batch = int(inputs[0].reshape(-1, info.inputs[0][1]).shape[0])
        keep, ptrs = [], []
        for (_, width, _), x in zip(info.inputs, list(inputs) + [None] * 4, strict=False):
            if x is None:
                ptrs.append(0)
                continue
            t = x.to(device=device, dtype=dtype).reshape(batch, width).contiguous()
            keep.append(t)
            ptrs.append(t.data_ptr())
        out = torch.full((batch, *info.output_shape), float("nan"), dtype=dtype, device=device)
        stream = torch.cuda.current_stream(device).cuda_stream
        self.artifact.check(self.launch_raw(info.name, ptrs, out.data_ptr(), batch, gravity,
                                            stream, variant, threads, max_blocks))
        return out


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


# -- one build per configuration per session -------------------------------------------
_BUILD_ROOT: Path | None = None
_BUILDS: dict[tuple, tuple[Artifact, RobotModel, float]] = {}
_LOCK = threading.Lock()


def _build_root() -> Path:
    """A temporary folder per session, or `$GRID_RBD_TEST_BUILD_DIR` (kept, so that a
    benchmark run after the tests on the GPU machine reuses their builds)."""
    global _BUILD_ROOT
    if _BUILD_ROOT is None:
        kept = os.environ.get("GRID_RBD_TEST_BUILD_DIR")
        if kept:
            _BUILD_ROOT = Path(kept)
            _BUILD_ROOT.mkdir(parents=True, exist_ok=True)
        else:
            _BUILD_ROOT = Path(tempfile.mkdtemp(prefix="grid_artifacts_"))
            atexit.register(shutil.rmtree, _BUILD_ROOT, True)
    return _BUILD_ROOT


def _build(model: RobotModel, opts: CodegenOptions, backend: str) -> tuple[Path, float]:
    """Compile into a folder named by the hash of the generated files and the backend, or
    reuse what a previous session left there (only with `$GRID_RBD_TEST_BUILD_DIR`)."""
    files = generate(model, opts, units=True)
    digest = hashlib.sha256(backend.encode())
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    out_dir = _build_root() / f"{model.name}-{backend}-{digest.hexdigest()[:16]}"
    if (out_dir / ARTIFACT).is_file():
        return out_dir / ARTIFACT, 0.0
    # GRID_RBD_TEST_NVCCFLAGS (e.g. "-Xptxas -v" for register and spill reports in the
    # build log) is not part of the folder name: it changes the log, not the code.
    extra = tuple(os.environ.get("GRID_RBD_TEST_NVCCFLAGS", "").split()) \
        if backend == "cuda" else ()
    result = compile_artifact(files, out_dir, backend=backend, extra_flags=extra)
    return result.so_path, result.seconds


def load_model(robot: str) -> RobotModel:
    spec = ROBOTS[robot]
    return parse_urdf(spec.path, floating_base=spec.floating_base)


def build_cached(robot: str, backend: str = "cpu", **options: Any) -> tuple[Artifact, float]:
    """The artifact of `robot` built with `CodegenOptions(**options)` on `backend`, and
    its compile time in seconds (of the first build in this session)."""
    key = (robot, backend, tuple(sorted(options.items())))
    with _LOCK:
        if key not in _BUILDS:
            model = load_model(robot)
            so_path, seconds = _build(model, CodegenOptions(**options), backend)
            _BUILDS[key] = (Artifact(so_path), model, seconds)
        artifact, _, seconds = _BUILDS[key]
        return artifact, seconds


def prebuild(configs: list[tuple[str, str, dict[str, Any]]], workers: int | None = None
             ) -> None:
    """Build `(robot, backend, options)` configurations concurrently (the compiler is
    single-threaded; builds of different robots overlap on a multi-core machine).
    `workers` defaults to `$GRID_RBD_BUILD_WORKERS`, else 2 (the CI machine's cores)."""
    from concurrent.futures import ThreadPoolExecutor
    workers = workers or int(os.environ.get("GRID_RBD_BUILD_WORKERS", "2"))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda c: _build_unlocked(*c), configs))


def _build_unlocked(robot: str, backend: str, options: dict[str, Any]) -> None:
    key = (robot, backend, tuple(sorted(options.items())))
    with _LOCK:
        if key in _BUILDS:
            return
    model = load_model(robot)
    so_path, seconds = _build(model, CodegenOptions(**options), backend)
    with _LOCK:
        _BUILDS.setdefault(key, (Artifact(so_path), model, seconds))


# -- the numeric matrix shared by the CPU and GPU tests --------------------------------
def reference_case(ref: Any, algorithm: str, s: Any, f_ext: bool = False,
                   gravity: float = GRAVITY) -> tuple[tuple[Any, ...], np.ndarray]:
    """`(inputs, expected)` of `algorithm` on states `s` (a `support.States`): the
    artifact's positional inputs and the float64 reference result."""
    fe = s.f_ext if f_ext else None
    if algorithm == "inverse_dynamics":
        return (s.q, s.qd, s.qdd, fe), ref.inverse_dynamics(s.q, s.qd, s.qdd, fe, gravity)
    if algorithm in ("crba", "minv", "end_effector_pose", "end_effector_pose_gradient"):
        return (s.q,), getattr(ref, algorithm)(s.q)
    if algorithm in ("forward_dynamics", "aba"):
        return (s.q, s.qd, s.u, fe), getattr(ref, algorithm)(s.q, s.qd, s.u, fe, gravity)
    if algorithm == "inverse_dynamics_gradient":
        return ((s.q, s.qd, s.qdd, fe),
                ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd, fe, gravity))
    if algorithm == "forward_dynamics_gradient":
        return ((s.q, s.qd, s.u, fe),
                ref.forward_dynamics_gradient(s.q, s.qd, s.u, fe, gravity))
    ct = np.cos(3.0 * s.qd) + 0.5  # a cotangent that is neither constant nor an input
    if algorithm == "forward_dynamics_vjp":
        return (s.q, s.qd, s.u, ct), ref.forward_dynamics_vjp(s.q, s.qd, s.u, ct, gravity)
    if algorithm == "inverse_dynamics_vjp":
        return (s.q, s.qd, ct, s.qdd), ref.inverse_dynamics_vjp(s.q, s.qd, ct, s.qdd, gravity)
    raise KeyError(algorithm)


# Algorithms whose result goes through a linear solve with M: their float32 error grows
# with the condition number of M.
SOLVES = frozenset({"minv", "forward_dynamics", "aba", "forward_dynamics_gradient",
                    "forward_dynamics_vjp"})
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def tolerance(dtype: np.dtype, algorithm: str, ref: Any, q: np.ndarray) -> float:
    """Scale-aware tolerance (see `support.scaled_error`).

    float64: 1e-9. float32: the kernels round every operation to 2^-24; a chain of
    O(depth) transforms and O(nb) force sums keeps the relative error of direct
    quantities (ID, M, poses) near 10 eps and we allow 2e-5 (about 170 eps). A solve
    amplifies the relative error by up to cond(M) (1.7e3 for iiwa14, 1e4 for go2, 3.5e5
    for g1), so solves get `max(2e-5, eps * cond(M))` with cond taken on these states."""
    if np.dtype(dtype) == np.float64:
        return 1e-9
    if algorithm in SOLVES:
        cond = float(np.linalg.cond(ref.crba(q)).max())
        return max(2e-5, FLOAT32_EPS * cond)
    return 2e-5


def states_in(s: Any, dtype: np.dtype) -> Any:
    """`s` rounded to `dtype` and held in it (C-contiguous), for a handle that computes in
    `dtype`: the reference then sees exactly the values the handle does."""
    from dataclasses import fields, replace
    s = round_states(s, dtype)
    return replace(s, **{f.name: np.ascontiguousarray(getattr(s, f.name), dtype=dtype)
                         for f in fields(s)})


def round_states(s: Any, dtype: np.dtype) -> Any:
    """`s` with every array rounded to `dtype` (and back to float64), so the reference
    sees exactly the inputs the artifact sees."""
    from dataclasses import replace
    return replace(s, **{k: np.asarray(getattr(s, k), dtype=dtype).astype(np.float64)
                         for k in ("q", "qd", "qdd", "u", "f_ext")})
