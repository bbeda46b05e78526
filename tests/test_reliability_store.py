"""The store under stress (issue 12), the bounded CI part of tools/reliability: SIGKILL at
every phase of a build and of a force_rebuild, concurrent registrations, rebuilds under
concurrent readers (with the atomic swap and with the two-rename fallback), damaged
entries, hostile pointers and manifest keys, damaged manifests and lock files replaced by
links. Every case asserts the store invariants afterwards (`harness.check_store`:
everything published verifies, nothing dangles, staging is swept) and that the next
registration succeeds. `tools/reliability/run.py --minutes N` repeats them for longer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from reliability import harness, store_cases  # noqa: E402
from reliability.harness import TINY_URDF  # noqa: E402


@pytest.fixture
def compiler(tmp_path, monkeypatch) -> harness.Compiler:
    """A counting g++ wrapper as GRID_RBD_CXX, here and in every child."""
    compiler = harness.make_compiler(tmp_path / "bin")
    for name in ("GRID_RBD_CXXFLAGS", "GRID_RBD_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRID_RBD_CXX", str(compiler.path))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    return compiler


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> dict[str, Path]:
    """Stores built once per module and copied per case: "tiny" (tiny registered) and
    "pair" (tiny and tiny_b)."""
    import os

    root = tmp_path_factory.mktemp("templates")
    compiler = harness.make_compiler(root / "bin")
    saved = {k: os.environ.get(k) for k in ("GRID_RBD_CXX", "GRID_RBD_PROGRESS",
                                             "GRID_RBD_CXXFLAGS", "GRID_RBD_CACHE_DIR")}
    os.environ.update(GRID_RBD_CXX=str(compiler.path), GRID_RBD_PROGRESS="off")
    os.environ.pop("GRID_RBD_CXXFLAGS", None)
    try:
        harness.ensure(root / "tiny")
        harness.ensure(root / "pair")
        harness.ensure(root / "pair", name="tiny_b", urdf=store_cases.OTHER_URDF)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"tiny": root / "tiny", "pair": root / "pair", "compiler": compiler.path}


def test_killed_builds_leave_a_consistent_store(tmp_path, compiler):
    """SIGKILL during each phase of a first build: nothing partial is visible, the dead
    staging is swept, and the next registration succeeds."""
    cases = [(phase, False, True) for phase in store_cases.BUILD_PHASES]
    records = store_cases.kill_cases(tmp_path, compiler, cases)
    after = {r["case"].split(" at ")[1]: r["after"] for r in records}
    # Killed before the entry was published: built again; after: found by content or key.
    assert after == {"parse": "built", "generate": "built", "compile": "built",
                     "publish": "built", "integrity": "built", "rename": "content",
                     "pointer": "content", "manifest": "hit"}, after


def test_killed_rebuilds_leave_the_name_with_an_entry(tmp_path, templates, monkeypatch):
    """SIGKILL during each phase of a force_rebuild (atomic swap, and the two renames of
    systems without it): the name resolves to a sound entry at every moment."""
    monkeypatch.setenv("GRID_RBD_CXX", str(templates["compiler"]))  # the templates' keys
    compiler = harness.Compiler(templates["compiler"], tmp_path / "count", tmp_path / "slow")
    cases = [(phase, True, swap) for phase, swap in store_cases.REBUILD_PHASES]
    records = store_cases.kill_cases(tmp_path, compiler, cases, template=templates["tiny"])
    assert [r["after"] for r in records] == ["hit"] * len(cases), records


def test_concurrent_registrations_compile_once_per_robot(tmp_path, compiler):
    assert store_cases.concurrent_registrations(tmp_path, compiler)["compiles"] == 2


@pytest.mark.parametrize("swap", [True, False], ids=["swap", "two-renames"])
def test_rebuilds_never_leave_a_reader_without_the_entry(tmp_path, compiler, swap):
    record = store_cases.rebuild_under_readers(tmp_path, compiler, rounds=1, swap=swap)
    assert record["reads"] > 0


@pytest.mark.parametrize("damage", sorted(store_cases.DAMAGE))
def test_damaged_entry_is_quarantined_and_rebuilt(tmp_path, compiler, templates, damage,
                                                  monkeypatch):
    monkeypatch.setenv("GRID_RBD_CXX", str(templates["compiler"]))  # the templates' keys
    record = store_cases.damaged_entry(tmp_path, damage, template=templates["pair"])
    assert record["after"] == "built"


def test_hostile_pointers_are_ignored_and_rewritten(tmp_path, compiler):
    assert store_cases.hostile_pointers(tmp_path)["after"] == ["content"]


def test_hostile_manifest_keys_are_refused_by_name(tmp_path, compiler):
    pytest.importorskip("grid_rbd._core", reason="get_robot needs the runtime extension")
    store_cases.hostile_manifest_keys(tmp_path, store_cases.HOSTILE_KEYS[:6])


def test_damaged_manifests_are_errors_and_never_reset(tmp_path, compiler):
    store_cases.damaged_manifests(tmp_path)


@pytest.mark.parametrize("which", ["build", "manifest"])
def test_lock_files_are_never_followed_through_links(tmp_path, compiler, which):
    assert store_cases.symlinked_lock(tmp_path, which)["after"] == "refused"


def test_the_tiny_robot_is_what_the_cases_build():
    """The cases' robot parses to what they assume (two moving joints, a fixed tool)."""
    from grid_codegen import parse_urdf

    model = parse_urdf(TINY_URDF.encode())
    assert model.joint_names == ("shoulder", "elbow") and model.nv == 2
    assert [f.name for f in model.frames if f.kind == "fixed_joint"] == ["tool_joint"]
