"""`python -m grid_codegen`: the code generator and compile driver as commands.

    python -m grid_codegen generate ROBOT.urdf --out-dir DIR [--floating-base]
        [--dtype float32] [--algorithms a,b] [--ee-joint-names j1,j2]
        [--runtime-inertia] [--max-batch-size N] [--strategy auto]
    python -m grid_codegen compile --backend cpu  --source DIR/wrapper.cu --output robot.so
        [--host-toolchain host.json | --compiler g++ --openmp/--no-openmp]
    python -m grid_codegen compile --backend cuda --source DIR/wrapper.cu --output robot.so
        --compiler path/to/nvcc --gpu-arch sm_90 [--host-toolchain host.json]
    python -m grid_codegen host-toolchain      # JSON: the host compiler, its version, OpenMP
    python -m grid_codegen consumer-compile ... # a consumer's units against grid.cuh
                                               # (grid_codegen.consumer_build)

`generate` writes `grid.cuh`, `wrapper.cu` and `options.json` (the canonical options)
into DIR; the same inputs give byte-identical files. `compile` builds with the command
lines of `grid_codegen.compile` (`cpu_command`, `cuda_command`), so an artifact built
here is compiled exactly as `compile_artifact` (the pip path) compiles it. These are the
actions of the Bazel macro `grid_robot` (tools/bazel/grid_robot.bzl): every input is a
file named on the command line, nothing is looked up on the machine except the
compilers named there (and nvcc's host compiler, named by `--host-toolchain`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from grid_codegen.compile import (
    cpu_command,
    cuda_command,
    find_cxx,
    openmp_works,
    run_compiler,
)
from grid_codegen.generate import generate
from grid_codegen.options import DEFAULT_ALGORITHMS, DTYPES, PROFILES, STRATEGIES, CodegenOptions
from grid_codegen.urdf import parse_urdf

OPTIONS_FILE = "options.json"


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grid_codegen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", help="URDF + options -> grid.cuh, wrapper.cu")
    gen.add_argument("urdf", type=Path)
    gen.add_argument("--out-dir", type=Path, required=True)
    gen.add_argument("--floating-base", action="store_true",
                     help="add a free-flyer root joint (q = [p, quat xyzw, joints])")
    gen.add_argument("--dtype", choices=DTYPES, default="float32")
    gen.add_argument("--algorithms", type=_csv, default=DEFAULT_ALGORITHMS,
                     help="comma-separated algorithm or profile names (profiles: "
                     + ", ".join(PROFILES) + "); default: the core profile, "
                     + ",".join(DEFAULT_ALGORITHMS))
    gen.add_argument("--ee-joint-names", type=_csv, default=(),
                     help="comma-separated joints whose frames are the end effectors")
    gen.add_argument("--runtime-inertia", action="store_true")
    gen.add_argument("--max-batch-size", type=int, default=65536)
    gen.add_argument("--strategy", choices=STRATEGIES, default="auto",
                     help="auto (default): every strategy that suits the robot, chosen per "
                     "batch by the cost model (grid_codegen.dispatch); or thread, warp, block")
    gen.add_argument("--device-api", action="store_true",
                     help="append the consumer-facing namespace grid::device to grid.cuh "
                     "(grid_codegen.emit.device_api; the grid_consumer macro's header)")
    gen.add_argument("--contact-frames", type=_csv, default=(),
                     help="with --device-api: comma-separated contact frames to bake")

    comp = sub.add_parser("compile", help="wrapper.cu -> robot .so (host compiler or nvcc)")
    comp.add_argument("--backend", choices=("cpu", "cuda"), required=True)
    comp.add_argument("--source", type=Path, required=True, help="the generated wrapper.cu")
    comp.add_argument("--output", type=Path, required=True)
    comp.add_argument("--compiler", help="host C++ compiler (cpu) or nvcc (cuda)")
    comp.add_argument("--host-toolchain", type=Path,
                      help="JSON from `host-toolchain`: the host compiler and OpenMP support")
    comp.add_argument("--openmp", action=argparse.BooleanOptionalAction, default=None,
                      help="cpu: build with -fopenmp (default: the host toolchain's answer)")
    comp.add_argument("--gpu-arch", type=_csv, default=("sm_90",))
    comp.add_argument("--library-dir", action="append", default=[],
                      help="cuda: where cudart lives, when nvcc's profile does not say "
                           "(a toolkit laid out from the PyPI wheels); repeatable")
    comp.add_argument("--log", type=Path, help="also write the compiler's output here")

    sub.add_parser("host-toolchain", help="print the host compiler, its version and "
                                          "whether OpenMP works, as JSON")
    return parser


def _generate(args: argparse.Namespace) -> int:
    options = CodegenOptions(
        dtype=args.dtype, max_batch_size=args.max_batch_size, algorithms=args.algorithms,
        ee_joint_names=args.ee_joint_names, runtime_inertia=args.runtime_inertia,
        strategy=args.strategy)
    model = parse_urdf(args.urdf, floating_base=args.floating_base)
    files = generate(model, options, device_api=args.device_api,
                     contact_frames=args.contact_frames)
    files[OPTIONS_FILE] = options.canonical_json() + "\n"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(files):
        # newline="" keeps "\n" on every platform: the bytes are part of cache keys.
        with open(args.out_dir / name, "w", encoding="utf-8", newline="") as f:
            f.write(files[name])
    return 0


def host_toolchain() -> dict[str, object]:
    """The host C++ compiler `compile_artifact` would pick (`$CXX`, g++, c++, clang++),
    resolved to an absolute path, its `--version` line and whether OpenMP works."""
    cxx = shutil.which(find_cxx()) or find_cxx()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()
    return {"cxx": cxx, "version": version[0] if version else "", "openmp": openmp_works(cxx)}


def _compile(args: argparse.Namespace) -> int:
    host = json.loads(args.host_toolchain.read_text()) if args.host_toolchain else {}
    # As given, not resolved: in a sandbox the inputs are symlinks whose targets lie
    # outside it, and `#include "grid.cuh"` must find the header beside wrapper.cu here.
    source, output = args.source, args.output
    tools: list[str] = []  # whose folders lead the compile's PATH (compile_environment)
    if args.backend == "cpu":
        cxx = args.compiler or host.get("cxx") or find_cxx()
        openmp = args.openmp if args.openmp is not None else bool(
            host["openmp"] if "openmp" in host else openmp_works(cxx))
        cmd = cpu_command(cxx, source, output, openmp, (), isa=())
    else:
        if not args.compiler:
            print("compile --backend cuda needs --compiler path/to/nvcc", file=sys.stderr)
            return 2
        extra = ["-ccbin", host["cxx"]] if host.get("cxx") else []
        extra += [f"-L{d}" for d in args.library_dir]
        cmd = cuda_command(args.compiler, source, output, args.gpu_arch, extra)
        tools += [host["cxx"]] if host.get("cxx") else []
    tools = [cmd[0], *tools] if os.sep in cmd[0] else tools
    # nvcc names its temporaries by process id; sandboxes in their own pid namespace
    # share /tmp, so two builds would write each other's files. One folder per build.
    tmp_dir = tempfile.mkdtemp(prefix=".compile_tmp_", dir=output.parent.absolute())
    try:
        returncode, stdout = run_compiler(cmd, Path(tmp_dir), tools)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    log = f"$ {' '.join(cmd)}\n{stdout}[exit {returncode}]\n"
    if args.log:
        args.log.write_text(log, errors="backslashreplace")
    if returncode != 0 or not output.is_file():
        sys.stderr.write(log)
        return returncode or 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["consumer-compile"]:  # grid_consumer's compile action
        from grid_codegen.consumer_build import main as consumer_compile

        return consumer_compile(argv[1:])
    args = _parser().parse_args(argv)
    if args.command == "generate":
        return _generate(args)
    if args.command == "compile":
        return _compile(args)
    print(json.dumps(host_toolchain(), sort_keys=True))
    return 0
