"""Runtime contexts (spec/runtime_contexts.md) on CPU artifacts through grid_rbd._core:
id rules, the default context's lifecycle, model versions, inertia tables per context,
admission (no torn tables under a concurrent swap), close while calls are in flight, and
the device profile.

Two float64 builds: go2 with runtime_inertia (the contexts under test) and iiwa14 without
it (a second artifact for foreign ids, and the refusal of set_inertia_params). Every test
loads the artifact afresh, so it starts with no contexts and its own salt.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time

import numpy as np
import pytest
from artifact_harness import build_cached
from support import ROBOTS, random_states, scaled_error

import grid_rbd.reference as reference
from grid_codegen.compile import detect_cuda_arch
from grid_rbd.reference import ReferenceRobot

try:
    from grid_rbd import _core
except ImportError as exc:  # pragma: no cover - a checkout without the extension
    raise ImportError("grid_rbd._core is not built: run tools/build_core.sh (in-tree) or "
                      "pip install -e .") from exc

TOL = 1e-9
COUNTER_BITS = 40  # ids: the load's 24-bit tag, then a 40-bit counter
# A call that stays in flight for a while: an FD gradient of go2 on one host thread, its
# batch calibrated on this machine (the kernels keep getting faster) to last LONG_SECONDS.
LONG_SECONDS = 0.25
LONG_BATCH_CAP = 1 << 16  # the build's max_batch_size


@pytest.fixture(scope="module")
def go2_path():
    harness, _ = build_cached("go2", dtype="float64", runtime_inertia=True)
    return str(harness.path)


@pytest.fixture(scope="module")
def iiwa_path():
    harness, _ = build_cached("iiwa14", dtype="float64")
    return str(harness.path)


@pytest.fixture
def go2(go2_path):
    return _core.load_artifact(go2_path)


@pytest.fixture(scope="module")
def go2_ref():
    robot = ROBOTS["go2"]
    return reference.load(robot.path, floating_base=robot.floating_base)


def _long_call(artifact, ctx, ref, s):
    """One FD gradient of the whole batch on one host thread (slow on purpose)."""
    artifact.set_threads_for(ctx, "forward_dynamics_gradient", 1)
    out = np.empty((len(s.q), ref.nv, 2 * ref.nv))
    artifact.call(ctx, "forward_dynamics_gradient", [s.q, s.qd, s.u], out)


@pytest.fixture(scope="module")
def long_batch(go2_path, go2_ref):
    """The batch whose one-thread FD gradient lasts about LONG_SECONDS here."""
    artifact = _core.load_artifact(go2_path)
    ctx = artifact.create_context()
    batch = 2048
    while True:
        s = random_states(go2_ref.model, batch, seed=3)
        start = time.monotonic()
        _long_call(artifact, ctx, go2_ref, s)
        took = time.monotonic() - start
        if took >= LONG_SECONDS or batch >= LONG_BATCH_CAP:
            break
        batch = min(LONG_BATCH_CAP, batch * max(2, int(LONG_SECONDS / max(took, 1e-3)) + 1))
    artifact.close_context(ctx)
    return batch


def _default_table(ref: ReferenceRobot) -> np.ndarray:
    return np.stack([b.inertia.dynamic_parameters() for b in ref.model.bodies])


def _heavier(ref: ReferenceRobot) -> ReferenceRobot:
    """Every body heavier, its centre of mass moved, its rotational inertia grown."""
    bodies = []
    for i, body in enumerate(ref.model.bodies):
        inertia = dataclasses.replace(body.inertia, mass=body.inertia.mass * (1.4 + 0.03 * i),
                                      com=body.inertia.com + 0.02 * (i % 3 + 1),
                                      inertia_com=body.inertia.inertia_com * 1.7 + 2e-3 * np.eye(3))
        bodies.append(dataclasses.replace(body, inertia=inertia))
    return ReferenceRobot(dataclasses.replace(ref.model, bodies=tuple(bodies)))


def _fd(artifact, ctx, s):
    out = np.empty(s.u.shape)
    artifact.call(ctx, "forward_dynamics", [s.q, s.qd, s.u], out)
    return out


# -- identity rules ----------------------------------------------------------------------
def test_ids_are_salted_distinct_and_never_zero(go2, go2_path):
    ids = [go2.create_context() for _ in range(5)]
    default = go2.default_context()
    assert len(set(ids + [default])) == 6 and 0 not in ids + [default]
    assert {i >> COUNTER_BITS for i in ids + [default]} == {go2.salt >> COUNTER_BITS}
    assert default == go2.default_context()  # the alias is stable while open
    again = _core.load_artifact(go2_path)  # the same .so loaded twice: a second salt
    assert again.salt != go2.salt
    assert (again.create_context() >> COUNTER_BITS) != (go2.salt >> COUNTER_BITS)


def test_closed_ids_are_refused_and_never_reused(go2, go2_ref):
    s = random_states(go2_ref.model, 3, seed=1)
    ctx = go2.create_context()
    _fd(go2, ctx, s)
    assert go2.is_open(ctx)
    go2.close_context(ctx)
    go2.close_context(ctx)  # idempotent
    assert not go2.is_open(ctx)
    for attempt in (lambda: _fd(go2, ctx, s), lambda: go2.model_version(ctx),
                    lambda: go2.get_inertia_params(ctx), lambda: go2.device_profile(ctx),
                    lambda: go2.set_inertia_params(ctx, _default_table(go2_ref))):
        with pytest.raises(RuntimeError, match="context is closed"):
            attempt()
    later = {go2.create_context() for _ in range(50)}
    assert ctx not in later
    with pytest.raises(RuntimeError, match="context is closed"):
        _fd(go2, ctx, s)


def test_foreign_and_unknown_ids(go2, iiwa_path, go2_ref):
    iiwa = _core.load_artifact(iiwa_path)
    s = random_states(go2_ref.model, 2, seed=2)
    theirs = iiwa.create_context()
    mine = go2.create_context()
    for attempt in (lambda: _fd(go2, theirs, s), lambda: go2.model_version(theirs),
                    lambda: go2.close_context(theirs)):
        with pytest.raises(RuntimeError, match="a context of another robot artifact"):
            attempt()
    assert not go2.is_open(theirs) and not iiwa.is_open(mine)
    never_minted = mine + 1000  # this load's tag, a counter it has not reached
    unclaimed_tag = ((go2.salt >> COUNTER_BITS) ^ 0x5A5A5A) << COUNTER_BITS | 1
    for bogus in (never_minted, unclaimed_tag, 12345):
        with pytest.raises(RuntimeError, match="unknown context id"):
            go2.model_version(bogus)
    with pytest.raises(RuntimeError, match="unknown context id"):
        go2.close_context(never_minted)


def test_default_context_is_lazy_and_recreated_after_close(go2, go2_ref):
    s = random_states(go2_ref.model, 4, seed=3)
    assert not go2.is_open(0)
    expected = go2_ref.forward_dynamics(s.q, s.qd, s.u)
    assert scaled_error(_fd(go2, 0, s), expected) < TOL  # created by the first call
    first = go2.default_context()
    assert go2.is_open(0) and go2.is_open(first)
    v1 = go2.model_version(0)
    assert v1 == go2.model_version(first)
    go2.close_context(0)
    assert not go2.is_open(0) and not go2.is_open(first)
    go2.close_context(0)  # no default incarnation now: a no-op
    with pytest.raises(RuntimeError, match="context is closed"):
        go2.model_version(first)
    assert scaled_error(_fd(go2, 0, s), expected) < TOL  # a new incarnation
    second = go2.default_context()
    assert second != first and go2.model_version(0) > v1
    go2.close_context(second)  # closing it by its own id ends the alias too
    assert not go2.is_open(0) and go2.default_context() not in (first, second)


# -- model versions ------------------------------------------------------------------------
def test_model_versions_increase_across_creations_and_mutations(go2, go2_ref):
    table = _default_table(go2_ref)
    seen = []
    a = go2.create_context()
    seen.append(go2.model_version(a))
    b = go2.create_context()
    seen.append(go2.model_version(b))
    seen.append(go2.set_inertia_params(a, table))
    assert go2.model_version(a) == seen[-1]
    seen.append(go2.model_version(0))  # the default is created here
    seen.append(go2.set_inertia_params(b, table * 1.1))
    seen.append(go2.set_inertia_params(a, table))
    seen.append(go2.model_version(go2.create_context()))
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert go2.model_epoch == seen[-1]
    assert go2.model_version(b) == seen[4]  # others' mutations do not move b


# -- inertia tables ------------------------------------------------------------------------
def test_inertia_tables_are_per_context(go2, go2_ref):
    heavy = _heavier(go2_ref)
    s = random_states(go2_ref.model, 6, seed=4)
    a, b = go2.create_context(), go2.create_context()
    np.testing.assert_allclose(go2.get_inertia_params(a), _default_table(go2_ref), rtol=1e-15)
    go2.set_inertia_params(a, _default_table(heavy))
    np.testing.assert_array_equal(go2.get_inertia_params(a), _default_table(heavy))
    assert scaled_error(_fd(go2, a, s), heavy.forward_dynamics(s.q, s.qd, s.u)) < TOL
    expected = go2_ref.forward_dynamics(s.q, s.qd, s.u)
    for untouched in (b, 0):
        np.testing.assert_allclose(go2.get_inertia_params(untouched), _default_table(go2_ref),
                                   rtol=1e-15)
        assert scaled_error(_fd(go2, untouched, s), expected) < TOL
    go2.set_inertia_params(a, _default_table(go2_ref).tolist())  # any real array-like
    assert scaled_error(_fd(go2, a, s), expected) < TOL


def test_inertia_table_errors(go2, go2_ref, iiwa_path):
    ctx = go2.create_context()
    version = go2.model_version(ctx)
    table = _default_table(go2_ref)
    with pytest.raises(ValueError, match=r"shape \(12, 10\); expected \(nb, 10\) = \(13, 10\)"):
        go2.set_inertia_params(ctx, table[:12])
    bad = table.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match="body 3 parameter Ixx is not finite"):
        go2.set_inertia_params(ctx, bad)
    assert go2.model_version(ctx) == version  # a refused mutation changes nothing
    iiwa = _core.load_artifact(iiwa_path)
    with pytest.raises(RuntimeError, match="runtime_inertia=True"):
        iiwa.set_inertia_params(0, np.zeros((7, 10)))
    assert iiwa.get_inertia_params(0).shape == (7, 10)  # the compiled-in values


def _hammer_while_swapping(artifact, ref, batch):
    """One thread hammers forward_dynamics while another swaps two inertia tables: every
    call must see one table for all of its items, the old physics or the new."""
    heavy = _heavier(ref)
    s = random_states(ref.model, batch, seed=5)
    answers = (ref.forward_dynamics(s.q, s.qd, s.u), heavy.forward_dynamics(s.q, s.qd, s.u))
    assert scaled_error(answers[0], answers[1]) > 1e-2
    tables = (_default_table(ref), _default_table(heavy))
    ctx = artifact.create_context()
    done = threading.Event()
    seen, torn = [0, 0], []

    def hammer():
        while not done.is_set() or sum(seen) < 20:
            out = _fd(artifact, ctx, s)
            errors = [scaled_error(out, answer) for answer in answers]
            if min(errors) <= TOL:
                seen[int(np.argmin(errors))] += 1
            else:
                torn.append(errors)

    worker = threading.Thread(target=hammer)
    worker.start()
    try:
        for k in range(60):
            artifact.set_inertia_params(ctx, tables[(k + 1) % 2])
            time.sleep(0.002)
    finally:
        done.set()
        worker.join()
    assert not torn, f"{len(torn)} calls matched neither table: {torn[:3]}"
    assert seen[0] > 0 and seen[1] > 0, seen


def test_a_concurrent_swap_is_never_torn(go2, go2_ref):
    _hammer_while_swapping(go2, go2_ref, 256)


@pytest.mark.gpu
def test_gpu_a_concurrent_swap_is_never_torn():
    if shutil.which("nvcc") is None or detect_cuda_arch() is None:
        pytest.skip("no CUDA GPU: nvcc or a GPU is missing")
    harness, _ = build_cached("iiwa14", backend="cuda", dtype="float64", runtime_inertia=True)
    artifact = _core.load_artifact(str(harness.path))
    _hammer_while_swapping(artifact, reference.load(ROBOTS["iiwa14"].path), 4096)


# -- close ---------------------------------------------------------------------------------
def test_close_drains_admitted_calls_and_refuses_later_ones(go2, go2_ref):
    """Workers call in a loop, each into a fresh NaN-filled out; the main thread closes.
    When close() returns, every out is either fully written (its call was admitted and has
    drained) or untouched (refused): never half-written."""
    s = random_states(go2_ref.model, 512, seed=6)
    expected = go2_ref.forward_dynamics(s.q, s.qd, s.u)
    ctx = go2.create_context()
    workers = 3
    started = threading.Barrier(workers + 1)
    current = [None] * workers
    results: list[list] = [[] for _ in range(workers)]

    def worker(k):
        started.wait()
        while True:
            out = current[k] = np.full(s.u.shape, np.nan)
            try:
                go2.call(ctx, "forward_dynamics", [s.q, s.qd, s.u], out)
            except RuntimeError as exc:
                results[k].append(("refused", str(exc)))
                return
            results[k].append(("ok", scaled_error(out, expected)))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
    for t in threads:
        t.start()
    started.wait()
    time.sleep(0.05)  # calls in flight
    go2.close_context(ctx)
    written = [int(np.isfinite(out).all(axis=1).sum()) for out in current]
    for t in threads:
        t.join()
    assert all(rows in (0, 512) for rows in written), f"half-written outputs: {written}"
    for log in results:
        *calls, last = log
        assert calls, "every worker completed calls before the close"
        assert all(kind == "ok" and err < TOL for kind, err in calls)
        assert last[0] == "refused" and ("context is closed" in last[1]
                                         or "context is closing" in last[1])


def test_a_closing_context_refuses_new_calls(go2, go2_ref, long_batch):
    """While close() waits for a long admitted call, a new call is told 'context is
    closing'. Scheduling decides whether the long call was admitted before the close; the
    scenario is repeated until it was."""
    s = random_states(go2_ref.model, long_batch, seed=7)
    small = random_states(go2_ref.model, 1, seed=8)
    for _ in range(5):
        ctx = go2.create_context()
        long_call = {}

        def run_long(ctx=ctx, record=long_call):
            try:
                _long_call(go2, ctx, go2_ref, s)
                record["ok"] = True
            except RuntimeError:
                record["ok"] = False
            record["end"] = time.monotonic()

        runner = threading.Thread(target=run_long)
        runner.start()
        time.sleep(0.03)
        closer = threading.Thread(target=go2.close_context, args=(ctx,))
        closer.start()
        time.sleep(0.03)
        with pytest.raises(RuntimeError, match="context is clos") as refused:
            _fd(go2, ctx, small)
        refused_at = time.monotonic()
        runner.join()
        closer.join()
        if long_call["ok"] and long_call["end"] > refused_at:
            assert "context is closing" in str(refused.value)
            return
    pytest.fail("the long call was never in flight when the new call came")


# -- device profile ------------------------------------------------------------------------
def test_device_profile(go2, go2_ref, monkeypatch):
    info = go2.info
    explicit = go2.device_profile(go2.create_context(workspace_slots=5))
    assert explicit["is_gpu"] is False and explicit["device_arch"] == "cpu"
    assert explicit["compiled_archs"] == ["cpu"] and explicit["name"] == "cpu"
    assert explicit["compute_capability"] == (0, 0)
    assert explicit["max_batch"] == info["max_batch"]
    assert explicit["total_memory"] >= explicit["free_memory"] > 0
    assert explicit["multiprocessors"] >= 1 and explicit["shared_memory_optin"] == 0
    assert (explicit["workspace_slots"], explicit["workspace_slots_source"]) == (5, "explicit")
    # The ABI 3 kernels need no global workspace; the arena holds the inertia table.
    assert explicit["workspace_bytes"] == 0
    assert explicit["arena_bytes"] == 10 * go2_ref.nb * 8 and not explicit["caller_owned_slab"]
    assert explicit["own_stream"] is False and explicit["stream_note"] == ""  # no CPU streams
    monkeypatch.setenv("GRID_WORKSPACE_TIMESTEP_SLOTS", "7")
    env = go2.device_profile(go2.create_context())
    assert (env["workspace_slots"], env["workspace_slots_source"]) == (7, "environment")
    cap = go2.device_profile(go2.create_context(workspace_slots=3))
    assert (cap["workspace_slots"], cap["workspace_slots_source"]) == (3, "explicit")
    for hostile in ("-4", "7x", " 7", "1e9", "99999999999"):
        monkeypatch.setenv("GRID_WORKSPACE_TIMESTEP_SLOTS", hostile)
        ignored = go2.device_profile(go2.create_context())
        assert ignored["workspace_slots_source"] == "auto", hostile
    monkeypatch.delenv("GRID_WORKSPACE_TIMESTEP_SLOTS")
    auto = go2.device_profile(0)
    assert (auto["workspace_slots"], auto["workspace_slots_source"]) == (info["max_batch"],
                                                                        "auto")
    with pytest.raises(ValueError, match="workspace_slots must be >= 0"):
        go2.create_context(workspace_slots=-1)


def test_workspace_fit_policy():
    """explicit > environment > auto; auto fits a quarter of the free memory; never more
    slots than max_batch."""
    fit = _core.fit_workspace
    assert fit(0, None, 0, 1 << 30, 512) == {"slots": 512, "source": "auto",
                                             "bytes_per_slot": 0, "bytes": 0}
    assert fit(0, None, 1000, 400_000, 512) == {"slots": 100, "source": "auto",
                                                "bytes_per_slot": 1000, "bytes": 100_000}
    assert fit(0, None, 1000, 1_000, 512)["slots"] == 1  # at least one slot
    assert fit(0, "64", 1000, 400_000, 512)["slots"] == 64  # the environment beats auto
    assert fit(8, "64", 1000, 400_000, 512) == {"slots": 8, "source": "explicit",
                                                "bytes_per_slot": 1000, "bytes": 8000}
    assert fit(4096, None, 10, 1 << 30, 512)["slots"] == 512  # capped at max_batch
    assert fit(0, "0", 1000, 400_000, 512)["source"] == "auto"
    with pytest.raises(ValueError, match="workspace_slots must be >= 0"):
        fit(-2, None, 0, 0, 512)


# -- the default context's owners -----------------------------------------------------------
def test_default_context_closes_with_its_last_owner(go2, go2_ref):
    s = random_states(go2_ref.model, 2, seed=9)
    go2.retain_default()
    go2.retain_default()
    _fd(go2, 0, s)
    first = go2.default_context()
    go2.release_default()
    assert go2.is_open(first) and go2.default_owners == 1  # another owner still holds it
    go2.release_default()
    assert not go2.is_open(first) and go2.default_owners == 0
    go2.release_default()  # no owner left: nothing to give back
    assert go2.default_owners == 0
    go2.retain_default()
    _fd(go2, 0, s)
    second = go2.default_context()
    assert second != first
    go2.close_arena()  # closes it whatever the owners
    assert not go2.is_open(second) and go2.default_owners == 1
    assert scaled_error(_fd(go2, 0, s), go2_ref.forward_dynamics(s.q, s.qd, s.u)) < TOL


# -- launch overrides ----------------------------------------------------------------------
def test_launch_overrides_are_per_context_and_keep_the_model_version(go2):
    a, b = go2.create_context(), go2.create_context()
    version = go2.model_version(a)
    go2.set_threads_for(a, "forward_dynamics", 128)
    go2.set_threads_for(a, "crba", 64)
    variant = go2.variants("minv")[-1]
    go2.set_variant_for(a, "minv", variant)
    assert go2.model_version(a) == version  # overrides are not model state
    table = go2.launch_overrides(a)
    assert table["forward_dynamics"] == {"threads_per_block": 128, "variant": ""}
    assert table["crba"]["threads_per_block"] == 64
    assert table["minv"]["variant"] == variant
    assert all(e == {"threads_per_block": 0, "variant": ""}
               for e in go2.launch_overrides(b).values())
    go2.set_threads_for(b, "", 256)  # every algorithm
    assert {e["threads_per_block"] for e in go2.launch_overrides(b).values()} == {256}
    go2.clear_launch_overrides(a)
    assert go2.launch_overrides(a)["forward_dynamics"]["threads_per_block"] == 0
    # On a CPU artifact the setting is a host thread count (on a GPU one, whole warps).
    go2.set_threads_for(a, "forward_dynamics", 3)
    assert go2.launch_overrides(a)["forward_dynamics"]["threads_per_block"] == 3
    for threads in (-32, 2048):
        with pytest.raises(ValueError, match="host thread count on this CPU artifact"):
            go2.set_threads_for(a, "forward_dynamics", threads)
    with pytest.raises(ValueError, match="unknown variant 'warp-x'"):
        go2.set_variant_for(a, "minv", "warp-x")
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        go2.set_threads_for(a, "nope", 64)
    go2.close_context(a)
    with pytest.raises(RuntimeError, match="context is closed"):
        go2.set_threads_for(a, "crba", 64)


def test_a_launch_override_waits_for_admitted_calls(go2, go2_ref, long_batch):
    """Overrides take the admission exclusive, like a mutation: one set while a long call
    is in flight returns only once that call is done (a few milliseconds of slack: the
    call's thread takes the GIL back before it can note its end)."""
    s = random_states(go2_ref.model, long_batch, seed=10)
    for _ in range(5):
        ctx = go2.create_context()
        ended = {}

        def long_call(ctx=ctx, ended=ended):
            _long_call(go2, ctx, go2_ref, s)
            ended["at"] = time.monotonic()

        runner = threading.Thread(target=long_call)
        runner.start()
        time.sleep(0.02)
        asked = time.monotonic()
        go2.set_threads_for(ctx, "forward_dynamics", 4)
        returned = time.monotonic()
        runner.join()
        if ended["at"] - asked > 0.05:  # the call was clearly in flight when the set came
            assert returned >= ended["at"] - 0.005, \
                f"the override returned {ended['at'] - returned:.3f} s before the call ended"
            return
    pytest.fail("the long call was never in flight when the override came")


# -- the staging path (GPU host calls), run on the CPU ----------------------------------------
@pytest.mark.parametrize("batch", [1, 7, 100, 3000])
def test_staged_host_calls_match_the_reference(go2, go2_ref, batch):
    """stage_host_calls runs the GPU path of a host call with memcpys, so its layout
    logic is checked without a GPU: up to 64 KiB (batches 1 and 7 here) the launch runs on
    the page-locked mirror itself (mapped staging), up to 4 MiB (100) the inputs are
    packed into the mirror, copied in once, launched on the arena and copied out once,
    above (3000) straight copies."""
    ctx = go2.create_context(stage_host_calls=True)
    assert go2.device_profile(ctx)["mapped_staging"] is True
    assert go2.device_profile(go2.create_context())["mapped_staging"] is False  # unstaged
    s = random_states(go2_ref.model, batch, seed=11)
    out = np.full((batch, go2_ref.nv, 2 * go2_ref.nv), np.nan)
    go2.call(ctx, "forward_dynamics_gradient", [s.q, s.qd, s.u, s.f_ext], out)
    assert scaled_error(out, go2_ref.forward_dynamics_gradient(s.q, s.qd, s.u, s.f_ext)) < TOL
    tau = np.full((batch, go2_ref.nv), np.nan)
    go2.call(ctx, "inverse_dynamics", [s.q, s.qd, None, s.f_ext], tau)  # an omitted input
    assert scaled_error(tau, go2_ref.inverse_dynamics(s.q, s.qd, None, s.f_ext)) < TOL


# -- launch groups (a backward's launches) ----------------------------------------------------
def test_a_launch_group_checks_its_stamp_once_for_all_and_refuses_whole(go2, go2_ref):
    s = random_states(go2_ref.model, 3, seed=12)
    ctx = go2.create_context()
    ids = {name: entry["id"] for name, entry in go2.info["algorithms"].items()}
    stamp = np.zeros(1, np.uint64)
    out = np.empty_like(s.u)
    version = go2.launch(ctx, ids["forward_dynamics"], [s.q.ctypes.data, s.qd.ctypes.data,
                                                        s.u.ctypes.data], out.ctypes.data, 3,
                         stamp_out=stamp.ctypes.data)
    assert int(stamp[0]) == version == go2.model_version(ctx)
    jac = np.full((3, go2_ref.nv, 2 * go2_ref.nv), np.nan)
    solved = np.full_like(s.u, np.nan)
    zeros = np.zeros_like(s.qd)
    calls = [(ids["forward_dynamics_gradient"], [s.q.ctypes.data, s.qd.ctypes.data,
                                                 s.u.ctypes.data], jac.ctypes.data, 3, -9.81),
             (ids["forward_dynamics"], [s.q.ctypes.data, zeros.ctypes.data, s.u.ctypes.data],
              solved.ctypes.data, 3, 0.0)]
    assert go2.launch_group(ctx, calls, stamp_expect=stamp.ctypes.data) == version
    assert scaled_error(jac, go2_ref.forward_dynamics_gradient(s.q, s.qd, s.u)) < TOL
    minv_u = np.einsum("bij,bj->bi", go2_ref.minv(s.q), s.u)
    assert scaled_error(solved, minv_u) < TOL
    go2.set_inertia_params(ctx, _default_table(go2_ref))
    jac[:], solved[:] = np.nan, np.nan
    with pytest.raises(RuntimeError, match=rf"version {version} -> "):
        go2.launch_group(ctx, calls, stamp_expect=stamp.ctypes.data)
    assert np.isnan(jac).all() and np.isnan(solved).all(), "a refused group launched"


def test_a_batch_above_the_slot_cap_is_complete(go2, go2_ref):
    """workspace_slots=3 caps the items in flight per launch; a batch of 11 strides over
    the slots and every item is computed (host and staged paths alike)."""
    s = random_states(go2_ref.model, 11, seed=13)
    expected = go2_ref.forward_dynamics_gradient(s.q, s.qd, s.u)
    for staged in (False, True):
        ctx = go2.create_context(workspace_slots=3, stage_host_calls=staged)
        assert go2.device_profile(ctx)["workspace_slots"] == 3
        out = np.full((11, go2_ref.nv, 2 * go2_ref.nv), np.nan)
        go2.call(ctx, "forward_dynamics_gradient", [s.q, s.qd, s.u], out)
        assert scaled_error(out, expected) < TOL, f"staged={staged}"


def test_a_variant_override_reaches_the_kernel(iiwa_path):
    """Each variant override launches that variant (ABI 4's launch configuration): all
    give the reference's numbers, and they are not all the same bits (the thread
    variant's vectorised arithmetic rounds differently from the level variants'), which
    they would be if the override never reached the kernel."""
    artifact = _core.load_artifact(iiwa_path)
    if artifact.info["abi_version"] < 4:
        pytest.skip("the artifact's ABI has no variants (ABI 3)")
    ref = reference.load(ROBOTS["iiwa14"].path)
    s = random_states(ref.model, 37, seed=14)
    expected = ref.forward_dynamics_gradient(s.q, s.qd, s.u)
    ctx = artifact.create_context()
    results = {}
    for variant in artifact.variants("forward_dynamics_gradient"):
        artifact.set_variant_for(ctx, "forward_dynamics_gradient", variant)
        out = np.empty((37, ref.nv, 2 * ref.nv))
        artifact.call(ctx, "forward_dynamics_gradient", [s.q, s.qd, s.u], out)
        assert scaled_error(out, expected) < TOL, variant
        results[variant] = out
    assert len(results) > 1
    first = next(iter(results.values()))
    assert any(not np.array_equal(first, other) for other in results.values()), \
        "every variant override gave the same bits: the override did not reach the kernel"
