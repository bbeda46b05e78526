"""The registration's autotune: which variant of each algorithm is fastest at which batch,
measured on the GPU the artifact was just built for.

An artifact built with `strategy="auto"` carries several variants per algorithm and a
default dispatch table from the cost model (`grid_codegen.dispatch`). Where a GPU is
present, registration times every variant at a few batch sizes (`BATCHES`, capped by the
artifact's max batch) on random valid states, keeps the fastest per size, and records the
resulting table in the entry's `meta.json` (`"dispatch"`, with the timings under
`"autotune"`); the handles install it in every context (`set_dispatch`). CPU builds keep
the cost model's table (the thread strategy on SIMD vectors wins there by construction),
and so do Bazel actions, which must be deterministic.

The measurement drives the artifact's descriptor directly (device buffers from its own
allocator, launches on the legacy default stream, host timing around `REPEATS` launches
between synchronisations), so it needs neither the runtime nor a framework.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from grid_rbd._abi_ctypes import ABI_VERSION, GridDescriptor, GridLaunchConfig

BATCHES = (1, 64, 1024, 16384, 65536)
REPEATS = 5
MIN_SECONDS = 0.004  # per (algorithm, batch, variant) measurement
DISABLE_ENV = "GRID_RBD_AUTOTUNE"  # "0" skips the measurement (the cost model's table)


@dataclass
class Result:
    """dispatch: algorithm -> [[min_batch, variant], ...] (only algorithms with several
    variants); seconds: algorithm -> variant -> batch -> seconds per call."""

    dispatch: dict[str, list[list[Any]]] = field(default_factory=dict)
    seconds: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    wall_seconds: float = 0.0

    def to_meta(self) -> dict[str, Any]:
        return {"dispatch": self.dispatch,
                "autotune": {"seconds_per_call": self.seconds,
                             "wall_seconds": round(self.wall_seconds, 3)}}


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "1").strip() not in ("0", "off", "no", "false")


class _Descriptor:
    def __init__(self, so_path: Path) -> None:
        self.lib = ctypes.CDLL(str(so_path))
        self.lib.grid_get_descriptor.restype = ctypes.POINTER(GridDescriptor)
        self.d = self.lib.grid_get_descriptor().contents
        if self.d.abi_version != ABI_VERSION or \
                self.d.struct_size != ctypes.sizeof(GridDescriptor):
            raise RuntimeError(f"{so_path}: ABI {self.d.abi_version} / descriptor size "
                               f"{self.d.struct_size}; autotune reads ABI {ABI_VERSION}")

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise RuntimeError(f"autotune: {what} failed: {self.d.error_string(code).decode()}")


def autotune(so_path: str | os.PathLike, batches: tuple[int, ...] = BATCHES,
             seed: int = 0, cpu: bool = False) -> Result:
    """Time every variant of every multi-variant algorithm of the GPU artifact at
    `so_path`; returns the measured dispatch tables (empty for a CPU artifact, unless
    `cpu`: then its host variants are measured the same way)."""
    start = time.monotonic()
    desc = _Descriptor(Path(so_path))
    d = desc.d
    result = Result()
    if not d.is_gpu and not cpu:
        return result
    dtype = np.dtype(d.dtype.decode())
    batches = tuple(b for b in batches if b <= d.max_batch) or (1,)
    state = ctypes.c_void_p()
    desc.check(d.create_state(ctypes.byref(state)), "create_state")
    buffers: list[int] = []
    try:
        rng = np.random.default_rng(seed)
        top = max(batches)
        for a in (d.algorithms[k] for k in range(d.num_algorithms)):
            if a.num_variants < 2:
                continue
            names = [a.variants[v].name.decode() for v in range(a.num_variants)]
            inputs = []
            for k in range(a.num_inputs):
                if not a.input_required[k]:
                    inputs.append(None)
                    continue
                host = _random_input(rng, a.input_names[k].decode(), a.input_widths[k], top,
                                     d.nq, d.nv, dtype)
                ptr = d.device_alloc(host.nbytes)
                if not ptr:
                    raise MemoryError("autotune: device_alloc of inputs failed")
                buffers.append(ptr)
                desc.check(d.copy(ptr, host.ctypes.data, host.nbytes, 0, None), "copy")
                inputs.append(ptr)
            out_size = a.output_shape[0] * a.output_shape[1] * dtype.itemsize * top
            out = d.device_alloc(out_size)
            if not out:
                raise MemoryError("autotune: device_alloc of the output failed")
            buffers.append(out)
            desc.check(d.synchronize(None), "synchronize")
            ins = (ctypes.c_void_p * 4)(*[ctypes.c_void_p(p) for p in inputs])
            outs = (ctypes.c_void_p * 1)(ctypes.c_void_p(out))
            timings: dict[str, dict[str, float]] = {n: {} for n in names}
            best: list[tuple[int, str]] = []
            for batch in batches:
                per_variant = {}
                for v, name in enumerate(names):
                    config = GridLaunchConfig(v + 1, 0, 0, 0)
                    seconds = _time(desc, state, a.id, config, ins, outs, batch)
                    timings[name][str(batch)] = seconds
                    per_variant[name] = seconds
                best.append((batch, min(names, key=lambda n: (per_variant[n], names.index(n)))))
            result.seconds[a.name.decode()] = timings
            result.dispatch[a.name.decode()] = _table(best)
    finally:
        for ptr in buffers:
            d.device_free(ptr)
        d.destroy_state(state)
    result.wall_seconds = time.monotonic() - start
    return result


def _random_input(rng: np.random.Generator, name: str, width: int, batch: int, nq: int,
                  nv: int, dtype: np.dtype) -> np.ndarray:
    x = rng.standard_normal((batch, width))
    if name == "q" and nq == nv + 1:  # a free-flyer root: a unit quaternion at 3:7
        x[:, 3:7] /= np.linalg.norm(x[:, 3:7], axis=1, keepdims=True)
    return np.ascontiguousarray(x, dtype=dtype)


def _time(desc: _Descriptor, state: ctypes.c_void_p, algorithm: int,
          config: GridLaunchConfig, ins: Any, outs: Any, batch: int) -> float:
    d = desc.d
    for _ in range(2):  # warm-up (first launches load the module, opt in shared memory)
        desc.check(d.launch_ex(state, algorithm, ctypes.byref(config), ins, outs, batch,
                               -9.81, None), "launch")
    desc.check(d.synchronize(None), "synchronize")
    samples = []
    spent = 0.0
    while len(samples) < 3 or spent < MIN_SECONDS:
        t0 = time.perf_counter()
        for _ in range(REPEATS):
            d.launch_ex(state, algorithm, ctypes.byref(config), ins, outs, batch, -9.81, None)
        desc.check(d.synchronize(None), "synchronize")
        elapsed = time.perf_counter() - t0
        samples.append(elapsed / REPEATS)
        spent += elapsed
        if len(samples) >= 200:
            break
    return float(np.median(samples))


def _table(best: list[tuple[int, str]]) -> list[list[Any]]:
    """[(batch, variant), ...] measured at ascending batches -> dispatch entries: the
    variant measured fastest at a size serves from there to the next measured size."""
    table: list[list[Any]] = []
    for k, (batch, name) in enumerate(best):
        if table and table[-1][1] == name:
            continue
        table.append([1 if k == 0 else batch, name])
    return table
