"""`CentroidalMixin`: centroidal quantities, Coriolis matrix and regressors."""

from __future__ import annotations


class CentroidalMixin:
    """Centroidal dynamics and regressors of `ReferenceRobot` (filled by issue 3)."""
