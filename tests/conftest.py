"""Fixtures shared by the test modules.

`shared_store`: one store root (`cache_dir`) for the whole pytest session, for the modules
that register robots to test what the handles compute. The store is content-addressed
(python/grid_rbd/_store.py): a registration whose URDF and options equal an earlier one's
(the registered name is not part of the key) finds its entry instead of compiling it
again, so an artifact that several modules register is compiled once per session; a
module run alone still builds what it needs. The names registered in it are distinct
per module (the manifest maps a name to its latest registration).

Modules that test the store itself (cold builds, force_rebuild, damaged entries,
concurrency, keys) keep a store of their own (tmp_path or tmp_path_factory.mktemp).
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def shared_store(tmp_path_factory):
    """The session's store root, shared by the handle test modules."""
    return tmp_path_factory.mktemp("shared_store")
