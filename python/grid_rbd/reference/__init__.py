"""The float64 numpy reference oracle every generated kernel is judged against."""

from __future__ import annotations

import os

from grid_codegen import parse_urdf
from grid_rbd.reference.coupled import CoupledReference
from grid_rbd.reference.robot import GRAVITY, ReferenceRobot


def load(urdf_path: str | os.PathLike | bytes, floating_base: bool = False,
         ee_joint_names: list[str] | tuple[str, ...] | None = None, mimic: bool = False
         ) -> ReferenceRobot | CoupledReference:
    """Parse a URDF and return its reference oracle (see `ReferenceRobot`); with
    `mimic=True` and mimic joints in the URDF, the reduced-coordinate `CoupledReference`."""
    model = parse_urdf(urdf_path, floating_base=floating_base, mimic=mimic)
    if model.coupling is not None:
        return CoupledReference(model, ee_joint_names)
    return ReferenceRobot(model, ee_joint_names)


__all__ = ["GRAVITY", "CoupledReference", "ReferenceRobot", "load"]
