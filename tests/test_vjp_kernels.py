"""The reverse-mode kernels (`forward_dynamics_vjp`, `inverse_dynamics_vjp`) and the
JAX/torch backwards that use them (issue 20: one launch per backward).

Oracles: central differences of the graph evaluated in float64 (the reverse-mode rules),
central differences of the generated kernels' own forward functions (so a quaternion's or
a (cos, sin) pair's four raw numbers are differentiated as the kernel reads them), the
float64 reference's Jacobians and M^-1 for vector configurations, and on the JAX/torch
handles the Jacobian-kernel backward of the same artifact (taken with an explicit f_ext).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from artifact_harness import Artifact, _build
from joint_type_robots import BALL_CHAIN, GRIPPER
from joint_type_robots import states as _states
from support import ROBOTS

import grid_rbd.reference as reference
from grid_codegen import parse_urdf
from grid_codegen.options import CodegenOptions
from grid_codegen.symbolic import graph as G
from grid_codegen.symbolic.reverse import vjp

ALGORITHMS = ("forward_dynamics", "inverse_dynamics", "forward_dynamics_vjp",
              "inverse_dynamics_vjp")


# -- the rules, on a graph evaluated in float64 -----------------------------------------
_UNARY = {"neg": lambda a: -a, "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos,
          "tanh": math.tanh, "sign": lambda a: float((a > 0) - (a < 0))}
_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "div": lambda a, b: a / b, "atan2": math.atan2}


def _evaluate(g: G.Graph, inputs: dict[str, float], roots: list) -> list[float]:
    values: list[float] = []
    for op, a, b in g.nodes:
        if op == "in":
            values.append(inputs[a])
            continue
        x = values[a] if isinstance(a, int) else (a[0] if a is not None else None)
        y = values[b] if isinstance(b, int) else (b[0] if b is not None else None)
        values.append(_UNARY[op](x) if op in _UNARY else _BINARY[op](x, y))
    return [values[r.i] if type(r) is G.Sym else float(r) for r in roots]


def test_reverse_rules_match_central_differences():
    g = G.Graph()
    x, y, z = g.input("x"), g.input("y"), g.input("z")
    outputs = [G.sin(x) * G.cos(y) + x / (y * y + 1.5), G.sqrt(z * z + 2.0) - G.tanh(x * z),
               G.atan2(y, z) * 3.0 - (-x) * G.sign(y) + 2.0, x * 0.0 + 4.0]
    seeds = [g.input("s0"), g.input("s1"), g.input("s2"), g.input("s3")]
    grads = vjp(outputs, seeds, [x, y, z])
    point = {"x": 0.7, "y": -1.3, "z": 0.4, "s0": 1.1, "s1": -0.6, "s2": 0.9, "s3": 5.0}
    value = _evaluate(g, point, grads)
    for k, name in enumerate("xyz"):
        up, down = dict(point), dict(point)
        up[name] += 1e-6
        down[name] -= 1e-6
        f = [sum(s * o for s, o in zip((point[f"s{j}"] for j in range(4)),
                                       _evaluate(g, p, outputs), strict=True))
             for p in (up, down)]
        assert value[k] == pytest.approx((f[0] - f[1]) / 2e-6, rel=1e-7, abs=1e-9), name
    assert vjp([3.0], [1.0], [x]) == [0.0]  # a constant output depends on nothing


# -- the generated CPU build ---------------------------------------------------------------
def _central(call, x: np.ndarray, k: int, eps: float = 1e-6) -> np.ndarray:
    up, down = x.copy(), x.copy()
    up[:, k] += eps
    down[:, k] -= eps
    return (call(up) - call(down)) / (2 * eps)


def _check_against_differences(state, q, qd, third, ct, tol: float = 1e-6) -> None:
    """Every cotangent of both reverse-mode kernels against central differences of the
    kernels' own forward functions, raw q entries included."""
    fd = state.call("forward_dynamics_vjp", q, qd, third, ct)
    nq, nv = q.shape[1], qd.shape[1]
    blocks = {"q": (q, lambda x: state.call("forward_dynamics", x, qd, third)),
              "qd": (qd, lambda x: state.call("forward_dynamics", q, x, third)),
              "u": (third, lambda x: state.call("forward_dynamics", q, qd, x))}
    at = 0
    for name, (x, f) in blocks.items():
        for k in range(x.shape[1]):
            expected = (ct * _central(f, x, k)).sum(axis=1)
            np.testing.assert_allclose(fd[:, at + k], expected, rtol=tol, atol=tol,
                                       err_msg=f"forward_dynamics_vjp d{name}[{k}]")
        at += x.shape[1]
    assert at == nq + 2 * nv
    iv = state.call("inverse_dynamics_vjp", q, qd, ct, third)
    blocks = {"q": (q, lambda x: state.call("inverse_dynamics", x, qd, third)),
              "qd": (qd, lambda x: state.call("inverse_dynamics", q, x, third))}
    at = 0
    for name, (x, f) in blocks.items():
        for k in range(x.shape[1]):
            expected = (ct * _central(f, x, k)).sum(axis=1)
            np.testing.assert_allclose(iv[:, at + k], expected, rtol=tol, atol=tol,
                                       err_msg=f"inverse_dynamics_vjp d{name}[{k}]")
        at += x.shape[1]


def _artifact(model) -> Artifact:
    so, _ = _build(model, CodegenOptions(dtype="float64", algorithms=ALGORITHMS), "cpu")
    return Artifact(so)


@pytest.mark.parametrize("floating", [False, True])
def test_iiwa14_vjps_match_differences_and_the_reference(floating):
    model = parse_urdf(ROBOTS["iiwa14"].path, floating_base=floating)
    artifact = _artifact(model)
    rng = np.random.default_rng(3)
    q = rng.uniform(-1.5, 1.5, (4, model.nq))
    if floating:  # quaternions off the unit sphere: the kernels rotate by q / |q|
        quat = rng.normal(size=(4, 4))
        q[:, 3:7] = 1.4 * quat / np.linalg.norm(quat, axis=1, keepdims=True)
    qd, u, ct = (rng.uniform(-2, 2, (4, model.nv)) for _ in range(3))
    state = artifact.state()
    try:
        _check_against_differences(state, q, qd, u, ct)
        if not floating:  # vector q: the reference's tangent Jacobians are the q layout
            ref = reference.ReferenceRobot(model)
            nv = model.nv
            got = state.call("forward_dynamics_vjp", q, qd, u, ct)
            jac = ref.forward_dynamics_gradient(q, qd, u)
            np.testing.assert_allclose(got[:, :2 * nv], np.einsum("bi,bij->bj", ct, jac),
                                       rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(got[:, 2 * nv:], np.einsum("bij,bj->bi", ref.minv(q),
                                                                  ct), rtol=1e-9, atol=1e-9)
            got = state.call("inverse_dynamics_vjp", q, qd, ct, None)
            jac = ref.inverse_dynamics_gradient(q, qd, np.zeros_like(qd))
            np.testing.assert_allclose(got, np.einsum("bi,bij->bj", ct, jac), rtol=1e-9,
                                       atol=1e-9)
    finally:
        state.close()


@pytest.mark.parametrize("urdf, mimic", [(BALL_CHAIN, False), (GRIPPER, True)],
                         ids=["ball_planar_chain", "mimic_gripper"])
def test_joint_type_vjps_match_differences(urdf, mimic):
    model = parse_urdf(urdf, mimic=mimic)
    artifact = _artifact(model)
    q, qd, _, u = _states(model, 3, 5, model.reduced_nq, model.reduced_nv)
    ct = np.random.default_rng(6).uniform(-1, 1, qd.shape)
    state = artifact.state()
    try:
        _check_against_differences(state, q, qd, u, ct)
    finally:
        state.close()
