"""Batched iLQR with grid-rbd: iiwa14 reaches a target from many initial states at once.

Each trajectory optimisation is the textbook iterative LQR (Li and Todorov, 2004) with a
Levenberg-Marquardt regulariser and a backtracking line search, run for a whole batch of
initial states in lock step on torch tensors (CPU or CUDA). Every iteration asks grid-rbd
for what iLQR needs along the current trajectory, all batched over (trajectories x time):

* `plant_step` to roll the dynamics out (semi-implicit Euler, `dt` static);
* `plant_step_gradient`, the linearisation `[A | B] = dx'/d(x, u)`;
* `ee_pos_cost` (tracking of the end effector, Gauss-Newton Hessian),
  `quadratic_input_cost` (effort) and `quadratic_state_cost` (a light posture and
  velocity regulariser), each with its gradient and Hessian.

    python examples/ilqr_reach_iiwa14.py [--batch 64] [--horizon 40] [--dt 0.02]
        [--iters 25] [--device auto] [--cache-dir DIR] [--json out.json] [--plot out.png]

Prints the mean cost per iteration and the final end-effector errors; `--plot` draws the
cost per iteration and the end-effector distance to the target along the trajectories
(needs matplotlib). Needs torch (`pip install torch`).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

import grid_rbd
from grid_rbd.data import bundled_urdf

ALGORITHMS = ["inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient", "minv",
              "world_kinematics"]


class Problem:
    """Costs of one reach: effort, a posture/velocity regulariser, the end effector's
    distance to `target` along the way (light) and at the end (heavy), and the final
    velocity."""

    def __init__(self, h, x0: torch.Tensor, target: torch.Tensor, dt: float) -> None:
        self.h, self.x0, self.target, self.dt = h, x0, target, dt
        nv = h.nv
        self.R = 1e-3
        self.Q_run = torch.cat([torch.full((nv,), 1e-3), torch.full((nv,), 1e-2)])
        self.Q_end = torch.cat([torch.zeros(nv), torch.full((nv,), 1.0)])
        self.w_run, self.w_end = 1.0, 1e3
        self.x_ref = x0.clone()
        self.x_ref[:, nv:] = 0.0

    def running(self, x: torch.Tensor, u: torch.Tensor):
        """Per (item, step): value, l_x (2nv), l_u (nv), l_xx, l_uu; x, u flattened."""
        h, n = self.h, x.shape[0]
        q = x[:, :h.nq].contiguous()
        # rows are (item, step) item-major: each item's reference repeated over its steps
        x_ref = self.x_ref.repeat_interleave(n // self.x_ref.shape[0], dim=0)
        target = self.target.repeat_interleave(n // self.target.shape[0], dim=0)
        v1, g1, H1 = h.quadratic_state_cost(x, x_ref, self.Q_run)
        v2, g2, H2 = h.ee_pos_cost(q, target, self.w_run)
        v3, g3, H3 = h.quadratic_input_cost(u, torch.zeros_like(u), self.R)
        return (self.dt * (v1 + v2 + v3), self.dt * (g1 + g2), self.dt * g3,
                self.dt * (H1 + H2), self.dt * H3)

    def terminal(self, x: torch.Tensor):
        h = self.h
        q = x[:, :h.nq].contiguous()
        v1, g1, H1 = h.quadratic_state_cost(x, self.x_ref, self.Q_end)
        v2, g2, H2 = h.ee_pos_cost(q, self.target, self.w_end)
        return v1 + v2, g1 + g2, H1 + H2

    def rollout(self, us: torch.Tensor, xs: torch.Tensor | None = None,
                Ks: torch.Tensor | None = None, ks: torch.Tensor | None = None,
                alpha: float = 1.0):
        """States (B, T+1, nx) and controls (B, T, nv) of a rollout; with a previous
        trajectory and gains, the iLQR update `u + alpha k + K (x_new - x)`."""
        T = us.shape[1]
        x = self.x0
        states, controls = [x], []
        for t in range(T):
            u = us[:, t]
            if Ks is not None:
                u = u + alpha * ks[:, t] + (Ks[:, t] @ (x - xs[:, t])[:, :, None])[:, :, 0]
            x = self.h.plant_step(x, u, self.dt, "semi_implicit_euler")
            states.append(x)
            controls.append(u)
        return torch.stack(states, 1), torch.stack(controls, 1)

    def total(self, xs: torch.Tensor, us: torch.Tensor) -> torch.Tensor:
        B, T = us.shape[:2]
        run = self.running(xs[:, :T].reshape(B * T, -1), us.reshape(B * T, -1))[0]
        return run.reshape(B, T).sum(1) + self.terminal(xs[:, T])[0]


def ilqr(problem: Problem, us: torch.Tensor, iters: int, log) -> tuple:
    h, dt = problem.h, problem.dt
    nv = h.nv
    B, T = us.shape[:2]
    xs, us = problem.rollout(us)
    cost = problem.total(xs, us)
    like = {"dtype": us.dtype, "device": us.device}  # every work tensor where the data is
    mu = torch.full((B,), 1e-3, **like)
    history = [cost.clone()]
    for it in range(iters):
        start = time.perf_counter()
        flat_x, flat_u = xs[:, :T].reshape(B * T, -1), us.reshape(B * T, -1)
        AB = h.plant_step_gradient(flat_x, flat_u, dt, "semi_implicit_euler")
        A = AB[:, :, :2 * nv].reshape(B, T, 2 * nv, 2 * nv)
        Bm = AB[:, :, 2 * nv:].reshape(B, T, 2 * nv, nv)
        _, lx, lu, lxx, luu = problem.running(flat_x, flat_u)
        lx, lu = lx.reshape(B, T, -1), lu.reshape(B, T, -1)
        lxx, luu = lxx.reshape(B, T, 2 * nv, 2 * nv), luu.reshape(B, T, nv, nv)
        _, Vx, Vxx = problem.terminal(xs[:, T])
        Ks = torch.zeros(B, T, nv, 2 * nv, **like)
        ks = torch.zeros(B, T, nv, **like)
        eye = torch.eye(nv, **like)
        for t in reversed(range(T)):
            At, Bt = A[:, t], Bm[:, t]
            Qx = lx[:, t] + (At.transpose(1, 2) @ Vx[:, :, None])[:, :, 0]
            Qu = lu[:, t] + (Bt.transpose(1, 2) @ Vx[:, :, None])[:, :, 0]
            Qxx = lxx[:, t] + At.transpose(1, 2) @ Vxx @ At
            Quu = luu[:, t] + Bt.transpose(1, 2) @ Vxx @ Bt + mu[:, None, None] * eye
            Qux = Bt.transpose(1, 2) @ Vxx @ At
            K = -torch.linalg.solve(Quu, Qux)
            k = -torch.linalg.solve(Quu, Qu[:, :, None])[:, :, 0]
            Ks[:, t], ks[:, t] = K, k
            KT = K.transpose(1, 2)
            Vx = Qx + (KT @ (Quu @ k[:, :, None]))[:, :, 0] + (KT @ Qu[:, :, None])[:, :, 0] \
                + (Qux.transpose(1, 2) @ k[:, :, None])[:, :, 0]
            Vxx = Qxx + KT @ Quu @ K + KT @ Qux + Qux.transpose(1, 2) @ K
            Vxx = 0.5 * (Vxx + Vxx.transpose(1, 2))
        # Line search, per trajectory: the first step length that lowers its cost.
        accepted = torch.zeros(B, dtype=torch.bool, device=us.device)
        new_xs, new_us, new_cost = xs.clone(), us.clone(), cost.clone()
        for alpha in (1.0, 0.5, 0.25, 0.1, 0.03):
            trial_xs, trial_us = problem.rollout(us, xs, Ks, ks, alpha)
            trial = problem.total(trial_xs, trial_us)
            better = (trial < new_cost) & ~accepted
            new_xs[better], new_us[better], new_cost[better] = (trial_xs[better],
                                                               trial_us[better], trial[better])
            accepted |= better
            if bool(accepted.all()):
                break
        mu = torch.where(accepted, torch.clamp(mu / 3, min=1e-6), mu * 10)
        xs, us, cost = new_xs, new_us, new_cost
        history.append(cost.clone())
        log(f"iteration {it + 1:2d}: mean cost {float(cost.mean()):10.4f}  "
            f"({int(accepted.sum())}/{B} improved, {time.perf_counter() - start:5.2f} s)")
    return xs, us, history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--horizon", type=int, default=40)
    parser.add_argument("--dt", type=float, default=0.02)
    parser.add_argument("--iters", type=int, default=25)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--cache-dir")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_default_dtype(torch.float64)
    h = grid_rbd.register_robot("iiwa14_ilqr", urdf_path=bundled_urdf("iiwa14"),
                                dtype="float64", algorithm_list=ALGORITHMS, backend="torch",
                                emit_plant=True,  # the step gradient as one fused kernel
                                device=args.device, cache_dir=args.cache_dir)
    device = "cuda" if h.device == "cuda" else "cpu"
    rng = np.random.default_rng(args.seed)
    nq, nv = h.nq, h.nv
    q0 = rng.uniform(-1.0, 1.0, (args.batch, nq))
    x0 = torch.from_numpy(np.concatenate([q0, np.zeros((args.batch, nv))], 1)).to(device)
    # Reachable targets: the end effector of a nearby configuration.
    q_goal = torch.from_numpy(q0 + rng.uniform(-0.6, 0.6, (args.batch, nq))).to(device)
    target = h.end_effector_pose_runtime(q_goal)[:, :3].contiguous()
    problem = Problem(h, x0, target, args.dt)
    problem.Q_run, problem.Q_end = problem.Q_run.to(device), problem.Q_end.to(device)
    # First guess: hold the initial posture (the gravity torques, inverse dynamics at rest).
    hold = h.inverse_dynamics(x0[:, :nq].contiguous(), torch.zeros(args.batch, nv,
                                                                    device=device))
    us = hold[:, None, :].repeat(1, args.horizon, 1)
    start = time.perf_counter()
    xs, us, history = ilqr(problem, us, args.iters, print)
    seconds = time.perf_counter() - start
    final_q = xs[:, -1, :nq].contiguous()
    errors = torch.linalg.norm(h.end_effector_pose_runtime(final_q)[:, :3] - target, dim=1)
    print(f"{args.batch} trajectories x {args.horizon} steps, {args.iters} iterations in "
          f"{seconds:.2f} s ({seconds / max(args.iters, 1) * 1e3:.0f} ms per iteration); "
          f"end-effector error: median {float(errors.median()) * 1e3:.2f} mm, max "
          f"{float(errors.max()) * 1e3:.2f} mm")
    if args.json:
        args.json.write_text(json.dumps({
            "costs": [c.cpu().tolist() for c in history],
            "errors": errors.cpu().tolist(), "x0": x0.cpu().tolist(),
            "target": target.cpu().tolist(), "controls": us.cpu().tolist(),
            "final_state": xs[:, -1].cpu().tolist(), "dt": args.dt,
            "seconds_per_iteration": seconds / max(args.iters, 1)}))
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        costs = torch.stack(history).cpu().numpy()
        left.semilogy(costs, color="tab:blue", alpha=0.2)
        left.semilogy(costs.mean(1), color="black", label="mean")
        left.set(xlabel="iteration", ylabel="cost", title="iLQR cost per trajectory")
        left.legend()
        B, T1 = xs.shape[:2]
        ee = h.end_effector_pose_runtime(xs[:, :, :nq].reshape(B * T1, nq).contiguous())[:, :3]
        distance = torch.linalg.norm(ee.reshape(B, T1, 3) - target[:, None], dim=2)
        t = np.arange(T1) * args.dt
        right.plot(t, distance.cpu().numpy().T * 1e3, color="tab:orange", alpha=0.3)
        right.set(xlabel="time [s]", ylabel="distance to target [mm]",
                  title="end effector along the optimised trajectories")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")
    h.close()


if __name__ == "__main__":
    main()
