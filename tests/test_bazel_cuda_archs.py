"""The default of `--//cuda:archs`: sm_90 plus the build machine's GPUs (cuda/detect.bzl).

Each case asks Bazel for the effective value (`CudaArchsInfo.archs` of //cuda:archs, by
cquery) in this workspace's own output base, so it reuses the server that `bazel build`
or `bazel test //...` left running; a case takes about a second once that server is up.
The probe runs a fake nvidia-smi (`--repo_env=GRID_CUDA_NVIDIA_SMI=...`) where a case
needs a GPU. Nothing here builds an action or fetches the CUDA toolkit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BAZEL = shutil.which("bazel")
_PROVIDER = "//cuda:defs.bzl%CudaArchsInfo"

pytestmark = [
    pytest.mark.skipif(BAZEL is None, reason="bazel is not on PATH"),
    pytest.mark.skipif("TEST_SRCDIR" in os.environ,
                       reason="runs Bazel on the workspace; not from inside a Bazel test"),
]


def _cquery(*flags: str) -> subprocess.CompletedProcess[str]:
    # The bazel client's environment reaches the repository rule, so the caller's own
    # overrides must not leak into a case.
    env = {k: v for k, v in os.environ.items()
           if k not in ("GRID_CUDA_ARCHS", "GRID_CUDA_NVIDIA_SMI")}
    return subprocess.run(
        [BAZEL, "cquery", "//cuda:archs", "--output=starlark",
         f"--starlark:expr=','.join(providers(target)['{_PROVIDER}'].archs)", *flags],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def effective_archs(*flags: str) -> list[str]:
    """The architectures CUDA targets are built for under these bazel flags."""
    result = _cquery(*flags)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip().split(",")


def fake_nvidia_smi(tmp_path: Path, stdout: str, exit_code: int = 0) -> str:
    """An executable that answers any nvidia-smi query with `stdout`."""
    path = tmp_path / "nvidia-smi"
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}EOF\nexit {exit_code}\n")
    path.chmod(0o755)
    return f"--repo_env=GRID_CUDA_NVIDIA_SMI={path}"


def test_default_is_sm_90_plus_this_machines_gpus():
    archs = effective_archs()
    assert "sm_90" in archs and archs == sorted(archs, key=lambda a: int(a[3:]))
    if shutil.which("nvidia-smi") is None:
        assert archs == ["sm_90"]


def test_detected_gpus_join_sm_90(tmp_path):
    assert effective_archs(fake_nvidia_smi(tmp_path, "9.0\n8.6\n")) == ["sm_86", "sm_90"]


def test_detection_sorts_by_number_dedups_and_skips_unparsable_lines(tmp_path):
    smi = fake_nvidia_smi(tmp_path, "12.0\n[N/A]\n8.6\n12.0\n")
    assert effective_archs(smi) == ["sm_86", "sm_90", "sm_120"]


@pytest.mark.parametrize("stdout, exit_code", [
    ("No devices were found\n", 6),  # a failing command
    ("garbage\n", 0),  # unparsable output
])
def test_a_failed_probe_leaves_sm_90(tmp_path, stdout, exit_code):
    assert effective_archs(fake_nvidia_smi(tmp_path, stdout, exit_code)) == ["sm_90"]


def test_missing_nvidia_smi_leaves_sm_90(tmp_path):
    missing = f"--repo_env=GRID_CUDA_NVIDIA_SMI={tmp_path / 'absent'}"
    assert effective_archs(missing) == ["sm_90"]


def test_grid_cuda_archs_replaces_detection(tmp_path):
    smi = fake_nvidia_smi(tmp_path, "8.6\n")
    assert effective_archs(smi, "--repo_env=GRID_CUDA_ARCHS=sm_80") == ["sm_80", "sm_90"]


def test_explicit_flag_replaces_the_default(tmp_path):
    smi = fake_nvidia_smi(tmp_path, "8.6\n")
    assert effective_archs(smi, "--//cuda:archs=sm_75") == ["sm_75"]


def test_bad_grid_cuda_archs_is_an_error_naming_it():
    result = _cquery("--repo_env=GRID_CUDA_ARCHS=compute_80")
    assert result.returncode != 0
    assert 'GRID_CUDA_ARCHS: CUDA architectures look like sm_90' in result.stderr
    assert 'got "compute_80"' in result.stderr
