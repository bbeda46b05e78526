"""Shared by the consumer-artifact tests: the robot, a two-unit consumer and its build."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IIWA = ROOT / "robots" / "iiwa14" / "iiwa14.urdf"
IK_DIR = ROOT / "examples" / "consumer_ik"
POSE_ONLY = ["end_effector_pose"]

UNIT_A = """// unit_a.cu: one end-effector pose per call, through grid::device (thread form)
#include "grid.cuh"
#include "probe.h"
extern "C" PROBE_EXPORT int probe_pose(const float* q, float* out) {
  grid::device::end_effector_pose<float>(q, out);
  return grid::device::kEndEffectorPoseOutSize;
}
"""

UNIT_B = """// unit_b.cu: the robot's constants, and the block form on the CPU build
#include "grid.cuh"
#include "probe.h"
#include <string.h>
extern "C" PROBE_EXPORT int probe_dims(int* out) {
  out[0] = grid::device::kNq; out[1] = grid::device::kNv; out[2] = grid::device::kNb;
  out[3] = (int)strlen(grid::device::kRobotName);
  return PROBE_VERSION;
}
extern "C" PROBE_EXPORT int probe_pose_block(const float* q, float* out) {
  float s[grid::device::kEndEffectorPoseBlockScratch];
  grid::device::end_effector_pose_block<float>(s, q, out);
  return 0;
}
"""

PROBE_H = """#pragma once
#define PROBE_EXPORT __attribute__((visibility("default")))
#ifndef PROBE_VERSION
#define PROBE_VERSION 1
#endif
"""


def write_probe(folder: Path) -> dict[str, Path]:
    """The two-unit probe consumer in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"a": folder / "unit_a.cu", "b": folder / "unit_b.cu", "h": folder / "probe.h"}
    paths["a"].write_text(UNIT_A)
    paths["b"].write_text(UNIT_B)
    paths["h"].write_text(PROBE_H)
    return paths


def build_probe(cache: Path, paths: dict[str, Path], name: str = "iiwa14", **kw):
    from grid_rbd import build_artifact

    return build_artifact("probe", name, IIWA, sources=[paths["a"], paths["b"]],
                          headers=[paths["h"]], cache_dir=cache, backend="cpu",
                          algorithm_list=POSE_ONLY, **kw)


def probe_pose(so_path: Path, q: np.ndarray, symbol: str = "probe_pose") -> np.ndarray:
    lib = ctypes.CDLL(os.fspath(so_path))
    fn = getattr(lib, symbol)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    q32 = np.ascontiguousarray(q, dtype=np.float32)
    out = np.zeros(6, np.float32)
    fn(q32.ctypes.data, out.ctypes.data)
    return out


def store_listing(root: Path) -> dict[str, list[str]]:
    """What a consumer namespace shows a reader: entries, pointers, objects, manifest."""
    def names(sub: str) -> list[str]:
        folder = root / sub
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    return {"store": names("store"), "bykey": [n for n in names("bykey") if not
                                               n.startswith(".")],
            "objects": [n for n in names("objects") if n.endswith(".o")],
            "manifest": [n for n in names("") if n == "manifest.json"]}
