"""Splits the frameworks lock that pip-compile wrote into what every machine installs and
what only a CUDA build of torch needs, and adds local torch wheels' hashes.

    python tools/ci/split_torch_lock.py [--local-wheel torch-2.13.0+cpu-....whl ...]

`requirements-frameworks.lock` (pip-compile against the public index) pins torch's
default build with its CUDA libraries (nvidia-*, cuda-*, triton). Those move to
`requirements-frameworks-cuda.lock`; tools/setup.sh installs it only when the torch it got
is a CUDA build. `--local-wheel` adds a wheel's sha256 to torch's hashes, so a machine whose
pip finds that wheel locally (a `+cpu` build, say) installs it under the same pin.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CUDA_ONLY = re.compile(r"^(nvidia-|cuda-|triton$)")
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def blocks(text: str) -> tuple[list[str], list[list[str]]]:
    """(header lines, one list of lines per pinned package)."""
    header: list[str] = []
    out: list[list[str]] = []
    for line in text.splitlines():
        if _NAME.match(line):
            out.append([line])
        elif out:
            out[-1].append(line)
        else:
            header.append(line)
    return header, out


def name_of(block: list[str]) -> str:
    match = _NAME.match(block[0])
    assert match is not None
    return match.group(1).lower()


def add_hashes(block: list[str], wheels: list[Path]) -> list[str]:
    """The torch block with one more `--hash` line per local wheel."""
    version = _NAME.match(block[0]).group(2)  # type: ignore[union-attr]
    lines = list(block)
    last_hash = max(i for i, line in enumerate(lines) if "--hash=" in line)
    for wheel in wheels:
        if not wheel.name.startswith(f"torch-{version}+"):
            sys.exit(f"{wheel.name}: not a local build of torch {version}")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        entry = f"    --hash=sha256:{digest}"
        if entry in lines:
            continue
        lines[last_hash] += " \\"
        last_hash += 1
        lines.insert(last_hash, entry)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local-wheel", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    lock = REPO / "requirements-frameworks.lock"
    header, pinned = blocks(lock.read_text())
    keep = [b for b in pinned if not CUDA_ONLY.match(name_of(b))]
    cuda = [b for b in pinned if CUDA_ONLY.match(name_of(b))]
    keep = [add_hashes(b, args.local_wheel) if name_of(b) == "torch" else b for b in keep]
    lock.write_text("\n".join(header + [line for b in keep for line in b]) + "\n")
    cuda_header = [
        "#",
        "# The CUDA libraries of torch's default build: split from the pip-compile output",
        "# of requirements-frameworks.in by tools/ci/split_torch_lock.py. tools/setup.sh",
        "# installs them only when the torch it installed is a CUDA build.",
        "#",
    ]
    (REPO / "requirements-frameworks-cuda.lock").write_text(
        "\n".join(cuda_header + [line for b in cuda for line in b]) + "\n")
    print(f"kept {len(keep)} pins, moved {len(cuda)} to requirements-frameworks-cuda.lock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
