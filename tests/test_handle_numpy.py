"""The numpy RobotHandle against the float64 reference, and its surface: dimensions,
aliases, input validation and its messages, `out=` views, `pinned_empty`, contexts
(isolation of runtime inertia tables, close and re-creation of the default context).

Builds (CPU, or the GPU where one is usable; in the session store of tests/conftest.py):
iiwa14 float64, go2 floating base float64, iiwa14 float32, and iiwa14 float64 with
runtime_inertia and a subset of algorithms.
"""

from __future__ import annotations

import inspect
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")

from artifact_harness import reference_case, round_states, tolerance  # noqa: E402
from support import ROBOTS, assert_scaled_close, random_states, robot_available  # noqa: E402

import grid_rbd  # noqa: E402
import grid_rbd.reference as reference  # noqa: E402
from grid_codegen import parse_urdf  # noqa: E402
from grid_codegen.options import ALGORITHMS as ALL_ALGORITHMS  # noqa: E402
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS  # noqa: E402
from grid_rbd._methods import METHODS  # noqa: E402
from grid_rbd.reference import ReferenceRobot  # noqa: E402

BATCH = 12
RUNTIME_ALGORITHMS = ["inverse_dynamics", "crba", "forward_dynamics"]
CONFIGS = {
    # name: (robot, register_robot keyword arguments)
    "iiwa14-f64": ("iiwa14", {"dtype": "float64"}),
    "go2-f64": ("go2", {"dtype": "float64"}),
    "iiwa14-f32": ("iiwa14", {"dtype": "float32"}),
    "iiwa14-rt": ("iiwa14", {"dtype": "float64", "runtime_inertia": True,
                             "algorithm_list": RUNTIME_ALGORITHMS, "max_batch_size": 64}),
}
NUMERIC = ["iiwa14-f64", "go2-f64", "iiwa14-f32"]


@pytest.fixture(scope="module")
def cache(shared_store):
    """The session store (tests/conftest.py): other modules register some of these
    configurations too (test_jax_backend's go2, test_mujoco_convention_vjp's iiwa14)."""
    return shared_store


@pytest.fixture(scope="module")
def handles(cache):
    """Every configuration registered once (two at a time: the compiler is serial)."""
    def register(item):
        name, (robot, kwargs) = item
        spec = ROBOTS[robot]
        return name, grid_rbd.register_robot(name, urdf_path=spec.path,
                                              floating_base=spec.floating_base,
                                              cache_dir=cache, **kwargs)

    items = [i for i in CONFIGS.items() if robot_available(i[1][0])]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(register, items))


@pytest.fixture(scope="module")
def refs():
    return {robot: reference.load(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
            for robot in ("iiwa14", "go2") if robot_available(robot)}


def _get(handles, refs, config):
    if config not in handles:
        pytest.skip(f"{CONFIGS[config][0]} is not available (example-robot-data missing)")
    return handles[config], refs[CONFIGS[config][0]]


def _states(ref, dtype, batch=BATCH, seed=3):
    s = round_states(random_states(ref.model, batch, seed=seed), dtype)
    return s, (lambda x: np.ascontiguousarray(x, dtype=dtype))


# -- numbers ---------------------------------------------------------------------------
FEXT_ALGORITHMS = {m.name for m in METHODS if any(p.name == "f_ext" for p in m.inputs)}
CASES = [(a, f) for a in ALGORITHMS for f in (False, True) if not f or a in FEXT_ALGORITHMS]


@pytest.mark.parametrize("algorithm,f_ext", CASES,
                         ids=[f"{a}{'-fext' if f else ''}" for a, f in CASES])
@pytest.mark.parametrize("config", NUMERIC)
def test_method_matches_reference(handles, refs, config, algorithm, f_ext):
    h, ref = _get(handles, refs, config)
    s, cast = _states(ref, h.dtype)
    inputs, expected = reference_case(ref, algorithm, s, f_ext=f_ext)
    got = getattr(h, algorithm)(*[None if x is None else cast(x) for x in inputs])
    assert got.shape == expected.shape and got.dtype == h.dtype
    assert_scaled_close(got, expected, tolerance(h.dtype, algorithm, ref, s.q),
                        f"{config} {algorithm}")


@pytest.mark.parametrize("config", NUMERIC)
def test_gravity_and_optional_inputs(handles, refs, config):
    h, ref = _get(handles, refs, config)
    s, cast = _states(ref, h.dtype)
    q, qd, qdd, u, fe = (cast(x) for x in (s.q, s.qd, s.qdd, s.u, s.f_ext))
    tol = tolerance(h.dtype, "forward_dynamics", ref, s.q)
    assert_scaled_close(h.inverse_dynamics(q, qd), ref.inverse_dynamics(s.q, s.qd), tol,
                        "bias (qdd=None)")
    assert_scaled_close(h.inverse_dynamics(q, qd, f_ext=fe, gravity=-1.62),
                        ref.inverse_dynamics(s.q, s.qd, None, s.f_ext, -1.62), tol,
                        "ID with f_ext=, gravity=-1.62")
    assert_scaled_close(h.forward_dynamics(q, qd, u, gravity=3.0),
                        ref.forward_dynamics(s.q, s.qd, s.u, None, 3.0), tol, "FD, gravity=3")
    assert_scaled_close(h.aba(q=q, qd=qd, u=u, f_ext=fe),
                        ref.aba(s.q, s.qd, s.u, s.f_ext), tol, "ABA by keyword")
    assert_scaled_close(h.forward_dynamics_gradient(q, qd, u, gravity=0.0),
                        ref.forward_dynamics_gradient(s.q, s.qd, s.u, None, 0.0),
                        tolerance(h.dtype, "forward_dynamics_gradient", ref, s.q),
                        "FD gradient, gravity=0")
    assert np.array_equal(h.inverse_dynamics(q, qd, qdd), h.inverse_dynamics(q, qd, qdd, None))


def test_aliases(handles, refs):
    h, ref = _get(handles, refs, "iiwa14-f64")
    s, _ = _states(ref, h.dtype)
    assert np.array_equal(h.rnea(s.q, s.qd, s.qdd), h.inverse_dynamics(s.q, s.qd, s.qdd))
    assert np.array_equal(h.fd(s.q, s.qd, s.u), h.forward_dynamics(s.q, s.qd, s.u))
    assert h.rnea.__name__ == "rnea" and "Alias of `inverse_dynamics`" in h.rnea.__doc__
    assert (h.num_joints, h.num_vel, h.num_bodies) == (h.nq, h.nv, h.nb)


def test_dimensions_names_and_description(handles, refs):
    for config, h in handles.items():
        robot = CONFIGS[config][0]
        ref = refs[robot]
        assert (h.nq, h.nv, h.nb, h.num_ees) == (ref.nq, ref.nv, ref.nb, ref.num_ees), config
        assert h.joint_names == ref.joint_names and h.body_names == ref.body_names
        assert h.dtype == np.dtype(CONFIGS[config][1]["dtype"])
        assert h.device in ("cpu", "cuda") and h.ctx_id == 0 and h.name == config
        assert isinstance(h.model_version, int) and isinstance(h.device_profile, dict)
        assert h.registration is not None and h.registration.entry_dir.is_dir()
        assert repr(h).startswith(f"<RobotHandle '{config}' nq={h.nq}")
    go2 = handles.get("go2-f64")
    if go2 is not None:
        assert go2.nq == go2.nv + 1 and go2.nb == len(go2.body_names)
    assert handles["iiwa14-rt"].algorithms == tuple(RUNTIME_ALGORITHMS)
    assert handles["iiwa14-f64"].algorithms == ALGORITHMS
    params = list(inspect.signature(handles["iiwa14-f64"].forward_dynamics).parameters)
    assert params == ["q", "qd", "u", "f_ext", "gravity", "out"]
    assert "gravity" not in inspect.signature(handles["iiwa14-f64"].crba).parameters
    assert {m.name for m in METHODS} == set(ALL_ALGORITHMS)


def test_get_robot_and_load_robot_share_the_artifact(handles, cache):
    h = handles["iiwa14-f64"]
    by_name = grid_rbd.get_robot("iiwa14-f64", cache_dir=cache)
    by_path = grid_rbd.load_robot(h.path)
    by_dir = grid_rbd.load_robot(h.path.parent)
    for other in (by_name, by_path, by_dir):
        assert other._artifact is h._artifact and other.ctx_id == 0
        assert other.joint_names == h.joint_names
    q = np.zeros((2, h.nq))
    assert np.array_equal(by_path.crba(q), h.crba(q))


# -- validation ----------------------------------------------------------------------------
def test_input_validation_messages(handles, refs):
    h, ref = _get(handles, refs, "iiwa14-f32")
    s, cast = _states(ref, h.dtype, batch=4)
    q, qd, u = cast(s.q), cast(s.qd), cast(s.u)
    with pytest.raises(ValueError, match=r"^qd has width 6; this robot's tangent width nv is 7$"):
        h.forward_dynamics(q, qd[:, :6].copy(), u)
    with pytest.raises(ValueError, match=r"^q has width 8; this robot's configuration width nq "
                                         r"is 7$"):
        h.crba(np.zeros((4, 8), np.float32))
    with pytest.raises(ValueError, match=r"f_ext has width 6; this robot's 6\*nb is 42 "
                                         r"\(nb = 7\)"):
        h.forward_dynamics(q, qd, u, np.zeros((4, 6), np.float32))
    with pytest.raises(ValueError, match=r"u has dtype float64; this robot computes in float32 "
                                         r"\(pass u.astype\(np.float32\)"):
        h.forward_dynamics(q, qd, s.u)
    with pytest.raises(ValueError, match=r"qd is not C-contiguous; pass "
                                         r"np.ascontiguousarray\(qd\)"):
        h.forward_dynamics(q, np.asfortranarray(qd), u)
    with pytest.raises(ValueError, match=r"q must be \(B, 7\) with the batch on axis 0, or "
                                         r"\(7,\) for a single state; got shape \(4, 1, 7\)"):
        h.crba(q[:, None, :])
    with pytest.raises(ValueError, match=r"^qd is a single state but q is batched; pass every "
                                         r"input as a single state \(1-D\) or every input "
                                         r"batched \(2-D\)$"):
        h.forward_dynamics(q, qd[0], u)
    with pytest.raises(ValueError, match=r"^u has batch 3; q has batch 4"):
        h.forward_dynamics(q, qd, u[:3])
    with pytest.raises(TypeError, match="q must be a numpy.ndarray"):
        h.crba(s.q.tolist())
    with pytest.raises(TypeError, match="missing required input 'u'"):
        h.forward_dynamics(q, qd)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tau'"):
        h.forward_dynamics(q, qd, tau=u)
    with pytest.raises(TypeError, match="multiple values for 'qd'"):
        h.forward_dynamics(q, qd, u, qd=qd)
    with pytest.raises(TypeError, match="takes 4 inputs"):
        h.forward_dynamics(q, qd, u, None, None)
    with pytest.raises(TypeError):
        h.crba(q, gravity=-9.81)
    assert h.crba(np.zeros((0, h.nq), np.float32)).shape == (0, h.nv, h.nv)


def test_floating_base_rejects_padded_velocity(handles, refs):
    h, ref = _get(handles, refs, "go2-f64")
    s, _ = _states(ref, h.dtype, batch=2)
    padded = np.zeros((2, h.nq))
    with pytest.raises(ValueError, match=rf"^qd has width {h.nq}; this robot's tangent width "
                                         rf"nv is {h.nv}$"):
        h.inverse_dynamics(s.q, padded)


def test_batch_limit_and_missing_algorithms(handles, refs):
    h, ref = _get(handles, refs, "iiwa14-rt")
    q = np.zeros((65, h.nq))
    with pytest.raises(ValueError, match="batch 65 exceeds this artifact's max_batch_size 64"):
        h.crba(q)
    assert h.crba(q[:64]).shape == (64, h.nv, h.nv)
    for method in ("minv", "aba", "end_effector_pose", "forward_dynamics_gradient"):
        with pytest.raises(RuntimeError, match=rf"{method} was not built into this artifact "
                                               r"\(built: inverse_dynamics, crba, "
                                               rf"forward_dynamics\); register with '{method}' "
                                               r"or its profile 'core' in algorithm_list"):
            getattr(h, method)(*([q[:2]] * 3 if "dynamics" in method or method == "aba"
                                 else [q[:2]]))
    with pytest.raises(RuntimeError, match="built without runtime_inertia"):
        handles["iiwa14-f64"].set_inertia_params(np.zeros((h.nb, 10)))


# -- out= and pinned memory --------------------------------------------------------------
@pytest.mark.parametrize("config", ["iiwa14-f64", "iiwa14-f32"])
def test_out_buffers_are_viewed(handles, refs, config):
    h, ref = _get(handles, refs, config)
    s, cast = _states(ref, h.dtype)
    q, qd, u = cast(s.q), cast(s.qd), cast(s.u)
    nv = h.nv
    expected = h.forward_dynamics_gradient(q, qd, u)
    flat = h.pinned_empty((BATCH, 2 * nv * nv))
    assert flat.shape == (BATCH, 2 * nv * nv) and flat.dtype == h.dtype
    got = h.forward_dynamics_gradient(q, qd, u, out=flat)
    assert got.shape == (BATCH, nv, 2 * nv) and np.shares_memory(got, flat)
    assert got.base is flat and np.array_equal(got, expected)
    shaped = np.empty((BATCH, nv, 2 * nv), h.dtype)
    assert h.forward_dynamics_gradient(q, qd, u, out=shaped) is not None
    assert np.array_equal(shaped, expected)
    vec = np.empty((BATCH, nv), h.dtype)
    assert np.shares_memory(h.fd(q, qd, u, out=vec), vec)
    reused = h.forward_dynamics_gradient(q, qd, 2 * u, out=flat)
    assert np.array_equal(got, reused), "a view shows the latest values of its out"

    other = np.float32 if h.dtype == np.float64 else np.float64
    with pytest.raises(ValueError, match=rf"out has dtype {np.dtype(other)}; "
                                         rf"forward_dynamics_gradient writes {h.dtype}"):
        h.forward_dynamics_gradient(q, qd, u, out=np.empty(flat.shape, other))
    with pytest.raises(ValueError, match=rf"out has shape \({BATCH}, {2 * nv * nv - 1}\); "
                                         rf"forward_dynamics_gradient on a batch of {BATCH} "
                                         rf"writes \({BATCH}, {nv}, {2 * nv}\) or "
                                         rf"\({BATCH}, {2 * nv * nv}\)"):
        h.forward_dynamics_gradient(q, qd, u, out=np.empty((BATCH, 2 * nv * nv - 1), h.dtype))
    with pytest.raises(ValueError, match="out has shape"):
        h.forward_dynamics_gradient(q, qd, u, out=np.empty((2 * nv * nv * BATCH,), h.dtype))
    with pytest.raises(ValueError, match="out is not C-contiguous"):
        h.crba(q, out=np.empty((nv, nv, BATCH), h.dtype).transpose(2, 0, 1))
    frozen = np.empty((BATCH, nv), h.dtype)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        h.fd(q, qd, u, out=frozen)
    assert h.pinned_empty(5).shape == (5,)


# -- contexts --------------------------------------------------------------------------
def _modified_iiwa() -> tuple[ReferenceRobot, np.ndarray]:
    """A reference robot with link 3 heavier and its centre of mass moved, and its
    inertia table (nb, 10)."""
    text = ROBOTS["iiwa14"].path.read_text()
    assert text.count('<mass value="3.5"/>') == 3
    text = text.replace('<origin xyz="0 0.03 0.13" rpy="0 0 0"/>\n      <mass value="3.5"/>',
                        '<origin xyz="0.02 0.05 0.11" rpy="0 0 0"/>\n      '
                        '<mass value="7.25"/>')
    model = parse_urdf(text.encode())
    table = np.array([b.inertia.dynamic_parameters() for b in model.bodies])
    return ReferenceRobot(model), table


def test_contexts_isolate_inertia_tables(handles, refs):
    h, ref = _get(handles, refs, "iiwa14-rt")
    modified, table = _modified_iiwa()
    default_table = np.array([b.inertia.dynamic_parameters() for b in ref.model.bodies])
    assert not np.allclose(table, default_table)
    s, _ = _states(ref, h.dtype)
    tol = tolerance(h.dtype, "forward_dynamics", ref, s.q)
    with h.context() as ctx:
        assert ctx.ctx_id not in (0, h.ctx_id) and ctx.joint_names == h.joint_names
        np.testing.assert_allclose(ctx.get_inertia_params(), default_table, rtol=1e-12)
        before = ctx.model_version
        version = ctx.set_inertia_params(table)
        assert version == ctx.model_version > before
        np.testing.assert_allclose(ctx.get_inertia_params(), table, rtol=1e-12)
        for name in RUNTIME_ALGORITHMS:
            inputs, _ = reference_case(ref, name, s, f_ext=True)
            _, expected_mod = reference_case(modified, name, s, f_ext=True)
            _, expected_ref = reference_case(ref, name, s, f_ext=True)
            assert_scaled_close(getattr(ctx, name)(*inputs), expected_mod, tol,
                                f"{name} in the modified context")
            assert_scaled_close(getattr(h, name)(*inputs), expected_ref, tol,
                                f"{name} in the default context")
        np.testing.assert_allclose(h.get_inertia_params(), default_table, rtol=1e-12)
        with pytest.raises(ValueError, match=r"inertia table has shape \(7, 9\); this robot's "
                                             r"is \(nb, 10\) = \(7, 10\)"):
            ctx.set_inertia_params(np.zeros((7, 9)))
        other = h.context(workspace_slots=2)
        assert other.ctx_id != ctx.ctx_id
        np.testing.assert_allclose(other.get_inertia_params(), default_table, rtol=1e-12)
        other.close()
    assert ctx.closed
    with pytest.raises(RuntimeError, match="was closed"):
        ctx.crba(s.q)
    ctx.close()  # idempotent
    assert not h._artifact.is_open(other.ctx_id)


def test_default_context_close_and_recreate(handles, refs):
    h, ref = _get(handles, refs, "iiwa14-rt")
    modified, table = _modified_iiwa()
    s, _ = _states(ref, h.dtype)
    h.close_arena()  # start from no default incarnation, whatever earlier tests left
    owners = h._artifact.default_owners
    h.set_inertia_params(table)
    assert_scaled_close(h.crba(s.q), modified.crba(s.q), 1e-9, "mutated default context")
    version = h.model_version
    other = grid_rbd.load_robot(h.path)  # a second owner of the same default context
    assert h._artifact.default_owners == owners + 1
    other.close()
    other.close()  # idempotent: one share given back once
    assert h._artifact.default_owners == owners
    # h still shares it: the mutation survives the other handle's close.
    assert h._artifact.is_open(0) and h.model_version == version
    assert_scaled_close(h.crba(s.q), modified.crba(s.q), 1e-9, "after another handle closed")
    # close_arena closes it whatever the shares; the next call re-creates it (a new epoch).
    h.close_arena()
    assert not h._artifact.is_open(0)
    assert_scaled_close(h.crba(s.q), ref.crba(s.q), 1e-9, "re-created default context")
    assert h.model_version > version and not h.closed


def test_the_last_share_closes_the_default_context(handles, refs, cache):
    h, ref = _get(handles, refs, "iiwa14-rt")
    artifact = h._artifact
    s, _ = _states(ref, h.dtype)
    artifact.close_arena()
    base = artifact.default_owners
    a, b = grid_rbd.get_robot("iiwa14-rt", cache_dir=cache), grid_rbd.load_robot(h.path)
    assert artifact.default_owners == base + 2
    a.crba(s.q)
    first = artifact.default_context()
    with a, b:  # two `with` blocks over one default context
        pass
    assert artifact.default_owners == base
    if base == 0:  # no other default handle of this artifact holds a share
        assert not artifact.is_open(first)
    # A closed default handle takes a share again on its next call.
    assert_scaled_close(a.crba(s.q), ref.crba(s.q), 1e-9, "after close")
    assert artifact.default_owners == base + 1
    del a, b
    import gc

    gc.collect()  # a collected handle gives its share back
    assert artifact.default_owners == base


# -- single states, the checked path, out= layout ------------------------------------------
@pytest.mark.parametrize("config", ["iiwa14-f64", "go2-f64"])
def test_single_states_are_1d_in_and_out(handles, refs, config):
    h, ref = _get(handles, refs, config)
    s, cast = _states(ref, h.dtype, batch=3)
    for algorithm in ALGORITHMS:
        inputs, expected = reference_case(ref, algorithm, s, f_ext=algorithm in FEXT_ALGORITHMS)
        one = [None if x is None else cast(x)[1] for x in inputs]
        got = getattr(h, algorithm)(*one)
        assert got.shape == expected.shape[1:], algorithm
        assert_scaled_close(got[None], expected[1:2], tolerance(h.dtype, algorithm, ref, s.q),
                            f"{config} {algorithm} on a single state")
    q, qd, u = cast(s.q)[0], cast(s.qd)[0], cast(s.u)[0]
    flat = np.empty(2 * h.nv * h.nv, h.dtype)
    view = h.forward_dynamics_gradient(q, qd, u, out=flat)
    assert view.shape == (h.nv, 2 * h.nv) and view.base is flat
    np.testing.assert_array_equal(view, h.forward_dynamics_gradient(q, qd, u))
    batched_out = np.empty((1, h.nv), h.dtype)
    assert h.fd(q, qd, u, out=batched_out).shape == (h.nv,)
    with pytest.raises(ValueError, match=r"^u is a single state but q is batched"):
        h.fd(cast(s.q), cast(s.qd), u)


def test_the_checked_path_gives_the_fast_paths_numbers(handles, refs):
    """A call the C++ fast path declines (here a numpy-scalar gravity) runs through the
    Python checked path with the same numbers; keywords in any order, explicit None and
    numpy subclasses take the fast path."""
    h, ref = _get(handles, refs, "iiwa14-f64")
    s, _ = _states(ref, h.dtype)
    fast = h.forward_dynamics(s.q, s.qd, s.u, gravity=-3.0)
    assert h._fast["forward_dynamics"]((s.q, s.qd, s.u), {"gravity": -3.0}) is not None
    scalar = {"gravity": np.float32(-3.0)}
    assert h._fast["forward_dynamics"]((s.q, s.qd, s.u), scalar) is None  # declined
    np.testing.assert_array_equal(h.forward_dynamics(s.q, s.qd, s.u, **scalar), fast)
    np.testing.assert_array_equal(h.forward_dynamics(s.q.view(_Sub), s.qd, s.u, gravity=-3.0),
                                  fast)
    np.testing.assert_array_equal(h.forward_dynamics(u=s.u, q=s.q, qd=s.qd, f_ext=None,
                                                     gravity=-3.0), fast)
    assert_scaled_close(fast, ref.forward_dynamics(s.q, s.qd, s.u, None, -3.0), 1e-9, "fast")


class _Sub(np.ndarray):
    """A numpy subclass (the fast path takes base ndarrays only)."""


def test_gradient_out_is_row_major_per_item(handles, refs):
    """The gradient out= layout (docs/runtime.md): item b of a flat (B, 2*nv*nv) buffer
    holds the (nv, 2*nv) matrix row after row, [d/dq | d/dqd] within each row, and the
    returned view is C-contiguous."""
    h, ref = _get(handles, refs, "iiwa14-f64")
    s, _ = _states(ref, h.dtype, batch=5)
    nv = h.nv
    flat = h.pinned_empty((5, 2 * nv * nv))
    view = h.inverse_dynamics_gradient(s.q, s.qd, s.qdd, out=flat)
    expected = ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)
    assert view.flags.c_contiguous and view.base is flat
    for b in (0, 4):
        for i in (0, nv - 1):
            row = flat[b, i * 2 * nv:(i + 1) * 2 * nv]
            assert_scaled_close(row[None], expected[b, i][None], 1e-9, f"item {b} row {i}")
    assert_scaled_close(flat.reshape(5, nv, 2 * nv), expected, 1e-9, "row-major items")


def test_device_cuda_without_gpu_raises(tmp_path):
    from grid_rbd._device import cuda_status
    if cuda_status().usable:
        pytest.skip("a CUDA GPU is usable here")
    with pytest.raises(RuntimeError, match="device='cuda' needs a usable CUDA GPU"):
        grid_rbd.register_robot("x", urdf_path=ROBOTS["iiwa14"].path, device="cuda",
                                cache_dir=tmp_path)
