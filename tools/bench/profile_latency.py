"""Where a batch-1 call spends its time on a GPU, surface by surface (issue 20): the floor
of the timing method, the kernel of every variant, and torch.profiler tables (CPU and
CUDA time, CUDA runtime calls) of the numpy call, the torch eager call and the torch
forward + backward. Text out (one file per table), for a person to read; the figures that
are reported come from bench_latency.py.

    python tools/bench/profile_latency.py --out-dir prof/ [--robot iiwa14]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from sidebyside_common import make_states, use_tree  # noqa: E402

use_tree(REPO)

import grid_rbd  # noqa: E402

ID, FD, FD_GRAD = "inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient"
INPUTS = {ID: ("q", "qd", "qdd"), FD: ("q", "qd", "u"), FD_GRAD: ("q", "qd", "u")}


def events_us(call: Callable[[], Any], reps: int = 300) -> float:
    """Median CUDA-event time of one call, the device idle before each (bench_latency's
    timer)."""
    from bench_latency import time_events

    return time_events(call, reps)


def wall_us(call: Callable[[], Any], reps: int = 300) -> float:
    for _ in range(20):
        call()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def profile_table(call: Callable[[], Any], path: Path, reps: int = 20) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    path.write_text(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--robot", default="iiwa14")
    parser.add_argument("--skip-numpy", action="store_true")
    args = parser.parse_args(argv)
    import torch
    from support import ROBOTS

    from grid_rbd.torch import TorchRobotHandle

    out = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    spec = ROBOTS[args.robot]
    h = grid_rbd.register_robot(f"{args.robot}-latency", urdf_path=spec.path,
                                floating_base=spec.floating_base, dtype="float32",
                                max_batch_size=16384, device="cuda",
                                algorithm_list=[ID, FD, FD_GRAD, "forward_dynamics_vjp",
                                                "inverse_dynamics_vjp"])
    states = {k: v.astype(np.float32) for k, v in
              make_states(h.nq, h.nv, spec.floating_base, 1, seed=20).items()}
    dev = {k: torch.as_tensor(v, device="cuda") for k, v in states.items()}
    x = torch.zeros(1, device="cuda")
    say(f"floor: torch x.add_(1) under events {events_us(lambda: x.add_(1)):.2f} us")
    say(f"floor: torch.cuda.synchronize() idle {wall_us(torch.cuda.synchronize):.2f} us")
    pinned = torch.empty(64, pin_memory=True)
    gpu = torch.empty(64, device="cuda")

    def round_trip() -> None:
        gpu.copy_(pinned, non_blocking=True)
        pinned.copy_(gpu, non_blocking=True)
        torch.cuda.current_stream().synchronize()

    say(f"floor: pinned H2D + D2H + sync (torch) {wall_us(round_trip):.2f} us")
    artifact = h._artifact
    for algorithm in () if args.skip_numpy else (ID, FD, FD_GRAD):
        info = h._info["algorithms"][algorithm]
        say(f"{algorithm}: chosen variant at B=1: "
            f"{artifact.chosen_variant(h._ctx_id, algorithm, 1)}")
        given = INPUTS[algorithm]
        pointers = [dev[n].data_ptr() if n in given else 0 for n, _, _ in info["inputs"]]
        o = torch.empty((1, *info["output_shape"]), device="cuda")

        def launch(i: int = info["id"], p: list[int] = pointers, o: Any = o) -> None:
            artifact.launch(0, i, p, o.data_ptr(), 1, -9.81, 0, 0, 0, 0)

        say(f"  raw launch under events {events_us(launch):.2f} us, "
            f"wall {wall_us(launch):.2f} us")
        for variant in h.variants(algorithm):
            h.set_variant_for(algorithm, variant)
            say(f"  variant {variant:8s} raw launch under events {events_us(launch):.2f} us;"
                f" numpy call {wall_us(lambda a=algorithm: getattr(h, a)(*[states[n] for n in INPUTS[a]])):.2f} us")  # noqa: E501
        h.set_variant_for(algorithm, "")
        fn, call_args = getattr(h, algorithm), [states[n] for n in INPUTS[algorithm]]
        say(f"  numpy call wall {wall_us(lambda f=fn, a=call_args: f(*a)):.2f} us")
        profile_table(lambda f=fn, a=call_args: f(*a), out / f"numpy_{algorithm}.txt")

    th = TorchRobotHandle(h)
    say(f"torch eager ID events {events_us(lambda: th.inverse_dynamics(dev['q'], dev['qd'], dev['qdd'])):.2f} us")  # noqa: E501
    profile_table(lambda: th.inverse_dynamics(dev["q"], dev["qd"], dev["qdd"]),
                  out / "torch_eager_id.txt")
    q, qd, u = (dev[k].clone().requires_grad_(True) for k in ("q", "qd", "u"))

    def fwd_bwd() -> None:
        th.forward_dynamics(q, qd, u).sum().backward()

    out_fd = th.forward_dynamics(q, qd, u)
    say(f"torch bwd only wall (synchronised) "
        f"{wall_us(lambda: (torch.autograd.grad(out_fd, (q, qd, u), torch.ones_like(out_fd), retain_graph=True), torch.cuda.synchronize())):.2f} us")  # noqa: E501
    a = torch.randn(1, 7, device="cuda", requires_grad=True)
    say(f"floor: torch (a * 2).sum().backward() wall (synchronised) "
        f"{wall_us(lambda: ((a * 2.0).sum().backward(), torch.cuda.synchronize())):.2f} us")
    with torch.autograd.set_multithreading_enabled(False):
        say(f"floor, backward on the calling thread: "
            f"{wall_us(lambda: ((a * 2.0).sum().backward(), torch.cuda.synchronize())):.2f}"
            f" us; ours {wall_us(lambda: (fwd_bwd(), torch.cuda.synchronize())):.2f} us")
    say(f"torch fwd+bwd FD wall (synchronised) "
        f"{wall_us(lambda: (fwd_bwd(), torch.cuda.synchronize())):.2f} us")
    say(f"torch fwd only (grad on) wall {wall_us(lambda: th.forward_dynamics(q, qd, u)):.2f} us")
    profile_table(fwd_bwd, out / "torch_fwd_bwd.txt")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fwd_bwd()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(out / "torch_fwd_bwd_trace.json"))
    try:
        import jax
        import jax.numpy as jnp

        from grid_rbd.jax import JaxRobotHandle

        jh = JaxRobotHandle(h)
        jq, jqd, ju = (jnp.asarray(states[k]) for k in ("q", "qd", "u"))
        fd = jax.jit(lambda a, b, c: jh.forward_dynamics(a, b, c))
        say(f"jax jit FD wait each {wall_us(lambda: fd(jq, jqd, ju).block_until_ready()):.2f} us")
        plain = jax.jit(lambda a: (a * 2.0).sum())
        say(f"jax jit trivial wait each {wall_us(lambda: plain(jq).block_until_ready()):.2f} us")
        grad = jax.jit(jax.grad(lambda a, b, c: jh.forward_dynamics(a, b, c).sum(),
                                argnums=(0, 1, 2)))
        say(f"jax jit grad FD wait each "
            f"{wall_us(lambda: jax.block_until_ready(grad(jq, jqd, ju))):.2f} us")
        (out / "jax_grad_hlo.txt").write_text(grad.lower(jq, jqd, ju).compile().as_text())
    except Exception as exc:  # noqa: BLE001 - a missing framework is reported, not fatal
        say(f"jax: {type(exc).__name__}: {exc}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
