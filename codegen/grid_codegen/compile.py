"""The compile driver: generated sources in, `robot.so` plus `robot.build.log` out.

`backend="cpu"` runs the host C++ compiler on `wrapper.cu` as C++
(`-O2 -std=c++17 -shared -fPIC -x c++`, OpenMP when available); `backend="cuda"` runs
nvcc for each requested architecture plus the one detected on this machine, with its
own temporary directory per build (nvcc names its temporaries by process id, which
collides between concurrent sandboxed builds). The shared object is written under a
temporary name and renamed, so a reader never sees a partial file. A failed build raises
`CompileError`, whose message ends with the tail of the build log.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_LINES = 40
ARTIFACT = "robot.so"
BUILD_LOG = "robot.build.log"


class CompileError(RuntimeError):
    """The compiler failed; `log_path` is the full log, the message ends with its tail."""

    def __init__(self, message: str, log_path: Path) -> None:
        super().__init__(message)
        self.log_path = log_path


@dataclass(frozen=True)
class CompileResult:
    so_path: Path
    log_path: Path
    command: tuple[str, ...]
    seconds: float
    backend: str
    archs: tuple[str, ...]  # ("cpu",) for the host build


def find_cxx() -> str:
    for name in (os.environ.get("CXX", ""), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    raise FileNotFoundError("no host C++ compiler found (set CXX, or install g++)")


def find_nvcc() -> str:
    for candidate in (os.environ.get("NVCC", ""), "nvcc",
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin/nvcc")):
        if candidate and shutil.which(candidate):
            return candidate
    raise FileNotFoundError("nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")


def detect_cuda_arch() -> str | None:
    """`sm_XY` of GPU 0 via nvidia-smi, or None without a visible GPU."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    first = out.strip().splitlines()[0].strip() if out.strip() else ""
    major, _, minor = first.partition(".")
    return f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None


@functools.cache
def openmp_works(cxx: str) -> bool:
    """Whether `cxx -fopenmp` builds and links a program (the CPU backend then runs a
    batch across OpenMP threads). Probed once per compiler per process."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cc"
        src.write_text("#include <omp.h>\n"
                       "int main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
        result = subprocess.run([cxx, "-fopenmp", str(src), "-o", str(Path(tmp) / "probe")],
                                capture_output=True)
        return result.returncode == 0


# The flags below are the one definition of how an artifact is compiled: the pip path
# (`compile_artifact`) and the Bazel actions (`python -m grid_codegen compile`, driven by
# tools/bazel/grid_robot.bzl) both build their command lines from them.
def cpu_flags(openmp: bool) -> list[str]:
    """Host compiler flags of a CPU artifact (the source is compiled as C++)."""
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden"]
    if openmp:
        flags.append("-fopenmp")
    return flags


def cuda_flags(archs: Sequence[str]) -> list[str]:
    """nvcc flags of a CUDA artifact: one `-gencode` per `sm_XY` in `archs`, and the
    architecture list the descriptor reports."""
    flags = ["-O3", "-std=c++17", "--shared", "-Xcompiler", "-fPIC",
             "-Xcompiler", "-fvisibility=hidden"]
    for arch in archs:
        number = arch.removeprefix("sm_")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    flags.append(f'-DGRID_COMPILED_ARCHS="{",".join(archs)}"')
    return flags


def cpu_command(cxx: str, source: Path, output: Path, openmp: bool,
                extra_flags: Sequence[str]) -> list[str]:
    return [cxx, *cpu_flags(openmp), *extra_flags, "-x", "c++", str(source), "-o", str(output)]


def cuda_command(nvcc: str, source: Path, output: Path, archs: Sequence[str],
                 extra_flags: Sequence[str]) -> list[str]:
    return [nvcc, *cuda_flags(archs), *extra_flags, str(source), "-o", str(output)]


def compile_artifact(files: Mapping[str, str], out_dir: str | Path, backend: str = "cpu", *,
                     gpu_archs: Sequence[str] = ("sm_90",), detect_arch: bool = True,
                     openmp: bool = True, compiler: str | None = None,
                     extra_flags: Sequence[str] = (), timeout: float | None = None
                     ) -> CompileResult:
    """Write `files` into `out_dir` and build `out_dir/robot.so` from `wrapper.cu`.

    files: `generate(...)` output (file name -> text; must hold `wrapper.cu`).
    backend: "cpu" (host compiler) or "cuda" (nvcc).
    gpu_archs: CUDA architectures to build; the detected GPU's is added when
        `detect_arch`. compiler: the host compiler or nvcc to use instead of the default.
    Raises `CompileError` (message ends with the build log's tail) when the build fails.
    """
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    if "wrapper.cu" not in files:
        raise ValueError(f"files must include wrapper.cu; got {sorted(files)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in sorted(files):
        (out / name).write_text(files[name])
    so_path, log_path = out / ARTIFACT, out / BUILD_LOG
    staging = out / f".{ARTIFACT}.{os.getpid()}.tmp"
    env = dict(os.environ)
    if backend == "cpu":
        tool = compiler or find_cxx()
        archs: tuple[str, ...] = ("cpu",)
        cmd = cpu_command(tool, out / "wrapper.cu", staging, openmp and openmp_works(tool),
                          extra_flags)
        tmp_dir = None
    else:
        tool = compiler or find_nvcc()
        detected = detect_cuda_arch() if detect_arch else None
        archs = tuple(sorted(set(gpu_archs) | ({detected} if detected else set()),
                             key=lambda a: int(a[3:])))
        cmd = cuda_command(tool, out / "wrapper.cu", staging, archs, extra_flags)
        tmp_dir = Path(tempfile.mkdtemp(prefix="nvcc_", dir=out))
        env["TMPDIR"] = str(tmp_dir)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=out, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout)
        rc, output = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        rc, output = -1, (exc.stdout or "") + f"\n[timed out after {timeout} s]\n"
    finally:
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    seconds = time.monotonic() - start
    log_path.write_text(f"$ {' '.join(cmd)}\n{output}\n[exit {rc}, {seconds:.1f} s]\n")
    if rc != 0 or not staging.exists():
        staging.unlink(missing_ok=True)
        tail = "\n".join(log_path.read_text().splitlines()[-LOG_TAIL_LINES:])
        raise CompileError(f"{backend} build of {out / 'wrapper.cu'} failed (exit {rc}); "
                           f"full log {log_path}; last lines:\n{tail}", log_path)
    os.replace(staging, so_path)
    return CompileResult(so_path, log_path, tuple(cmd), seconds, backend, archs)
