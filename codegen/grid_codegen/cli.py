"""`python -m grid_codegen`: the code generator and compile driver as commands.

    python -m grid_codegen generate ROBOT.urdf --out-dir DIR [--floating-base]
        [--dtype float32] [--algorithms a,b] [--ee-joint-names j1,j2]
        [--runtime-inertia] [--max-batch-size N] [--strategy auto] [--split-dir DIR/units]
    python -m grid_codegen compile --backend cpu  --source DIR/wrapper.cu --output robot.so
        [--host-toolchain host.json | --compiler g++ --openmp/--no-openmp]
    python -m grid_codegen compile --backend cuda --source-dir DIR/units --output robot.so
        --compiler path/to/nvcc --gpu-arch sm_90 [--host-toolchain host.json]
    python -m grid_codegen host-toolchain      # JSON: the host compiler, its version, OpenMP
    python -m grid_codegen consumer-compile ... # a consumer's units against grid.cuh
                                               # (grid_codegen.consumer_build)

`generate` writes `grid.cuh`, `wrapper.cu` and `options.json` (the canonical options)
into DIR; with `--split-dir` also the split build (`generate(units=True)`: `grid.cuh`, a
`wrapper.cu` that only declares the kernels, one `unit_<algorithm>.cu` per algorithm)
into that folder. The same inputs give byte-identical files, named by the options only.
`compile` builds with the command lines of `grid_codegen.compile` (`cpu_command`,
`cuda_command`): `--source` one wrapper.cu in one compiler run; `--source-dir` a split
build's folder, its units compiled to objects in parallel (`build_jobs()` at once) and
linked (`compile_units`), as `compile_artifact` (the pip path) compiles them. These are the
actions of the Bazel macro `grid_robot` (tools/bazel/grid_robot.bzl): every input is a
file named on the command line, nothing is looked up on the machine except the
compilers named there (and nvcc's host compiler, named by `--host-toolchain`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from grid_codegen.compile import (
    compile_units,
    cpu_command,
    cuda_command,
    find_cxx,
    openmp_works,
    run_compiler,
    unit_sources,
)
from grid_codegen.generate import generate
from grid_codegen.options import DEFAULT_ALGORITHMS, DTYPES, PROFILES, STRATEGIES, CodegenOptions
from grid_codegen.urdf import parse_urdf

OPTIONS_FILE = "options.json"
SPLIT = "split"  # generate's key prefix of the split build's files (--split-dir)
UNIT_NAME = re.compile(r"unit_[a-z][a-z0-9_]*\.cu")


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
    gen.add_argument("--split-dir", type=Path,
                     help="also write the split build (grid.cuh, wrapper.cu, "
                     "unit_<algorithm>.cu) here, for `compile --source-dir`")

    comp = sub.add_parser("compile", help="wrapper.cu -> robot .so (host compiler or nvcc)")
    comp.add_argument("--backend", choices=("cpu", "cuda"), required=True)
    source = comp.add_mutually_exclusive_group(required=True)
    source.add_argument("--source", type=Path, help="the generated wrapper.cu (one unit)")
    source.add_argument("--source-dir", type=Path,
                        help="a split build's folder (generate --split-dir): its units are "
                        "compiled in parallel and linked")
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
                     contact_frames=args.contact_frames,
                     split_dir=SPLIT if args.split_dir else None)
    files[OPTIONS_FILE] = options.canonical_json() + "\n"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if args.split_dir:
        args.split_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(files):
        split, _, rest = name.partition("/")
        path = args.split_dir / rest if split == SPLIT and rest else args.out_dir / name
        # newline="" keeps "\n" on every platform: the bytes are part of cache keys.
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(files[name])
    return 0


def host_toolchain() -> dict[str, object]:
    """The host C++ compiler `compile_artifact` would pick (`$CXX`, g++, c++, clang++),
    resolved to an absolute path, its `--version` line and whether OpenMP works."""
    cxx = shutil.which(find_cxx()) or find_cxx()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True,
                             check=False).stdout.splitlines()
    return {"cxx": cxx, "version": version[0] if version else "", "openmp": openmp_works(cxx)}


def _split_sources(folder: Path) -> list[Path] | str:
    """The sources of a split build's folder (`generate --split-dir`) in compile order,
    or why the folder is not one: it must hold `grid.cuh`, `wrapper.cu` and
    `unit_<algorithm>.cu` files only (names the generator's registry gives)."""
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    odd = [n for n in names if n not in ("grid.cuh", "wrapper.cu") and not UNIT_NAME.fullmatch(n)]
    if odd or "grid.cuh" not in names or "wrapper.cu" not in names:
        return (f"{folder} is not a split build (grid.cuh, wrapper.cu, unit_*.cu); "
                f"it holds {names}")
    return [folder / name for name in unit_sources(names)]


def _compile(args: argparse.Namespace) -> int:
    host = json.loads(args.host_toolchain.read_text()) if args.host_toolchain else {}
    # As given, not resolved: in a sandbox the inputs are symlinks whose targets lie
    # outside it, and `#include "grid.cuh"` must find the header beside each unit here.
    sources = [args.source] if args.source else _split_sources(args.source_dir)
    if isinstance(sources, str):
        print(f"compile --source-dir: {sources}", file=sys.stderr)
        return 2
    source, output = sources[0], args.output
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
    # share /tmp, so two builds would write each other's files. One folder per build
    # (the split build's objects go there too).
    tmp_dir = Path(tempfile.mkdtemp(prefix=".compile_tmp_", dir=output.parent.absolute()))
    try:
        if args.source_dir:
            returncode, stdout, _ = compile_units(cmd, [str(s) for s in sources], None,
                                                  args.backend, tmp_dir, tools, None)
        else:
            returncode, stdout = run_compiler(cmd, tmp_dir, tools)
            stdout = f"$ {' '.join(cmd)}\n{stdout}"
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    log = f"{stdout}[exit {returncode}]\n"
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
