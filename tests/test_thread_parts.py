"""Thread items cut into parts of their output (`grid_codegen.emit.thread_parts`).

The CUDA thread kernel runs a wide item as parts, one warp per part; the host build runs
the whole item. So the parts' item functions are compiled here on the host (a small C++
harness over the generated `grid.cuh`, float64) and checked entry by entry against the
float64 reference; the CUDA kernels over them are checked on the GPU
(`test_thread_staging_gpu.py`, `test_codegen_gpu.py`)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from artifact_harness import load_model
from support import ROBOTS, assert_scaled_close, random_states

import grid_rbd.reference as reference
from grid_codegen.emit.kernels import SHARED_ROW_MAX_BYTES, shared_row_pitch
from grid_codegen.emit.thread_parts import (
    MAX_PARTS,
    STACK_SCALAR_OPS,
    part_ranges,
    worth_cutting,
)
from grid_codegen.generate import generate
from grid_codegen.options import CodegenOptions
from grid_codegen.registry import Dims, algorithm

CUT = ("crba", "minv", "end_effector_pose_gradient")


def _dims(nv: int, num_ees: int = 2) -> Dims:
    return Dims(nv, nv, nv, num_ees)


@pytest.mark.parametrize("nv", [6, 7, 12, 18, 29, 35, 60])
def test_parts_are_whole_rows_that_fit_a_shared_row(nv):
    entry = algorithm("crba")
    ranges = part_ranges(entry, _dims(nv))
    width = nv * nv
    fits = shared_row_pitch(width) * 4 <= SHARED_ROW_MAX_BYTES
    if fits or nv > 159:
        assert ranges == []
        return
    if not ranges:  # more parts than allowed
        assert -(-nv // (159 // nv)) > MAX_PARTS
        return
    assert [o for o, _ in ranges] == list(np.cumsum([0] + [w for _, w in ranges])[:-1])
    assert sum(w for _, w in ranges) == width
    for offset, w in ranges:
        assert offset % nv == 0 and w % nv == 0  # whole rows
        assert shared_row_pitch(w) * 4 <= SHARED_ROW_MAX_BYTES
    rows = [w // nv for _, w in ranges]
    assert max(rows) - min(rows) <= 1  # balanced


def test_the_cost_model():
    # g1's CRBA: 4,781 operations whole, the 9 parts repeat 11.6k (allowed: 40 x 1,225).
    assert worth_cutting(4781, [(4781 + 11600) // 9] * 9, 1225)
    # g1's M^-1: 28k whole, the parts would repeat 112k.
    assert not worth_cutting(28368, [(28368 + 112000) // 9] * 9, 1225)
    assert STACK_SCALAR_OPS * 1225 == 49000


def _harness(parts: dict[str, list[tuple[int, int]]]) -> str:
    """C++ that runs the whole item and each part of every algorithm on one item."""
    lines = ['#include "grid.cuh"', 'extern "C" {']
    for name, ranges in parts.items():
        lines.append(f"void run_{name}(const double* q, double* whole, double* cut) {{")
        lines.append(f"  grid::{name}_thread<double, double>(q, nullptr, 0.0, whole);")
        for k, (offset, _) in enumerate(ranges):
            lines.append(f"  grid::{name}_thread_p{k}<double, double>(q, nullptr, 0.0, "
                         f"cut + {offset});")
        lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("robot", ["go2", "g1"])
def test_parts_compute_their_entries(robot, tmp_path):
    """Each part writes exactly its entries; together they equal the whole item and the
    float64 reference."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++ or c++) on PATH")
    spec = ROBOTS[robot]
    if not spec.path.exists():
        pytest.skip(f"{robot}: its URDF is not available")
    model = load_model(robot)
    files = generate(model, CodegenOptions(dtype="float64", strategy="thread",
                                           algorithms=CUT))
    header = files["grid.cuh"]
    dims = Dims(model.reduced_nq, model.reduced_nv, model.nb,
                len(model.end_effector_frames(None)))
    parts = {}
    for name in CUT:
        ranges = part_ranges(algorithm(name), dims)
        if f"{name}_thread_p0" in header:
            assert len(ranges) > 1 and f"{name}_thread_p{len(ranges)}" not in header
            parts[name] = ranges
    # The model's cut: the store-bound CRBA and end-effector gradient are cut.
    assert {"crba", "end_effector_pose_gradient"} <= set(parts), sorted(parts)
    (tmp_path / "grid.cuh").write_text(header)
    (tmp_path / "harness.cpp").write_text(_harness(parts))
    lib = tmp_path / "parts.so"
    subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-x", "c++",
                    str(tmp_path / "harness.cpp"), "-o", str(lib)], check=True,
                   capture_output=True, timeout=600)
    so = ctypes.CDLL(str(lib))
    ref = reference.load(spec.path, floating_base=spec.floating_base)
    s = random_states(ref.model, 3, seed=11)
    pointer = ctypes.POINTER(ctypes.c_double)
    for name in parts:
        width = algorithm(name).output_size(dims)
        want = getattr(ref, name)(s.q)
        for b in range(s.q.shape[0]):
            q = np.ascontiguousarray(s.q[b], dtype=np.float64)
            whole = np.full(width, np.nan)
            cut = np.full(width, np.nan)
            getattr(so, f"run_{name}")(q.ctypes.data_as(pointer), whole.ctypes.data_as(pointer),
                                       cut.ctypes.data_as(pointer))
            assert np.array_equal(cut, whole), f"{name}: parts differ from the whole item"
            assert_scaled_close(cut.reshape(1, -1), want[b].reshape(1, -1), 1e-10,
                                f"{name} parts, item {b}")
