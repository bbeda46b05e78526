"""build_artifact / load_artifact / list_artifacts: the spec's behaviours one by one, on
the CPU build of a two-unit consumer of iiwa14's grid.cuh (grid_rbd.consumer)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from consumer_support import IIWA, build_probe, probe_pose, store_listing, write_probe

import grid_rbd
from grid_rbd import consumer as C
from grid_rbd import reference

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT / "codegen"),
                                                   str(ROOT / "tests")])}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One cold build, shared: (cache, sources, artifact)."""
    base = tmp_path_factory.mktemp("consumer")
    paths = write_probe(base / "src")
    art = build_probe(base / "cache", paths)
    return base / "cache", paths, art


def test_cold_build_compiles_both_units_and_computes_the_reference_pose(built):
    cache, _, art = built
    assert art.compiled and sorted(art.compiled_units) == ["unit_a.cu", "unit_b.cu"]
    assert art.path.is_file() and art.header.is_file() and art.arch == "cpu"
    assert art.store_dir == cache / "consumers" / "probe" / "store" / art.content_key
    assert "namespace device" in art.header.read_text()
    ref = reference.load(IIWA)
    q = np.array([0.3, -0.7, 0.5, 1.1, -0.4, 0.9, 0.2])
    want = ref.end_effector_pose(q[None])[0]
    np.testing.assert_allclose(probe_pose(art.path, q), want, atol=2e-5)
    # The cooperative (block) form computes the same item on the CPU build.
    np.testing.assert_allclose(probe_pose(art.path, q, "probe_pose_block"), want, atol=2e-5)


def test_key_hit_compiles_nothing_and_load_needs_no_toolchain(built, monkeypatch):
    cache, paths, art = built
    start = time.perf_counter()
    again = build_probe(cache, paths)
    warm = time.perf_counter() - start
    assert not again.compiled and again.compiled_units == ()
    assert again.content_key == art.content_key and again.path == art.path
    assert warm < 2.0, f"a key hit took {warm:.2f} s"
    # load_artifact never resolves a compiler: make every toolchain lookup fail.
    from grid_rbd import _build

    def no_toolchain(*_a, **_k):
        raise AssertionError("load_artifact resolved a toolchain")

    monkeypatch.setattr(_build, "resolve_toolchain", no_toolchain)
    loaded = grid_rbd.load_artifact("probe", "iiwa14", cache_dir=cache)
    assert loaded.path == art.path and loaded.content_key == art.content_key
    assert not loaded.compiled
    listed = grid_rbd.list_artifacts("probe", cache_dir=cache)
    assert [e["name"] for e in listed] == ["iiwa14"]
    assert listed[0]["content_key"] == art.content_key and listed[0]["arch"] == "cpu"


def test_object_cache_recompiles_only_the_edited_unit(built, tmp_path):
    cache, _, _ = built
    paths = write_probe(tmp_path / "src")  # same content, another folder: objects reused
    first = build_probe(cache, paths, name="edited")
    assert first.compiled_units == ()  # both objects came from the cache (same inputs)
    paths["b"].write_text(paths["b"].read_text() + "// an edit\n")
    second = build_probe(cache, paths, name="edited")
    assert second.compiled and second.compiled_units == ("unit_b.cu",)
    assert second.content_key != first.content_key
    assert second.meta["units"]["unit_a.cu"]["compiled"] is False
    # A header listed in headers= is keyed by content: editing it recompiles both.
    paths["h"].write_text(paths["h"].read_text().replace("VERSION 1", "VERSION 2"))
    third = build_probe(cache, paths, name="edited")
    assert sorted(third.compiled_units) == ["unit_a.cu", "unit_b.cu"]


def test_identity_mismatch_is_not_honoured(built, monkeypatch):
    cache, paths, art = built
    real = C.identity

    def moved_on(toolchain):
        ident = dict(real(toolchain))
        ident["package_version"] = "99.0.0"  # another release: another identity
        return ident

    monkeypatch.setattr(C, "identity", moved_on)
    plan = build_probe(cache, paths, plan_only=True)
    assert plan["cached"] is False
    # A pointer of the new request planted at the old entry (recorded identity differs).
    pointer = cache / "consumers" / "probe" / "bykey" / plan["input_key"]
    pointer.write_text(art.content_key + "\n")
    rebuilt = build_probe(cache, paths, name="moved")
    assert rebuilt.compiled, "a pointer to an entry of another identity was honoured"
    assert rebuilt.content_key == art.content_key  # same compile inputs, rebuilt in place
    recorded = json.loads((rebuilt.store_dir / "build_inputs.json").read_text())
    assert recorded["package_version"] == "99.0.0"


def test_another_architecture_or_schema_is_refused(built, monkeypatch):
    cache, paths, _ = built
    build_probe(cache, paths, name="archs")
    with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="architecture.*sm_90"):
        grid_rbd.load_artifact("probe", "archs", cache_dir=cache, arch="sm_90")
    assert grid_rbd.load_artifact("probe", "archs", cache_dir=cache, arch="cpu").arch == "cpu"
    monkeypatch.setattr(C, "ARTIFACT_SCHEMA", C.ARTIFACT_SCHEMA + 1)
    with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="artifact_schema"):
        grid_rbd.load_artifact("probe", "archs", cache_dir=cache)
    monkeypatch.undo()
    monkeypatch.setattr(C, "STORE_SCHEMA", C.STORE_SCHEMA + 1)
    with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="key_schema"):
        grid_rbd.load_artifact("probe", "archs", cache_dir=cache)


def _builder_script(cache: Path, src: Path, gate: Path) -> str:
    return textwrap.dedent(f"""
        import json, os, time
        from pathlib import Path
        from consumer_support import build_probe
        gate = Path({str(gate)!r})
        while not gate.exists():
            time.sleep(0.01)
        src = Path({str(src)!r})
        paths = {{"a": src / "unit_a.cu", "b": src / "unit_b.cu", "h": src / "probe.h"}}
        art = build_probe(Path({str(cache)!r}), paths)
        print(json.dumps({{"compiled": art.compiled, "key": art.content_key}}))
    """)


def test_concurrent_builds_of_one_key_compile_once(tmp_path):
    paths = write_probe(tmp_path / "src")
    cache, gate = tmp_path / "cache", tmp_path / "go"
    script = _builder_script(cache, paths["a"].parent, gate)
    procs = [subprocess.Popen([sys.executable, "-c", script], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1.0)  # both are importing / waiting at the gate
    gate.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["compiled"] for r in results) == [False, True]
    assert results[0]["key"] == results[1]["key"]
    listing = store_listing(cache / "consumers" / "probe")
    assert len(listing["store"]) == 1 and len(listing["objects"]) == 2


def test_a_killed_build_leaves_nothing_visible(tmp_path):
    paths = write_probe(tmp_path / "src")
    cache, marker = tmp_path / "cache", tmp_path / "compiling"
    slow = tmp_path / "slow-cxx"
    slow.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do
          if [ "$a" = "-c" ]; then touch {marker}; sleep 120; fi
        done
        exec g++ "$@"
        """))
    slow.chmod(0o755)
    gate = tmp_path / "go"
    gate.touch()
    env = {**ENV, "GRID_RBD_CXX": str(slow)}
    proc = subprocess.Popen([sys.executable, "-c", _builder_script(cache, paths["a"].parent,
                                                                   gate)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the build never reached the compiler"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the builder and its compiler, mid-compile
    proc.wait(timeout=30)
    root = cache / "consumers" / "probe"
    assert store_listing(root) == {"store": [], "bykey": [], "objects": [], "manifest": []}
    (left,) = (root / "staging").iterdir()  # the dead builder's, private to this user
    assert left.stat().st_mode & 0o077 == 0
    assert grid_rbd.list_artifacts("probe", cache_dir=cache) == []  # (sweeps it)
    with pytest.raises(grid_rbd.ArtifactNotFoundError):
        grid_rbd.load_artifact("probe", "iiwa14", cache_dir=cache)
    assert list((root / "staging").iterdir()) == []
    art = build_probe(cache, paths)
    assert art.compiled and sorted(art.compiled_units) == ["unit_a.cu", "unit_b.cu"]


@pytest.mark.parametrize("field, value", [
    ("consumer", "../escape"), ("consumer", ""), ("consumer", ".hidden"),
    ("consumer", "a/b"), ("name", "-flag"), ("name", "x\ny"), ("name", "dots/.."),
    ("artifact_name", "../evil.so"), ("artifact_name", "lib so"), ("name", "a" * 200),
])
def test_bad_names_are_refused(tmp_path, field, value):
    args = {"consumer": "probe", "name": "iiwa14", "artifact_name": "artifact.so"}
    args[field] = value
    paths = write_probe(tmp_path / "src")
    with pytest.raises(ValueError, match=field):
        grid_rbd.build_artifact(args["consumer"], args["name"], IIWA, sources=[paths["a"]],
                                artifact_name=args["artifact_name"], cache_dir=tmp_path / "c",
                                backend="cpu")
    assert not (tmp_path / "c" / "consumers").exists()
    if field != "artifact_name":
        with pytest.raises(ValueError, match=field):
            grid_rbd.load_artifact(args["consumer"], args["name"], cache_dir=tmp_path / "c")


def test_missing_sources_and_bad_inputs_are_refused(tmp_path):
    paths = write_probe(tmp_path / "src")
    cache = tmp_path / "c"

    def build(**kw):
        args = {"sources": [paths["a"]], "cache_dir": cache, "backend": "cpu", **kw}
        return grid_rbd.build_artifact("probe", "iiwa14", args.pop("urdf", IIWA), **args)

    with pytest.raises(FileNotFoundError, match="source not found"):
        build(sources=[tmp_path / "nope.cu"])
    with pytest.raises(FileNotFoundError, match="header not found"):
        build(headers=[tmp_path / "nope.h"])
    with pytest.raises(FileNotFoundError, match="URDF not found"):
        build(urdf=tmp_path / "nope.urdf")
    with pytest.raises(FileNotFoundError, match="include_dirs"):
        build(include_dirs=[tmp_path / "nope"])
    with pytest.raises(ValueError, match="at least one"):
        build(sources=[])
    with pytest.raises(ValueError, match="expected a file ending"):
        build(sources=[paths["h"]])
    with pytest.raises(ValueError, match="distinct file names"):
        other = write_probe(tmp_path / "other")
        build(sources=[paths["a"], other["a"]])
    with pytest.raises(ValueError, match="NAME or NAME=VALUE"):
        build(defines=["1BAD"])
    with pytest.raises(ValueError, match="list of flags"):
        build(extra_flags="-O3")
    assert not (cache / "consumers").exists()
    with pytest.raises(grid_rbd.ArtifactNotFoundError, match="build_artifact first"):
        grid_rbd.load_artifact("probe", "iiwa14", cache_dir=cache)
    assert grid_rbd.list_artifacts("probe", cache_dir=cache) == []


def test_a_compile_error_is_reported_with_its_log_and_publishes_nothing(tmp_path):
    paths = write_probe(tmp_path / "src")
    paths["a"].write_text(paths["a"].read_text() + "\nthis is not C++;\n")
    cache = tmp_path / "c"
    with pytest.raises(grid_rbd.ConsumerArtifactError, match="unit_a.cu") as info:
        build_probe(cache, paths)
    assert "this is not C++" in str(info.value) or "error" in str(info.value)
    listing = store_listing(cache / "consumers" / "probe")
    assert listing["store"] == [] and listing["manifest"] == []
    assert len(listing["objects"]) == 1  # unit_b compiled and is reusable


def test_untrusted_store_contents_are_refused(built, tmp_path):
    cache, paths, art = built
    root = cache / "consumers" / "probe"
    manifest_path = root / "manifest.json"
    saved = manifest_path.read_text()
    try:
        manifest = json.loads(saved)
        manifest["forged"] = {**manifest["iiwa14"], "content_key": "../../../etc"}
        manifest["evil"] = {**manifest["iiwa14"], "artifact": "../../robot.so"}
        manifest_path.write_text(json.dumps(manifest))
        with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="not a store key"):
            grid_rbd.load_artifact("probe", "forged", cache_dir=cache)
        with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="artifact must match"):
            grid_rbd.load_artifact("probe", "evil", cache_dir=cache)
    finally:
        manifest_path.write_text(saved)
    # A damaged artifact is refused (and quarantined), never returned; a build restores it.
    so = art.path
    os.chmod(so, 0o700)
    data = bytearray(so.read_bytes())
    data[-1] ^= 0xFF
    so.write_bytes(bytes(data))
    with pytest.raises(grid_rbd.ArtifactIncompatibleError, match="damaged"):
        grid_rbd.load_artifact("probe", "iiwa14", cache_dir=cache)
    assert any((root / "quarantine").iterdir())
    again = build_probe(cache, paths)
    assert again.compiled and again.compiled_units == ()  # relinked from cached objects
    assert grid_rbd.load_artifact("probe", "iiwa14", cache_dir=cache).path == again.path


def test_registration_text_is_unchanged_by_the_device_api():
    """The device API is appended only on request: a registration's grid.cuh (and so
    every existing store key) is byte-for-byte what it was without it."""
    from grid_codegen import parse_urdf
    from grid_codegen.generate import generate
    from grid_codegen.options import CodegenOptions

    model = parse_urdf(IIWA.read_bytes())
    options = CodegenOptions(algorithms=("end_effector_pose", "crba"))
    plain = generate(model, options, units=True)
    with_api = generate(model, options, units=True, device_api=True)
    assert "grid::device" not in plain["grid.cuh"] and "namespace device" not in plain["grid.cuh"]
    assert with_api["grid.cuh"].startswith(plain["grid.cuh"])
    assert {k: v for k, v in with_api.items() if k != "grid.cuh"} == \
        {k: v for k, v in plain.items() if k != "grid.cuh"}


JOINT_DYNAMICS_UNIT = """// joint_dynamics.cu: inverse dynamics, joint dynamics baked, one thread
#include "grid.cuh"
extern "C" __attribute__((visibility("default")))
int probe_id(const double* q, const double* qd, const double* qdd, double* out) {
  grid::device::inverse_dynamics<double>(q, qd, qdd, nullptr, out);
  return grid::device::kInverseDynamicsOutSize;
}
"""


def test_codegen_keywords_reach_the_device_api(tmp_path):
    """use_joint_dynamics / friction_model / friction_width bake the joint dynamics into
    the consumer's item functions (against the reference with the same terms); the run-
    time tables, a bad cuda_arch and an unknown cost frame are refused (collision is
    accepted: tests/test_consumer_collision.py)."""
    import ctypes

    from test_joint_dynamics import DAMPING, FRICTION, iiwa_urdf, model_of, reference

    urdf = tmp_path / "iiwa14_jd.urdf"
    urdf.write_text(iiwa_urdf(DAMPING, FRICTION))
    src = tmp_path / "joint_dynamics.cu"
    src.write_text(JOINT_DYNAMICS_UNIT)
    art = grid_rbd.build_artifact("probe", "iiwa14_jd", urdf, sources=[src],
                                  cache_dir=tmp_path / "cache", backend="cpu",
                                  dtype="float64", algorithm_list=["inverse_dynamics"],
                                  use_joint_dynamics=True, friction_model="tanh",
                                  friction_width=0.3, cost_frames=["iiwa_link_7"])
    lib = ctypes.CDLL(os.fspath(art.path))
    ref, rigid = reference(model_of(), "tanh", 0.3)
    rng = np.random.default_rng(3)
    for _ in range(3):
        q, qd, qdd = (np.ascontiguousarray(rng.uniform(-1, 1, 7)) for _ in range(3))
        out = np.zeros(7)
        assert lib.probe_id(*(a.ctypes.data_as(ctypes.c_void_p) for a in (q, qd, qdd)),
                            out.ctypes.data_as(ctypes.c_void_p)) == 7
        want = ref.inverse_dynamics(q[None], qd[None], qdd[None])[0]
        np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
        assert np.abs(want - rigid.inverse_dynamics(q[None], qd[None], qdd[None])[0]).max() \
            > 1e-3  # the terms are there
    common = {"sources": [src], "cache_dir": tmp_path / "cache", "backend": "cpu"}
    for bad, match in (({"runtime_transform": True}, "no run-time tables"),
                       ({"runtime_joint_dynamics": True}, "no run-time tables"),
                       ({"cuda_arch": "sm_9x"}, "not an architecture"),
                       ({"cuda_arch": 90}, "applies to a CUDA build"),
                       ({"cost_frames": ["no_such_frame"]}, "cost_frames entry")):
        with pytest.raises(ValueError, match=match):
            grid_rbd.build_artifact("probe", "iiwa14_bad", urdf, **common, **bad)
