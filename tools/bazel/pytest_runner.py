"""Entry point of every grid_py_test: run pytest on the files given in argv.

Bazel runs this from the runfiles root with the test files' runfiles paths
first in argv, then the target's extra args. A run that selects no test is a
failure: a filter (-k) or a rename that silently selects nothing must not pass. The
grid-rbd store root defaults to the test's TEST_TMPDIR.

In-tree packages (grid_rbd, grid_codegen, and grid_rbd._core, which //python:grid_rbd
ships as the Bazel build of //runtime:_core.so) come from the runfiles, the test's
declared inputs. The venv's editable install of the project (`pip install -e .` in
tools/setup.sh) would map them to the source tree instead, through a meta-path finder
that runs before sys.path: the runner removes that finder first.
"""

import importlib.machinery
import os
import sys

import pytest

_NO_TESTS_COLLECTED = 5


def _drop_editable_finders() -> None:
    """Removes import hooks other than the path finder that claim an in-tree package
    (the editable install's redirecting finder), as tools/bazel/codegen_action.py does."""
    for finder in list(sys.meta_path):
        if finder is importlib.machinery.PathFinder:
            continue
        try:
            claims = any(finder.find_spec(name, None) is not None
                         for name in ("grid_rbd", "grid_codegen"))
        except (AttributeError, ImportError, ValueError):
            claims = False
        if claims:
            sys.meta_path.remove(finder)


def main(argv: list[str]) -> int:
    _drop_editable_finders()
    # Stores and caches the tests create go to the test's own temporary folder, never the
    # user's home (read-only in Bazel's sandbox); an explicit GRID_RBD_CACHE_DIR wins.
    tmp = os.environ.get("TEST_TMPDIR")
    if tmp and not os.environ.get("GRID_RBD_CACHE_DIR"):
        os.environ["GRID_RBD_CACHE_DIR"] = os.path.join(tmp, "grid_rbd_cache")
    args = [*argv, "-p", "no:cacheprovider"]
    # Bazel asks for a JUnit XML report here; it then shows per-case results.
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append(f"--junitxml={xml}")
    code = int(pytest.main(args))
    if code == _NO_TESTS_COLLECTED:
        print(f"grid-rbd: pytest selected no test ({argv}); failing.", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
