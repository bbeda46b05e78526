"""Where a torch forward + backward of forward dynamics spends its time at batch 1 on a
GPU (torch.profiler table, CPU and CUDA time): the host path the latency targets of
issue 20 are about.

    python tools/bench/profile_torch_backward.py [--robot iiwa14] [--batch 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    import torch

    import grid_rbd

    h = grid_rbd.register_robot("iiwa14_prof", urdf_path=REPO / "robots/iiwa14/iiwa14.urdf",
                                backend="torch", device="cuda")
    q = torch.randn(args.batch, h.nq, device="cuda", requires_grad=True)
    qd = torch.randn(args.batch, h.nv, device="cuda", requires_grad=True)
    u = torch.randn(args.batch, h.nv, device="cuda", requires_grad=True)

    def step() -> None:
        h.forward_dynamics(q, qd, u).sum().backward()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.reps):
        step()
    torch.cuda.synchronize()
    print(f"forward+backward B={args.batch}: {(time.perf_counter() - t0) / args.reps * 1e6:.1f}"
          " us per step (wall, synchronized)")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    sys.exit(main())
