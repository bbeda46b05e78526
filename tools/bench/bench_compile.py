"""Cold compile cost of an artifact: generation, then the split build (one translation
unit per algorithm, `GRID_RBD_BUILD_JOBS` at once, then the link), with nvcc (sm_90, no
GPU needed) and with the host compiler, per robot and algorithm profile.

    .venv/bin/python tools/bench/bench_compile.py --robots iiwa14,g1 --out RESULT.json

Every build goes to a fresh folder (nothing cached); figures are wall seconds on this
machine with its core count recorded (the targets are for the 2-core CI machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from sidebyside_common import use_tree, write_rows  # noqa: E402

use_tree(REPO)
sys.path.insert(0, str(REPO / "tests"))

from grid_codegen import parse_urdf  # noqa: E402
from grid_codegen.compile import build_jobs, compile_artifact  # noqa: E402
from grid_codegen.generate import generate  # noqa: E402
from grid_codegen.options import CodegenOptions  # noqa: E402


def measure(robot: str, profile: str, backend: str, dtype: str) -> dict:
    from support import ROBOTS
    model = parse_urdf(ROBOTS[robot].path, floating_base=ROBOTS[robot].floating_base)
    options = CodegenOptions(dtype=dtype, algorithms=(profile,))
    start = time.perf_counter()
    files = generate(model, options, units=True)
    generated = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="grid_compile_bench_") as out:
        start = time.perf_counter()
        compile_artifact(files, out, backend, detect_arch=False)
        compiled = time.perf_counter() - start
    row = {"robot": robot, "profile": profile, "backend": backend, "dtype": dtype,
           "algorithms": len(options.algorithms), "generate_s": round(generated, 2),
           "compile_s": round(compiled, 1), "jobs": build_jobs()}
    print(f"{robot:7s} {profile:10s} {backend:4s} {dtype}: generate {generated:5.1f} s, "
          f"compile {compiled:6.1f} s ({build_jobs()} jobs)", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default="iiwa14,go2,g1")
    parser.add_argument("--profiles", default="core,all")
    parser.add_argument("--backends", default="cuda,cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rows = [measure(r, p, b, args.dtype) for r in args.robots.split(",")
            for p in args.profiles.split(",") for b in args.backends.split(",")]
    write_rows(args.out, rows)


if __name__ == "__main__":
    main()
