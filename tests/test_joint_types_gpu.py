"""The spherical/planar and mimic-coupled robots' generated CUDA build against the float64
reference (tag gpu; the CPU twins are in test_joint_types.py, which also needs Pinocchio:
this file does not, so it runs on the GPU machine)."""

from __future__ import annotations

import shutil

import pytest
from joint_type_robots import BALL_CHAIN, GRIPPER, artifact, check_kernels
from joint_type_robots import states as _states

import grid_rbd.reference as reference
from grid_codegen import parse_urdf


def _require_cuda():
    if shutil.which("nvcc") is None:
        pytest.skip("no CUDA GPU: nvcc is not on PATH")
    torch = pytest.importorskip("torch", reason="no CUDA GPU: torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU: torch.cuda.is_available() is False")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("robot", ["gripper", "ball_chain"])
def test_gpu_build_matches_reference(robot):
    torch = _require_cuda()
    mimic = robot == "gripper"
    model = parse_urdf(GRIPPER if mimic else BALL_CHAIN, mimic=mimic)
    ref = reference.CoupledReference(model) if mimic else reference.ReferenceRobot(model)
    built = artifact(model, "cuda")
    check_kernels(built, ref, *_states(model, 37, 6, model.reduced_nq, model.reduced_nv),
                  torch=torch)

