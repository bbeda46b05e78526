"""The second-order profile (`idsva_so`, `fdsva_so`) on the CPU build against the float64
reference (itself checked against Pinocchio's ComputeRNEASecondOrderDerivatives and
finite differences in test_reference_second_order), through the numpy handle:

* iiwa14 in float64 and float32, and a small floating tree (a free-flyer base with two
  branches, one of them prismatic) in float64: the iterated chart of the free flyer;
* with and without `f_ext`, `qdd=None`, a single state, `out=` into a pinned buffer;
* the identity `dMinv/dq_k = -Minv dM/dq_k Minv` between the two kernels' last blocks;
* the four forms of the passes: the world-frame sweep (`symbolic.idsva`, what these
  models get), the sweep as loops over the tree (`grid/idsva.h`, what large trees get),
  one hyper-dual pass and the per-joint hyper-dual loops (the last three forced).
"""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import round_states, tolerance
from support import ROBOTS, assert_scaled_close, cuda_available, random_states

import grid_rbd
import grid_rbd.reference as reference

FLOATING_TREE = """<robot name="so_tree">
  <link name="base"><inertial><mass value="3.0"/><origin xyz="0.02 -0.01 0.03"/>
    <inertia ixx="0.2" ixy="0.01" ixz="0.0" iyy="0.3" iyz="0.02" izz="0.25"/></inertial></link>
  <link name="a1"><inertial><mass value="1.2"/><origin xyz="0.1 0.0 0.02"/>
    <inertia ixx="0.02" ixy="0.0" ixz="0.001" iyy="0.03" iyz="0.0" izz="0.025"/></inertial></link>
  <link name="a2"><inertial><mass value="0.7"/><origin xyz="0.0 0.12 0.0"/>
    <inertia ixx="0.01" ixy="0.002" ixz="0.0" iyy="0.012" iyz="0.0" izz="0.011"/></inertial></link>
  <link name="b1"><inertial><mass value="0.9"/><origin xyz="0.0 0.0 -0.1"/>
    <inertia ixx="0.015" ixy="0.0" ixz="0.0" iyy="0.014" iyz="0.001" izz="0.01"/></inertial></link>
  <joint name="j_a1" type="revolute"><parent link="base"/><child link="a1"/>
    <origin xyz="0.2 0.1 0.0" rpy="0.3 0.0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
  <joint name="j_a2" type="revolute"><parent link="a1"/><child link="a2"/>
    <origin xyz="0.3 0.0 0.0" rpy="0.0 0.5 0.0"/><axis xyz="0.6 0.8 0"/>
    <limit lower="-3" upper="3" effort="50" velocity="10"/></joint>
  <joint name="j_b1" type="prismatic"><parent link="base"/><child link="b1"/>
    <origin xyz="-0.2 0.0 -0.1" rpy="0.0 0.0 0.7"/><axis xyz="0 1 0"/>
    <limit lower="-0.5" upper="0.5" effort="50" velocity="1"/></joint>
</robot>
"""

BATCH = 9
SECOND_ORDER = ("idsva_so", "fdsva_so")


# What each case builds. On the CPU (device "auto" without a GPU, as in CI) iiwa14's
# builds are other modules' CPU builds, found in the session store of tests/conftest.py
# (compiled once per session): test_parameter_sensitivities' float64 one with every
# algorithm and test_plant_hessian_handles' float32 one with the core profile beside the
# second-order one. Where a GPU is usable the builds are CUDA ones that no other module
# makes: the profile alone. The floating tree's build is the profile alone everywhere:
# its semi-implicit step Hessian is refused without the core kernels
# (test_plant_step_hessian_from_the_kernel).
_SHARED = not cuda_available()
ALGORITHMS = {("iiwa14", "float64"): ["all"] if _SHARED else ["second_order"],
              ("iiwa14", "float32"): ["core", "second_order"] if _SHARED else ["second_order"],
              ("so_tree", "float64"): ["second_order"]}


@pytest.fixture(scope="module")
def store(shared_store):
    return shared_store


@pytest.fixture(scope="module")
def urdfs(tmp_path_factory):
    """A folder for the URDFs written here (the store holds only what it publishes)."""
    return tmp_path_factory.mktemp("second_order_urdfs")


def _handle(store, robot: str, dtype: str, urdfs=None):
    """The handle of `robot` (its URDF written to `urdfs` when it is not a file) in the
    store root `store`, and its reference."""
    if robot == "so_tree":
        path = (urdfs or store) / "so_tree.urdf"
        path.write_text(FLOATING_TREE)
        floating = True
    else:
        path, floating = ROBOTS[robot].path, ROBOTS[robot].floating_base
    handle = grid_rbd.register_robot(f"{robot}_so_{dtype}", urdf_path=str(path),
                                     floating_base=floating, dtype=dtype,
                                     algorithm_list=ALGORITHMS[robot, dtype], cache_dir=store)
    return handle, reference.load(path, floating_base=floating)


CASES = [("iiwa14", "float64"), ("iiwa14", "float32"), ("so_tree", "float64")]


@pytest.fixture(scope="module", params=CASES, ids=[f"{r}-{d}" for r, d in CASES])
def case(request, store, urdfs):
    robot, dtype = request.param
    handle, ref = _handle(store, robot, dtype, urdfs)
    s = round_states(random_states(ref.model, BATCH, seed=11 + len(robot)), dtype)
    yield handle, ref, s, np.dtype(dtype)
    handle.close()


def _tol(dtype, ref, s, name):
    # fdsva_so is a solve (Minv) twice over: its float32 error scales with cond(M)^2
    if dtype == np.float32:
        return 3 * tolerance(dtype, "forward_dynamics" if name == "fdsva_so" else
                             "inverse_dynamics", ref, s.q)
    return 1e-9


def _cast(x, dtype):
    return None if x is None else np.ascontiguousarray(x, dtype=dtype)


@pytest.mark.parametrize("f_ext", [False, True], ids=["no-fext", "fext"])
def test_idsva_so_matches_reference(case, f_ext):
    handle, ref, s, dtype = case
    fext = s.f_ext if f_ext else None
    got = handle.idsva_so(_cast(s.q, dtype), _cast(s.qd, dtype), _cast(s.qdd, dtype),
                          _cast(fext, dtype))
    want = ref.idsva_so(s.q, s.qd, s.qdd, fext)
    assert len(got) == 4
    for name, g, w in zip(("d2tau_dq2", "d2tau_dqd2", "d2tau_dq_dqd", "dM_dq"), got, want,
                          strict=True):
        assert g.shape == (BATCH, ref.nv, ref.nv, ref.nv)
        assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1),
                            _tol(dtype, ref, s, "idsva_so"), f"{name} ({dtype})")


@pytest.mark.parametrize("f_ext", [False, True], ids=["no-fext", "fext"])
def test_fdsva_so_matches_reference(case, f_ext):
    handle, ref, s, dtype = case
    fext = s.f_ext if f_ext else None
    got = handle.fdsva_so(_cast(s.q, dtype), _cast(s.qd, dtype), _cast(s.u, dtype),
                          _cast(fext, dtype))
    want = ref.fdsva_so(s.q, s.qd, s.u, fext)
    for name, g, w in zip(("d2qdd_dq2", "d2qdd_dqd2", "d2qdd_dq_dqd", "dMinv_dq"), got,
                          want, strict=True):
        assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1),
                            _tol(dtype, ref, s, "fdsva_so"), f"{name} ({dtype})")


def test_zero_acceleration_single_state_and_out(case):
    """`qdd=None` is a zero acceleration; one state drops the batch axis; `out=` fills a
    pinned buffer in place and returns views of it."""
    handle, ref, s, dtype = case
    nv = ref.nv
    want = ref.idsva_so(s.q, s.qd, np.zeros_like(s.qdd))
    got = handle.idsva_so(_cast(s.q, dtype), _cast(s.qd, dtype))
    tol = _tol(dtype, ref, s, "idsva_so")
    for g, w in zip(got, want, strict=True):
        assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1), tol, "qdd=None")
    one = handle.fdsva_so(_cast(s.q[0], dtype), _cast(s.qd[0], dtype), _cast(s.u[0], dtype))
    ref_one = ref.fdsva_so(s.q[:1], s.qd[:1], s.u[:1])
    for g, w in zip(one, ref_one, strict=True):
        assert g.shape == (nv, nv, nv)
        assert_scaled_close(g.reshape(1, -1), w.reshape(1, -1),
                            _tol(dtype, ref, s, "fdsva_so"), "a single state")
    out = handle.pinned_empty((BATCH, 4 * nv, nv, nv))
    views = handle.idsva_so(_cast(s.q, dtype), _cast(s.qd, dtype), out=out)
    for k, (g, w) in enumerate(zip(views, want, strict=True)):
        assert np.shares_memory(g, out)
        assert_scaled_close(out[:, k * nv:(k + 1) * nv].reshape(BATCH, -1),
                            w.reshape(BATCH, -1), tol, "out=")


def test_inverse_mass_derivative_from_both_kernels(case):
    """The two kernels agree with each other: fdsva_so's dMinv/dq_k equals
    -Minv (dM/dq_k) Minv from idsva_so's dM/dq and the reference's Minv."""
    handle, ref, s, dtype = case
    dM = handle.idsva_so(_cast(s.q, dtype), _cast(s.qd, dtype))[3].astype(np.float64)
    dMinv = handle.fdsva_so(_cast(s.q, dtype), _cast(s.qd, dtype), _cast(s.u, dtype))[3]
    Minv = ref.minv(s.q)
    want = -np.einsum("bil,blmk,bmj->bijk", Minv, dM, Minv)
    assert_scaled_close(dMinv.reshape(BATCH, -1), want.reshape(BATCH, -1),
                        _tol(dtype, ref, s, "fdsva_so"), "dMinv = -Minv dM Minv")


def test_every_strategy_matches_the_reference(case):
    """The strategies beside the thread one, each chosen on a context of its own:
    idsva_so's directions (one thread per group of turns, `emit.directions`) and the
    gather strategy of both kernels (a team per item, fdsva_so's combination as shared
    contractions, `emit.idsva_gather`; iiwa14 in its tile form, the floating tree in its
    memory-order form; on the host its team is one thread): the reference's numbers,
    with and without f_ext (and qdd), at a batch that is not a multiple of anything; and
    the thread strategy's."""
    handle, ref, s, dtype = case
    ctx = handle.context()
    try:
        for name, drive, built in (("idsva_so", s.qdd, ("thread", "directions", "gather")),
                                   ("fdsva_so", s.u, ("thread", "gather"))):
            assert ctx.variants(name) == built
            whole = getattr(handle, name)(*(_cast(a, dtype) for a in (s.q, s.qd, drive)))
            for variant in built[1:]:
                ctx.set_variant_for(name, variant)
                for args in ((s.q, s.qd, drive, s.f_ext), (s.q, s.qd, drive, None)):
                    got = getattr(ctx, name)(*(_cast(a, dtype) for a in args))
                    want = getattr(ref, name)(*args)
                    for k, (g, w) in enumerate(zip(got, want, strict=True)):
                        assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1),
                                            _tol(dtype, ref, s, name),
                                            f"{name} block {k} ({variant})")
                split = getattr(ctx, name)(*(_cast(a, dtype) for a in (s.q, s.qd, drive)))
                # fdsva_so's float32 round-off grows with cond(M)^2 (two solves), as _tol's
                agree = (1e-12 if dtype != np.float32 else
                         1e-5 if name == "idsva_so" else _tol(dtype, ref, s, name))
                for k, (a, b) in enumerate(zip(whole, split, strict=True)):
                    assert_scaled_close(b.reshape(BATCH, -1), a.reshape(BATCH, -1), agree,
                                        f"{name} block {k}: {variant} against thread")
            if name == "idsva_so":
                ctx.set_variant_for(name, "gather")
                got = ctx.idsva_so(*(_cast(a, dtype) for a in (s.q, s.qd, None, None)))
                want = ref.idsva_so(s.q, s.qd, None, None)
                for k, (g, w) in enumerate(zip(got, want, strict=True)):
                    assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1),
                                        _tol(dtype, ref, s, name), f"qdd=None, block {k}")
    finally:
        ctx.close()


def _forced_form_matches(store, seed: int, form: str) -> None:
    """The floating tree built into `store` (a store of its own: a patched emitter is not
    in the store key, so the session store would hand back the usual build) against the
    reference, both kernels, with f_ext."""
    handle, ref = _handle(store, "so_tree", "float64")
    s = random_states(ref.model, BATCH, seed=seed)
    for name, args in (("idsva_so", (s.q, s.qd, s.qdd, s.f_ext)),
                       ("fdsva_so", (s.q, s.qd, s.u, s.f_ext))):
        want = getattr(ref, name)(*args)
        ctx = handle.context()
        try:
            for variant in ctx.variants(name):  # idsva_so's directions too, where built
                ctx.set_variant_for(name, variant)
                got = getattr(ctx, name)(*args)
                for k, (g, w) in enumerate(zip(got, want, strict=True)):
                    assert_scaled_close(g.reshape(BATCH, -1), w.reshape(BATCH, -1), 1e-9,
                                        f"{name} block {k} ({form}, {variant})")
        finally:
            ctx.close()
    handle.close()


def test_sweep_loops_match_the_reference(monkeypatch, tmp_path):
    """The form large trees get (the traced forward pass, then the sweep as loops over
    the tree, grid/idsva.h), forced on the floating tree, with the CPU tiles' output rows
    on the heap as such trees' outputs have them (`emit.kernels.HOST_ROW_STACK_BYTES`):
    the same numbers."""
    from grid_codegen.emit import kernels
    from grid_codegen.emit import second_order as emitter
    monkeypatch.setattr(emitter, "UNROLLED_OPS", 0)
    monkeypatch.setattr(kernels, "HOST_ROW_STACK_BYTES", 0)
    _forced_form_matches(tmp_path, 4, "sweep loops")


def test_joint_loops_match_the_reference(monkeypatch, tmp_path):
    """The form large trees outside the sweep get (one run-time-seeded hyper-dual pass
    per joint, looped over its directions), forced on the floating tree."""
    from grid_codegen.emit import second_order as emitter
    monkeypatch.setattr(emitter, "UNROLLED_OPS", 0)
    monkeypatch.setattr(emitter.idsva, "supported", lambda model: False)
    _forced_form_matches(tmp_path, 5, "joint loops")


def test_hyperdual_pass_matches_the_reference(monkeypatch, tmp_path):
    """The form models outside the world-frame sweep get (one unrolled hyper-dual pass;
    `symbolic.idsva.supported` is False for planar or spherical joints), forced on the
    floating tree: the same numbers as the reference."""
    from grid_codegen.emit import second_order as emitter
    monkeypatch.setattr(emitter.idsva, "supported", lambda model: False)
    _forced_form_matches(tmp_path, 6, "hyper-dual pass")


def _force_head_groups(monkeypatch) -> None:
    """The gather strategy's head in groups (`emit.idsva_head_groups`) on the floating
    tree, too small for them otherwise: one group per body."""
    from grid_codegen.emit import idsva_head_groups
    monkeypatch.setattr(idsva_head_groups, "MIN_BODIES", 1)
    monkeypatch.setattr(idsva_head_groups, "GROUP_OPS", 1)


def test_head_groups_match_the_reference(monkeypatch, tmp_path):
    """idsva_so's gather head in groups of bodies, each a pass recomputing its chain,
    forced on the floating tree (the host runs the groups one after the other, writing
    the first kernel's interleaved layout): the same numbers as the reference."""
    _force_head_groups(monkeypatch)
    _forced_form_matches(tmp_path, 7, "head groups")


@pytest.mark.parametrize("integrator", ["euler", "semi_implicit_euler"])
def test_plant_step_hessian_from_the_kernel(case, integrator):
    """The numpy handle's plant_step_hessian (fdsva_so's blocks assembled in float64)
    against the reference's (its own fdsva_so); refused for rk4, and on a free flyer's
    semi-implicit step without the core kernels (its configuration moves by qd'), naming
    them (tests/test_plant_hessian_handles.py has the rest)."""
    handle, ref, s, dtype = case
    x = np.concatenate([s.q, s.qd], axis=1)
    if ref.model.floating_base and integrator == "semi_implicit_euler":
        with pytest.raises(RuntimeError, match="lacks forward_dynamics.*'core'"):
            handle.plant_step_hessian(x, s.u, 0.01, integrator)
        return
    got = handle.plant_step_hessian(x.astype(dtype), s.u.astype(dtype), 0.01, integrator)
    want = ref.plant_step_hessian(x, s.u, 0.01, integrator)
    assert got.shape == (BATCH, 2 * ref.nv, 3 * ref.nv, 3 * ref.nv)
    assert_scaled_close(got.reshape(BATCH, -1), want.reshape(BATCH, -1),
                        _tol(dtype, ref, s, "fdsva_so"), f"plant_step_hessian {integrator}")
    one = handle.plant_step_hessian(x[0].astype(dtype), s.u[0].astype(dtype), 0.01,
                                    integrator)
    assert_scaled_close(one.reshape(1, -1), want[:1].reshape(1, -1),
                        _tol(dtype, ref, s, "fdsva_so"), "a single state")
    with pytest.raises(ValueError, match="rk4"):
        handle.plant_step_hessian(x.astype(dtype), s.u.astype(dtype), 0.01, "rk4")


@pytest.mark.gpu
@pytest.mark.parametrize("robot,dtype,form", [("iiwa14", "float32", "sweep"),
                                              ("so_tree", "float64", "sweep"),
                                              ("so_tree", "float64", "sweep loops"),
                                              ("so_tree", "float64", "hyper-duals"),
                                              ("so_tree", "float64", "head groups")])
def test_second_order_on_cuda_tensors(monkeypatch, tmp_path, robot, dtype, form):
    """The CUDA build through the torch handle: device-resident tuples of the four
    blocks against the reference, and the pinned host round trip of the spec; the
    sweep's loop form (grid/idsva.h in device code) and the hyper-dual passes forced on
    the floating tree (each build in a store of its own, tmp_path)."""
    from test_codegen_gpu import _require_cuda
    torch = _require_cuda()
    import grid_rbd.torch as gtorch
    from grid_codegen.emit import second_order as emitter
    if form == "sweep loops":
        monkeypatch.setattr(emitter, "UNROLLED_OPS", 0)
    elif form == "hyper-duals":
        monkeypatch.setattr(emitter.idsva, "supported", lambda model: False)
    elif form == "head groups":
        _force_head_groups(monkeypatch)
    if robot == "so_tree":
        path, floating = tmp_path / "so_tree.urdf", True
        path.write_text(FLOATING_TREE)
    else:
        path, floating = ROBOTS[robot].path, ROBOTS[robot].floating_base
    th = grid_rbd.register_robot(f"{robot}_so_cuda", urdf_path=str(path),
                                 floating_base=floating, dtype=dtype, backend="torch",
                                 device="cuda", algorithm_list=["second_order"],
                                 cache_dir=tmp_path)
    ref = reference.load(path, floating_base=floating)
    s = round_states(random_states(ref.model, 37, seed=9), dtype)
    dev = {k: torch.from_numpy(np.ascontiguousarray(getattr(s, k), dtype=dtype)).cuda()
           for k in ("q", "qd", "qdd", "u", "f_ext")}
    np_dtype = np.dtype(dtype)
    for name, args, want in (
            ("idsva_so", ("q", "qd", "qdd", "f_ext"),
             ref.idsva_so(s.q, s.qd, s.qdd, s.f_ext)),
            ("fdsva_so", ("q", "qd", "u", "f_ext"), ref.fdsva_so(s.q, s.qd, s.u, s.f_ext))):
        got = getattr(th, name)(*(dev[a] for a in args))
        assert all(g.is_cuda for g in got)
        host = gtorch.pinned_host_like(got)
        gtorch.copy_to_host(host, got)
        for k, (g, w) in enumerate(zip(host, want, strict=True)):
            assert_scaled_close(g.numpy().reshape(37, -1), w.reshape(37, -1),
                                _tol(np_dtype, ref, s, name), f"{name} block {k} (cuda)")
        ctx = th.context()
        try:  # every variant the build carries (idsva_so's directions and gather too)
            for variant in ctx.variants(name):
                ctx.set_variant_for(name, variant)
                got = getattr(ctx, name)(*(dev[a] for a in args))
                torch.cuda.synchronize()
                for k, (g, w) in enumerate(zip(got, want, strict=True)):
                    assert_scaled_close(g.cpu().numpy().reshape(37, -1), w.reshape(37, -1),
                                        _tol(np_dtype, ref, s, name),
                                        f"{name} block {k} (cuda, {variant})")
        finally:
            ctx.close()
    th.close()
