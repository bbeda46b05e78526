"""Where a torch forward + backward at batch 1 waits on a GPU host (issue 20): the same
step timed whole, with a device sync between forward and backward, backward alone, and a
pure-torch autograd.Function whose backward reads one device scalar (the floor of a
backward with a host read). Text out.

    python tools/bench/probe_backward_wait.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def med(fn, reps=300):
    for _ in range(20):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def main() -> int:
    import torch

    import grid_rbd
    from grid_rbd.torch import TorchRobotHandle

    h = grid_rbd.register_robot("iiwa14-latency", urdf_path=REPO / "robots/iiwa14/iiwa14.urdf",
                                dtype="float32", max_batch_size=16384, device="cuda",
                                algorithm_list=["inverse_dynamics", "forward_dynamics",
                                                "forward_dynamics_gradient",
                                                "forward_dynamics_vjp", "inverse_dynamics_vjp"])
    th = TorchRobotHandle(h)
    q, qd, u = (torch.randn(1, 7, device="cuda", requires_grad=True) for _ in range(3))
    sync = torch.cuda.synchronize

    def whole():
        th.forward_dynamics(q, qd, u).sum().backward()
        sync()

    def split():
        y = th.forward_dynamics(q, qd, u).sum()
        sync()
        y.backward()
        sync()

    times = {}

    def timed_backward():
        y = th.forward_dynamics(q, qd, u).sum()
        t0 = time.perf_counter()
        y.backward()
        sync()
        times.setdefault("b", []).append((time.perf_counter() - t0) * 1e6)

    class ReadsScalar(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            g.sum().item()  # one device-to-host read
            return g * 2.0

    a = torch.randn(1, 7, device="cuda", requires_grad=True)
    print(f"whole step {med(whole):.1f} us", flush=True)
    print(f"sync between forward and backward {med(split):.1f} us", flush=True)
    for _ in range(300):
        timed_backward()
    print(f"backward alone (in the step) {statistics.median(times['b']):.1f} us", flush=True)
    print(f"torch Function with a scalar read in backward "
          f"{med(lambda: (ReadsScalar.apply(a).sum().backward(), sync())):.1f} us", flush=True)
    print(f"trivial backward {med(lambda: ((a * 2.0).sum().backward(), sync())):.1f} us",
          flush=True)
    b, c = (torch.randn(1, 7, device="cuda", requires_grad=True) for _ in range(2))
    print(f"trivial backward, three leaves "
          f"{med(lambda: ((a * 2.0 + b * 3.0 + c).sum().backward(), sync())):.1f} us",
          flush=True)
    with torch.autograd.set_multithreading_enabled(False):
        print(f"[calling thread] whole {med(whole):.1f} us; torch Function with a read "
              f"{med(lambda: (ReadsScalar.apply(a).sum().backward(), sync())):.1f} us",
              flush=True)
    out = th.forward_dynamics(q, qd, u)
    g = torch.ones_like(out)
    print(f"autograd.grad (no accumulation) "
          f"{med(lambda: (torch.autograd.grad(th.forward_dynamics(q, qd, u), (q, qd, u), g), sync())):.1f} us",  # noqa: E501
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
