"""The version of grid-rbd: the one place it is written. pyproject.toml reads it (the
scikit-build-core regex provider), `grid_rbd.__version__` imports it, and the store keys
every artifact by it."""

__version__ = "0.1.0"
