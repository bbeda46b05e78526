"""Layer 2: the generated CPU build against the float64 reference, every algorithm.

Each (robot, dtype) artifact is generated and compiled once per session
(`artifact_harness.build_cached`); float64 and float32 both run on every robot of the
test set.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from artifact_harness import (
    GridError,
    build_cached,
    load_model,
    prebuild,
    reference_case,
    round_states,
    tolerance,
)
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd.reference as reference
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS
from grid_codegen.options import CodegenOptions
from grid_rbd.reference import ReferenceRobot

FLOAT64_ROBOTS = sorted(ROBOTS)
FLOAT32_ROBOTS = sorted(ROBOTS)
CONFIGS = ([(r, "float64") for r in FLOAT64_ROBOTS] + [(r, "float32") for r in FLOAT32_ROBOTS])
WITH_FEXT = ("inverse_dynamics", "forward_dynamics", "aba", "inverse_dynamics_gradient",
             "forward_dynamics_gradient")
BATCH = 37  # not a multiple of any block or warp size
EDGE_MAX_BATCH = 300


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    configs = [(r, "cpu", {"dtype": d}) for r, d in CONFIGS]
    configs += [("go2", "cpu", {"dtype": "float64", "max_batch_size": EDGE_MAX_BATCH,
                                "strategy": "warp"}),
                ("go2", "cpu", {"dtype": "float64", "runtime_inertia": True})]
    prebuild(configs)


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{r}-{d}" for r, d in CONFIGS])
def case(request):
    robot, dtype = request.param
    artifact, _ = build_cached(robot, dtype=dtype)
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    states = round_states(random_states(ref.model, BATCH, seed=len(robot)), artifact.dtype)
    yield artifact, ref, state, states
    state.close()


def _check(state, ref, algorithm, s, f_ext=False, gravity=-9.81, what="", variant=None):
    inputs, expected = reference_case(ref, algorithm, s, f_ext, gravity)
    actual = state.call(algorithm, *inputs, gravity=gravity, variant=variant)
    tol = tolerance(state.artifact.dtype, algorithm, ref, s.q)
    assert_scaled_close(actual, expected, tol, f"{algorithm}{what} ({state.artifact.dtype})")
    return actual


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_matches_reference(case, algorithm):
    artifact, ref, state, s = case
    _check(state, ref, algorithm, s)


@pytest.mark.parametrize("algorithm", WITH_FEXT)
def test_external_forces(case, algorithm):
    _, ref, state, s = case
    with_fext = _check(state, ref, algorithm, s, f_ext=True, what=" with f_ext")
    assert not np.allclose(with_fext, state.call(algorithm, *reference_case(ref, algorithm, s)[0]))


@pytest.mark.parametrize("gravity", [0.0, -3.71, 9.81])
def test_signed_gravity(case, gravity):
    _, ref, state, s = case
    for algorithm in WITH_FEXT:
        _check(state, ref, algorithm, s, gravity=gravity, what=f" gravity {gravity}")


def test_zero_velocity_and_batch_one(case):
    _, ref, state, s = case
    still = dataclasses.replace(s, qd=np.zeros_like(s.qd))
    for algorithm in ALGORITHMS:
        _check(state, ref, algorithm, still, what=" at zero velocity")
    one = dataclasses.replace(s, **{k: getattr(s, k)[:1] for k in ("q", "qd", "qdd", "u",
                                                                     "f_ext")})
    for algorithm in ALGORITHMS:
        _check(state, ref, algorithm, one, what=" batch 1")


def test_inverse_dynamics_without_qdd_is_the_bias(case):
    _, ref, state, s = case
    actual = state.call("inverse_dynamics", s.q, s.qd)
    tol = tolerance(state.artifact.dtype, "inverse_dynamics", ref, s.q)
    assert_scaled_close(actual, ref.inverse_dynamics(s.q, s.qd), tol, "bias")


def test_mass_matrix_and_inverse_are_symmetric(case):
    _, _, state, s = case
    for algorithm in ("crba", "minv"):
        out = state.call(algorithm, s.q)
        np.testing.assert_array_equal(out, np.swapaxes(out, 1, 2), err_msg=algorithm)


def test_unnormalised_quaternion(case):
    artifact, ref, state, s = case
    if not ref.model.floating_base:
        pytest.skip("fixed base: no quaternion")
    q = s.q.copy()
    q[:, 3:7] *= 3.0
    for algorithm in ("inverse_dynamics", "aba", "end_effector_pose"):
        inputs, expected = reference_case(ref, algorithm, dataclasses.replace(s, q=q))
        tol = tolerance(artifact.dtype, algorithm, ref, q)
        assert_scaled_close(state.call(algorithm, *inputs), expected, tol, algorithm)


def test_descriptor(case):
    artifact, ref, _, _ = case
    assert (artifact.nq, artifact.nv, artifact.nb) == (ref.nq, ref.nv, ref.nb)
    assert artifact.num_ees == ref.num_ees
    assert artifact.archs == "cpu" and not artifact.is_gpu
    assert artifact.query_device().is_gpu == 0
    options = CodegenOptions(dtype=artifact.dtype.name)
    assert artifact.options_json == options.canonical_json()
    assert json.loads(artifact.options_json)["algorithms"] == list(ALGORITHMS)
    shapes = {name: info.output_shape for name, info in artifact.algorithms.items()}
    assert shapes["inverse_dynamics"] == (ref.nv,)
    assert shapes["minv"] == (ref.nv, ref.nv)
    assert shapes["end_effector_pose_gradient"] == (6 * ref.num_ees, ref.nv)
    widths = [w for _, w, _ in artifact.algorithms["aba"].inputs]
    assert widths == [ref.nq, ref.nv, ref.nv, 6 * ref.nb]


# -- edge cases on dedicated builds ------------------------------------------------------
def test_largest_batch_and_refusals():
    artifact, _ = build_cached("go2", dtype="float64", max_batch_size=EDGE_MAX_BATCH,
                               strategy="warp")
    ref = reference.load(ROBOTS["go2"].path, floating_base=True)
    assert artifact.max_batch == EDGE_MAX_BATCH
    state = artifact.state()
    s = random_states(ref.model, EDGE_MAX_BATCH + 1, seed=3)
    inputs, expected = reference_case(ref, "aba", s)
    top = [x[:EDGE_MAX_BATCH] for x in inputs[:3]]
    assert_scaled_close(state.call("aba", *top), expected[:EDGE_MAX_BATCH], 1e-9, "max batch")
    with pytest.raises(GridError, match="max_batch") as err:
        state.call("aba", *inputs[:3])
    assert err.value.code == 2
    q = np.ascontiguousarray(s.q)
    out = np.zeros((1, ref.nv))
    assert state.launch_raw("aba", [q.ctypes.data, 0, 0], out.ctypes.data, 1) == 4  # NULL qd
    assert state.launch_raw("aba", [q.ctypes.data], out.ctypes.data, -1) == 1
    assert state.launch_raw("aba", [], 0, 0) == 0  # an empty batch is a no-op
    assert artifact.desc.launch(state.handle, 99, None, None, 1, -9.81, None) == 3
    with pytest.raises(GridError, match="runtime_inertia"):
        state.set_inertia_table(np.zeros((ref.nb, 10)))
    state.close()


def _modified_model(model):
    """Every body heavier, its centre of mass shifted, its rotational inertia grown."""
    bodies = []
    for i, body in enumerate(model.bodies):
        inertia = body.inertia
        inertia = dataclasses.replace(inertia, mass=inertia.mass * (1.3 + 0.05 * i),
                                      com=inertia.com + 0.01 * (i % 3 + 1),
                                      inertia_com=inertia.inertia_com * 1.5 + 1e-3 * np.eye(3))
        bodies.append(dataclasses.replace(body, inertia=inertia))
    return dataclasses.replace(model, bodies=tuple(bodies))


def test_runtime_inertia_table():
    artifact, _ = build_cached("go2", dtype="float64", runtime_inertia=True)
    model = load_model("go2")
    ref, modified = ReferenceRobot(model), ReferenceRobot(_modified_model(model))
    state = artifact.state()
    s = random_states(model, BATCH, seed=11)
    dynamics = [a for a in ALGORITHMS if not a.startswith("end_effector")]
    for algorithm in dynamics:  # the defaults are the URDF's inertias
        _check(state, ref, algorithm, s, f_ext=algorithm in WITH_FEXT)
    state.set_inertia_table(np.stack([b.inertia.dynamic_parameters()
                                      for b in modified.model.bodies]))
    for algorithm in dynamics:
        _check(state, modified, algorithm, s, f_ext=algorithm in WITH_FEXT, what=" modified")
        # Every variant reads the table: the level strategies' composite inertias too.
        for variant in artifact.algorithms[algorithm].variants:
            _check(state, modified, algorithm, s, f_ext=algorithm in WITH_FEXT,
                   what=f" modified ({variant})", variant=variant)
    other = artifact.state()  # a fresh state starts from the URDF's table again
    _check(other, ref, "inverse_dynamics", s)
    other.close()
    state.close()


STRATEGY_ROBOTS = ("iiwa14", "go2", "hyq")


@pytest.mark.parametrize("strategy", ["thread", "warp", "block", "tangents"])
@pytest.mark.parametrize("robot", STRATEGY_ROBOTS)
def test_every_strategy_matches_reference(robot, strategy):
    """Every variant of an `auto` artifact, chosen explicitly per call, against the
    reference: fixed base, floating base, a branching tree; f_ext where it applies
    (algorithms without the variant, such as the thread-only reverse-mode kernels and
    every algorithm but the FD gradient for "tangents", are skipped)."""
    artifact, _ = build_cached(robot, dtype="float64")
    ref = reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    state = artifact.state()
    s = random_states(ref.model, 19, seed=5)  # 19: two SIMD tiles and a partial one
    ran = 0
    for algorithm in ALGORITHMS:
        if strategy not in artifact.algorithms[algorithm].variants:
            continue
        ran += 1
        inputs, expected = reference_case(ref, algorithm, s, algorithm in WITH_FEXT)
        actual = state.call(algorithm, *inputs, variant=strategy)
        assert_scaled_close(actual, expected, tolerance(artifact.dtype, algorithm, ref, s.q),
                            f"{algorithm} ({strategy})")
    state.close()
    expected_count = {"thread": len(ALGORITHMS), "tangents": 1}
    assert ran == expected_count.get(strategy, len(ALGORITHMS) - 2)  # warp/block: no VJPs


def test_dispatch_tables():
    """An `auto` artifact carries every strategy (and the FD gradient the tangents
    strategy); the CPU default picks the thread strategy (SIMD over items), a state's
    table can be replaced and restored, bad tables are refused, and a single-strategy
    artifact carries only that variant."""
    artifact, _ = build_cached("iiwa14", dtype="float64")
    info = artifact.algorithms["forward_dynamics_gradient"]
    assert info.variants == ("thread", "warp", "block", "tangents")
    assert info.dispatch == ((1, 0),)
    state = artifact.state()
    assert state.chosen_variant("forward_dynamics_gradient", 1) == "thread"
    assert state.set_dispatch("forward_dynamics_gradient", [(1, "warp"), (64, "block")]) == 0
    assert [state.chosen_variant("forward_dynamics_gradient", b) for b in (1, 63, 64, 999)] == \
        ["warp", "warp", "block", "block"]
    for bad in ([(2, "thread")], [(1, "thread"), (1, "warp")], [(1, "nope")],
                [(1, "thread")] * 9):
        assert state.set_dispatch("forward_dynamics_gradient", bad) == 1, bad
    assert state.set_dispatch("forward_dynamics_gradient", []) == 0  # back to the default
    assert state.chosen_variant("forward_dynamics_gradient", 999) == "thread"
    state.close()
    single, _ = build_cached("go2", dtype="float64", max_batch_size=EDGE_MAX_BATCH,
                             strategy="warp")
    thread_only = {"forward_dynamics_vjp", "inverse_dynamics_vjp"}  # no level builders
    assert all(a.variants == (("thread",) if name in thread_only else ("warp",))
               for name, a in single.algorithms.items())
    assert json.loads(single.options_json)["strategy"] == "warp"


@pytest.mark.parametrize("threads", [1, 2])
def test_host_threads_give_the_same_numbers(threads):
    artifact, _ = build_cached("iiwa14", dtype="float64")
    ref = reference.load(ROBOTS["iiwa14"].path)
    state = artifact.state()
    s = random_states(ref.model, 200, seed=9)
    inputs, expected = reference_case(ref, "forward_dynamics_gradient", s)
    got = state.call("forward_dynamics_gradient", *inputs, threads=threads)
    assert_scaled_close(got, expected, 1e-9, f"{threads} host threads")
    state.close()
