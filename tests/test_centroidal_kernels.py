"""The centroidal profile (issue 14, item 1 and 2) on the CPU build: centre of mass,
centroidal momentum and its derivatives, energy, the Coriolis matrix, gravity and bias
forces, and the three inertial-parameter regressors, against the float64 reference
(itself checked against Pinocchio in test_reference_centroidal.py), against finite
differences, and against each other's identities (`Y pi = tau`, `C qd + g = nle`,
`dM/dt = C + C^T`, `h = A qd`, `dA/dt = dA/dq . qd`).

float64 runs on every robot of the test set, float32 on a fixed-base arm and a
quadruped. The handles' surface for these methods (tuples, rank-3 outputs, single
states, out=, the not-built error, torch and JAX) is at the end.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
from artifact_harness import build_cached, load_model, prebuild, round_states, tolerance
from support import ROBOTS, assert_scaled_close, random_states, robot_available

import grid_rbd.reference as reference
from grid_codegen.registry import PROFILES, algorithm
from grid_rbd.reference import ReferenceRobot, configuration

CENTROIDAL = PROFILES["centroidal"]
CONFIGS = ([(r, "float64") for r in sorted(ROBOTS)] + [("iiwa14", "float32"),
                                                       ("go2", "float32")])
BATCH = 23
OPTIONS = {"algorithms": ("centroidal",)}


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    configs = [(r, "cpu", {"dtype": d, **OPTIONS}) for r, d in CONFIGS]
    configs.append(("go2", "cpu", {"dtype": "float64", "runtime_inertia": True, **OPTIONS}))
    prebuild(configs)


def expected(ref: ReferenceRobot, name: str, s, gravity: float = -9.81
             ) -> tuple[tuple, np.ndarray]:
    """`(inputs, result)`: the artifact's inputs and the reference's result, flattened per
    item as the kernel writes it (parts one after the other)."""
    if name in ("com", "dccrba"):
        inputs, result = (s.q,), getattr(ref, name)(s.q)
    elif name in ("generalized_gravity", "potential_energy_regressor"):
        inputs, result = (s.q,), getattr(ref, name)(s.q, gravity=gravity)
    elif name in ("nonlinear_effects", "energy"):
        inputs, result = (s.q, s.qd), getattr(ref, name)(s.q, s.qd, gravity=gravity)
    elif name == "inverse_dynamics_regressor":
        inputs, result = (s.q, s.qd, s.qdd), ref.inverse_dynamics_regressor(
            s.q, s.qd, s.qdd, gravity=gravity)
    else:
        inputs, result = (s.q, s.qd), getattr(ref, name)(s.q, s.qd)
    parts = result if isinstance(result, tuple) else (result,)
    batch = len(s.q)
    return inputs, np.concatenate([np.reshape(p, (batch, -1)) for p in parts], axis=1)


def _flat(x: np.ndarray) -> np.ndarray:
    return np.reshape(x, (x.shape[0], -1))


def _check(state, ref, name, s, gravity=-9.81, what=""):
    inputs, want = expected(ref, name, s, gravity)
    kwargs = {"gravity": gravity} if algorithm(name).uses_gravity else {}
    got = _flat(state.call(name, *inputs, **kwargs))
    tol = tolerance(state.artifact.dtype, name, ref, s.q)
    assert_scaled_close(got, want, tol, f"{name}{what} ({state.artifact.dtype})")
    return got


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def case(request):
    robot, dtype = request.param
    artifact, _ = build_cached(robot, dtype=dtype, **OPTIONS)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    s = round_states(random_states(ref.model, BATCH, seed=3 + len(robot)), artifact.dtype)
    yield artifact, ref, state, s
    state.close()


@pytest.mark.parametrize("name", CENTROIDAL)
def test_matches_reference(case, name):
    _, ref, state, s = case
    _check(state, ref, name, s)


def test_signed_gravity_zero_velocity_and_batch_one(case):
    _, ref, state, s = case
    for gravity in (0.0, 3.71):
        for name in CENTROIDAL:
            if algorithm(name).uses_gravity:
                _check(state, ref, name, s, gravity, f" gravity {gravity}")
    still = dataclasses.replace(s, qd=np.zeros_like(s.qd))
    one = dataclasses.replace(s, **{k: getattr(s, k)[:1] for k in ("q", "qd", "qdd")})
    for name in CENTROIDAL:
        _check(state, ref, name, still, what=" at zero velocity")
        _check(state, ref, name, one, what=" batch 1")


def _parameters(ref: ReferenceRobot) -> np.ndarray:
    return np.concatenate([b.inertia.dynamic_parameters() for b in ref.model.bodies])


def test_regressors_are_linear_in_the_parameters(case):
    """The kernels' regressors times the URDF's parameters give the reference's torque
    and energies (the regressors say nothing of the parameters themselves)."""
    _, ref, state, s = case
    pi = _parameters(ref)
    tol = tolerance(state.artifact.dtype, "inverse_dynamics", ref, s.q)
    Y = state.call("inverse_dynamics_regressor", s.q, s.qd, s.qdd).reshape(BATCH, ref.nv, -1)
    assert_scaled_close(Y @ pi, ref.inverse_dynamics(s.q, s.qd, s.qdd), tol, "Y pi = tau")
    energies = ref.energy(s.q, s.qd)
    kinetic = state.call("kinetic_energy_regressor", s.q, s.qd) @ pi
    potential = state.call("potential_energy_regressor", s.q) @ pi
    assert_scaled_close(kinetic[:, None], energies[:, :1], tol, "y_T pi = T")
    assert_scaled_close(potential[:, None] + energies[:, :1], energies[:, 2:], tol,
                        "y_V pi + T = E")


def test_coriolis_bias_and_momentum_identities(case):
    """`C qd + g = nle`, `h = A qd` and `dA/dt = sum_i dA/d eps_i qd_i` among the kernels'
    own outputs."""
    _, ref, state, s = case
    nv = ref.nv
    tol = 10 * tolerance(state.artifact.dtype, "inverse_dynamics", ref, s.q)
    C = state.call("coriolis_matrix", s.q, s.qd).reshape(BATCH, nv, nv)
    g = state.call("generalized_gravity", s.q)
    nle = state.call("nonlinear_effects", s.q, s.qd)
    assert_scaled_close(np.einsum("bij,bj->bi", C, s.qd) + g, nle, tol, "C qd + g = nle")
    Ah = state.call("ccrba", s.q, s.qd).reshape(BATCH, -1)
    A, h = Ah[:, :6 * nv].reshape(BATCH, 6, nv), Ah[:, 6 * nv:]
    assert_scaled_close(np.einsum("bij,bj->bi", A, s.qd), h, tol, "h = A qd")
    dA = state.call("dccrba", s.q).reshape(BATCH, 6, nv, nv)
    A_dot = state.call("cmm_time_variation", s.q, s.qd).reshape(BATCH, 6, nv)
    assert_scaled_close(np.einsum("brci,bi->brc", dA, s.qd), A_dot, tol,
                        "dA/dt = dA/dq qd")


def test_mass_matrix_rate_is_c_plus_c_transpose():
    """`dM/dt = C + C^T` against a central difference of the reference's mass matrix
    along the motion (float64, a fixed and a floating robot)."""
    for robot in ("panda", "go2"):
        artifact, _ = build_cached(robot, dtype="float64", **OPTIONS)
        ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
        s = random_states(ref.model, 4, seed=21, max_velocity=2.0)
        state = artifact.state()
        C = state.call("coriolis_matrix", s.q, s.qd).reshape(4, ref.nv, ref.nv)
        state.close()
        h = 1e-6  # q moved along qd on the manifold, both ways
        plus = configuration.integrate(ref.model, s.q, h * s.qd)
        minus = configuration.integrate(ref.model, s.q, -h * s.qd)
        M_dot = (ref.crba(plus) - ref.crba(minus)) / (2 * h)
        assert_scaled_close(C + np.swapaxes(C, 1, 2), M_dot, 1e-6, f"{robot}: dM/dt")


def test_com_jacobian_and_dccrba_against_finite_differences():
    """The kernels' derivatives against central differences of their own values along
    the tangent chart (go2: the free flyer's chart included)."""
    artifact, _ = build_cached("go2", dtype="float64", **OPTIONS)
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    s = random_states(ref.model, 3, seed=5)
    state = artifact.state()
    nv, h = ref.nv, 1e-6
    cJ = state.call("com", s.q).reshape(3, -1)
    dA = state.call("dccrba", s.q).reshape(3, 6, nv, nv)
    for i in range(nv):
        e = np.zeros((3, nv))
        e[:, i] = h
        plus, minus = (configuration.integrate(ref.model, s.q, d) for d in (e, -e))
        dc = (state.call("com", plus).reshape(3, -1)[:, :3]
              - state.call("com", minus).reshape(3, -1)[:, :3]) / (2 * h)
        np.testing.assert_allclose(cJ[:, 3:].reshape(3, 3, nv)[:, :, i], dc, atol=1e-7)
        A_p = state.call("ccrba", plus, s.qd).reshape(3, -1)[:, :6 * nv]
        A_m = state.call("ccrba", minus, s.qd).reshape(3, -1)[:, :6 * nv]
        np.testing.assert_allclose(dA[..., i].reshape(3, -1), (A_p - A_m) / (2 * h),
                                   atol=1e-6 * (1 + np.abs(dA).max()))
    state.close()


def test_runtime_inertia_table_is_followed():
    """With runtime_inertia the mass-dependent kernels follow the context's table (a
    reference built on the edited model is the oracle); the regressors do not depend on
    it."""
    from test_codegen_cpu import _modified_model
    artifact, _ = build_cached("go2", dtype="float64", runtime_inertia=True, **OPTIONS)
    model = load_model("go2")
    ref, modified = ReferenceRobot(model), ReferenceRobot(_modified_model(model))
    state = artifact.state()
    s = random_states(model, BATCH, seed=12)
    for name in CENTROIDAL:
        _check(state, ref, name, s, what=" (URDF table)")
    state.set_inertia_table(np.stack([b.inertia.dynamic_parameters()
                                      for b in modified.model.bodies]))
    for name in CENTROIDAL:
        _check(state, modified, name, s, what=" (edited table)")
    state.close()


# -- the handles -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def go2_handle(tmp_path_factory):
    import grid_rbd
    handle = grid_rbd.register_robot(
        "go2_centroidal", urdf_path=str(ROBOTS["go2"].path), floating_base=True,
        dtype="float64", algorithm_list=["centroidal", "inverse_dynamics"], device="cpu",
        cache_dir=tmp_path_factory.mktemp("store"))
    yield handle
    handle.close()


@pytest.fixture(scope="module")
def go2_ref():
    return reference.load(ROBOTS["go2"].path, floating_base=True)


def test_numpy_handle_shapes_tuples_and_single_states(go2_handle, go2_ref):
    h, ref = go2_handle, go2_ref
    nv, nb = ref.nv, ref.nb
    s = random_states(ref.model, 5, seed=30)
    assert set(CENTROIDAL) | {"inverse_dynamics"} == set(h.algorithms)
    c, J = h.com(s.q)
    rc, rJ = ref.com(s.q)
    assert c.shape == (5, 3) and J.shape == (5, 3, nv)
    np.testing.assert_allclose(c, rc, atol=1e-12)
    np.testing.assert_allclose(J, rJ, atol=1e-12)
    A, mom = h.ccrba(s.q, s.qd)
    assert A.shape == (5, 6, nv) and mom.shape == (5, 6)
    np.testing.assert_allclose(mom, ref.ccrba(s.q, s.qd)[1], rtol=1e-10, atol=1e-10)
    shapes = {"dccrba": (6, nv, nv), "cmm_time_variation": (6, nv), "energy": (3,),
              "coriolis_matrix": (nv, nv), "generalized_gravity": (nv,),
              "nonlinear_effects": (nv,), "kinetic_energy_regressor": (10 * nb,),
              "potential_energy_regressor": (10 * nb,),
              "inverse_dynamics_regressor": (nv, 10 * nb)}
    for name, shape in shapes.items():
        inputs, want = expected(ref, name, s)
        got = getattr(h, name)(*inputs)
        assert got.shape == (5, *shape), name
        assert_scaled_close(_flat(got), want, 1e-9, name)
        single = getattr(h, name)(*(x[0] for x in inputs))
        assert single.shape == shape, name
        np.testing.assert_array_equal(single, got[0])
    c1, J1 = h.com(s.q[0])
    assert c1.shape == (3,) and J1.shape == (3, nv)
    out = np.empty((5, 6 * nv * nv))
    dA = h.dccrba(s.q, out=out)
    assert dA.shape == (5, 6, nv, nv) and np.shares_memory(dA, out)
    out = np.empty((5, 3 * nv + 3))
    c2, J2 = h.com(s.q, out=out)
    assert np.shares_memory(c2, out) and np.shares_memory(J2, out)
    np.testing.assert_array_equal(J2, J)
    assert "Returns: the tuple (com (B, 3), jacobian (B, 3, nv))" in h.com.__doc__


def test_a_method_not_built_names_its_profile(go2_handle, go2_ref):
    s = random_states(go2_ref.model, 2, seed=31)
    with pytest.raises(RuntimeError, match="profile 'core' in algorithm_list"):
        go2_handle.crba(s.q)


def test_profiles_expand_in_the_options():
    from grid_codegen.options import CodegenOptions
    assert CodegenOptions().algorithms == PROFILES["core"]
    both = CodegenOptions(algorithms=("centroidal", "core"))
    assert both.algorithms == PROFILES["core"] + PROFILES["centroidal"]
    # "all" is every profile but the two that need more than the URDF (a sphere model)
    # or a vector configuration (the fused plant steps): they are asked for by name.
    every = CodegenOptions(algorithms=("kinematics", "centroidal", "core", "second_order"))
    assert every.algorithms == PROFILES["all"] and CodegenOptions(algorithms=("all",)) == every
    assert not set(PROFILES["collision"] + PROFILES["plant"]) & set(PROFILES["all"])
    with pytest.raises(ValueError, match="profiles: core, centroidal, kinematics, "
                                         "second_order, collision, plant, all"):
        CodegenOptions(algorithms=("centroidl",))


def test_torch_handle_values_and_forward_only(go2_handle, go2_ref):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from grid_rbd.torch import TorchRobotHandle
    th = TorchRobotHandle(go2_handle)
    s = random_states(go2_ref.model, 4, seed=32)
    q, qd = torch.from_numpy(s.q), torch.from_numpy(s.qd)
    A, mom = th.ccrba(q, qd)
    want_A, want_h = go2_ref.ccrba(s.q, s.qd)
    np.testing.assert_allclose(A.numpy(), want_A, atol=1e-10)
    np.testing.assert_allclose(mom.numpy(), want_h, atol=1e-10)
    dA = th.dccrba(q)
    assert tuple(dA.shape) == (4, 6, go2_ref.nv, go2_ref.nv)
    assert_scaled_close(dA.numpy(), go2_ref.dccrba(s.q), 1e-9, "torch dccrba")
    with pytest.raises(RuntimeError, match="coriolis_matrix is forward-only"):
        th.coriolis_matrix(q.clone().requires_grad_(True), qd)


def test_jax_handle_values_under_jit(go2_handle, go2_ref):
    jax = pytest.importorskip("jax", reason="jax is not installed")
    jax.config.update("jax_enable_x64", True)
    from grid_rbd.jax import JaxRobotHandle
    jh = JaxRobotHandle(go2_handle)
    s = random_states(go2_ref.model, 4, seed=33)
    c, J = jax.jit(jh.com)(s.q)
    want_c, want_J = go2_ref.com(s.q)
    np.testing.assert_allclose(np.asarray(c), want_c, atol=1e-12)
    np.testing.assert_allclose(np.asarray(J), want_J, atol=1e-12)
    Y = jax.jit(jh.inverse_dynamics_regressor)(s.q, s.qd, s.qdd)
    assert_scaled_close(np.asarray(Y), go2_ref.inverse_dynamics_regressor(s.q, s.qd, s.qdd),
                        1e-9, "jax regressor")


def test_regressor_warp_strategy(case):
    """The inverse-dynamics regressor's warp strategy (one item per warp, rows stored by
    all lanes: `emit.regressor_warp`) against the reference, batch 1 and the full batch;
    built with `strategy="auto"` on every robot of the set."""
    artifact, ref, state, s = case
    assert "warp" in artifact.algorithms["inverse_dynamics_regressor"].variants
    one = dataclasses.replace(s, **{k: getattr(s, k)[:1] for k in ("q", "qd", "qdd")})
    for states, what in ((s, ""), (one, " batch 1")):
        inputs, want = expected(ref, "inverse_dynamics_regressor", states, 3.71)
        got = _flat(state.call("inverse_dynamics_regressor", *inputs, gravity=3.71,
                               variant="warp"))
        tol = tolerance(artifact.dtype, "inverse_dynamics_regressor", ref, states.q)
        assert_scaled_close(got, want, tol, f"warp regressor{what} ({artifact.dtype})")
    zero = _flat(state.call("inverse_dynamics_regressor", s.q, s.qd, variant="warp"))
    _, want = expected(ref, "inverse_dynamics_regressor",
                       dataclasses.replace(s, qdd=np.zeros_like(s.qdd)))
    assert_scaled_close(zero, want, tolerance(artifact.dtype, "inverse_dynamics", ref, s.q),
                        "warp regressor, qdd absent")


def _hand(fingers: int) -> bytes:
    """A 3-link arm with a ball wrist and `fingers` two-link fingers: more leaves than
    the regressor's warp strategy splits its terms into (MAX_GROUPS)."""
    from joint_type_robots import _joint, _link, _robot
    parts = [_link("base"), _link("a"), _link("b"), _link("palm"),
             _joint("j1", "base", "a"), _joint("j2", "a", "b", axis="0 1 0"),
             _joint("wrist", "b", "palm", "spherical")]
    for k in range(fingers):
        parts += [_link(f"p{k}", 0.05), _link(f"d{k}", 0.03),
                  _joint(f"f{k}a", "palm", f"p{k}", axis="1 0 0", xyz=f"0.02 {0.01 * k} 0.1"),
                  _joint(f"f{k}b", f"p{k}", f"d{k}", axis="0 1 0")]
    return _robot("hand", *parts)


def test_regressor_warp_terms_groups():
    """The terms of the warp strategy split into groups (one thread each): the groups
    partition the bodies into ranges in order; a chain is one group, g1 one per limb,
    a hand with more fingers than MAX_GROUPS is merged down to it; and a many-group
    build's regressor matches the reference on the CPU build (which runs every group)."""
    from artifact_harness import Artifact, _build
    from joint_type_robots import states

    from grid_codegen import parse_urdf
    from grid_codegen.emit import regressor_warp
    from grid_codegen.options import CodegenOptions

    def check_partition(model, groups):
        assert groups[0][0] == 0 and groups[-1][1] == model.nb
        assert all(a[1] == b[0] for a, b in zip(groups[:-1], groups[1:], strict=True))
        assert all(b0 < b1 for b0, b1 in groups)
        assert len(groups) <= regressor_warp.MAX_GROUPS

    iiwa = load_model("iiwa14")
    assert regressor_warp.terms_groups(iiwa) == [(0, iiwa.nb)]
    if robot_available("g1"):
        g1 = parse_urdf(ROBOTS["g1"].path, floating_base=True)
        groups = regressor_warp.terms_groups(g1)
        check_partition(g1, groups)
        assert len(groups) == 4  # two legs, two arms (the waist goes with the first arm)
    model = parse_urdf(_hand(11))
    groups = regressor_warp.terms_groups(model)
    check_partition(model, groups)
    assert len(groups) == regressor_warp.MAX_GROUPS
    ref = reference.ReferenceRobot(model)
    so, _ = _build(model, CodegenOptions(dtype="float64",
                                         algorithms=("inverse_dynamics_regressor",)), "cpu")
    artifact = Artifact(so)
    assert "warp" in artifact.algorithms["inverse_dynamics_regressor"].variants
    state = artifact.state()
    try:
        q, qd, qdd, _ = states(model, 7, 5, model.nq, model.nv)
        s = types.SimpleNamespace(q=q, qd=qd, qdd=qdd)
        inputs, want = expected(ref, "inverse_dynamics_regressor", s, 3.71)
        got = _flat(state.call("inverse_dynamics_regressor", *inputs, gravity=3.71,
                               variant="warp"))
        assert_scaled_close(got, want, 1e-10, "warp regressor of a hand of 11 fingers")
    finally:
        state.close()
