"""Run pytest or a script with `grid_codegen` from another tree (a worktree with a probe
patch applied), the runtime from this checkout:

    PYTHONPATH=TREE/codegen:python:TREE/tests .venv/bin/python \
        tools/bench/gather_probe/with_tree.py pytest -q TREE/tests/test_second_order_kernels.py

`PYTHONPATH` alone is not enough: the editable install's finder (scikit-build-core's
redirecting finder) answers before it, so `grid_codegen` would come from this checkout.
This drops that finder, then runs `pytest ARGS...` or `SCRIPT ARGS...`.
"""

from __future__ import annotations

import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path
                    if type(f).__name__ != "ScikitBuildRedirectingFinder"]

import grid_codegen  # noqa: E402

print(f"grid_codegen from {grid_codegen.__file__}", file=sys.stderr)
if len(sys.argv) < 2:
    sys.exit(__doc__)
if sys.argv[1] == "pytest":
    import pytest  # noqa: E402

    sys.exit(pytest.main(sys.argv[2:]))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
