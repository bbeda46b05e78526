"""`KinematicsMixin`: frame Jacobians, their derivatives and end-effector pose derivatives."""

from __future__ import annotations


class KinematicsMixin:
    """Kinematic derivatives of `ReferenceRobot` (filled by issue 3)."""
