"""Names from users and URDFs (issue 12): validated where they enter, never a path, never
able to lose the compiler's error; a hostile but valid name registers end to end.

The generator's own guarantee (any name reaching it is emitted inertly) is
tests/test_codegen_hostile_names.py; this file is about the entry points."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import grid_rbd
from grid_codegen import URDFError
from grid_codegen.compile import CompileError

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from reliability import harness  # noqa: E402

BAD_NAMES = {"line feed": "a\nb", "carriage return": "a\rb", "tab": "a\tb", "NUL": "a\0b",
             "C1": "a\x85b", "bidi override": "a\u202eb", "line separator": "a\u2028b",
             "lone surrogate": "a\ud800b", "empty": "", "too long": "r" * 257}


@pytest.fixture
def compiler(tmp_path, monkeypatch) -> harness.Compiler:
    compiler = harness.make_compiler(tmp_path / "bin")
    for name in ("GRID_RBD_CXXFLAGS", "GRID_RBD_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GRID_RBD_CXX", str(compiler.path))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    return compiler


def _files_under(folder: Path) -> set[Path]:
    """Every path under `folder` but the compiler wrapper's own (bin/)."""
    return {p for p in folder.rglob("*") if (folder / "bin") not in (p, *p.parents)}


@pytest.mark.parametrize("kind", sorted(BAD_NAMES))
def test_registration_names_are_validated(tmp_path, compiler, kind):
    bad = BAD_NAMES[kind]
    kw = dict(urdf_string=harness.TINY_URDF, cache_dir=tmp_path / "cache", device="cpu")
    with pytest.raises(ValueError, match=r"^name ") as info:
        grid_rbd.register_robot(bad, **kw)
    assert str(info.value).isprintable() and (bad == "" or repr(bad)[1:-1] in str(info.value)
                                              or "characters long" in str(info.value))
    with pytest.raises(ValueError, match=r"^ee_joint_names entry "):
        grid_rbd.register_robot("ok", ee_joint_names=["tool_joint", bad], **kw)
    assert compiler.compiles() == 0


def test_non_string_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"name 5 is a int, not a str"):
        grid_rbd.register_robot(5, urdf_string=harness.TINY_URDF, cache_dir=tmp_path)


def test_urdf_string_with_nul_or_lone_surrogate_names_the_offset(tmp_path, compiler):
    kw = dict(cache_dir=tmp_path / "cache", device="cpu")
    text = harness.TINY_URDF
    with pytest.raises(ValueError, match=r"urdf_string holds a NUL character at offset 10 "):
        grid_rbd.register_robot("r", urdf_string=text[:10] + "\0" + text[10:], **kw)
    with pytest.raises(ValueError, match=r"urdf_string holds a lone surrogate, U\+DC80, at "
                                         r"offset 12"):
        grid_rbd.register_robot("r", urdf_string=text[:12] + "\udc80" + text[12:], **kw)
    with pytest.raises(ValueError, match=r"urdf_path .* holds a NUL character"):
        grid_rbd.register_robot("r", urdf_path="robot\0.urdf", **kw)
    assert compiler.compiles() == 0


def test_unsafe_urdf_name_is_an_urdf_error_before_any_build(tmp_path, compiler):
    hostile = harness.TINY_URDF.replace('name="elbow"', 'name="elbow&#13;static int x;"')
    with pytest.raises(URDFError, match=r"^<urdf string>:\d+: <joint> name: name=\"elbow\\r"
                                        r"static int x;\" holds a control character, U\+000D"):
        grid_rbd.register_robot("r", urdf_string=hostile, cache_dir=tmp_path / "cache",
                                device="cpu")
    assert compiler.compiles() == 0


def test_empty_cache_dir_is_refused(tmp_path):
    for empty in ("", "  "):  # (pathlib turns Path("") into ".", an explicit folder)
        with pytest.raises(ValueError, match=r"cache_dir is empty"):
            grid_rbd.register_robot("r", urdf_string=harness.TINY_URDF, cache_dir=empty)
        with pytest.raises(ValueError, match=r"cache_dir is empty"):
            grid_rbd.get_robot("r", cache_dir=empty)


HOSTILE_BUT_VALID = {
    "tiny": "r\u00f6b\u00f6t \"quoted\" */ ??/ \\",
    "shoulder": "sh\u00f6ulder\\", "elbow": "elbow */ #define X 1", "upper": "upper%41'",
    "lower": "l\u00f6wer \u4e2d", "tool_joint": "tool?? joint",
}


def _hostile_urdf() -> str:
    from xml.sax.saxutils import escape

    text = harness.TINY_URDF
    for plain, hostile in HOSTILE_BUT_VALID.items():
        text = text.replace(f'"{plain}"', '"' + escape(hostile, {'"': "&quot;"}) + '"')
    return text


def test_hostile_but_valid_names_register_end_to_end(tmp_path, compiler):
    """Names full of C and shell syntax, quotes, backslashes and non-ASCII letters go from
    the URDF through the generated code into the artifact and back, unchanged; the
    registration name is only a manifest key, never a path."""
    pytest.importorskip("grid_rbd._core", reason="loading needs the runtime extension")
    cache = tmp_path / "cache"
    name = "../../escape \u00e9 'me'"
    before = _files_under(tmp_path)
    handle = grid_rbd.register_robot(name, urdf_string=_hostile_urdf(), cache_dir=cache,
                                     device="cpu", algorithm_list=["inverse_dynamics"],
                                     ee_joint_names=[HOSTILE_BUT_VALID["tool_joint"]])
    outside = {p for p in _files_under(tmp_path) - before if p != cache and cache not in p.parents}
    assert outside == set(), f"files written outside the store: {outside}"
    assert handle.joint_names == (HOSTILE_BUT_VALID["shoulder"], HOSTILE_BUT_VALID["elbow"])
    assert handle.body_names == (HOSTILE_BUT_VALID["upper"], HOSTILE_BUT_VALID["lower"])
    assert handle.ee_names == (HOSTILE_BUT_VALID["tool_joint"],)
    assert handle._info["robot_name"] == HOSTILE_BUT_VALID["tiny"]  # from the artifact
    again = grid_rbd.get_robot(name, cache_dir=cache)
    assert again.path == handle.path and again.name == name
    manifest = json.loads((cache / "manifest.json").read_text())
    assert list(manifest) == [name]
    # It computes the dynamics of the plain robot exactly.
    import numpy as np

    import grid_rbd.reference as reference
    from grid_codegen import parse_urdf

    ref = reference.ReferenceRobot(parse_urdf(harness.TINY_URDF.encode()))
    rng = np.random.default_rng(5)
    q, qd, qdd = (rng.uniform(-2, 2, (3, 2)).astype(np.float32) for _ in range(3))
    got = handle.inverse_dynamics(q, qd, qdd)
    want = ref.inverse_dynamics(q.astype(float), qd.astype(float), qdd.astype(float))
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


def test_failed_build_keeps_the_compilers_error_and_a_safe_log_name(tmp_path, monkeypatch):
    """A compiler that fails with bytes that are not UTF-8: the error carries its words,
    the full log is kept in the store's logs/ under a name no registration name can
    turn into a path."""
    script = tmp_path / "bin" / "badcxx"
    script.parent.mkdir()
    script.write_bytes(b"#!/bin/sh\nprintf 'wrapper.cu:1: fatal error: \\377\\376 boom\\n' >&2\n"
                       b"exit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("GRID_RBD_CXX", str(script))
    monkeypatch.setenv("GRID_RBD_PROGRESS", "off")
    cache = tmp_path / "cache"
    before = _files_under(tmp_path)
    name = "../../../outside/\u00e9vil name"
    with pytest.raises(CompileError) as info:
        grid_rbd.register_robot(name, urdf_string=harness.TINY_URDF, cache_dir=cache,
                                device="cpu", algorithm_list=["crba"])
    message = str(info.value)
    assert "fatal error: \\xff\\xfe boom" in message, message
    log = info.value.log_path
    assert log.parent == cache / "logs" and log.is_file()
    assert "/" not in log.name[:-len(".build.log")] and ".." not in log.name
    assert log.name.endswith("-outsidevilname.build.log"), log.name
    assert str(log) in message and "boom" in log.read_text()
    outside = {p for p in _files_under(tmp_path) - before if p != cache and cache not in p.parents}
    assert outside == set(), f"files written outside the store: {outside}"
    assert not any((cache / "staging").iterdir()), "the failed staging folder was left"


def test_failed_log_names_are_hashed_and_plain():
    from grid_rbd._build import failed_log_name

    key = "ab" * 32
    names = ["../../x", "/etc/passwd", "a b", "\u00e9", "..", "a" * 300, "ok_name-1"]
    files = [failed_log_name(n, key) for n in names]
    assert len(set(files)) == len(files), "distinct names must not share a log"
    for file in files:
        assert os.sep not in file and not file.startswith(".")
        assert set(file) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_-.")
    assert files[-1] == f"{key[:16]}-{files[-1].split('-')[1]}-ok_name-1.build.log"
