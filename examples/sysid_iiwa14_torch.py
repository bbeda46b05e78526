"""System identification of iiwa14's inertial parameters with torch and grid-rbd.

Inverse dynamics is linear in the inertial parameters: tau = Y(q, qd, qdd) @ pi, with pi
the (nb, 10) table of Pinocchio's dynamic parameters per body [m, m c (3), Ixx, Ixy,
Iyy, Ixz, Iyz, Izz] (flattened). This example

  1. registers iiwa14 with `runtime_inertia=True` (the inertias are a per-context table
     the kernels read at run time) on the torch backend, in float64;
  2. makes "measured" torques: the URDF's parameters (the truth here) on random states,
     plus Gaussian sensor noise;
  3. builds the regressor Y with the compiled kernel itself: column k is the inverse
     dynamics with the table e_k (all parameters zero but the k-th), gravity included;
  4. identifies pi from a CAD-like prior (the truth with every parameter off by up to
     30 %) by regularised least squares in torch: min |Y pi - tau|^2 + lam |pi - prior|^2
     (the regulariser fixes the parameter combinations no motion can excite);
  5. loads the identified table into the context and predicts torques on held-out states.

    python examples/sysid_iiwa14_torch.py [--samples 400] [--noise 0.05] [--device auto]
                                          [--cache-dir DIR] [--json results.json]

Prints the held-out torque error of the prior and of the identified model (near the
noise level) and the masses per link. Needs torch (`pip install torch`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

import grid_rbd
from grid_rbd.data import bundled_urdf


def random_states(h, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
    """Exciting states: joint angles over the whole circle, brisk velocities and
    accelerations (identification needs motion in every direction)."""
    q = rng.uniform(-np.pi, np.pi, (n, h.nq))
    qd = rng.uniform(-2.0, 2.0, (n, h.nv))
    qdd = rng.uniform(-6.0, 6.0, (n, h.nv))
    return tuple(torch.from_numpy(x) for x in (q, qd, qdd))


def regressor(h, q, qd, qdd) -> torch.Tensor:
    """(n, nv, 10 nb): the inverse-dynamics regressor, column by column from the kernel."""
    n, k = q.shape[0], 10 * h.nb
    Y = torch.empty((n, h.nv, k), dtype=torch.float64)
    for j in range(k):
        unit = np.zeros(k)
        unit[j] = 1.0
        h.set_inertia_params(unit.reshape(h.nb, 10))
        Y[:, :, j] = h.inverse_dynamics(q, qd, qdd)
    return Y


def identify(Y: torch.Tensor, tau: torch.Tensor, prior: torch.Tensor, lam: float
             ) -> torch.Tensor:
    """argmin |Y pi - tau|^2 + lam |pi - prior|^2, as one stacked least-squares solve."""
    A = Y.reshape(-1, Y.shape[-1])
    b = tau.reshape(-1)
    eye = torch.eye(A.shape[1], dtype=A.dtype)
    A_aug = torch.cat([A, lam ** 0.5 * eye])
    b_aug = torch.cat([b, lam ** 0.5 * prior])
    return torch.linalg.lstsq(A_aug, b_aug[:, None]).solution[:, 0]


def rms(x: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(x ** 2)))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400, help="training states")
    parser.add_argument("--noise", type=float, default=0.05, help="torque noise (N m, std)")
    parser.add_argument("--prior-error", type=float, default=0.3)
    parser.add_argument("--lam", type=float, default=1e-3, help="regulariser weight")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)

    h = grid_rbd.register_robot("iiwa14_sysid", urdf_path=bundled_urdf("iiwa14"),
                                dtype="float64", runtime_inertia=True, backend="torch",
                                device=args.device, cache_dir=args.cache_dir,
                                algorithm_list=["inverse_dynamics"])
    truth = torch.from_numpy(np.array(h.get_inertia_params(), dtype=np.float64)).reshape(-1)

    q, qd, qdd = random_states(h, args.samples, rng)
    tau = h.inverse_dynamics(q, qd, qdd) + args.noise * torch.from_numpy(
        rng.standard_normal((args.samples, h.nv)))
    Y = regressor(h, q, qd, qdd)
    prior = truth * torch.from_numpy(1.0 + rng.uniform(-args.prior_error, args.prior_error,
                                                       truth.shape))
    estimate = identify(Y, tau, prior, args.lam)

    # Held-out states: the identified table goes back into the context.
    tq, tqd, tqdd = random_states(h, args.samples, rng)
    h.set_inertia_params(truth.reshape(h.nb, 10).numpy())
    tau_true = h.inverse_dynamics(tq, tqd, tqdd)
    h.set_inertia_params(prior.reshape(h.nb, 10).numpy())
    err_prior = rms(h.inverse_dynamics(tq, tqd, tqdd) - tau_true)
    h.set_inertia_params(estimate.reshape(h.nb, 10).numpy())
    err_fit = rms(h.inverse_dynamics(tq, tqd, tqdd) - tau_true)

    masses = [(name, float(truth[10 * i]), float(prior[10 * i]), float(estimate[10 * i]))
              for i, name in enumerate(h.body_names)]
    print(f"iiwa14: {args.samples} states, torque noise {args.noise} N m, prior off by up "
          f"to {args.prior_error:.0%}")
    print(f"held-out torque error (rms): prior {err_prior:.4f} N m, identified "
          f"{err_fit:.4f} N m")
    print(f"{'link':<14}{'true kg':>10}{'prior kg':>10}{'fit kg':>10}")
    for name, m_true, m_prior, m_fit in masses:
        print(f"{name:<14}{m_true:>10.3f}{m_prior:>10.3f}{m_fit:>10.3f}")
    print("(a fixed-base arm's torques fix only combinations of the parameters, its base "
          "parameters: the masses move little from the prior, the torques are right)")
    results = {"samples": args.samples, "noise": args.noise, "rms_prior": err_prior,
               "rms_identified": err_fit, "truth": truth.tolist(), "prior": prior.tolist(),
               "identified": estimate.tolist(), "device": h.device,
               "regressor_sample": {"q": q[:2].tolist(), "qd": qd[:2].tolist(),
                                    "qdd": qdd[:2].tolist(), "Y": Y[:2].tolist()}}
    if args.json:
        args.json.write_text(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
