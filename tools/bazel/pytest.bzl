"""grid_py_test: a py_test that runs pytest on the given files.

Every test target shares one entry point, //tools/bazel:pytest_runner.py, which
calls pytest.main() on `srcs` (by their runfiles paths) followed by `args`. The
interpreter is the project venv (see python_venv.bzl), which provides pytest,
numpy, pinocchio and example-robot-data; in-tree code comes in through `deps`.
"""

_RUNNER = "//tools/bazel:pytest_runner.py"

# pytest's configuration (pyproject.toml / conftest at the root), when present.
_PYTEST_CONFIG = "//:pytest_config"

def grid_py_test(name, srcs, args = [], data = [], deps = [], tags = [], env = {}, **kwargs):
    """Runs pytest on `srcs`.

    Args:
      name: target name.
      srcs: test files (labels, possibly from other packages: a robot package
        can run a shared suite with a `-k` filter).
      args: extra pytest arguments, e.g. ["-k", "iiwa14"].
      data: runtime files (URDFs, conftest.py, fixtures).
      deps: py_library targets the tests import.
      tags: Bazel tags, e.g. ["gpu"] for tests that need a GPU.
      env: extra environment of the test ($(rootpath ...) is expanded).
      **kwargs: passed to py_test (size, timeout, shard_count, ...).
    """
    native.py_test(
        name = name,
        srcs = [_RUNNER] + srcs,
        main = _RUNNER,
        python_version = "PY3",
        srcs_version = "PY3",
        args = ["$(rootpath %s)" % src for src in srcs] + args,
        data = data + [_PYTEST_CONFIG],
        deps = deps,
        # Runfiles are read-only symlink trees: no __pycache__ (nor pytest's
        # assertion-rewrite cache) there.
        env = dict(env, PYTHONDONTWRITEBYTECODE = "1"),
        tags = tags,
        **kwargs
    )
