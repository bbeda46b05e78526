"""The examples a user copies (examples/), run as a user runs them (a subprocess on the CPU,
small sizes), their results checked against the float64 reference oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grid_rbd.reference as reference
from grid_rbd.data import bundled_urdf

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--device", "cpu", "--cache-dir",
         str(tmp_path / "store"), "--json", str(out), *args],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text())


def test_sysid_identifies_iiwa14_from_noisy_torques(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed")
    noise = 0.05
    res = run_example("sysid_iiwa14_torch.py", tmp_path, "--samples", "150", "--noise",
                      str(noise))
    # The kernel-built regressor is the reference's, and reproduces the URDF's torques.
    ref = reference.load(bundled_urdf("iiwa14"))
    sample = res["regressor_sample"]
    q, qd, qdd = (np.array(sample[k]) for k in ("q", "qd", "qdd"))
    Y = np.array(sample["Y"])
    np.testing.assert_allclose(Y, ref.inverse_dynamics_regressor(q, qd, qdd),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(Y @ np.array(res["truth"]), ref.inverse_dynamics(q, qd, qdd),
                               rtol=1e-9, atol=1e-9)
    # Held-out torques: well below the sensor noise, and far better than the prior.
    assert res["rms_identified"] < 0.5 * noise
    assert res["rms_prior"] > 10 * res["rms_identified"]


def _reference_rollout(ref, log_gains, q0, qd0, target, steps, dt):
    kp, kd = np.exp(log_gains[0]), np.exp(log_gains[1])
    q, qd, errors = q0.copy(), qd0.copy(), []
    for _ in range(steps):
        u = kp * (target - q) - kd * qd
        qd = qd + dt * ref.forward_dynamics(q, qd, u)
        q = q + dt * qd
        errors.append(np.mean(np.sum((q - target) ** 2, axis=1)))
    return float(np.mean(errors)), q, qd


def test_jax_rollout_and_its_gain_gradient_match_the_reference(tmp_path):
    pytest.importorskip("jax", reason="jax is not installed")
    steps, dt = 25, 0.01
    res = run_example("rollout_jax.py", tmp_path, "--dtype", "float64", "--batch", "5",
                      "--steps", str(steps), "--dt", str(dt), "--iters", "2")
    ref = reference.load(bundled_urdf("iiwa14"))
    log_gains, q0, qd0, target = (np.array(res[k]) for k in ("log_gains", "q0", "qd0",
                                                              "target"))
    cost, q, qd = _reference_rollout(ref, log_gains, q0, qd0, target, steps, dt)
    first = res["first"]
    np.testing.assert_allclose(first["q_final"], q, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(first["qd_final"], qd, rtol=1e-9, atol=1e-9)
    assert first["cost"] == pytest.approx(cost, rel=1e-10)
    # The analytic gradient through the whole rollout against central differences, on a
    # shoulder, an elbow and a wrist gain of each kind.
    grad = np.array(first["grad"])
    h = 1e-6
    for index in ((0, 0), (0, 3), (0, 6), (1, 1), (1, 5)):
        plus, minus = log_gains.copy(), log_gains.copy()
        plus[index] += h
        minus[index] -= h
        numeric = (_reference_rollout(ref, plus, q0, qd0, target, steps, dt)[0]
                   - _reference_rollout(ref, minus, q0, qd0, target, steps, dt)[0]) / (2 * h)
        assert grad[index] == pytest.approx(numeric, rel=1e-5, abs=1e-9), index
    # Gradient steps on the gains lower the cost.
    assert res["costs"][-1] < res["costs"][0]


def test_ilqr_reaches_its_targets_and_its_trajectories_are_the_references(tmp_path):
    """The iLQR example, small: the cost never rises and falls by 95 % or more, every end
    effector ends within 1 cm of its target, and the optimised controls, replayed through
    the float64 reference's plant step, give the example's final states."""
    pytest.importorskip("torch", reason="torch is not installed")
    res = run_example("ilqr_reach_iiwa14.py", tmp_path, "--batch", "4", "--horizon", "30",
                      "--iters", "20")
    costs = np.array(res["costs"])  # (iterations + 1, batch)
    assert np.all(np.diff(costs, axis=0) <= 1e-12), "a line search accepted a worse step"
    assert np.all(costs[-1] < 0.05 * costs[0])
    assert max(res["errors"]) < 0.01
    ref = reference.load(bundled_urdf("iiwa14"))
    x = np.array(res["x0"])
    for u in np.swapaxes(np.array(res["controls"]), 0, 1):
        x = ref.plant_step(x, u, res["dt"], "semi_implicit_euler")
    np.testing.assert_allclose(x, np.array(res["final_state"]), rtol=1e-9, atol=1e-9)
    target = np.array(res["target"])
    reached = ref.end_effector_pose(x[:, :ref.nq])[:, :3]
    np.testing.assert_allclose(np.linalg.norm(reached - target, axis=1), res["errors"],
                               atol=1e-9)
