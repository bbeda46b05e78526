"""Strategy selection: an explicit strategy builds one variant and re-keys the store,
`auto` carries every variant with a default dispatch table, and the autotune measures
variants and produces tables the artifact accepts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from artifact_harness import Artifact, build_cached, reference_case
from support import REPO, ROBOTS, assert_scaled_close, random_states

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd import _autotune

IIWA = REPO / "robots/iiwa14/iiwa14.urdf"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return tmp_path_factory.mktemp("strategy_store")


def test_an_explicit_strategy_is_its_own_entry(store):
    algorithms = ["inverse_dynamics", "aba"]
    auto = grid_rbd.register_robot("iiwa_auto", urdf_path=IIWA, device="cpu", dtype="float64",
                                   algorithm_list=algorithms, cache_dir=store)
    warp = grid_rbd.register_robot("iiwa_warp", urdf_path=IIWA, device="cpu", dtype="float64",
                                   algorithm_list=algorithms, cache_dir=store, strategy="warp")
    assert auto.registration.content_key != warp.registration.content_key
    assert auto.registration.input_key != warp.registration.input_key
    got_auto = Artifact(auto.path).algorithms["aba"].variants
    got_warp = Artifact(warp.path).algorithms["aba"].variants
    assert got_auto == ("thread", "warp", "block") and got_warp == ("warp",)
    assert json.loads((warp.path.parent / "meta.json").read_text())["options"][
        "strategy"] == "warp"
    ref = reference.load(IIWA)
    s = random_states(ref.model, 9, seed=1)
    inputs, expected = reference_case(ref, "aba", s)
    for handle in (auto, warp):
        assert_scaled_close(handle.aba(*inputs[:3]), expected, 1e-9, "aba")
    with pytest.raises(ValueError, match="strategy"):
        grid_rbd.register_robot("bad", urdf_path=IIWA, device="cpu", strategy="grid",
                                cache_dir=store)


def test_autotune_measures_every_variant_and_the_tables_install():
    artifact, _ = build_cached("iiwa14", dtype="float64")
    result = _autotune.autotune(artifact.path, batches=(1, 16), cpu=True)
    tunable = {name for name, a in artifact.algorithms.items() if len(a.variants) > 1}
    assert set(result.dispatch) == tunable  # one variant (the reverse-mode kernels): no table
    assert {"forward_dynamics_vjp", "inverse_dynamics_vjp"} <= set(artifact.algorithms)
    for name, table in result.dispatch.items():
        variants = artifact.algorithms[name].variants
        assert table[0][0] == 1 and all(v in variants for _, v in table)
        assert [b for b, _ in table] == sorted({b for b, _ in table})
        times = result.seconds[name]
        assert set(times) == set(variants)
        assert all(t > 0 for per in times.values() for t in per.values())
        # The table names the fastest variant measured at each batch.
        for batch, variant in table:
            at = str(batch if batch > 1 else 1)
            assert times[variant][at] == min(per[at] for per in times.values())
    state = artifact.state()
    for name, table in result.dispatch.items():
        assert state.set_dispatch(name, [(b, v) for b, v in table]) == 0
        assert state.chosen_variant(name, 1) == table[0][1]
    # The measured choice changes which variant runs, never the numbers.
    ref = reference.load(ROBOTS["iiwa14"].path)
    s = random_states(ref.model, 20, seed=3)
    inputs, expected = reference_case(ref, "forward_dynamics_gradient", s)
    assert_scaled_close(state.call("forward_dynamics_gradient", *inputs), expected, 1e-9,
                        "after set_dispatch")
    state.close()
    assert _autotune.autotune(artifact.path).dispatch == {}  # a CPU build: the cost model
    meta = result.to_meta()
    assert json.loads(json.dumps(meta))["dispatch"] == result.dispatch
    assert np.isfinite(meta["autotune"]["wall_seconds"])


def test_a_recorded_dispatch_table_is_honoured_by_every_context(store):
    """The table registration records in meta.json (measured on the GPU) reaches the
    default context, explicit contexts opened before and after, and changes which variant
    runs but never the numbers; a table naming an unknown variant is refused."""
    from grid_rbd._handle import install_dispatch

    handle = grid_rbd.register_robot("iiwa_tab", urdf_path=IIWA, device="cpu", dtype="float64",
                                     algorithm_list=["aba", "crba"], cache_dir=store)
    artifact = handle._artifact
    ref = reference.load(IIWA)
    s = random_states(ref.model, 40, seed=4)
    inputs, expected = reference_case(ref, "aba", s)
    before = handle.context()
    assert artifact.chosen_variant(before.ctx_id, "aba", 40) == "thread"  # the CPU default
    install_dispatch(artifact, {"dispatch": {"aba": [[1, "warp"], [32, "block"]],
                                             "not_built": [[1, "thread"]]}})
    after = handle.context()
    for h in (handle, before, after):
        ctx = h.ctx_id
        assert [artifact.chosen_variant(ctx, "aba", b) for b in (1, 31, 32)] == \
            ["warp", "warp", "block"]
        assert artifact.chosen_variant(ctx, "crba", 1) == "thread"  # untouched
        assert_scaled_close(h.aba(*inputs[:3]), expected, 1e-9, "aba under the table")
    with pytest.raises(Exception, match="variant|dispatch"):
        install_dispatch(artifact, {"dispatch": {"aba": [[1, "nonsense"]]}})
    with pytest.raises(Exception, match="dispatch"):
        install_dispatch(artifact, {"dispatch": {"aba": [[2, "warp"]]}})
    install_dispatch(artifact, {"dispatch": {"aba": []}})  # back to the artifact's default
    assert artifact.chosen_variant(after.ctx_id, "aba", 32) == "thread"
    before.close()
    after.close()
