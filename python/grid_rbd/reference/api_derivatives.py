"""`DerivativesMixin`: first- and second-order dynamics derivatives of `ReferenceRobot`."""

from __future__ import annotations


class DerivativesMixin:
    """Analytic derivatives of inverse and forward dynamics (filled by issue 3)."""
