"""CUDA architectures and the CPU-only default in Bazel (cuda/defs.bzl, cuda/probe.bzl).

- `--//cuda:archs` defaults to DEFAULT_ARCHS, pinned in cuda/defs.bzl: the GPUs of the
  build machine change nothing;
- no action of a CPU artifact (generate, CPU compile) reads the architectures or the GPU
  probe: its action keys are the same under any `--//cuda:archs` and with or without a
  GPU, so machines with different GPUs share remote-cache entries for it;
- `--//cuda:enabled` defaults to whether the machine has a GPU, so a CPU machine skips the
  CUDA targets (no toolkit fetch, no nvcc).

Each case asks Bazel (cquery / aquery: analysis only, nothing is built) in this
workspace's own output base, reusing the server that `bazel test //...` left running. A
fake nvidia-smi (`--repo_env=GRID_CUDA_NVIDIA_SMI=...`) stands in for a GPU machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BAZEL = shutil.which("bazel")
_ARCHS = "//cuda:defs.bzl%CudaArchsInfo"
_ENABLED = "//cuda:defs.bzl%CudaEnabledInfo"
_CPU_ARTIFACT = "//robots/iiwa14:iiwa14_cpu"

pytestmark = [
    pytest.mark.skipif(BAZEL is None, reason="bazel is not on PATH"),
    pytest.mark.skipif("TEST_SRCDIR" in os.environ,
                       reason="runs Bazel on the workspace; not from inside a Bazel test"),
]


def _bazel(*args: str) -> subprocess.CompletedProcess[str]:
    # The bazel client's environment reaches the repository rules: no override may leak in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_CUDA_")}
    return subprocess.run([BAZEL, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


def _provider(target: str, expr: str, *flags: str) -> str:
    result = _bazel("cquery", target, "--output=starlark", f"--starlark:expr={expr}", *flags)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout.strip()


def effective_archs(*flags: str) -> list[str]:
    """The architectures CUDA targets are built for under these bazel flags."""
    return _provider("//cuda:archs", f"','.join(providers(target)['{_ARCHS}'].archs)",
                     *flags).split(",")


def cuda_enabled(*flags: str) -> bool:
    value = _provider("//cuda:enabled", f"providers(target)['{_ENABLED}'].enabled", *flags)
    assert value in ("True", "False"), value
    return value == "True"


def action_keys(target: str, mnemonics: str, *flags: str) -> dict[str, str]:
    """{mnemonic + output: ActionKey} of `target`'s actions with those mnemonics."""
    result = _bazel("aquery", f"mnemonic('{mnemonics}', deps({target}))", *flags)
    assert result.returncode == 0, result.stderr[-4000:]
    keys: dict[str, str] = {}
    for block in result.stdout.split("\n\n"):
        mnemonic = re.search(r"Mnemonic: (\S+)", block)
        outputs = re.search(r"Outputs: \[([^\]]*)\]", block)
        key = re.search(r"ActionKey: (\S+)", block)
        if mnemonic and outputs and key:
            keys[f"{mnemonic.group(1)} {outputs.group(1)}"] = key.group(1)
            assert "sm_" not in block.split("Command Line:")[-1] or "Cuda" in mnemonic.group(1)
    return keys


def fake_nvidia_smi(tmp_path: Path, gpus: int) -> str:
    """--repo_env naming an executable that lists `gpus` GPUs for `nvidia-smi -L`."""
    path = tmp_path / f"nvidia-smi-{gpus}"  # a new path: the probe re-runs when it changes
    lines = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d})\\n" for i in range(gpus))
    path.write_text(f"#!/bin/sh\nprintf '{lines}'\n[ {gpus} -gt 0 ] || exit 6\n")
    path.chmod(0o755)
    return f"--repo_env=GRID_CUDA_NVIDIA_SMI={path}"


def _pinned_default() -> list[str]:
    text = (REPO / "cuda/defs.bzl").read_text()
    match = re.search(r'^DEFAULT_ARCHS = "([^"]+)"$', text, re.MULTILINE)
    assert match, "cuda/defs.bzl pins no DEFAULT_ARCHS"
    return match.group(1).split(",")


def test_default_archs_are_the_pinned_list_whatever_the_gpus(tmp_path):
    assert _pinned_default() == ["sm_90"]
    assert effective_archs() == ["sm_90"]
    assert effective_archs(fake_nvidia_smi(tmp_path, 2)) == ["sm_90"]


def test_explicit_archs_replace_the_default_sorted_and_deduplicated():
    assert effective_archs("--//cuda:archs=sm_90, sm_80,sm_90") == ["sm_80", "sm_90"]


def test_bad_archs_are_an_error_naming_them():
    result = _bazel("cquery", "//cuda:archs", "--//cuda:archs=compute_80")
    assert result.returncode != 0
    assert "CUDA architectures look like sm_90" in result.stderr
    assert 'got "compute_80"' in result.stderr


def test_cuda_is_on_by_default_only_where_a_gpu_is(tmp_path):
    assert cuda_enabled(fake_nvidia_smi(tmp_path, 0)) is False
    assert cuda_enabled(fake_nvidia_smi(tmp_path, 1)) is True
    assert cuda_enabled(fake_nvidia_smi(tmp_path, 1), "--//cuda:enabled=false") is False
    assert cuda_enabled(fake_nvidia_smi(tmp_path, 0), "--config=cuda") is True


def test_cpu_artifact_actions_do_not_depend_on_archs_or_gpus(tmp_path):
    mnemonics = "GridGenerate|GridCompileCpu"
    base = action_keys(_CPU_ARTIFACT, mnemonics, fake_nvidia_smi(tmp_path, 0))
    assert sorted(k.split()[0] for k in base) == ["GridCompileCpu", "GridGenerate"]
    assert action_keys(_CPU_ARTIFACT, mnemonics, "--//cuda:archs=sm_80,sm_86",
                       fake_nvidia_smi(tmp_path, 0)) == base
    assert action_keys(_CPU_ARTIFACT, mnemonics, fake_nvidia_smi(tmp_path, 1)) == base


def test_a_cpu_machine_skips_cuda_targets(tmp_path):
    smi = fake_nvidia_smi(tmp_path, 0)
    result = _bazel("build", "--nobuild", "//robots/iiwa14:all", smi)
    assert result.returncode == 0, result.stderr[-4000:]
    result = _bazel("build", "--nobuild", "//robots/iiwa14:iiwa14_cuda", smi)
    assert result.returncode != 0
    assert "incompatible" in result.stderr


def test_archs_reach_the_cuda_compile_command(tmp_path):
    toolkit = _bazel("info", "output_base").stdout.strip() + "/external/grid_cuda/version.txt"
    if not Path(toolkit).is_file():
        pytest.skip("the CUDA toolkit repository is not fetched in this output base "
                    "(tools/ci/remote_cache_check.sh with --config=cuda fetches it)")
    result = _bazel("aquery", "mnemonic('GridCompileCuda', //robots/iiwa14:iiwa14_cuda)",
                    "--config=cuda", "--//cuda:archs=sm_80,sm_90")
    assert result.returncode == 0, result.stderr[-4000:]
    command = " ".join(result.stdout.replace("\\\n", " ").replace("'", "").split())
    assert "--gpu-arch sm_80,sm_90" in command
