"""Thread items cut into parts of their output (`grid_codegen.emit.thread_parts`).

The CUDA thread kernel runs a wide item as parts, one warp per part; the host build runs
the whole item. So the parts' item functions are compiled here on the host (a small C++
harness over the generated `grid.cuh`, float64) and checked entry by entry against the
float64 reference; the CUDA kernels over them are checked on the GPU
(`test_thread_staging_gpu.py`, `test_codegen_gpu.py`)."""

from __future__ import annotations

import ctypes
import re
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

CANDIDATES = ("crba", "minv", "end_effector_pose_gradient", "world_kinematics", "ccrba",
              "dccrba", "kinetic_energy_regressor", "potential_energy_regressor")
"""Wide outputs of inputs the harness has (q, qd, qdd, u; f_ext left out)."""
GRAVITY = -9.81


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
    # g1's CRBA: 5,003 operations whole, the 9 parts repeat 14.5k (allowed: 16 x 1,225).
    assert worth_cutting(5003, [19495 // 9] * 9, 1225)
    # go2's M^-1: 5,883 whole, the 3 parts repeat 7.6k, 23.6 per scalar (allowed: 16).
    assert not worth_cutting(5883, [13519 // 3] * 3, 324)
    assert STACK_SCALAR_OPS == 16


def _harness(parts: dict[str, list[tuple[int, int]]]) -> str:
    """C++ that runs the whole item and each part of every algorithm on one item
    (inputs `in[k]` in port order, NULL for an optional input left out)."""
    lines = ['#include "grid.cuh"', 'extern "C" {']
    for name, ranges in parts.items():
        ports = ", ".join(f"in[{k}]" for k in range(len(algorithm(name).inputs)))
        args = f"{ports}, nullptr, {GRAVITY!r}"
        lines.append(f"void run_{name}(const double* const* in, double* whole, double* cut) {{")
        lines.append(f"  grid::{name}_thread<double, double>({args}, whole);")
        for k, (offset, _) in enumerate(ranges):
            lines.append(f"  grid::{name}_thread_p{k}<double, double>({args}, cut + {offset});")
        lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("robot", ["go2", "g1"])
def test_parts_compute_their_entries(robot, tmp_path):
    """Each part writes exactly its entries: together they equal the whole item bit for
    bit, for every algorithm the cost model cuts; and the float64 reference where it has
    the method."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler (g++ or c++) on PATH")
    spec = ROBOTS[robot]
    if not spec.path.exists():
        pytest.skip(f"{robot}: its URDF is not available")
    model = load_model(robot)
    files = generate(model, CodegenOptions(dtype="float64", strategy="thread",
                                           algorithms=CANDIDATES))
    header = files["grid.cuh"]
    dims = Dims(model.reduced_nq, model.reduced_nv, model.nb,
                len(model.end_effector_frames(None)))
    parts = {}
    for name in CANDIDATES:
        ranges = part_ranges(algorithm(name), dims)
        if re.search(rf"\b{name}_thread_p0\(", header):
            assert len(ranges) > 1
            assert re.search(rf"\b{name}_thread_p{len(ranges) - 1}\(", header)
            assert not re.search(rf"\b{name}_thread_p{len(ranges)}\(", header)
            parts[name] = ranges
    # The store-bound CRBA, end-effector gradient and world kinematics are cut; M^-1,
    # whose parts would repeat most of it, is not.
    assert {"crba", "end_effector_pose_gradient", "world_kinematics"} <= set(parts)
    assert "minv" not in parts
    (tmp_path / "grid.cuh").write_text(header)
    (tmp_path / "harness.cpp").write_text(_harness(parts))
    lib = tmp_path / "parts.so"
    subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-x", "c++",
                    str(tmp_path / "harness.cpp"), "-o", str(lib)], check=True,
                   capture_output=True, timeout=900)
    so = ctypes.CDLL(str(lib))
    ref = reference.load(spec.path, floating_base=spec.floating_base)
    s = random_states(ref.model, 3, seed=11)
    pointer = ctypes.POINTER(ctypes.c_double)
    for name in parts:
        entry = algorithm(name)
        width = entry.output_size(dims)
        for b in range(s.q.shape[0]):
            values = [None if not p.required else
                      np.ascontiguousarray(getattr(s, p.name)[b], dtype=np.float64)
                      for p in entry.inputs]
            table = (ctypes.c_void_p * len(values))(
                *[None if v is None else v.ctypes.data for v in values])
            whole = np.full(width, np.nan)
            cut = np.full(width, np.nan)
            getattr(so, f"run_{name}")(table, whole.ctypes.data_as(pointer),
                                       cut.ctypes.data_as(pointer))
            assert np.isfinite(whole).all(), name
            assert np.array_equal(cut, whole), f"{name}: parts differ from the whole item"
            if name in ("crba", "end_effector_pose_gradient"):
                assert_scaled_close(cut.reshape(1, -1),
                                    getattr(ref, name)(s.q[b:b + 1]).reshape(1, -1), 1e-10,
                                    f"{name} parts, item {b}")
