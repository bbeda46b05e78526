"""How a consumer's own sources are compiled against a generated `grid.cuh`: the one
definition of the command lines, shared by the pip path (`grid_rbd.consumer`) and the
Bazel action of `grid_consumer` (`python -m grid_codegen consumer-compile ...`).

Each unit is compiled with `-c` (the CPU form as C++, `-x c++`, so `.cu` files build with
the host compiler), then the objects are linked into one shared object. Unlike a robot
artifact, symbols keep default visibility: the consumer's exported functions are the
point of the artifact.

    python -m grid_codegen consumer-compile --backend cpu --include GEN_DIR \
        --src a.cu --src b.cu --output ik.so [--host-toolchain host.json] \
        [--define NAME=VALUE] [--copt FLAG] [--linkopt FLAG]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grid_codegen.compile import build_jobs, find_cxx, openmp_works, run_compiler


def cpu_flags(openmp: bool, isa: Sequence[str] = ()) -> list[str]:
    """Host compiler flags of every unit of a CPU consumer artifact."""
    flags = ["-O2", "-std=c++17", "-fPIC", "-fno-math-errno", "-Wno-psabi", *isa]
    return flags + (["-fopenmp"] if openmp else [])


def cpu_link(openmp: bool) -> list[str]:
    return ["-shared", *(["-fopenmp"] if openmp else [])]


def cuda_flags(archs: Sequence[str]) -> list[str]:
    """nvcc flags of every unit of a CUDA consumer artifact (one -gencode per sm_XY)."""
    return ["-O3", "-std=c++17", "-Xcompiler", "-fPIC", *cuda_link(archs)[1:],
            f'-DGRID_COMPILED_ARCHS="{",".join(archs)}"']


def cuda_link(archs: Sequence[str]) -> list[str]:
    numbers = [a.removeprefix("sm_") for a in archs]
    return ["--shared", *(f"-gencode=arch=compute_{n},code=sm_{n}" for n in numbers)]


def unit_command(compiler: str, flags: Sequence[str], backend: str, unit: str | Path,
                 obj: str | Path) -> list[str]:
    """`flags` (includes, defines, options) then `-c unit -o obj`."""
    language = ["-x", "c++"] if backend == "cpu" else []
    return [compiler, *flags, "-c", *language, str(unit), "-o", str(obj)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grid_codegen consumer-compile",
                                description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("cpu", "cuda"), required=True)
    p.add_argument("--compiler", help="host C++ compiler (cpu) or nvcc (cuda)")
    p.add_argument("--host-toolchain", type=Path, help="JSON of `host-toolchain`")
    p.add_argument("--include", action="append", default=[], help="-I folder; repeatable")
    p.add_argument("--src", action="append", required=True, help="a unit; repeatable")
    p.add_argument("--define", action="append", default=[])
    p.add_argument("--copt", action="append", default=[])
    p.add_argument("--linkopt", action="append", default=[])
    p.add_argument("--gpu-arch", default="sm_90", help="comma-separated sm_XY")
    p.add_argument("--library-dir", action="append", default=[])
    p.add_argument("--output", type=Path, required=True)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The Bazel action: compile every `--src`, link `--output`; the log on failure."""
    args = _parser().parse_args(argv)
    host = json.loads(args.host_toolchain.read_text()) if args.host_toolchain else {}
    tools: list[str] = []
    if args.backend == "cpu":
        compiler = args.compiler or host.get("cxx") or find_cxx()
        openmp = bool(host["openmp"]) if "openmp" in host else openmp_works(compiler)
        flags, link = cpu_flags(openmp), cpu_link(openmp)
    else:
        if not args.compiler:
            print("consumer-compile --backend cuda needs --compiler path/to/nvcc",
                  file=sys.stderr)
            return 2
        compiler = args.compiler
        archs = [a for a in args.gpu_arch.split(",") if a]
        flags, link = cuda_flags(archs), cuda_link(archs)
        if host.get("cxx"):
            flags += ["-ccbin", host["cxx"]]
            tools.append(host["cxx"])
        link += [f"-L{d}" for d in args.library_dir]
    flags += [f"-I{d}" for d in args.include] + [f"-D{d}" for d in args.define] + args.copt
    if "/" in compiler:  # its folder leads the compile's PATH (compile_environment)
        tools.insert(0, compiler)
    names = [Path(s).name for s in args.src]
    if len(set(names)) != len(names):
        print(f"consumer-compile: units must have distinct file names: {names}",
              file=sys.stderr)
        return 2
    # nvcc names temporaries by pid: one private folder per action (see cli._compile).
    tmp = Path(tempfile.mkdtemp(prefix=".consumer_tmp_", dir=args.output.parent.absolute()))
    try:
        def one(src: str) -> tuple[int, str]:
            obj = tmp / (Path(src).stem + ".o")
            cmd = unit_command(compiler, flags, args.backend, src, obj)
            rc, out = run_compiler(cmd, tmp, tools)
            return rc, f"$ {' '.join(cmd)}\n{out}[exit {rc}]\n"

        with ThreadPoolExecutor(max_workers=max(1, min(build_jobs(), len(args.src)))) as pool:
            results = list(pool.map(one, args.src))
        log = "".join(text for _, text in results)
        failed = [rc for rc, _ in results if rc != 0]
        if not failed:
            objects = [str(tmp / (Path(s).stem + ".o")) for s in args.src]
            cmd = [compiler, *link, *objects, "-o", str(args.output), *args.linkopt]
            rc, out = run_compiler(cmd, tmp, tools)
            log += f"$ {' '.join(cmd)}\n{out}[exit {rc}]\n"
            failed = [rc] if rc != 0 else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failed or not args.output.is_file():
        sys.stderr.write(log)
        return failed[0] if failed else 1
    return 0
