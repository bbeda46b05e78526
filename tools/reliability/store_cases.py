"""The store under stress: processes killed at every phase of a build and of a rebuild,
concurrent registrations, rebuilds under concurrent readers, and damaged or hostile
store files. Each case asserts its expectation and returns a small record for the
summary; the tests run each once, `run.py` repeats them.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from reliability.harness import (
    OPTIONS,
    TINY_URDF,
    Compiler,
    check_store,
    ensure,
    kill,
    result,
    spawn,
    wait_for,
)

# Phases a first build can be killed in, and those of a force_rebuild over an entry (with
# the atomic swap, and with the two-rename fallback of systems that cannot swap; a rebuild
# of the same robot leaves the manifest record as it is, so it has no manifest phase).
BUILD_PHASES = ("parse", "generate", "compile", "publish", "integrity", "rename", "pointer",
                "manifest")
REBUILD_PHASES = (("compile", True), ("publish", True), ("integrity", True), ("swap", True),
                  ("pointer", True), ("rename", False))


def prepared(work: Path, template: Path | None, *names_and_urdfs: tuple[str, str]) -> Path:
    """`work/cache`: a copy of `template` when given (a store where `names_and_urdfs` are
    registered), else a store where they are registered now."""
    cache = work / "cache"
    if template is not None:
        shutil.copytree(template, cache, symlinks=True)
    else:
        for name, urdf in names_and_urdfs:
            ensure(cache, name=name, urdf=urdf)
    return cache


def kill_case(work: Path, compiler: Compiler, phase: str, rebuild: bool = False,
              swap: bool = True, template: Path | None = None) -> dict:
    """SIGKILL a registration paused at `phase`; the store must stay consistent, a
    rebuild must leave the name with an entry throughout, and the next registration
    must succeed. `template`: a store where `tiny` is registered (for a rebuild)."""
    cache = work / "cache"
    if rebuild:
        prepared(work, template, ("tiny", TINY_URDF))
    child, marker = spawn(cache, compiler, phase=phase, force=rebuild, swap=swap)
    try:
        wait_for(marker, child)
    finally:
        kill(child)
    check_store(cache, names=("tiny",) if rebuild else ())
    after = ensure(cache)
    check_store(cache, names=("tiny",))
    return {"case": f"kill {'rebuild' if rebuild else 'build'} at {phase}"
                    + ("" if swap else " (no atomic swap)"), "after": after.outcome}


def kill_at_random(work: Path, compiler: Compiler, delay: float, rebuild: bool,
                   template: Path | None = None) -> dict:
    """SIGKILL a registration (or a force_rebuild) `delay` seconds after it starts,
    wherever it is then: the same guarantees as at the named phases."""
    cache = work / "cache"
    if rebuild:
        prepared(work, template, ("tiny", TINY_URDF))
    child, _ = spawn(cache, compiler, force=rebuild)
    time.sleep(delay)
    finished = child.poll() is not None
    kill(child)
    check_store(cache, names=("tiny",) if rebuild else ())
    after = ensure(cache)
    check_store(cache, names=("tiny",))
    return {"case": f"kill {'rebuild' if rebuild else 'build'} after {delay:.2f} s",
            "after": after.outcome, "finished first": finished}


def kill_cases(work: Path, compiler: Compiler, cases: list[tuple[str, bool, bool]],
               template: Path | None = None) -> list[dict]:
    """`kill_case` for each (phase, rebuild, swap) of `cases`, the children run side by
    side (each in its own store under `work`); the checks run once all are killed."""
    children = []
    for k, (phase, rebuild, swap) in enumerate(cases):
        folder = work / f"case{k}"
        folder.mkdir()
        if rebuild:
            prepared(folder, template, ("tiny", TINY_URDF))
        children.append((folder, *spawn(folder / "cache", compiler, phase=phase,
                                        force=rebuild, swap=swap)))
    try:
        for _, child, marker in children:
            wait_for(marker, child)
    finally:
        for _, child, _ in children:
            kill(child)
    records = []
    for (folder, _, _), (phase, rebuild, swap) in zip(children, cases, strict=True):
        label = f"kill {'rebuild' if rebuild else 'build'} at {phase}" + (
            "" if swap else " (no atomic swap)")
        try:
            check_store(folder / "cache", names=("tiny",) if rebuild else ())
            after = ensure(folder / "cache")
            check_store(folder / "cache", names=("tiny",))
        except AssertionError as exc:
            raise AssertionError(f"{label}: {exc}") from None
        records.append({"case": label, "after": after.outcome})
    return records


def concurrent_registrations(work: Path, compiler: Compiler, processes: int = 3) -> dict:
    """`processes` children register one robot under different names at once, plus one
    other robot: each robot compiles once and every name ends in the manifest."""
    cache = work / "cache"
    compiler.slow(1.0)
    other = TINY_URDF.replace('name="tiny"', 'name="tiny_other"').replace(
        'xyz="0 1 0"/><limit', 'xyz="1 0 0"/><limit')
    children = [spawn(cache, compiler, name=f"tiny{k}")[0] for k in range(processes)]
    children.append(spawn(cache, compiler, name="other", urdf=other)[0])
    results = [result(child) for child in children]
    compiler.slow(None)
    same = results[:processes]
    assert len({r["content_key"] for r in same}) == 1, same
    assert sorted(r["outcome"] for r in same) == ["built"] + ["hit"] * (processes - 1), same
    assert results[-1]["content_key"] != same[0]["content_key"]
    assert compiler.compiles() == 2, f"{compiler.compiles()} compiles for two robots"
    check_store(cache, names=tuple(f"tiny{k}" for k in range(processes)) + ("other",))
    return {"case": f"{processes + 1} concurrent registrations", "compiles": 2}


def rebuild_under_readers(work: Path, compiler: Compiler, rounds: int = 3,
                          swap: bool = True) -> dict:
    """A child force-rebuilds `rounds` times while threads here keep resolving the name
    (manifest -> verified entry): no read may fail or find no entry."""
    from grid_rbd._store import Store

    cache = work / "cache"
    ensure(cache)
    failures: list[str] = []
    reads = [0]
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            try:
                store = Store(cache)
                key = store.read_manifest()["tiny"]["content_key"]
                entry = store.entry(key)
                if entry is None or entry.content_key != key:
                    failures.append(f"no entry for {key}")
                reads[0] += 1
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(rounds):
            # The child lingers right after the swap (or between its two renames), where
            # a reader would find a missing or a half-replaced entry if one could.
            child, _ = spawn(cache, compiler, force=True, swap=swap,
                             phase="linger-swap" if swap else "linger-rename")
            assert result(child)["outcome"] == "built"
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not failures, f"{len(failures)} failed reads of {reads[0]}: {failures[:3]}"
    assert reads[0] > 0
    check_store(cache, names=("tiny",))
    return {"case": f"{rounds} rebuilds under readers" + ("" if swap else " (no swap)"),
            "reads": reads[0]}


# -- damaged entries ----------------------------------------------------------------------
def _truncate(entry: Path, other: Path) -> None:
    so = entry / "robot.so"
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])


def _empty(entry: Path, other: Path) -> None:
    (entry / "robot.so").write_bytes(b"")


def _swap_artifact(entry: Path, other: Path) -> None:
    shutil.copyfile(other / "robot.so", entry / "robot.so")


def _flip_byte(entry: Path, other: Path) -> None:
    so = entry / "robot.so"
    data = bytearray(so.read_bytes())
    data[len(data) // 3] ^= 0x5A
    so.write_bytes(bytes(data))


def _edit_source(entry: Path, other: Path) -> None:
    header = entry / "grid.cuh"
    header.write_text(header.read_text() + "\n// edited\n")


def _garbage_meta(entry: Path, other: Path) -> None:
    (entry / "meta.json").write_text("{not json")


def _garbage_integrity(entry: Path, other: Path) -> None:
    (entry / "integrity.json").write_bytes(b"\x00\xff garbage")


def _no_integrity(entry: Path, other: Path) -> None:
    (entry / "integrity.json").unlink()


def _swap_whole_entry(entry: Path, other: Path) -> None:
    for name in ("robot.so", "meta.json", "integrity.json"):
        shutil.copyfile(other / name, entry / name)


def _link_artifact(entry: Path, other: Path) -> None:
    (entry / "robot.so").unlink()
    (entry / "robot.so").symlink_to(other / "robot.so")


def _link_entry(entry: Path, other: Path) -> None:
    shutil.rmtree(entry)
    entry.symlink_to(other)


def _world_writable(entry: Path, other: Path) -> None:
    (entry / "robot.so").chmod(0o777)


DAMAGE: dict[str, Callable[[Path, Path], None]] = {
    "truncated robot.so": _truncate, "empty robot.so": _empty,
    "robot.so of another robot": _swap_artifact, "one byte of robot.so changed": _flip_byte,
    "grid.cuh edited": _edit_source, "meta.json not JSON": _garbage_meta,
    "integrity.json garbage": _garbage_integrity, "integrity.json missing": _no_integrity,
    "artifact, meta and record of another entry": _swap_whole_entry,
    "robot.so a link to another entry's": _link_artifact,
    "entry folder a link to another entry": _link_entry,
    "robot.so world-writable": _world_writable,
}

OTHER_URDF = TINY_URDF.replace('name="tiny"', 'name="tiny_b"').replace('value="1.5"',
                                                                        'value="2.5"')


def damaged_entry(work: Path, damage: str, template: Path | None = None) -> dict:
    """Damage an entry as `DAMAGE[damage]` says: it is reported and quarantined when the
    name is resolved, and the next registration rebuilds it. `template`: a store where
    `tiny` and `tiny_b` (OTHER_URDF) are registered."""
    from grid_rbd._store import DamagedEntryError, Store

    cache = prepared(work, template, ("tiny", TINY_URDF), ("tiny_b", OTHER_URDF))
    first = ensure(cache)
    other = ensure(cache, name="tiny_b", urdf=OTHER_URDF)
    assert first.outcome == other.outcome == "hit"
    DAMAGE[damage](first.entry_dir, other.entry_dir)
    store = Store(cache)
    assert store.verify_entry(first.content_key), f"{damage}: verify_entry found nothing"
    try:
        store.entry(first.content_key)
    except DamagedEntryError as exc:
        assert str(first.entry_dir) in str(exc) and exc.quarantined is not None
        assert json.loads((exc.quarantined / "quarantine.json").read_text())["problems"]
    else:
        raise AssertionError(f"{damage}: the damaged entry was accepted")
    assert not os.path.lexists(first.entry_dir)
    again = ensure(cache)
    assert again.outcome == "built" and again.content_key == first.content_key, again
    assert store.verify_entry(other.content_key) == [], "the other entry was harmed"
    check_store(cache, names=("tiny", "tiny_b"))
    return {"case": f"damaged entry: {damage}", "after": again.outcome}


# -- hostile store files -----------------------------------------------------------------
HOSTILE_KEYS = ["../../../../tmp/grid-rbd-victim", "/etc", "..", "", "A" * 64, "0" * 63,
                "g" * 64, "0" * 64, "0" * 64 + "/../x", "0" * 64 + "\n" + "1" * 64,
                "\x00" * 64, "\u202e" + "0" * 63]


def hostile_pointers(work: Path, texts: list[str] = HOSTILE_KEYS) -> dict:
    """A pointer file holding any of `texts` (anything but the store key of a sound
    entry) is ignored and rewritten; nothing outside the store is read or written."""
    cache = work / "cache"
    victim = _victim(work)
    first = ensure(cache)
    pointer = cache / "bykey" / first.input_key
    outcomes = []
    for text in texts:
        pointer.write_text(text)
        again = ensure(cache)
        assert again.outcome in ("content", "built"), (text, again.outcome)
        assert pointer.read_text().strip() == first.content_key, text
        outcomes.append(again.outcome)
    pointer.unlink()
    pointer.symlink_to(victim)  # a pointer that is a link is never read through
    assert ensure(cache).outcome == "content" and not pointer.is_symlink()
    _check_victim(victim)
    check_store(cache, names=("tiny",))
    return {"case": f"{len(texts) + 1} hostile pointers", "after": sorted(set(outcomes))}


def hostile_manifest_keys(work: Path, texts: list[str] = HOSTILE_KEYS) -> dict:
    """A manifest record whose content key is any of `texts` is refused by name
    (StoreError), the other records keep working, and registering again repairs it."""
    import grid_rbd
    from grid_rbd._integrity import is_digest
    from grid_rbd._store import Store, StoreError

    cache = work / "cache"
    victim = _victim(work)
    ensure(cache)
    ensure(cache, name="good")
    for text in texts:
        manifest = json.loads((cache / "manifest.json").read_text())
        manifest["tiny"]["content_key"] = text
        (cache / "manifest.json").write_text(json.dumps(manifest))
        try:
            grid_rbd.get_robot("tiny", cache_dir=cache)
        except StoreError as exc:  # a key of the right form names an absent entry
            expected = "is missing from" if is_digest(text) else "not a store key"
            assert expected in str(exc) and "'tiny'" in str(exc), exc
        else:
            raise AssertionError(f"a manifest key {text!r} was followed")
        good = Store(cache).read_manifest()["good"]["content_key"]
        assert Store(cache).entry(good) is not None
        ensure(cache)  # registering again repairs the record
    _check_victim(victim)
    check_store(cache, names=("tiny", "good"))
    return {"case": f"{len(texts)} hostile manifest keys", "after": "refused, then repaired"}


MANIFESTS = [b"{x", b"[]", b'{"a": 1}', b"\xff\xfe", b"", b'{"a": {"content_key": 1}} trailing']


def damaged_manifests(work: Path, contents: list[bytes] = MANIFESTS) -> dict:
    """A manifest that is not a JSON object of records is an error for readers and
    writers alike, and is left exactly as it was (never reset)."""
    import grid_rbd
    from grid_rbd._store import StoreError

    cache = work / "cache"
    ensure(cache)
    for content in contents:
        (cache / "manifest.json").write_bytes(content)
        for action in (lambda: grid_rbd.get_robot("tiny", cache_dir=cache),
                       lambda: ensure(cache, name="another")):
            try:
                action()
            except StoreError as exc:
                assert "manifest" in str(exc) and "move" in str(exc), exc
            else:
                raise AssertionError(f"manifest {content[:20]!r} was taken as valid")
        assert (cache / "manifest.json").read_bytes() == content, "the manifest was rewritten"
    return {"case": f"{len(contents)} damaged manifests", "after": "refused, left as they were"}


def symlinked_lock(work: Path, which: str) -> dict:
    """A lock file replaced by a link to a file outside the store: the registration
    refuses to follow it (StoreError) and the link's target is untouched."""
    from grid_rbd._build import build_identity, resolve_toolchain
    from grid_rbd._store import StoreError, input_key

    cache = work / "cache"
    victim = _victim(work)
    if which == "manifest":
        ensure(cache, name="first")
        lock = cache / "manifest.lock"
    else:
        import grid_rbd
        from grid_codegen.options import CodegenOptions

        identity = build_identity(resolve_toolchain("cpu"))
        options = {"codegen": CodegenOptions(**OPTIONS).to_dict(),
                   "floating_base": False}
        key = input_key(TINY_URDF.encode(), options, grid_rbd.__version__, identity)
        (cache / "locks").mkdir(parents=True, exist_ok=True)
        lock = cache / "locks" / f"{key}.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(victim)
    try:
        ensure(cache)
    except StoreError as exc:
        assert "symbolic link" in str(exc), exc
    else:
        raise AssertionError(f"the {which} lock was followed through a link")
    _check_victim(victim)
    return {"case": f"{which} lock is a link", "after": "refused"}


def _victim(work: Path) -> Path:
    victim = work / "victim.txt"
    victim.write_text("precious\n")
    os.utime(victim, (1_000_000_000, 1_000_000_000))
    return victim


def _check_victim(victim: Path) -> None:
    assert victim.read_text() == "precious\n", "a file outside the store was written"
    assert victim.stat().st_mtime == 1_000_000_000, "a file outside the store was touched"


def all_cases() -> list[tuple[str, Callable[..., dict], tuple]]:
    """(label, function, arguments after (work, compiler)) of every store case."""
    cases: list[tuple[str, Callable[..., dict], tuple]] = []
    cases += [(f"kill build {p}", kill_case, (p,)) for p in BUILD_PHASES]
    cases += [(f"kill rebuild {p}{'' if s else ' noswap'}", kill_case, (p, True, s))
              for p, s in REBUILD_PHASES]
    cases += [("concurrent", concurrent_registrations, ()),
              ("readers", rebuild_under_readers, ()),
              ("readers noswap", rebuild_under_readers, (2, False))]
    return cases


def timed(function: Callable[..., dict], *args: object) -> dict:
    start = time.monotonic()
    record = function(*args)
    record["seconds"] = round(time.monotonic() - start, 2)
    return record
