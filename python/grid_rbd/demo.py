"""The main job: register the in-tree iiwa14 (the GPU build when a GPU is usable, else the
CPU build), run forward dynamics and its gradient on a batch, and report the timing and
the agreement with the float64 reference (and the reference's with Pinocchio).

    python -m grid_rbd.demo [--urdf PATH] [--device auto|cpu|cuda] [--dtype float32]
                            [--batch N] [--timing-batch N] [--cache-dir DIR] [--cold]

Exit status: 0 when every agreement is within tolerance, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import grid_rbd
import grid_rbd.reference as reference

DEFAULT_URDF = Path(__file__).resolve().parent / "data" / "iiwa14.urdf"  # package data
FLOAT32_DIRECT_TOL = 2e-5  # about 170 eps: a chain of O(depth) transforms and force sums


def _scaled_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest per-item max-abs error relative to that item's magnitude."""
    batch = expected.shape[0]
    diff = np.abs(actual - expected).reshape(batch, -1).max(axis=1)
    scale = np.maximum(np.abs(expected).reshape(batch, -1).max(axis=1), 1e-12)
    return float((diff / scale).max())


def _tolerance(dtype: np.dtype, cond: float) -> float:
    """float64: 1e-9. float32: forward dynamics goes through a solve with M, which
    amplifies the relative error up to cond(M)."""
    if dtype == np.float64:
        return 1e-9
    return max(FLOAT32_DIRECT_TOL, float(np.finfo(np.float32).eps) * cond)


def _time_call(fn, min_reps: int = 5, budget_s: float = 1.0) -> float:
    """Median seconds of a warm call (one untimed warm-up first)."""
    fn()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 200:
            break
    return float(np.median(times))


def _states(ref, batch: int, rng: np.random.Generator, dtype: np.dtype):
    """Random states rounded to `dtype`: the reference sees exactly the artifact's inputs."""
    q = rng.uniform(-np.pi, np.pi, (batch, ref.nq))
    qd = rng.uniform(-10.0, 10.0, (batch, ref.nv))
    u = rng.uniform(-50.0, 50.0, (batch, ref.nv))
    return tuple(np.ascontiguousarray(x, dtype=dtype) for x in (q, qd, u))


def _pinocchio_agreement(urdf: Path, q, qd, u, qdd, M) -> tuple[float, float] | None:
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = pin.buildModelFromUrdf(str(urdf))
    pd = pm.createData()
    fd_err = m_err = 0.0
    for b in range(len(q)):
        qdd_pin = pin.aba(pm, pd, q[b], qd[b], u[b])
        M_pin = pin.crba(pm, pd, q[b])
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        fd_err = max(fd_err, np.abs(qdd[b] - qdd_pin).max() / np.abs(qdd_pin).max())
        m_err = max(m_err, np.abs(M[b] - M_pin).max() / np.abs(M_pin).max())
    return fd_err, m_err


def _registration_lines(handle: grid_rbd.RobotHandle, seconds: float) -> list[str]:
    reg = handle.registration
    meta = handle._meta
    if reg.compiled:
        phases = ", ".join(f"{name} {s:.2f} s" for name, s in reg.phases)
        lines = [f"registration (cold): built in {seconds:.2f} s ({phases})"]
    else:
        how = ("store hit" if reg.outcome == "hit"
               else "generated sources matched an entry, no compile")
        lines = [f"registration (warm): {how} in {seconds * 1e3:.1f} ms"]
        build = meta.get("build_phases", [])
        if build:
            phases = ", ".join(f"{name} {s:.2f} s" for name, s in build)
            lines.append(f"  the entry's cold build: {phases} (--cold rebuilds in a "
                         "temporary store)")
    lines.append(f"  store entry {reg.entry_dir}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urdf", type=Path, default=DEFAULT_URDF)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--batch", type=int, default=256, help="states checked against "
                        "the reference")
    parser.add_argument("--timing-batch", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="store root (default $GRID_RBD_CACHE_DIR or ~/.cache/grid-rbd)")
    parser.add_argument("--cold", action="store_true",
                        help="register into a fresh temporary store (a cold build)")
    args = parser.parse_args(argv)
    if not args.urdf.is_file():
        print(f"no URDF at {args.urdf}; pass --urdf PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="grid_rbd_demo_") as tmp:
        cache_dir = Path(tmp) if args.cold else args.cache_dir
        return _run(args, cache_dir)


def _run(args: argparse.Namespace, cache_dir: Path | None) -> int:
    ref = reference.load(args.urdf)
    from grid_rbd._register import resolve_device

    try:
        target = resolve_device(args.device)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(f"{ref.model.name}: nq={ref.nq} nv={ref.nv} nb={ref.nb}; device {args.device} -> "
          f"{target}, {args.dtype}")
    start = time.perf_counter()
    h = grid_rbd.register_robot(ref.model.name, urdf_path=args.urdf, dtype=args.dtype,
                                device=args.device, cache_dir=cache_dir,
                                max_batch_size=max(args.batch, args.timing_batch))
    seconds = time.perf_counter() - start
    for line in _registration_lines(h, seconds):
        print(line)
    profile = h.device_profile
    print(f"  artifact {h.path.name}: device {h.device} "
          f"({profile.get('name', profile.get('device_name', '?'))}), ctx_id {h.ctx_id}")

    rng = np.random.default_rng(args.seed)
    q, qd, u = _states(ref, args.batch, rng, h.dtype)
    qdd = h.forward_dynamics(q, qd, u)
    dqdd = h.forward_dynamics_gradient(q, qd, u)
    np.set_printoptions(precision=4, suppress=True, linewidth=120)
    print(f"\nforward dynamics, item 0 (rad/s^2):\n{qdd[0]}")

    # Warm calls on a larger batch into preallocated buffers (no allocation per call).
    tq, tqd, tu = _states(ref, args.timing_batch, rng, h.dtype)
    out_fd = h.pinned_empty((args.timing_batch, h.nv))
    out_grad = h.pinned_empty((args.timing_batch, 2 * h.nv * h.nv))
    print(f"\nwarm calls, batch {args.timing_batch} (median):")
    for name, fn in (
        ("forward_dynamics", lambda: h.forward_dynamics(tq, tqd, tu, out=out_fd)),
        ("forward_dynamics_gradient",
         lambda: h.forward_dynamics_gradient(tq, tqd, tu, out=out_grad)),
    ):
        t = _time_call(fn)
        print(f"  {name:<26} {t * 1e3:9.3f} ms per call, {t / args.timing_batch * 1e9:9.1f} "
              "ns per item")

    q64, qd64, u64 = (x.astype(np.float64) for x in (q, qd, u))
    qdd_ref = ref.forward_dynamics(q64, qd64, u64)
    dqdd_ref = ref.forward_dynamics_gradient(q64, qd64, u64)
    M_ref = ref.crba(q64)
    cond = float(np.linalg.cond(M_ref).max())
    tol = _tolerance(h.dtype, cond)
    errors = {"forward_dynamics": _scaled_error(qdd, qdd_ref),
              "forward_dynamics_gradient": _scaled_error(dqdd, dqdd_ref)}
    print(f"\nagreement with the float64 reference ({args.batch} states, scale-aware max "
          f"relative error; tolerance {tol:.1e}, cond(M) up to {cond:.0f}):")
    ok = True
    for name, err in errors.items():
        verdict = "ok" if err <= tol else "FAILED"
        ok &= err <= tol
        print(f"  {name:<26} {err:.2e}  {verdict}")

    agreement = _pinocchio_agreement(args.urdf, q64, qd64, u64, qdd_ref, M_ref)
    if agreement is None:
        print("pinocchio is not installed: no cross-check of the reference (run "
              "tools/setup.sh)")
    else:
        fd_err, m_err = agreement
        ok &= max(fd_err, m_err) < 1e-9
        print(f"reference vs Pinocchio (max relative error): forward dynamics {fd_err:.2e}, "
              f"mass matrix {m_err:.2e}")
    h.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
