"""What both sides of a side-by-side benchmark share: the algorithm table, the random
states, the number of rotated input sets, and the timers.

Pure numpy at import (torch is imported inside the GPU timer), and no import of any
`grid_rbd`: the peer's worker process (`gridrbd060_worker.py`, which imports the
`grid-rbd` 0.6.0 wheel under that same package name) and our driver
(`bench_vs_gridrbd060.py`) both load this file, so both time the same inputs the same way.

Conventions: float32; q is (B, nq) with a floating base as [p(3), quat xyzw(4), joints];
qd, qdd, u are (B, nv). Per-item figures are nanoseconds, per-call figures microseconds.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# Every algorithm both systems have, by the public method name (the same on both
# handles), with its positional inputs.
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "inverse_dynamics": ("q", "qd", "qdd"),
    "crba": ("q",),
    "minv": ("q",),
    "forward_dynamics": ("q", "qd", "u"),
    "aba": ("q", "qd", "u"),
    "end_effector_pose": ("q",),
    "end_effector_pose_gradient": ("q",),
    "inverse_dynamics_gradient": ("q", "qd", "qdd"),
    "forward_dynamics_gradient": ("q", "qd", "u"),
    # issue 13's: opt-in (`--algorithms`), their builds are long (g1's idsva_so)
    "fk_batched": ("q",),
    "idsva_so": ("q", "qd", "qdd"),
    "fdsva_so": ("q", "qd", "u"),
}
CORE_ALGORITHMS = tuple(ALGORITHMS)[:9]
"""What a run times by default: the kernels issue's nine."""

# Results that go through a solve with the mass matrix: their float32 error scales with
# cond(M), so the cross-check tolerance does too.
SOLVES = frozenset({"minv", "forward_dynamics", "aba", "forward_dynamics_gradient",
                    "fdsva_so"})
FLOAT32_EPS = float(np.finfo(np.float32).eps)
DEFAULT_BATCHES = (1, 1024, 16384, 65536)


def drop_editable_finders() -> None:
    """Remove editable-install import hooks (setuptools' `__editable__...` and
    scikit-build-core's `_editable_skbc_...` finders) from this process: they answer
    `import grid_rbd` ahead of sys.path, so without this a script would import the
    installed checkout instead of the package its sys.path names."""
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not type(f).__module__.lstrip("_").startswith("editable")]


def use_tree(repo: Path) -> None:
    """Import our project from `repo` (the checkout this script lives in): its codegen/,
    python/ and tests/ first on sys.path, editable hooks of any other checkout gone."""
    drop_editable_finders()
    for sub in ("tests", "python", "codegen"):
        path = str(repo / sub)
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)


def make_states(nq: int, nv: int, floating_base: bool, batch: int,
                seed: int) -> dict[str, np.ndarray]:
    """Random non-zero float32 states, the same for the same arguments on any machine.

    Joints uniform in [-1.2, 1.2] rad; a floating base gets a position ~N(0, 0.5) and a
    uniformly random unit quaternion (xyzw, w >= 0); qd, qdd ~ N(0, 1); u ~ N(0, 5).
    Returns {"q": (B, nq), "qd", "qdd", "u": (B, nv)}, C-contiguous."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.2, 1.2, size=(batch, nq))
    if floating_base:
        q[:, :3] = rng.normal(0.0, 0.5, size=(batch, 3))
        quat = rng.normal(size=(batch, 4))
        quat /= np.linalg.norm(quat, axis=1, keepdims=True)
        quat *= np.where(quat[:, 3:4] < 0, -1.0, 1.0)
        q[:, 3:7] = quat
    states = {"q": q, "qd": rng.normal(size=(batch, nv)), "qdd": rng.normal(size=(batch, nv)),
              "u": rng.normal(0.0, 5.0, size=(batch, nv))}
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in states.items()}


def method_call(handle: Any, algorithm: str,
                after: Callable[[], Any] | None = None) -> Callable[[dict[str, Any]], Any]:
    """`call(states)`: the handle's public method `algorithm` on its inputs taken from a
    states dict (see `make_states`), then `after()` when given (e.g. a synchronize)."""
    fn, names = getattr(handle, algorithm), ALGORITHMS[algorithm]

    def call(states: dict[str, Any]) -> Any:
        result = fn(*[states[n] for n in names])
        if after is not None:
            after()
        return result

    return call


def set_seed(base_seed: int, robot_index: int, batch: int, set_index: int) -> int:
    """The seed of one rotated input set (both sides derive the same one)."""
    return base_seed + 1_000_003 * robot_index + 7919 * set_index + batch


def rotated_sets(batch: int, bytes_per_item: int, l2_bytes: int, max_sets: int = 64,
                 max_bytes: int = 2 << 30) -> int:
    """How many input sets to rotate through so that one lap moves at least three times
    the L2 (a large batch cannot be served from cache by the previous call), capped at
    `max_sets` and at `max_bytes` of inputs in all."""
    need = math.ceil(3 * l2_bytes / max(1, batch * bytes_per_item))
    cap = max(1, max_bytes // max(1, batch * bytes_per_item))
    return max(1, min(need, max_sets, cap))


def summary(seconds: Sequence[float], batch: int) -> dict[str, float]:
    """Median and minimum of per-call seconds, as us per call and ns per item."""
    median = statistics.median(seconds)
    return {"us_per_call": median * 1e6, "min_us_per_call": min(seconds) * 1e6,
            "ns_per_item": median / batch * 1e9, "reps": len(seconds)}


def gpu_warmup(device: str, seconds: float = 1.0) -> None:
    """Busy the GPU for a moment so that its clocks have left idle before the first
    timing (both processes do this)."""
    if device != "cuda":
        return
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def time_cuda(call: Callable[[Any], Any], sets: Sequence[Any], batch: int,
              min_reps: int = 20, min_seconds: float = 0.1, warmup: int = 3,
              max_reps: int = 2000) -> dict[str, float]:
    """CUDA events around one call at a time on torch's current stream, the device idle
    before each (so a batch-1 figure includes the host path, as a caller sees it). Warm-up
    calls first; at least `min_reps` and `len(sets)` timed calls and `min_seconds`; the
    sets are used in turn."""
    import torch

    for i in range(warmup):
        call(sets[i % len(sets)])
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    seconds: list[float] = []
    deadline = time.perf_counter() + min_seconds
    while (len(seconds) < max(min_reps, len(sets)) or time.perf_counter() < deadline) \
            and len(seconds) < max_reps:
        s = sets[len(seconds) % len(sets)]
        start.record()
        call(s)
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) * 1e-3)
    return summary(seconds, batch)


def time_host(call: Callable[[Any], Any], sets: Sequence[Any], batch: int,
              min_reps: int = 20, min_seconds: float = 0.1, warmup: int = 3,
              max_reps: int = 20000) -> dict[str, float]:
    """Wall time (perf_counter) of one call at a time, for calls that return host data
    (so they have waited for their device work), with the same warm-up and rotation as
    `time_cuda`."""
    for i in range(warmup):
        call(sets[i % len(sets)])
    seconds: list[float] = []
    deadline = time.perf_counter() + min_seconds
    while (len(seconds) < max(min_reps, len(sets)) or time.perf_counter() < deadline) \
            and len(seconds) < max_reps:
        s = sets[len(seconds) % len(sets)]
        t0 = time.perf_counter()
        call(s)
        seconds.append(time.perf_counter() - t0)
    return summary(seconds, batch)


def comparable(algorithm: str, result: Any) -> np.ndarray:
    """A method's output as one numpy array of float64 per item: the blocks of a tuple
    (the second-order kernels' four tensors) flattened side by side, and `fk_batched`'s
    quaternion `[x, y, z, qw, qx, qy, qz]` signed so that qw >= 0 (q and -q are one
    rotation; each system picks its own sign)."""
    parts = result if isinstance(result, (tuple, list)) else (result,)
    arrays = [np.asarray(p.detach().cpu().numpy() if hasattr(p, "detach") else p,
                         np.float64) for p in parts]
    out = np.concatenate([a.reshape(a.shape[0], -1) for a in arrays], 1) \
        if len(arrays) > 1 else arrays[0]
    if algorithm == "fk_batched":
        out = out.copy()
        out[:, 3:] *= np.where(out[:, 3:4] < 0, -1.0, 1.0)
    return out


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b|| over the whole batch in float64 (inf on a shape mismatch, NaN
    when either holds a NaN)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return math.inf
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        return math.nan
    return float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-300))


def cross_check_tolerance(algorithm: str, cond_m: float) -> float:
    """Relative agreement expected between two float32 implementations: 1e-4 for direct
    quantities, and eps32 * cond(M) * 10 (at least 1e-4) for results of a solve."""
    if algorithm in SOLVES:
        return max(1e-4, 10 * FLOAT32_EPS * cond_m)
    return 1e-4


def write_rows(out: Path, rows: list, **extra: Any) -> None:
    """A benchmark's result file: when, where, `extra` and its `rows`, as indented JSON."""
    import datetime
    import json
    import os
    import platform

    result = {"when": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "machine": platform.node(), "cpu_count": os.cpu_count(), **extra, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")
