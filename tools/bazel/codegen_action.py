"""Entry point of the grid_robot build actions: `python3 codegen_action.py ROOT ARGS...`.

Runs `grid_codegen.cli.main(ARGS)` with the code generator imported from ROOT, the
execroot-relative folder holding the action's declared `grid_codegen/` sources, and
refuses to run if Python found `grid_codegen` anywhere else (the venv's editable install
of the project maps it to the source tree, which is not an input of the action). Options
the generator refuses (an unknown algorithm or strategy: the macro passes the names
through, the generator's registry is the one list) and URDFs the parser refuses end the
action with exit 2 and the generator's message, not a traceback.
"""

import importlib.machinery
import os
import sys


def _drop_redirecting_finders(package: str) -> None:
    """Remove import hooks other than the path finder that claim `package`: an editable
    install (scikit-build-core's redirecting finder) maps it to the source tree."""
    for finder in list(sys.meta_path):
        if finder is importlib.machinery.PathFinder:
            continue
        try:
            claims = finder.find_spec(package, None) is not None
        except (AttributeError, ImportError, ValueError):
            claims = False
        if claims:
            sys.meta_path.remove(finder)


def main() -> int:
    root = os.path.abspath(sys.argv[1])
    _drop_redirecting_finders("grid_codegen")
    sys.path.insert(0, root)
    import grid_codegen
    from grid_codegen.cli import main as cli_main

    where = os.path.abspath(grid_codegen.__file__)
    if not where.startswith(root + os.sep):
        print(f"grid_codegen was imported from {where}, not from the action's inputs "
              f"under {root}", file=sys.stderr)
        return 2
    try:
        return cli_main(sys.argv[2:])
    except ValueError as exc:  # bad options or URDF (URDFError): the message says which
        print(f"grid_robot: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
