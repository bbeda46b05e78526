"""grid-rbd: a rigid-body dynamics compiler (per-robot kernels for GPU and CPU)."""

__version__ = "0.1.0"
