"""The JAX/torch q pullback through ball, planar and floating joints (issue 15): the
kernels' gradients live in the local tangent chart, and `_framework.ambient_pullback`
maps them to the configuration's own coordinates block by block (meta.json's
"q_chart"). Checked against central differences, coordinate by coordinate, of the
float64 reference (which evaluates the rotation of quat/|quat| and of (c, s)/|(c, s)|,
as the kernels do) at configurations off the unit sphere, and by torch's gradcheck /
jax's check_grads on the handles' own values. With `f_ext` the dynamics' backward is the
gradient kernel and this pullback (so is the end-effector pose's, always); without it,
the artifact's reverse-mode kernels (`*_vjp`, whose q cotangent is already in q's
layout), checked the same way. Float64 CPU builds, one per robot."""

from __future__ import annotations

import numpy as np
import pytest
from joint_type_robots import BALL_CHAIN, _joint, _link, _robot

import grid_rbd
import grid_rbd.reference as reference
from grid_codegen import parse_urdf
from grid_codegen.model import JointType
from grid_rbd._build import _q_chart
from grid_rbd._framework import tangent_chart
from grid_rbd._register import with_backend

torch = pytest.importorskip("torch", reason="torch is not installed")
jax = pytest.importorskip("jax", reason="jax is not installed")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

# A free-flyer root (floating_base=True), a hinge, a ball joint, a hinge after it.
FREE_BALL = _robot("free_ball", _link("base", 2.0), _link("a"), _link("b"), _link("c"),
                   _joint("j1", "base", "a"), _joint("ball", "a", "b", "spherical"),
                   _joint("j3", "b", "c", axis="1 0 0"))
# A fixed base, a hinge, a URDF `floating` joint below it (a free flyer off the root),
# a ball joint after it: q = [j1, p, quat, quat], the free-flyer block at q[1:8].
INNER_FREE = _robot("inner_free", _link("world", 0.0), _link("a"), _link("b"), _link("c"),
                    _joint("j1", "world", "a"), _joint("free", "a", "b", "floating"),
                    _joint("ball", "b", "c", "ball"))
# One ball joint and a hinge on a fixed base: nq == nv + 1, as a free flyer's root.
ONE_BALL = _robot("one_ball", _link("a"), _link("b"), _link("c"),
                  _joint("ball", "a", "b", "spherical"), _joint("hinge", "b", "c"))
ROBOTS = {"ball_chain": (BALL_CHAIN, False), "free_ball": (FREE_BALL, True),
          "inner_free": (INNER_FREE, False), "one_ball": (ONE_BALL, False)}


@pytest.fixture(scope="module")
def robots(tmp_path_factory):
    store = tmp_path_factory.mktemp("store")
    out = {}
    for name, (urdf, floating) in ROBOTS.items():
        h = grid_rbd.register_robot(f"pullback_{name}", urdf_string=urdf.decode(),
                                    floating_base=floating, dtype="float64", device="cpu",
                                    algorithm_list=["core"], cache_dir=store)
        out[name] = (h, reference.ReferenceRobot(parse_urdf(urdf, floating_base=floating)))
    yield out
    for h, _ in out.values():
        h.close()


def _blocks(model):
    """(type, idx_q, idx_v) of the model's non-vector joints, from the parsed model."""
    return [(j.type.value, j.idx_q, j.idx_v) for j in model.joints if not j.type.scalar]


def _state(model, seed: int):
    """q off the unit sphere (quaternions scaled by 1.3, (c, s) pairs by 0.7), qd, qdd, u."""
    rng = np.random.default_rng(seed)
    batch = 3
    q = rng.uniform(-1.0, 1.0, (batch, model.nq))
    for j in model.joints:
        if j.type in (JointType.SPHERICAL, JointType.FREE_FLYER):
            at = j.idx_q + (3 if j.type is JointType.FREE_FLYER else 0)
            quat = rng.normal(size=(batch, 4))
            q[:, at:at + 4] = 1.3 * quat / np.linalg.norm(quat, axis=1, keepdims=True)
        elif j.type is JointType.PLANAR:
            t = rng.uniform(-np.pi, np.pi, batch)
            q[:, j.idx_q + 2], q[:, j.idx_q + 3] = 0.7 * np.cos(t), 0.7 * np.sin(t)
    nv = model.nv
    return q, rng.uniform(-2, 2, (batch, nv)), rng.uniform(-3, 3, (batch, nv)), \
        rng.uniform(-3, 3, (batch, nv))


def _ambient_differences(f, q, weights, h=1e-6):
    """d(sum(weights * f(q)))/dq (B, nq) by central differences along every coordinate of
    q itself (the reference normalises quaternions and (c, s) pairs inside f)."""
    out = np.zeros_like(q)
    for k in range(q.shape[1]):
        e = np.zeros_like(q)
        e[:, k] = h
        out[:, k] = ((f(q + e) - f(q - e)) * weights).reshape(len(q), -1).sum(1) / (2 * h)
    return out


def _close(actual, expected, tol, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    err = np.abs(actual - expected).max() / max(1e-12, np.abs(expected).max())
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e}"


def _cases(ref, q, qd, qdd, u, fe):
    """(method, its inputs, the reference as a function of q) for each differentiable
    method of the core profile (`fe`: f_ext or None)."""
    return [("inverse_dynamics", (q, qd, qdd, fe),
             lambda x: ref.inverse_dynamics(x, qd, qdd, fe)),
            ("forward_dynamics", (q, qd, u, fe), lambda x: ref.forward_dynamics(x, qd, u, fe)),
            ("aba", (q, qd, u, fe), lambda x: ref.aba(x, qd, u, fe)),
            ("end_effector_pose", (q,), ref.end_effector_pose)]


def _f_ext(ref, batch, given):
    return np.random.default_rng(7).uniform(-2, 2, (batch, 6 * ref.nb)) if given else None


def test_meta_records_the_joint_layout(robots):
    for name, (h, ref) in robots.items():
        expected = _blocks(ref.model)
        assert [(b["type"], b["idx_q"], b["idx_v"]) for b in h._meta["q_chart"]] == expected
        assert with_backend(h, "torch").tangent_chart == tuple(expected), name
    assert _blocks(robots["free_ball"][1].model) == [("free_flyer", 0, 0),
                                                     ("spherical", 8, 7)]
    assert _blocks(robots["inner_free"][1].model) == [("free_flyer", 1, 1),
                                                      ("spherical", 8, 7)]
    assert robots["one_ball"][1].nq == robots["one_ball"][1].nv + 1
    assert not with_backend(robots["one_ball"][0], "torch").floating_base


def test_mimic_layout_is_in_reduced_coordinates():
    urdf = _robot("mimic_ball", _link("a"), _link("b"), _link("c"), _link("d"),
                  _joint("j1", "a", "b"),
                  _joint("m", "b", "c", extra='<mimic joint="j1" multiplier="2"/>'),
                  _joint("ball", "c", "d", "spherical"))
    assert _q_chart(parse_urdf(urdf)) == [{"type": "spherical", "idx_q": 2, "idx_v": 2}]
    assert _q_chart(parse_urdf(urdf, mimic=True)) == [
        {"type": "spherical", "idx_q": 1, "idx_v": 1}]


@pytest.mark.parametrize("with_f_ext", [True, False], ids=["pullback", "vjp_kernel"])
@pytest.mark.parametrize("name", list(ROBOTS))
def test_torch_q_gradient_matches_reference_differences(robots, name, with_f_ext):
    h, ref = robots[name]
    th = with_backend(h, "torch")
    q, qd, qdd, u = _state(ref.model, seed=len(name))
    for method, inputs, f in _cases(ref, q, qd, qdd, u, _f_ext(ref, len(q), with_f_ext)):
        w = np.random.default_rng(3).normal(size=f(q).shape)
        tq = torch.tensor(q, requires_grad=True)
        rest = [None if x is None else torch.tensor(x) for x in inputs[1:]]
        (getattr(th, method)(tq, *rest) * torch.from_numpy(w)).sum().backward()
        _close(tq.grad.numpy(), _ambient_differences(f, q, w), 1e-6, f"{name} {method}")


@pytest.mark.parametrize("with_f_ext", [True, False], ids=["pullback", "vjp_kernel"])
@pytest.mark.parametrize("name", list(ROBOTS))
def test_jax_q_gradient_matches_reference_differences(robots, name, with_f_ext):
    h, ref = robots[name]
    jh = with_backend(h, "jax")
    q, qd, qdd, u = _state(ref.model, seed=10 + len(name))
    for method, inputs, f in _cases(ref, q, qd, qdd, u, _f_ext(ref, len(q), with_f_ext)):
        w = np.random.default_rng(4).normal(size=f(q).shape)
        rest = [None if x is None else jnp.asarray(x) for x in inputs[1:]]

        def loss(x, method=method, rest=rest, w=w):
            return (getattr(jh, method)(x, *rest) * w).sum()

        grad = jax.grad(loss)(jnp.asarray(q))
        _close(np.asarray(grad), _ambient_differences(f, q, w), 1e-6, f"{name} {method}")


@pytest.mark.parametrize("name", ["ball_chain", "free_ball", "inner_free"])
def test_torch_gradcheck(robots, name):
    """torch's own check: the analytic backward (q, qd, u) against differences of the
    handle's values, in float64 (atol 1e-4: accelerations reach 4e2, whose differences
    carry about 4e-6 of round-off)."""
    h, ref = robots[name]
    th = with_backend(h, "torch")
    q, qd, qdd, u = (torch.tensor(x[:2], requires_grad=True) for x in _state(ref.model, 21))
    fe = torch.tensor(_f_ext(ref, 2, True))
    assert torch.autograd.gradcheck(lambda a, b, c: th.forward_dynamics(a, b, c, fe),
                                    (q, qd, u), eps=1e-6, atol=1e-4, rtol=1e-5)
    assert torch.autograd.gradcheck(lambda a, b: th.inverse_dynamics(a, b, qdd.detach(), fe),
                                    (q, qd), eps=1e-6, atol=1e-4, rtol=1e-5)
    assert torch.autograd.gradcheck(th.end_effector_pose, (q,), eps=1e-6, atol=1e-4,
                                    rtol=1e-5)


@pytest.mark.parametrize("name", ["ball_chain", "free_ball", "inner_free"])
def test_jax_check_grads(robots, name):
    from jax.test_util import check_grads

    h, ref = robots[name]
    jh = with_backend(h, "jax")
    q, qd, qdd, u = (jnp.asarray(x[:2]) for x in _state(ref.model, 22))
    fe = jnp.asarray(_f_ext(ref, 2, True))
    check_grads(lambda a, b, c: jh.forward_dynamics(a, b, c, fe), (q, qd, u), order=1,
                modes=["rev"], eps=1e-6, atol=1e-4, rtol=1e-5)
    check_grads(lambda a: jh.inverse_dynamics(a, qd, qdd, fe), (q,), order=1,
                modes=["rev"], eps=1e-6, atol=1e-4, rtol=1e-5)
    check_grads(jh.end_effector_pose, (q,), order=1, modes=["rev"], eps=1e-6, atol=1e-4,
                rtol=1e-5)


def test_quaternion_and_pair_cotangents_have_no_radial_part(robots):
    """f is invariant to the scale of each quaternion and (c, s) pair, so its cotangent
    is orthogonal to them."""
    h, ref = robots["ball_chain"]
    th = with_backend(h, "torch")
    q, qd, qdd, _ = _state(ref.model, 30)
    tq = torch.tensor(q, requires_grad=True)
    fe = torch.tensor(_f_ext(ref, len(q), True))  # the gradient kernel and the pullback
    th.inverse_dynamics(tq, torch.tensor(qd), torch.tensor(qdd), fe).pow(2).sum().backward()
    g = tq.grad.numpy()
    planar, ball = g[:, 2:4], g[:, 5:9]
    assert np.abs(planar).max() > 1e-3 and np.abs(ball).max() > 1e-3
    np.testing.assert_allclose((planar * q[:, 2:4]).sum(1), 0.0, atol=1e-10)
    np.testing.assert_allclose((ball * q[:, 5:9]).sum(1), 0.0, atol=1e-10)


def test_refusal_only_without_a_recorded_layout(robots):
    """The refusal of a q cotangent through the pullback now fires only for an entry
    whose meta.json predates the layout (and whose q is not a free-flyer root's):
    simulated by dropping it. (The pose's backward always takes the pullback.)"""
    h, ref = robots["one_ball"]
    th = with_backend(h, "torch")
    q, *_ = _state(ref.model, 40)
    tq = torch.tensor(q, requires_grad=True)
    th.end_effector_pose(tq).sum().backward()
    assert np.abs(tq.grad.numpy()).max() > 1e-3  # no refusal: a real cotangent
    recorded = h._meta.pop("q_chart")
    try:
        assert th.tangent_chart is None
        with pytest.raises(NotImplementedError, match="force_rebuild=True"):
            th.end_effector_pose(torch.tensor(q, requires_grad=True))
        jh = with_backend(h, "jax")
        with pytest.raises(NotImplementedError, match="force_rebuild=True"):
            jax.grad(lambda x: jh.end_effector_pose(x).sum())(jnp.asarray(q))
    finally:
        h._meta["q_chart"] = recorded


@pytest.mark.parametrize("recorded, expected", [
    (None, None),  # an old entry: its ball joint is not taken for a free flyer
    ([{"type": "spherical", "idx_q": 0, "idx_v": 0}], (("spherical", 0, 0),)),
    ([{"type": "planar", "idx_q": 0, "idx_v": 0}], (("planar", 0, 0),)),
    ([{"type": "spherical", "idx_q": 1, "idx_v": 0}], None),  # scalar runs disagree
    ([{"type": "screw", "idx_q": 0, "idx_v": 0}], None),  # an unknown type
    ([{"type": "spherical", "idx_q": 0}], None),  # a field missing
    ([], None),  # widths that do not add up
])
def test_recorded_layout_is_validated(recorded, expected):
    meta = {"floating_base": False, **({} if recorded is None else {"q_chart": recorded})}
    assert tangent_chart(5, 4, meta) == expected
    assert tangent_chart(5, 5, meta) == "vector"
    assert tangent_chart(8, 7, {"floating_base": True}) == "free_flyer"  # an old entry
