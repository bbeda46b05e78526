"""Names from a URDF never become code: the generator's output for a model whose robot,
joint, link and frame names are hostile is printable ASCII, has exactly the code of the
same model with harmless names once comments and string literals are set aside, and the
compiled artifact computes the same dynamics and reports the exact names back.

The names here go around the parser's validation (they are put on an already parsed
model), so this is the generator's own guarantee, whatever reaches it."""

from __future__ import annotations

import ctypes
import dataclasses
import re

import numpy as np
import pytest
from artifact_harness import load_model

from grid_codegen.compile import compile_artifact
from grid_codegen.emit.writer import Writer, c_string, comment_text
from grid_codegen.generate import generate
from grid_codegen.model import RobotModel
from grid_codegen.options import CodegenOptions

# Every class of text that could end a comment, a literal or a line, or smuggle code.
HOSTILE = [
    "j\rstatic int pwn = system(\"id\");//",            # bare carriage return (&#13;)
    "j\nint evil() { return 1; }",                       # line feed
    "j\\",                                               # backslash ends a // comment line
    "j\\\nx",                                            # backslash-newline splice
    "j */ int x; /*",                                    # block-comment terminator
    "j\"; system(\"id\"); const char* s = \"",           # string-literal terminator
    "j??/",                                              # trigraph for a backslash
    "j\x0bvertical\x0cform",                             # vertical tab, form feed
    "j\u2028sep\u2029para",                              # Unicode line/paragraph separators
    "j\u202eevil\u202c",                                 # bidi override (trojan source)
    "j\x85next-line",                                    # C1 NEL
    "\u00e9l\u00e9ment-\u4e2d\u6587",                    # ordinary non-ASCII letters
    "#define GRID_OK 1",                                 # a directive, if it began a line
    "j%41%25",                                           # percent signs (our own escape)
    "j\t\ttabs",
    "'; DROP",
]


def _renamed(model: RobotModel, names: list[str]) -> RobotModel:
    """`model` with its robot, joint, body and frame names taken from `names` (cycled)."""
    import itertools

    pool = itertools.cycle(names)
    joints = tuple(dataclasses.replace(j, name=f"{next(pool)}#{k}")
                   for k, j in enumerate(model.joints))
    bodies = tuple(dataclasses.replace(b, name=f"{next(pool)}@{k}")
                   for k, b in enumerate(model.bodies))
    frames = tuple(dataclasses.replace(f, name=f"{next(pool)}${k}")
                   for k, f in enumerate(model.frames))
    return dataclasses.replace(model, name=next(pool), joints=joints, bodies=bodies,
                               frames=frames)


_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                    re.DOTALL)


def _code_only(text: str) -> str:
    """The text with comments removed and every string literal replaced by `""`."""
    return _TOKEN.sub(lambda m: '""' if m.group().startswith('"') else "", text)


@pytest.fixture(scope="module")
def models() -> tuple[RobotModel, RobotModel]:
    base = load_model("iiwa14")
    plain = _renamed(base, ["plain"])
    hostile = _renamed(base, HOSTILE)
    return plain, hostile


@pytest.mark.parametrize("strategy", ["block", "thread"])
def test_hostile_names_leave_the_code_unchanged(models, strategy):
    plain, hostile = models
    options = CodegenOptions(strategy=strategy,
                             ee_joint_names=(hostile.joints[-1].name,))
    plain_options = dataclasses.replace(options, ee_joint_names=(plain.joints[-1].name,))
    got = generate(hostile, options)
    want = generate(plain, plain_options)
    for name, text in got.items():
        assert re.search(r"[^\x20-\x7e\n]", text) is None, name
        for line in text.splitlines():
            assert not (line.rstrip().endswith("\\") and "//" in line), line
        assert _code_only(text) == _code_only(want[name]), name


def test_hostile_artifact_computes_dynamics_and_reports_exact_names(models, tmp_path):
    plain, hostile = models
    files = generate(hostile, CodegenOptions(dtype="float64",
                                             algorithms=("inverse_dynamics",)))
    result = compile_artifact(files, tmp_path / "hostile", backend="cpu")
    reference = compile_artifact(generate(plain, CodegenOptions(
        dtype="float64", algorithms=("inverse_dynamics",))), tmp_path / "plain",
        backend="cpu")
    from artifact_harness import Artifact

    bad, good = Artifact(result.so_path), Artifact(reference.so_path)
    assert bad.desc.robot_name.decode("utf-8") == hostile.name
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.standard_normal((5, hostile.nv)) for _ in range(3))
    got = bad.state().call("inverse_dynamics", q, qd, qdd, None)
    want = good.state().call("inverse_dynamics", q, qd, qdd, None)
    np.testing.assert_array_equal(got, want)
    # Nothing runs at load: the artifact exports one symbol and has no initialisers of
    # its own beyond what the plain artifact has.
    assert _init_array_size(result.so_path) == _init_array_size(reference.so_path)


def _init_array_size(path) -> int:
    """Bytes of the ELF .init_array section (static constructors run at dlopen)."""
    data = path.read_bytes()
    import struct

    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize)
                for k in range(shnum)]
    names_offset = sections[shstrndx][4]
    for name, _, _, _, _, size, *_ in sections:
        end = data.index(b"\0", names_offset + name)
        if data[names_offset + name:end] == b".init_array":
            return size
    return 0


@pytest.mark.parametrize("text", HOSTILE + ["", "plain", "\U0001f916 robot"])
def test_c_string_round_trips_through_the_compiler(text, tmp_path):
    """The literal `c_string` makes is printable ASCII and compiles to exactly the UTF-8
    bytes of `text`."""
    literal = c_string(text)
    assert re.fullmatch(r'"[\x20-\x7e]*"', literal)
    source = tmp_path / "lit.cc"
    source.write_text(f'extern "C" const char* grid_text() {{ return {literal}; }}\n')
    lib = tmp_path / "lit.so"
    import subprocess

    subprocess.run(["g++", "-shared", "-fPIC", "-std=c++17", str(source), "-o", str(lib)],
                   check=True)
    fn = ctypes.CDLL(str(lib)).grid_text
    fn.restype = ctypes.c_char_p
    assert fn().decode("utf-8") == text


def test_comment_text_is_inert():
    for text in HOSTILE:
        rendered = comment_text(text)
        assert re.fullmatch(r"[A-Za-z0-9_.+:@/ =,()\[\]%-]*", rendered), rendered


@pytest.mark.parametrize("bad", ["a\rb", "a\nb", "\x00", "caf\u00e9", "tab\there"])
def test_writer_refuses_unprintable_lines(bad):
    w = Writer()
    with pytest.raises(ValueError, match="printable ASCII"):
        w.line(f"// {bad}")
    if "\n" not in bad:  # comment() splits on line feeds: that is its interface
        with pytest.raises(ValueError):
            w.comment(bad)


def test_writer_refuses_a_comment_that_continues_onto_the_next_line():
    with pytest.raises(ValueError, match="backslash"):
        Writer().comment("name\\")


def test_c_string_refuses_nul_and_lone_surrogates():
    with pytest.raises(ValueError):
        c_string("a\x00b")
    with pytest.raises(UnicodeEncodeError):
        c_string("a\ud800")
