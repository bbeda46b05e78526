"""Joint dynamics (damping and Coulomb friction): the float64 reference against an
independent check, the generated CPU build against the reference (every strategy, baked
and from the runtime table), gradients against finite differences, option handling.

The convention (grid_codegen.joint_dynamics): tau = ID_rigid + damping qd + friction
phi(qd), phi = sign or tanh(qd / width); FD solves M qdd = u - c - tau_passive."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from artifact_harness import Artifact, _build
from support import REPO, random_states, scaled_error

from grid_codegen.options import CodegenOptions
from grid_codegen.urdf import parse_urdf
from grid_rbd.reference import ReferenceRobot
from grid_rbd.reference.joint_dynamics import PassiveJoints

IIWA = REPO / "robots/iiwa14/iiwa14.urdf"
ALGORITHMS = ("inverse_dynamics", "forward_dynamics", "aba", "inverse_dynamics_gradient",
              "forward_dynamics_gradient")


def iiwa_urdf(damping: list[float], friction: list[float]) -> str:
    """iiwa14's URDF with joint k's `<dynamics>` set to damping[k], friction[k]."""
    text = IIWA.read_text()
    values = iter(zip(damping, friction, strict=True))

    def one(_: re.Match) -> str:
        d, f = next(values)
        return f'<dynamics damping="{float(d)!r}" friction="{float(f)!r}"/>'

    return re.sub(r"<dynamics[^>]*/>", one, text)


DAMPING = [0.5, 0.4, 0.3, 0.35, 0.2, 0.1, 0.05]
FRICTION = [1.0, 0.8, 0.6, 0.5, 0.3, 0.2, 0.1]


def model_of(damping=DAMPING, friction=FRICTION, floating_base=False):
    return parse_urdf(iiwa_urdf(damping, friction).encode(), floating_base=floating_base)


def reference(model, friction_model="sign", width=None, **kw):
    jd = PassiveJoints.from_model(model, friction_model, width, **kw)
    return ReferenceRobot(model, joint_dynamics=jd), ReferenceRobot(model)


def expected(ref, name, s):
    if name == "inverse_dynamics":
        return (s.q, s.qd, s.qdd, None), ref.inverse_dynamics(s.q, s.qd, s.qdd)
    if name in ("forward_dynamics", "aba"):
        return (s.q, s.qd, s.u, None), ref.forward_dynamics(s.q, s.qd, s.u)
    if name == "inverse_dynamics_gradient":
        return (s.q, s.qd, s.qdd, None), ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)
    return (s.q, s.qd, s.u, None), ref.forward_dynamics_gradient(s.q, s.qd, s.u)


# -- the reference ---------------------------------------------------------------------
@pytest.mark.parametrize("friction_model", ["sign", "tanh"])
def test_reference_adds_the_explicit_terms(friction_model):
    model = model_of()
    ref, rigid = reference(model, friction_model, 0.5)
    s = random_states(model, 6, seed=1)
    qd = s.qd
    phi = np.sign(qd) if friction_model == "sign" else np.tanh(qd / 0.5)
    passive = np.asarray(DAMPING) * qd + np.asarray(FRICTION) * phi
    tau = ref.inverse_dynamics(s.q, qd, s.qdd)
    assert np.allclose(tau, rigid.inverse_dynamics(s.q, qd, s.qdd) + passive, atol=1e-12)
    qdd = ref.forward_dynamics(s.q, qd, s.u)
    assert np.allclose(qdd, rigid.forward_dynamics(s.q, qd, s.u - passive), atol=1e-9)
    assert np.allclose(ref.aba(s.q, qd, s.u), qdd, atol=1e-8)
    # FD inverts ID: ID(q, qd, FD(q, qd, u)) = u.
    assert np.allclose(ref.inverse_dynamics(s.q, qd, qdd), s.u, atol=1e-8)


def test_reference_rigid_part_matches_pinocchio():
    pin = pytest.importorskip("pinocchio")
    model = model_of()
    ref, _ = reference(model)
    pm = pin.buildModelFromXML(iiwa_urdf(DAMPING, FRICTION))
    data = pm.createData()
    s = random_states(model, 3, seed=2)
    for b in range(3):
        rigid = pin.rnea(pm, data, s.q[b], s.qd[b], s.qdd[b])
        passive = pm.damping * s.qd[b] + pm.friction * np.sign(s.qd[b])
        assert np.allclose(pm.damping, DAMPING) and np.allclose(pm.friction, FRICTION)
        got = ref.inverse_dynamics(s.q[b:b + 1], s.qd[b:b + 1], s.qdd[b:b + 1])[0]
        assert scaled_error(got, rigid + passive) < 1e-10


def test_reference_tanh_gradients_match_finite_differences():
    model = model_of()
    ref, _ = reference(model, "tanh", 0.3)
    s = random_states(model, 2, seed=3, max_velocity=1.0)
    nv, h = model.nv, 1e-6
    for name, fn, x in (("id", lambda qd: ref.inverse_dynamics(s.q, qd, s.qdd),
                         ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)),
                        ("fd", lambda qd: ref.forward_dynamics(s.q, qd, s.u),
                         ref.forward_dynamics_gradient(s.q, s.qd, s.u))):
        num = np.stack([(fn(s.qd + h * e) - fn(s.qd - h * e)) / (2 * h)
                        for e in np.eye(nv)], axis=-1)
        assert scaled_error(x[:, :, nv:], num) < 1e-6, name


# -- option handling ---------------------------------------------------------------------
@pytest.mark.parametrize("bad, message", [
    ({"friction_model": "viscous"}, "unknown friction_model 'viscous'"),
    ({"friction_model": "tanh"}, "turn it on with use_joint_dynamics=True"),
    ({"friction_width": 0.1}, "turn it on with use_joint_dynamics=True"),
    ({"use_joint_dynamics": True, "friction_width": 0.1}, "friction_model='sign' has none"),
    ({"use_joint_dynamics": True, "friction_model": "tanh", "friction_width": -1.0},
     "finite and positive"),
    ({"use_joint_dynamics": True, "friction_model": "tanh", "friction_width": float("nan")},
     "finite and positive"),
    ({"use_joint_dynamics": True, "friction_model": "tanh", "friction_width": "wide"},
     "positive number"),
])
def test_bad_combinations_are_refused(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        CodegenOptions(**bad)


def test_default_options_keep_their_canonical_json():
    base = CodegenOptions().canonical_json()
    assert "joint_dynamics" not in base and "friction" not in base
    assert CodegenOptions(friction_model="sign").canonical_json() == base
    jd = CodegenOptions(use_joint_dynamics=True, friction_model="tanh", friction_width=0.2)
    assert '"friction_model":"tanh"' in jd.canonical_json()
    assert '"use_joint_dynamics":true' in jd.canonical_json()


def test_per_dof_width_must_match_the_robot():
    model = model_of()
    opts = CodegenOptions(use_joint_dynamics=True, friction_model="tanh",
                          friction_width=[0.1, 0.2])
    from grid_codegen.generate import generate
    with pytest.raises(ValueError, match="7 joint-dynamics dofs"):
        generate(model, opts)


# -- the generated CPU build ---------------------------------------------------------------
def _artifact(model, **options):
    so, _ = _build(model, CodegenOptions(algorithms=ALGORITHMS, dtype="float64", **options),
                   "cpu")
    return Artifact(so)


def _check(art, state, ref, s, tol=1e-8):
    for name in ALGORITHMS:
        inputs, want = expected(ref, name, s)
        for variant in art.algorithms[name].variants:
            got = state.call(name, *inputs, variant=variant)
            assert scaled_error(np.asarray(got).reshape(want.shape), want) < tol, \
                (name, variant)


@pytest.mark.parametrize("friction_model, width", [("sign", None), ("tanh", 0.7)])
def test_cpu_build_with_baked_joint_dynamics(friction_model, width):
    model = model_of()
    art = _artifact(model, use_joint_dynamics=True, friction_model=friction_model,
                    friction_width=width)
    ref, _ = reference(model, friction_model, width)
    _check(art, art.state(), ref, random_states(model, 9, seed=4))


def _set_joint_table(art, state, table):
    table = np.ascontiguousarray(table, dtype=np.float64)
    return art.desc.set_joint_dynamics_table(state.handle, table.ctypes.data_as(ctypes.c_void_p))


def test_cpu_runtime_table_matches_a_reference_rebuilt_from_the_edited_urdf():
    model = model_of()
    art = _artifact(model, runtime_joint_dynamics=True, friction_model="tanh",
                    friction_width=0.4)
    assert art.desc.runtime_joint_dynamics == 1
    assert art.desc.joint_dynamics_table_size == 14
    state = art.state()
    s = random_states(model, 9, seed=5)
    ref, _ = reference(model, "tanh", 0.4)
    _check(art, state, ref, s)  # the URDF's values first
    damping = [0.05, 1.5, 0.0, 2.0, 0.7, 0.3, 0.9]
    friction = [0.3, 0.0, 2.5, 0.1, 0.4, 1.2, 0.6]
    assert _set_joint_table(art, state, damping + friction) == 0
    edited = model_of(damping, friction)
    ref2, _ = reference(edited, "tanh", 0.4)
    _check(art, state, ref2, s)
    baked = _artifact(model, use_joint_dynamics=True)
    assert _set_joint_table(baked, baked.state(), damping + friction) == 8  # UNSUPPORTED


def test_floating_base_has_no_joint_dynamics_on_the_free_flyer():
    model = model_of(floating_base=True)
    assert model.nv == 13
    art = _artifact(model, runtime_joint_dynamics=True)
    assert art.desc.joint_dynamics_table_size == 14
    ref, _ = reference(model)
    s = random_states(model, 5, seed=6)
    _check(art, art.state(), ref, s)
    tau = ref.inverse_dynamics(s.q, s.qd, s.qdd) - ReferenceRobot(model).inverse_dynamics(
        s.q, s.qd, s.qdd)
    assert np.all(tau[:, :6] == 0.0) and np.any(tau[:, 6:] != 0.0)
