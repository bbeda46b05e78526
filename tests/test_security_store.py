"""Store entries are verified before they are loaded and checked after (issue 12): a
truncated artifact is an error naming the entry, never a SIGBUS; an artifact that passes
its digest but describes another robot is caught by its descriptor; `verify_entry` and
`verify_all` (what `grid-rbd verify` calls) report without changing anything.

(tests/test_reliability_store.py runs the wider corruption, crash and concurrency cases.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import grid_rbd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from reliability import harness, store_cases  # noqa: E402

THREE_JOINTS = harness.TINY_URDF.replace('name="tiny"', 'name="three"').replace(
    '<joint name="tool_joint" type="fixed">', '<joint name="tool_joint" type="revolute">'
    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/>')


@pytest.fixture
def compiler(tmp_path, monkeypatch) -> harness.Compiler:
    compiler = harness.make_compiler(tmp_path / "bin")
    for name in ("GRID_RBD_CXXFLAGS", "GRID_RBD_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRID_RBD_CXX", str(compiler.path))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    return compiler


def _register(cache: Path, name: str = "tiny", urdf: str = harness.TINY_URDF, **kw):
    return grid_rbd.register_robot(name, urdf_string=urdf, cache_dir=cache, device="cpu",
                                   algorithm_list=["crba"], **kw)


def test_truncated_artifact_is_an_error_in_a_fresh_process_not_a_crash(tmp_path, compiler):
    """The review's SIGBUS: a later get_robot of a truncated robot.so. Now the child
    exits with DamagedEntryError naming the entry; register_robot then rebuilds it."""
    pytest.importorskip("grid_rbd._core", reason="loading needs the runtime extension")
    cache = tmp_path / "cache"
    # Built, not loaded here: a file truncated in place under a process that has it
    # mapped faults that process whatever it checks (why entries change only by rename).
    so = harness.ensure(cache).so_path
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 3])
    code = ("import grid_rbd, sys\n"
            "try:\n"
            "    grid_rbd.get_robot('tiny', cache_dir=sys.argv[1])\n"
            "except Exception as exc:\n"
            "    print(type(exc).__name__ + ': ' + str(exc)); sys.exit(3)\n")
    child = subprocess.run([sys.executable, "-c", code, str(cache)], capture_output=True,
                           text=True, env=harness.environment(compiler), timeout=120)
    assert child.returncode == 3, (child.returncode, -signal.SIGBUS, child.stderr[-2000:])
    assert child.stdout.startswith("DamagedEntryError: robot 'tiny': store entry ")
    assert str(so.parent) in child.stdout and "truncated" in child.stdout
    assert "register_robot('tiny', ...)" in child.stdout
    quarantined = list((cache / "quarantine").iterdir())
    assert len(quarantined) == 1 and (quarantined[0] / "entry" / "robot.so").is_file()
    assert not so.parent.exists()
    again = _register(cache)
    assert again.registration.outcome == "built" and compiler.compiles() == 2
    assert grid_rbd.get_robot("tiny", cache_dir=cache).nv == 2


def test_descriptor_that_contradicts_meta_is_caught_after_load(tmp_path, compiler):
    """An artifact swapped together with a fresh integrity record passes the digest
    check; its descriptor (another robot: nq 3, not 2) does not match meta.json."""
    pytest.importorskip("grid_rbd._core", reason="loading needs the runtime extension")
    from grid_rbd._integrity import write_record
    from grid_rbd._store import RECORDED_FILES, DamagedEntryError, Store

    cache = tmp_path / "cache"
    two = harness.ensure(cache)
    three = harness.ensure(cache, name="three", urdf=THREE_JOINTS)
    (two.entry_dir / "robot.so").write_bytes((three.entry_dir / "robot.so").read_bytes())
    write_record(two.entry_dir, two.content_key, RECORDED_FILES)
    assert Store(cache).verify_entry(two.content_key) == []  # the digest cannot tell
    with pytest.raises(DamagedEntryError, match=r"robot 'tiny': store entry .* holds another "
                                                r"robot's artifact \(its descriptor says "
                                                r"robot_name 'three', meta.json says 'tiny'"
                                                r".*nq '3', meta.json says '2'") as info:
        grid_rbd.get_robot("tiny", cache_dir=cache)
    assert "in a new process" in str(info.value)
    note = json.loads((info.value.quarantined / "quarantine.json").read_text())
    assert any("nq" in p for p in note["problems"])
    assert not two.entry_dir.exists()
    assert Store(cache).entry(three.content_key) is not None  # the other robot is intact


def test_load_robot_verifies_a_store_entry_but_trusts_a_bare_artifact(tmp_path, compiler):
    pytest.importorskip("grid_rbd._core", reason="loading needs the runtime extension")
    from grid_rbd._store import StoreError

    cache = tmp_path / "cache"
    entry = harness.ensure(cache).entry_dir
    bare = tmp_path / "mine.so"
    bare.write_bytes((entry / "robot.so").read_bytes())
    assert grid_rbd.load_robot(bare).nv == 2  # a user's own file: no record to check
    data = bytearray((entry / "robot.so").read_bytes())
    data[-100] ^= 1
    (entry / "robot.so").write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"store entry .* is damaged: robot.so has SHA-256"):
        grid_rbd.load_robot(entry)
    assert entry.exists(), "load_robot reports; it moves nothing"


def test_verify_all_reports_every_item_and_changes_nothing(tmp_path, compiler):
    from grid_rbd._store import Store

    cache = tmp_path / "cache"
    good = harness.ensure(cache)
    other = harness.ensure(cache, name="b", urdf=store_cases.OTHER_URDF)
    store = Store(cache)
    report = store.verify_all()
    assert set(report) == {"manifest.json", "manifest.json:tiny", "manifest.json:b",
                           f"bykey/{good.input_key}", f"bykey/{other.input_key}",
                           f"store/{good.content_key}", f"store/{other.content_key}"}
    assert all(problems == [] for problems in report.values())
    (other.entry_dir / "grid.cuh").write_text("// edited\n")
    (cache / "bykey" / good.input_key).write_text("../../etc\n")
    (cache / "store" / "junk").mkdir()
    report = store.verify_all()
    size = json.loads((other.entry_dir / "integrity.json").read_text())["files"]["grid.cuh"]
    assert report[f"store/{other.content_key}"] == [
        f"grid.cuh is 10 bytes; integrity.json records {size['size']} (truncated or replaced)"]
    assert report[f"bykey/{good.input_key}"] == ["it holds no store key"]
    assert report["store/junk"] == ["'junk' is not a store key (64 hex digits)"]
    assert report[f"store/{good.content_key}"] == [] and report["manifest.json"] == []
    assert other.entry_dir.is_dir() and not any((cache / "quarantine").iterdir())
    moved, problems = store.quarantine("junk")  # what verify_all lists, quarantine takes
    assert problems == ["not a store key"] and (moved / "entry").is_dir()
    assert not (cache / "store" / "junk").exists()
    (cache / "manifest.json").write_text("{")
    assert "cannot be read" in store.verify_all()["manifest.json"][0]


def test_store_keys_from_callers_are_checked_too(tmp_path):
    from grid_rbd._store import Store

    store = Store(tmp_path / "cache")
    for key in ("../x", "/etc", "A" * 64, ""):
        with pytest.raises(ValueError, match=r"is not a 64-digit hex digest"):
            store.entry(key)
        assert store.verify_entry(key) == [f"{key[:80]!r} is not a store key (64 hex digits)"]
    assert store.entry("0" * 64) is None
    assert os.listdir(store.entries) == []
