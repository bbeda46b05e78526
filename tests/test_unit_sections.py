"""The split build's units read only their sections of the header (`emit.unit_sections`),
and start heaviest first (`compile.unit_weight`).

The units are preprocessed with the host compiler (`g++ -E`): what a unit reads is what
is left. That the split builds compile and agree with the reference is the business of
every other artifact test (the test harness builds split artifacts)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import ROBOTS

from grid_codegen import parse_urdf
from grid_codegen.compile import unit_weight
from grid_codegen.generate import generate
from grid_codegen.options import CodegenOptions

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (host build)")


def _write(files: dict[str, str], folder: Path) -> None:
    for name, text in files.items():
        (folder / name).write_text(text)


def _preprocessed(folder: Path, source: str) -> str:
    run = subprocess.run(["g++", "-E", "-P", "-std=c++17", "-x", "c++", source],
                         cwd=folder, capture_output=True, text=True, check=True)
    return run.stdout


@pytest.fixture(scope="module")
def iiwa14_units(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    model = parse_urdf(ROBOTS["iiwa14"].path)
    files = generate(model, CodegenOptions(dtype="float64"), units=True)
    folder = tmp_path_factory.mktemp("units")
    _write(files, folder)
    return folder, files


def test_each_unit_reads_its_algorithm_and_what_it_calls(iiwa14_units):
    folder, files = iiwa14_units
    algorithms = [n.removeprefix("unit_").removesuffix(".cu") for n in files
                  if n.startswith("unit_")]
    assert "forward_dynamics_gradient" in algorithms and "forward_dynamics_vjp" in algorithms
    whole = _preprocessed(folder, "wrapper.cu")
    for name in algorithms:
        text = _preprocessed(folder, f"unit_{name}.cu")
        assert len(text) < len(whole), name
        for other in algorithms:
            launchers = re.search(rf"\blaunch_{other}_(thread|warp|block|tangents)\b", text)
            assert bool(launchers) == (other == name), (name, other)
            assert re.search(rf"\blaunch_{other}_thread\b", whole), other
    # the FD gradient's tangents variant has an item of its own, not the FD VJP's
    fdg = _preprocessed(folder, "unit_forward_dynamics_gradient.cu")
    assert re.search(r"\bforward_dynamics_gradient_tangent_thread\b", fdg)
    assert not re.search(r"\bforward_dynamics_vjp_thread\b", fdg)
    crba = _preprocessed(folder, "unit_crba.cu")
    assert not re.search(r"\bforward_dynamics_vjp_thread\b", crba)


def test_every_pass_a_unit_calls_is_defined_in_it(iiwa14_units):
    folder, files = iiwa14_units
    for name in (n for n in files if n.startswith("unit_")):
        text = _preprocessed(folder, name)
        called = set(re.findall(r"\b(\w+)<T, S>\(", text))
        defined = set(re.findall(r"\bvoid\s+(\w+)\(", text))
        assert called and called <= defined, (name, sorted(called - defined)[:5])


def test_units_leave_out_the_device_api(tmp_path):
    model = parse_urdf(ROBOTS["iiwa14"].path)
    files = generate(model, CodegenOptions(dtype="float64", algorithms=("crba", "aba")),
                     units=True, device_api=True)
    _write(files, tmp_path)
    assert "namespace device" in _preprocessed(tmp_path, "wrapper.cu")
    unit = _preprocessed(tmp_path, "unit_crba.cu")
    assert "namespace device" not in unit and re.search(r"\blaunch_crba_thread\b", unit)


def test_the_header_is_the_same_with_and_without_units(iiwa14_units):
    _, files = iiwa14_units
    model = parse_urdf(ROBOTS["iiwa14"].path)
    single = generate(model, CodegenOptions(dtype="float64"))
    assert "defined(GRID_UNIT)" in single["grid.cuh"]
    assert single["grid.cuh"] == files["grid.cuh"]


def test_the_heaviest_unit_starts_first(iiwa14_units, tmp_path):
    folder, files = iiwa14_units
    weights = {n: unit_weight(folder / n) for n in files if n.endswith(".cu")}
    assert weights["wrapper.cu"] == 0
    assert all(w > 0 for n, w in weights.items() if n.startswith("unit_"))
    assert weights["unit_forward_dynamics_gradient.cu"] > weights["unit_end_effector_pose.cu"]
    for text in ("// Compile weight: 12x\n", "", "// Compile weight: -5\n"):
        (tmp_path / "bad.cu").write_text("//\n//\n" + text)
        assert unit_weight(tmp_path / "bad.cu") == 0
    assert unit_weight(tmp_path / "missing.cu") == 0
