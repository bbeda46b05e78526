"""A batched rollout for learning, with JAX and grid-rbd: iiwa14 under a PD policy.

B initial states are rolled out for T steps of semi-implicit Euler,
    qd <- qd + dt * FD(q, qd, u),   q <- q + dt * qd,   u = kp (q* - q) - kd qd,
inside `jax.lax.scan`, compiled once with `jax.jit`. The cost is the mean squared
tracking error along the rollout; `jax.value_and_grad` differentiates it with respect to
the policy gains (kp, kd, one per joint) through every step, with grid-rbd's analytic
forward-dynamics backward (no finite differences, no unrolled autodiff of the dynamics).
A few steps of gradient descent on log-gains then tune the policy, as a learning loop
would.

    python examples/rollout_jax.py [--batch 256] [--steps 100] [--dt 0.01] [--iters 5]
                                   [--dtype float32] [--device auto] [--json out.json]

Needs jax (`pip install jax`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--iters", type=int, default=5, help="gradient steps on the gains")
    parser.add_argument("--lr", type=float, default=0.2)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    import jax

    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)  # JAX would make float32 of float64
    import jax.numpy as jnp

    import grid_rbd
    import grid_rbd.reference
    from grid_rbd.data import bundled_urdf

    # forward_dynamics and the two kernels its backward runs: the gradient and itself.
    h = grid_rbd.register_robot("iiwa14_rollout", urdf_path=bundled_urdf("iiwa14"),
                                backend="jax", dtype=args.dtype, device=args.device,
                                cache_dir=args.cache_dir, max_batch_size=args.batch,
                                algorithm_list=["forward_dynamics",
                                                "forward_dynamics_gradient"])
    dtype = jnp.dtype(args.dtype)
    rng = np.random.default_rng(args.seed)
    q0 = rng.uniform(-1.0, 1.0, (args.batch, h.nq))
    qd0 = rng.uniform(-0.5, 0.5, (args.batch, h.nv))
    target = rng.uniform(-0.5, 0.5, (args.batch, h.nq))
    # Gains for a 10 rad/s, critically damped loop on each joint's typical inertia (a
    # joint's diagonal of M): stiff distal joints with small inertias stay stable at dt.
    inertia = np.diag(grid_rbd.reference.load(bundled_urdf("iiwa14")).crba(
        np.zeros((1, h.nq)))[0])
    log_gains = np.log(np.stack([100.0 * inertia, 20.0 * inertia]))

    def rollout_cost(log_gains, q0, qd0, target):
        kp, kd = jnp.exp(log_gains[0]), jnp.exp(log_gains[1])

        def step(state, _):
            q, qd = state
            u = kp * (target - q) - kd * qd
            qd = qd + args.dt * h.forward_dynamics(q, qd, u)
            q = q + args.dt * qd
            return (q, qd), jnp.mean(jnp.sum((q - target) ** 2, axis=1))

        (q, qd), errors = jax.lax.scan(step, (q0, qd0), None, length=args.steps)
        return jnp.mean(errors), (q, qd)

    value_and_grad = jax.jit(jax.value_and_grad(rollout_cost, has_aux=True))
    inputs = [jnp.asarray(x, dtype) for x in (log_gains, q0, qd0, target)]
    (cost, (q_final, qd_final)), grad = value_and_grad(*inputs)
    first = {"cost": float(cost), "grad": np.asarray(grad).tolist(),
             "q_final": np.asarray(q_final).tolist(), "qd_final": np.asarray(qd_final).tolist()}
    print(f"iiwa14: {args.batch} rollouts x {args.steps} steps (dt {args.dt}), {h.device}, "
          f"{args.dtype}")
    print(f"  cost {float(cost):.5f}; d cost / d log kp = {np.asarray(grad[0]).round(4)}")

    costs = [float(cost)]
    params = inputs[0]
    for _ in range(args.iters):
        (cost, _), grad = value_and_grad(params, *inputs[1:])
        params = params - args.lr * grad / (jnp.linalg.norm(grad) + 1e-12)
        costs.append(float(rollout_cost(params, *inputs[1:])[0]))
    print("  tuning the gains: cost " + " -> ".join(f"{c:.5f}" for c in costs))
    results = {"batch": args.batch, "steps": args.steps, "dt": args.dt, "dtype": args.dtype,
               "seed": args.seed, "q0": q0.tolist(), "qd0": qd0.tolist(),
               "target": target.tolist(), "log_gains": log_gains.tolist(), "first": first,
               "costs": costs, "device": h.device}
    if args.json:
        args.json.write_text(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
