"""Generation is a pure function of (model, options): byte-identical output, stable
canonical options, and a compile failure that reports the log's tail."""

from __future__ import annotations

import json

import pytest
from artifact_harness import load_model

from grid_codegen.compile import CompileError, compile_artifact
from grid_codegen.emit import BUILDERS
from grid_codegen.emit.layout import Layout
from grid_codegen.emit.writer import Writer, linear_combination, lit
from grid_codegen.generate import generate
from grid_codegen.options import DEFAULT_ALGORITHMS as ALGORITHMS
from grid_codegen.options import CodegenOptions


@pytest.mark.parametrize("robot", ["iiwa14", "g1"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_generation_is_byte_identical(robot, dtype):
    options = CodegenOptions(dtype=dtype, runtime_inertia=(robot == "g1"))
    first = generate(load_model(robot), options)
    second = generate(load_model(robot), CodegenOptions(dtype=dtype,
                                                        runtime_inertia=(robot == "g1")))
    assert sorted(first) == ["grid.cuh", "wrapper.cu"]
    assert first == second


def test_options_change_the_source():
    model = load_model("iiwa14")
    base = generate(model, CodegenOptions())
    assert generate(model, CodegenOptions(dtype="float64"))["wrapper.cu"] != base["wrapper.cu"]
    assert generate(model, CodegenOptions(runtime_inertia=True))["grid.cuh"] != base["grid.cuh"]
    only_id = generate(model, CodegenOptions(algorithms=("inverse_dynamics",)))["grid.cuh"]
    assert "crba_thread_kernel" not in only_id and "crba_block_kernel" not in only_id
    for strategy in ("thread", "warp", "block"):
        assert f"inverse_dynamics_{strategy}_kernel" in only_id
    warp_only = generate(model, CodegenOptions(algorithms=("inverse_dynamics",),
                                               strategy="warp"))["grid.cuh"]
    assert "inverse_dynamics_warp_kernel" in warp_only
    assert "inverse_dynamics_thread_kernel" not in warp_only


def test_canonical_json_is_stable():
    a = CodegenOptions(algorithms=["minv", "crba"], ee_joint_names=["b", "a"])
    b = CodegenOptions(algorithms=("crba", "minv"), ee_joint_names=("b", "a"))
    assert a == b and a.canonical_json() == b.canonical_json()
    data = json.loads(a.canonical_json())
    assert list(data) == sorted(data)
    assert data["algorithms"] == ["crba", "minv"]  # registry order, not the caller's
    assert data["ee_joint_names"] == ["b", "a"]  # end-effector order is meaningful
    assert a.canonical_json() == ('{"algorithms":["crba","minv"],"dtype":"float32",'
                                  '"ee_joint_names":["b","a"],'
                                  '"max_batch_size":65536,"runtime_inertia":false,'
                                  '"strategy":"auto","version":3}')


@pytest.mark.parametrize("bad", [{"dtype": "float16"}, {"algorithms": ("rnea2",)},
                                 {"max_batch_size": 0},
                                 {"strategy": "grid"}, {"algorithms": ()}])
def test_options_are_validated(bad):
    with pytest.raises(ValueError):
        CodegenOptions(**bad)


def test_registry_covers_every_algorithm():
    """Every core algorithm has a level-synchronous builder, except the reverse-mode
    kernels, which are thread passes only (emit.thread_vjp); so do the plant profile's
    fused step gradients (emit.plant_level)."""
    from grid_codegen.emit.thread_vjp import VJP_OF
    from grid_codegen.registry import PROFILES

    core = tuple(a for a in ALGORITHMS if a not in VJP_OF)
    assert tuple(BUILDERS) == core + PROFILES["plant"]
    assert set(VJP_OF) <= set(ALGORITHMS)


def test_writer_and_layout():
    assert lit(0.1) == "T(0.1)" and lit(-0.0) == "T(0.0)" and lit(1e-300) == "T(1e-300)"
    with pytest.raises(ValueError):
        lit(float("nan"))
    assert linear_combination([(1.0, "s"), (-1.0, "c"), (0.0, "x")], 0.5) == "s - c + T(0.5)"
    assert linear_combination([(-2.0, "s")]) == "-T(2.0) * s"
    assert linear_combination([]) == "T(0.0)"
    layout = Layout("demo")
    v = layout.add("v", 6, 3, doc="velocities")
    q = layout.add("q", 7)
    assert (v.offset, q.offset, layout.size) == (0, 18, 25)
    assert v.at(2) == "(s_v + 6 * 2)" and q["k"] == "s_q[k]"
    with pytest.raises(IndexError):
        v.at(3)
    w = Writer()
    layout.emit_constants(w)
    assert "constexpr int k_q = 18;" in w.text() and "constexpr int kSize = 25;" in w.text()


def test_compile_failure_reports_the_log_tail(tmp_path):
    files = generate(load_model("iiwa14"), CodegenOptions(algorithms=("crba",)))
    broken = dict(files)
    broken["wrapper.cu"] += "\nint broken = undeclared_symbol;\n"
    with pytest.raises(CompileError) as err:
        compile_artifact(broken, tmp_path, backend="cpu")
    message = str(err.value)
    assert "undeclared_symbol" in message and "last lines" in message
    log = (tmp_path / "robot.build.log").read_text()
    assert "undeclared_symbol" in log and "[exit" in log
    assert not (tmp_path / "robot.so").exists()
